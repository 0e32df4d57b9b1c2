"""The claim hands the fire each row's version (its ctid), and the fire finds rows by it before
falling back to the primary key (migrations/025_log_timers.sql, claim_v3 step 2 and fire_v2
step 2a). Whatever the ctids say, the outcome must be the primary-key path's: a wrong or stale
ctid costs a lookup, never a wrong fire."""

import pytest

from queen_timers.identity import DEFAULT_TENANT
from queen_timers.timers import fire, store
from queen_timers.timers.pack import pack_batches

from .helpers import at, log_frames, sched, timer_row

D = DEFAULT_TENANT


async def put(conn, ops, now=0.0):
    return await store.apply(conn, ops, D, "alice", at(now))


async def fire_with_tids(conn, claimed, tids, now):
    """Fire `claimed` (one batch) with tids[i] as the version of claimed[i]."""
    for c, tid in zip(claimed, tids, strict=True):
        c.tid = tid
    [batch], bad = pack_batches(claimed, 8 << 20, 3, 1 << 20)
    assert not bad
    return await fire.fire_statement(conn, batch, now)


async def test_the_claim_returns_each_rows_version_and_a_fresh_token_per_row(queen, conn):
    await put(conn, [sched("q", f"k{i}", 0) for i in range(20)])
    first = await fire.claim(queen.rt, now=at(0), max_rows=10)
    second = await fire.claim(queen.rt, now=at(0), max_rows=10)
    claimed = first + second
    assert len(claimed) == 20
    current = {
        r["timer_key"]: (r["ctid"], r["claim_token"])
        for r in await conn.fetch("SELECT timer_key, ctid, claim_token FROM queen.log_timers")
    }
    for c in claimed:
        assert (c.tid, c.token) == current[c.timer_key]
    assert len({c.token for c in claimed}) == 20, "tokens repeat within or across claims"


async def test_a_fire_by_version_delivers_exactly_once(queen, conn):
    await put(conn, [sched("q", f"k{i}", 0) for i in range(5)])
    claimed = await fire.claim(queen.rt, now=at(0))
    [res] = await fire_with_tids(conn, claimed, [c.tid for c in claimed], at(1))
    assert res["result"] == "fired" and res["timers"] == 5
    assert sorted(f["txn"] for f in await log_frames(conn)) == sorted(c.txn for c in claimed)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


@pytest.mark.parametrize("case", ["swapped", "nowhere", "none"])
async def test_wrong_versions_fall_back_to_the_primary_key(queen, conn, case):
    await put(conn, [sched("q", f"k{i}", 0) for i in range(4)])
    claimed = await fire.claim(queen.rt, now=at(0))
    tids = [c.tid for c in claimed]
    if case == "swapped":  # each ctid names another live row of the same fire
        tids = tids[1:] + tids[:1]
    elif case == "nowhere":  # past the end of the table, or a slot that holds nothing
        tids = [(4_000_000, 1), (0, 999), None, tids[3]]
    else:
        tids = [None] * len(tids)
    [res] = await fire_with_tids(conn, claimed, tids, at(1))
    assert res["result"] == "fired" and res["timers"] == 4
    frames = await log_frames(conn)
    assert sorted(f["txn"] for f in frames) == sorted(c.txn for c in claimed)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_the_version_of_an_expired_claim_is_stale_not_fired(queen, conn):
    await put(conn, [sched("q", "k", 0, txn="t1")])
    [dead] = await fire.claim(queen.rt, now=at(0))
    [live] = await fire.claim(queen.rt, now=at(31))  # the dead holder's lease expired
    assert dead.tid != live.tid  # every claim writes a new version of the row (never HOT)
    # The dead claim's ctid, and the live row's ctid under the dead claim's token: both stale.
    for tid in (dead.tid, live.tid):
        [res] = await fire_with_tids(conn, [dead], [tid], at(31))
        assert res["result"] == "stale", res
    assert (await timer_row(conn, "q", "k"))["claim_token"] == live.token
    [res] = await fire_with_tids(conn, [live], [live.tid], at(31))
    assert res["result"] == "fired"
    assert [f["txn"] for f in await log_frames(conn)] == ["t1"]


async def test_the_previous_builds_calls_still_work(queen, conn):
    """A rolling restart mixes builds: claim_v1 and fire_v1 (no ctids) keep their signatures
    and behaviour, as wrappers of v2."""
    await put(conn, [sched("q", f"k{i}", 0) for i in range(3)])
    rows = await conn.fetch(
        "SELECT * FROM queen.log_timers_claim_v1(NULL, $1, 30000, 10, 50)", at(0)
    )
    assert len(rows) == 3 and "tid" not in rows[0].keys()
    claimed = [store.ClaimedTimer.from_record(r) for r in rows]
    assert all(c.tid is None for c in claimed)
    [batch], _ = pack_batches(claimed, 8 << 20, 3, 1 << 20)
    [s] = batch
    res = await conn.fetchval(
        "SELECT queen.log_timers_fire_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        [s.tenant],
        [s.queue],
        [s.partition],
        [len(s.rows)],
        [s.blob],
        [1] * len(s.rows),
        [t.timer_key for t in s.rows],
        [t.token for t in s.rows],
        s.hashes,
        at(1),
    )
    assert res[0]["result"] == "fired" and res[0]["timers"] == 3
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
