"""The probe names the shards with due work, and a claim walks only the shards it is given
(migrations/025_log_timers.sql, log_timers_due_v1 and log_timers_claim_v3), with explicit
instants (time travel, no sleeps)."""

from queen_timers.identity import DEFAULT_TENANT
from queen_timers.timers import fire, store

from .helpers import at, sched

D = DEFAULT_TENANT


async def put(conn, ops, now=0.0):
    res = await store.apply(conn, ops, D, "alice", at(now))
    assert all(r["status"] == "scheduled" for r in res), res
    return res


async def shard_minima(conn) -> dict[int, float]:
    """Each shard's earliest visible_at, in seconds after at(0)."""
    rows = await conn.fetch(
        "SELECT shard, extract(epoch FROM min(visible_at) - $1::timestamptz)::float8 AS s"
        "  FROM queen.log_timers GROUP BY shard",
        at(0),
    )
    return {r["shard"]: r["s"] for r in rows}


async def test_the_probe_names_exactly_the_due_shards(queen, conn):
    rt = queen.rt
    # 200 timers a second apart (in ~60 of the 64 shards): at each instant a different set of
    # shards has its earliest row due
    await put(conn, [sched("q", f"k{i}", 1000 * (i + 1)) for i in range(200)])
    minima = await shard_minima(conn)
    assert len(minima) > 40
    for t in (0.5, 1.0, 7.5, 30.0, 120.5, 250.0):
        p = await fire.probe(rt, now=at(t))
        assert p.due_shards is not None
        assert sorted(p.due_shards) == sorted(s for s, m in minima.items() if m <= t), t
        # the soon shards: earliest row within the next second, with its ms from now
        soon = dict(zip(p.soon_shards, p.soon_in_ms))
        assert sorted(soon) == sorted(s for s, m in minima.items() if m <= t + 1), t
        for s, ms in soon.items():
            assert abs(ms - (minima[s] - t) * 1000) < 1e-3
        assert p.shards_due_within(0) == [s for s in p.soon_shards if s in p.due_shards]
        assert p.due == min(sum(1 for i in range(200) if i + 1 <= t), 2000)


async def test_a_claimed_row_takes_its_shard_out_of_the_due_set(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", f"k{i}", 0) for i in range(30)])
    before = await fire.probe(rt, now=at(1))
    assert before.due == 30 and before.due_shards
    [first, *_] = sorted(before.due_shards)
    claimed = await fire.claim(rt, now=at(1), shards=[first], max_rows=1000)
    assert claimed
    after = await fire.probe(rt, now=at(1))  # the shard's rows are leased: not due
    assert after.due_shards is not None and before.due_shards is not None
    assert sorted(after.due_shards) == sorted(set(before.due_shards) - {first})
    assert after.due == 30 - len(claimed)


async def test_an_idle_probe_names_no_shard(queen, conn):
    rt = queen.rt
    p = await fire.probe(rt, now=at(0))
    assert (p.due_shards, p.soon_shards, p.soon_in_ms) == ([], [], [])
    await put(conn, [sched("q", f"k{i}", 3_600_000) for i in range(50)])
    p = await fire.probe(rt, now=at(0))
    assert p.next_in_ms is not None and p.next_in_ms > 0
    assert (p.due, p.due_shards, p.soon_shards) == (0, [], [])


async def test_a_claim_given_some_shards_takes_only_from_them(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", f"k{i}", 0) for i in range(1000)])
    counts = {
        r["shard"]: r["n"]
        for r in await conn.fetch("SELECT shard, count(*) AS n FROM queen.log_timers GROUP BY 1")
    }
    assert len(counts) == 64
    two = sorted(counts, key=lambda s: -counts[s])[:2]
    claimed = await fire.claim(rt, now=at(1), shards=two, max_rows=200)
    keys = [c.timer_key for c in claimed]
    got = {
        r["shard"]
        for r in await conn.fetch(
            "SELECT shard FROM queen.log_timers WHERE timer_key = ANY($1::text[])", keys
        )
    }
    assert got == set(two)
    # v_per = max(ceil(200 / 2), 8) = 100: the two shards give up to 100 rows each, where a
    # walk of all 64 would stop at 8 a shard
    assert len(claimed) == sum(min(counts[s], 100) for s in two)
    # what is left in other shards is still due, and the probe still names those shards
    p = await fire.probe(rt, now=at(1))
    assert p.due_shards is not None
    assert set(p.due_shards) >= set(counts) - set(two)


async def test_a_claim_given_no_shard_claims_nothing(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", f"k{i}", 0) for i in range(20)])
    assert await fire.claim(rt, now=at(1), shards=[], max_rows=200) == []
    assert (await fire.probe(rt, now=at(1))).due == 20
