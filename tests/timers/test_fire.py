"""The fire: claim, verify, push and delete in one transaction (timers-contract §12 items 1-3,
8-18, 21-22), driven with explicit instants (time travel, no sleeps)."""

import asyncio
import dataclasses
import datetime as dt
import json
import uuid
from typing import Any

import asyncpg
import pytest
import zstandard

from queen_timers.db.errors import FailureClass
from queen_timers.identity import DEFAULT_TENANT
from queen_timers.timers import fire, store
from queen_timers.timers.pack import pack_batches

from .helpers import at, log_frames, sched, timer_row

D = DEFAULT_TENANT


async def put(conn, ops, now=0.0, tenant=D, sub="alice"):
    return await store.apply(conn, ops, tenant, sub, at(now))


async def fire_segments(conn, segs, now):
    """Call the fire procedure directly with already packed segments."""
    rows = [t for s in segs for t in s.rows]
    return await store.fire(
        conn,
        [s.tenant for s in segs],
        [s.queue for s in segs],
        [s.partition for s in segs],
        [len(s.rows) for s in segs],
        [s.blob for s in segs],
        [i + 1 for i, s in enumerate(segs) for _ in s.rows],
        [t.timer_key for t in rows],
        [t.token for t in rows],
        [h for s in segs for h in s.hashes],
        now,
    )


def pack(claimed, max_bytes=8 << 20):
    batches, bad = pack_batches(claimed, max_bytes, 3, 1 << 20)
    assert not bad
    return batches


# -- §12 1-3: when and in which order ----------------------------------------------------------


async def test_not_before_deliver_at(queen, conn):
    rt = queen.rt
    assert (await put(conn, [sched("q", "k", 5000)]))[0]["status"] == "scheduled"
    p = await fire.probe(rt, now=at(0))
    assert p.next_in_ms is not None
    assert p.due == 0 and 4000 <= p.next_in_ms <= 6000 and p.late_ms == 0
    assert await fire.claim(rt, now=at(0)) == []
    assert await fire.claim(rt, now=at(4.9)) == []
    [c] = await fire.claim(rt, now=at(5.1))
    assert c.timer_key == "k" and c.attempts == 0


async def test_zero_and_negative_delays_are_due_at_once(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "zero", 0), sched("q", "past", -3600000)])
    p = await fire.probe(rt, now=at(0))
    assert p.next_in_ms is not None
    # due at once, and not late: both were scheduled at 0 (test_fire_lateness.py)
    assert p.due == 2 and not p.due_capped and p.late_ms == 0 and p.next_in_ms <= 0
    claimed = await fire.claim(rt, now=at(0))
    assert [c.timer_key for c in claimed] == ["past", "zero"]
    assert (await fire.probe(rt, now=at(0))).due == 0  # leased


async def test_probe_empty_and_capped(queen, conn):
    rt = queen.rt
    p = await fire.probe(rt, now=at(0))
    assert (p.next_in_ms, p.due, p.due_capped, p.late_ms) == (None, 0, False, 0)
    await put(conn, [sched("q", f"k{i}", 0) for i in range(5)])
    rt = dataclasses.replace(rt, settings=rt.settings.replace(sweeper_due_cap=3))
    p = await fire.probe(rt, now=at(1))
    assert p.due == 3 and p.due_capped is True


async def test_an_idle_probe_is_one_descent_per_shard(queen, conn):
    # Nothing due: the probe's per-shard minimum already says so, and the due count (64 more
    # descents) is skipped. What the idle sweeper pays at every poll.
    for i in range(0, 2000, 250):
        await put(conn, [sched("q", f"k{j}", 3_600_000) for j in range(i, i + 250)])
    # index pages read in this transaction: 2,000 entries make a root and a few leaves, so a
    # descent reads two pages
    scans = "SELECT pg_stat_get_xact_blocks_fetched('queen.idx_log_timers_visible'::regclass)"
    async with conn.transaction():
        before = await conn.fetchval(scans)
        p = await store.due(conn, None, at(0), 2000)
        idle = await conn.fetchval(scans) - before
        busy = await store.due(conn, None, at(3601), 2000)
    assert p["due"] == 0 and p["nextInMs"] > 0
    assert idle <= 2 * 64
    # with rows due, the count runs too (its page reads depend on the server's version: on
    # PostgreSQL 15 they hit the pages the minimum already read, so the answer is the proof)
    assert busy["due"] == 2000


async def test_fire_order_is_visible_at_order(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "gamma", 0)])
    [g] = await fire.claim(rt, now=at(0))
    await store.fail(conn, [D], ["q"], ["gamma"], [g.token], [2000], "x", True, 5, at(0))
    await put(conn, [sched("q", "alpha", 3000), sched("q", "beta", 1000)])
    claimed = await fire.claim(rt, now=at(4))
    assert [c.timer_key for c in claimed] == ["beta", "gamma", "alpha"]
    r = await fire.fire_claimed(rt, claimed, now=at(4))
    assert r.fired == 3
    assert [f["txn"] for f in await log_frames(conn)] == [
        "txn-q-beta",
        "txn-q-gamma",
        "txn-q-alpha",
    ]


# -- §12 8-10: leases --------------------------------------------------------------------------


async def test_lease_hides_the_row_and_a_reclaim_gets_a_new_token(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "k", 0)])
    [c1] = await fire.claim(rt, now=at(0))
    assert await fire.claim(rt, now=at(1)) == []
    assert (await fire.probe(rt, now=at(1))).due == 0
    [c2] = await fire.claim(rt, now=at(31))  # default lease 30 s
    assert c2.token != c1.token and c2.attempts == 0
    row = await timer_row(conn, "q", "k")
    assert row["attempts"] == 0 and row["last_error"] is None


async def test_stale_token_fires_nothing_and_does_not_provision(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "k", 0, txn="t1")])
    [dead] = await fire.claim(rt, now=at(0))
    [live] = await fire.claim(rt, now=at(31))  # the dead holder's lease expired
    r = await fire.fire_claimed(rt, [dead], now=at(31))
    assert (r.stale, r.fired) == (1, 0)
    assert await conn.fetchval("SELECT count(*) FROM queen.queues") == 0
    r = await fire.fire_claimed(rt, [live], now=at(31))
    assert r.fired == 1 and await timer_row(conn, "q", "k") is None
    r = await fire.fire_claimed(rt, [live], now=at(31))
    assert (r.stale, r.fired) == (1, 0)
    assert len(await log_frames(conn)) == 1


async def test_short_lease(queen, conn):
    await put(conn, [sched("q", "k", 0)])
    [c] = await store.claim(conn, None, at(0), 1000, 10, 10)
    assert await store.claim(conn, None, at(0.5), 1000, 10, 10) == []
    [again] = await store.claim(conn, None, at(2), 1000, 10, 10)
    assert again.attempts == 0 and again.token != c.token


async def test_expired_lease_is_not_live(queen, conn):
    """A holder whose lease ran out must not fire, even if nobody reclaimed the row yet."""
    rt = queen.rt
    await put(conn, [sched("q", "k", 0)])
    [c] = await fire.claim(rt, now=at(0))
    r = await fire.fire_claimed(rt, [c], now=at(30.5))
    assert r.stale == 1 and r.fired == 0 and r.released == 1
    row = await timer_row(conn, "q", "k")
    assert row["claim_token"] is None and row["claimed_until"] == at(30.5)


# -- §12 11, 18: cancel and reschedule against claims and backoff --------------------------------


async def test_cancel_and_reschedule_against_a_claim(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "free", 0), sched("q", "held", 0, txn="t-held")])
    assert (await put(conn, [{"op": "cancel", "queue": "q", "timerKey": "free"}]))[0] == {
        "ok": True,
        "status": "cancelled",
        "queue": "q",
        "timerKey": "free",
        "txn": "txn-q-free",
    }
    [c] = await fire.claim(rt, now=at(0))
    res = await put(conn, [{"op": "cancel", "queue": "q", "timerKey": "held"}], now=1)
    assert res[0] == {"ok": False, "status": "too_late", "queue": "q", "timerKey": "held"}
    res = await put(conn, [sched("q", "held", 0, txn="t-new")], now=1)
    assert res[0] == {"ok": False, "status": "too_late", "queue": "q", "timerKey": "held"}
    assert (await timer_row(conn, "q", "held"))["txn"] == "t-held"
    assert (await fire.fire_claimed(rt, [c], now=at(1))).fired == 1


async def test_backoff_row_is_not_claimable_but_cancellable(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "k", 0)])
    [c] = await fire.claim(rt, now=at(0))
    res = await store.fail(conn, [D], ["q"], ["k"], [c.token], [8000], "boom", True, 5, at(0))
    assert res == {"failed": 1, "exhausted": []}
    row = await timer_row(conn, "q", "k")
    assert row["claim_token"] is None and row["claimed_until"] == at(8)
    assert row["attempts"] == 1 and row["last_error"] == "boom"
    assert await fire.claim(rt, now=at(5)) == []
    peek = await store.peek(conn, D, "q", "k", at(5))
    assert peek["claimed"] is False and peek["attempts"] == 1
    assert (await put(conn, [{"op": "cancel", "queue": "q", "timerKey": "k"}], now=5))[0][
        "status"
    ] == "cancelled"
    assert (await put(conn, [{"op": "cancel", "queue": "q", "timerKey": "k"}], now=5))[0] == {
        "ok": False,
        "status": "absent",
        "queue": "q",
        "timerKey": "k",
        "txn": None,
    }


async def test_reschedule_resets_attempts_and_claim(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "k", 0)])
    [c] = await fire.claim(rt, now=at(0))
    await store.fail(conn, [D], ["q"], ["k"], [c.token], [8000], "boom", True, 5, at(0))
    res = await put(conn, [sched("q", "k", 1000, txn="t2", partition="p2")], now=1)
    assert res[0]["status"] == "rescheduled"
    row = await timer_row(conn, "q", "k")
    assert (row["attempts"], row["last_error"], row["claim_token"], row["claimed_until"]) == (
        0,
        None,
        None,
        None,
    )
    assert (row["partition"], row["txn"], row["deliver_at"]) == ("p2", "t2", at(2))


# -- §12 12, 14: stale segments and two live segments -------------------------------------------


async def test_stale_segment_releases_its_survivors_healthy_one_fires(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q1", k, 0) for k in ("a", "b", "c")] + [sched("q2", "h", 0)])
    claimed = await fire.claim(rt, now=at(0))
    assert len(claimed) == 4
    await conn.execute("DELETE FROM queen.log_timers WHERE timer_key = 'b'")
    r = await fire.fire_claimed(rt, claimed, now=at(0))
    assert (r.fired, r.stale, r.released) == (1, 3, 2)
    assert await conn.fetchval("SELECT count(*) FROM queen.queues WHERE name = 'q1'") == 0
    for k in ("a", "c"):
        row = await timer_row(conn, "q1", k)
        assert row["claim_token"] is None and row["claimed_until"] == at(0)
    again = await fire.claim(rt, now=at(0))
    assert sorted(c.timer_key for c in again) == ["a", "c"]
    assert (await fire.fire_claimed(rt, again, now=at(0))).fired == 2


async def test_two_live_segments_on_one_triple_are_refused(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "a", 0), sched("q", "b", 0)])
    claimed = await fire.claim(rt, now=at(0))
    batches = pack(claimed, max_bytes=1)  # one row per chunk: two rounds, two batches
    assert len(batches) == 2
    with pytest.raises(asyncpg.PostgresError) as e:
        async with conn.transaction():
            await fire_segments(conn, [batches[0][0], batches[1][0]], at(0))
    assert "two live segments target the same" in str(e.value)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_segments") == 0


@pytest.mark.parametrize(
    "case", ["segment arrays", "row arrays", "not grouped", "count", "out of range", "twice"]
)
async def test_misaligned_fire_arguments_are_refused_and_change_nothing(queen, conn, case):
    rt = queen.rt
    await put(conn, [sched("q1", "a", 0), sched("q1", "b", 0), sched("q2", "c", 0)])
    claimed = sorted(await fire.claim(rt, now=at(0)), key=lambda c: (c.queue, c.timer_key))
    ((s1, s2),) = pack(claimed)
    segs = [s1, s2] if s1.queue == "q1" else [s2, s1]
    rows = [t for sg in segs for t in sg.rows]
    args: dict[str, Any] = {  # store.fire's arrays by name; each case misaligns one
        "tenants": [D, D],
        "queues": ["q1", "q2"],
        "partitions": ["Default", "Default"],
        "counts": [2, 1],
        "blobs": [sg.blob for sg in segs],
        "seg_of": [1, 1, 2],
        "keys": [t.timer_key for t in rows],
        "tokens": [t.token for t in rows],
        "hashes": [h for sg in segs for h in sg.hashes],
    }
    if case == "segment arrays":
        args["queues"] = ["q1"]
    elif case == "row arrays":
        args["tokens"] = args["tokens"][:2]
    elif case == "not grouped":
        args["seg_of"], args["keys"] = (
            [1, 2, 1],
            [args["keys"][0], args["keys"][2], args["keys"][1]],
        )
    elif case == "count":
        args["counts"] = [1, 2]
    elif case == "out of range":
        args["seg_of"] = [1, 1, 3]
    elif case == "twice":
        args["keys"] = [args["keys"][0]] * 2 + [args["keys"][2]]
    with pytest.raises(asyncpg.PostgresError) as e:
        await store.fire(conn, **args, now=at(0))
    assert e.value.sqlstate == "P0001" and "QFIRE" in str(e.value)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_segments") == 0
    assert (
        await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE claim_token IS NOT NULL")
        == 3
    )


def test_batches_never_hold_two_segments_of_one_triple():
    from queen_timers.timers.store import ClaimedTimer

    def row(q, k, size):
        return ClaimedTimer(
            tenant=D,
            queue=q,
            timer_key=k,
            partition="Default",
            txn=k,
            message_id=uuid.uuid4(),
            payload=b"x" * size,
            payload_zstd=False,
            encrypted=False,
            producer_sub=None,
            attempts=0,
            deliver_at=at(0),
            late_ms=0.0,
            token=uuid.uuid4(),
            visible_at=at(0),
        )

    rows = [row("a", f"a{i}", 400) for i in range(5)] + [row("b", f"b{i}", 10) for i in range(3)]
    batches, _ = pack_batches(rows, 1000, 3, 1 << 20)
    for b in batches:
        keys = [(s.tenant, s.queue, s.partition) for s in b]
        assert len(keys) == len(set(keys))
        assert (
            sum(len(t.payload) + len(t.txn) + 64 for s in b for t in s.rows) <= 1000 or len(b) == 1
        )
    flat = [t.timer_key for b in batches for s in b for t in s.rows]
    assert sorted(flat) == sorted(t.timer_key for t in rows)
    # claim order is kept inside a triple
    assert [k for k in flat if k.startswith("a")] == [f"a{i}" for i in range(5)]


# -- beyond the reference: a txn already in the log is not appended again -----------------------


async def test_txn_already_in_the_log_is_not_appended_again(queen, ident, conn):
    rt = queen.rt
    await queen.push(ident, [{"queue": "q", "payload": {"pushed": 1}, "transactionId": "same"}])
    await put(conn, [sched("q", "dup", 0, txn="same"), sched("q", "ok", 0, txn="other")])
    r = await fire.drain(rt, now=at(0))
    assert (r.duplicate, r.fired, r.released) == (1, 1, 1)
    txns = [f["txn"] for f in await log_frames(conn, queue="q")]
    assert sorted(txns) == ["other", "same"]
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_reschedule_after_fire_with_the_same_txn_leaves_one_message(queen, conn):
    rt = queen.rt
    res = await put(conn, [sched("q", "k", 0, txn="once")])
    assert (await fire.drain(rt, now=at(0))).fired == 1
    late = await put(conn, [{"op": "cancel", "queue": "q", "timerKey": "k", "txn": "once"}], now=1)
    assert late[0]["status"] == "absent"  # no longer pending: it WAS delivered
    again = await put(conn, [sched("q", "k", 0, txn="once")], now=1)
    assert again[0]["status"] == "scheduled"  # a new row: the old one is gone
    r = await fire.drain(rt, now=at(1))
    assert (r.fired, r.duplicate) == (0, 1)
    frames = await log_frames(conn, queue="q")
    assert [f["txn"] for f in frames] == ["once"]
    assert str(frames[0]["id"]) == res[0]["messageId"]
    assert await timer_row(conn, "q", "k") is None


async def test_same_txn_twice_in_one_segment_is_delivered_once(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", "a", 0, txn="t"), sched("q", "b", 0, txn="t")])
    r = await fire.drain(rt, now=at(0))
    assert r.duplicate == 1 and r.fired == 1
    assert [f["txn"] for f in await log_frames(conn)] == ["t"]


# -- §12 15: one poisoned timer does not hold back a batch ----------------------------------------


async def test_poisoned_batch_is_isolated(queen, conn):
    rt = queen.rt
    await put(conn, [sched(f"q{i % 5}", f"k{i:03}", 0) for i in range(199)])
    # a queue name provisioning refuses: the schedule's value rules refuse it too, so the row
    # is written as a damaged or hand-edited table would hold it
    await conn.execute(
        "INSERT INTO queen.log_timers (tenant_id, queue, timer_key, deliver_at, txn, "
        "message_id, payload) VALUES ($1, $2, 'poison', $3, 't', gen_random_uuid(), '{}')",
        D,
        "x" * 300,
        at(0),
    )
    # per shard a claim takes max(ceil(max_rows / 64), 8) rows: 2000 -> 32, so 200 keys
    # (about 3 per shard) come in one claim
    claimed = await fire.claim(rt, now=at(0), max_rows=2000)
    assert len(claimed) == 200
    [batch] = pack(claimed)
    assert len(batch) == 6
    with pytest.raises(asyncpg.PostgresError) as e:
        async with conn.transaction():
            await fire_segments(conn, batch, at(0))
    assert e.value.sqlstate[:2] in ("22", "23") or e.value.sqlstate == "P0001"
    assert await conn.fetchval("SELECT count(*) FROM queen.log_segments") == 0

    r = await fire.fire_claimed(rt, claimed, now=at(0))
    assert (r.poisoned, r.fired, r.failed_permanent, r.dead_lettered) == (1, 199, 1, 0)
    row = await timer_row(conn, "x" * 300, "poison")
    assert row["attempts"] == 1 and row["claim_token"] is None
    assert row["claimed_until"] == at(1) and "23514" in row["last_error"]
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 1
    assert len(await log_frames(conn)) == 199


# -- §12 16: dead-letter ------------------------------------------------------------------------


async def test_dlq_archives_only_exhausted_rows(queen, conn):
    await put(
        conn, [sched("q", "tired", 0, txn="t-tired", payload={"p": 1}), sched("q", "fresh", 0)]
    )
    await conn.execute(
        "UPDATE queen.log_timers SET attempts = 5, last_error = 'boom' WHERE timer_key = 'tired'"
    )
    res = await store.dlq(
        conn, [D, D], ["q", "q"], ["tired", "fresh"], [{"p": 1}, {"p": 2}], 5, at(0)
    )
    assert res == {"archived": 1, "skipped": 1}
    d = await conn.fetchrow(
        "SELECT d.*, p.name AS pname FROM queen.log_dlq d "
        "JOIN queen.log_partitions p ON p.id = d.partition_id"
    )
    assert (d["consumer_group"], d["offset"], d["transaction_id"], d["retry_count"]) == (
        "__timer__",
        -1,
        "t-tired",
        5,
    )
    assert d["pname"] == "Default" and d["error"] == "boom" and d["payload"] == {"p": 1}
    assert d["timer_key"] == "tired"
    assert await timer_row(conn, "q", "tired") is None
    assert await timer_row(conn, "q", "fresh") is not None


async def test_permanent_failures_back_off_then_dead_letter(queen, conn):
    rt = queen.rt
    # a payload flagged zstd that is not zstd cannot become a frame: a permanent failure of
    # that row alone (the service refuses it at schedule; here it is written by the procedure)
    await put(
        conn,
        [
            sched("q", "bad", 0, txn="t-bad", payloadZstd=True, payload={"no": 1}),
            sched("q", "good", 0),
        ],
    )
    expected_backoff = [1, 2, 4, 8]
    now = 0.0
    r = await fire.drain(rt, now=at(now))
    assert (r.fired, r.failed_permanent) == (1, 1)
    for attempt, wait in enumerate(expected_backoff, start=1):
        row = await timer_row(conn, "q", "bad")
        assert row["attempts"] == attempt
        assert row["claimed_until"] == at(now + wait)
        assert await fire.claim(rt, now=at(now + wait - 0.01)) == []
        now += wait
        r = await fire.drain(rt, now=at(now))
        assert r.failed_permanent == 1
    assert r.dead_lettered == 1
    assert await timer_row(conn, "q", "bad") is None
    d = await conn.fetchrow("SELECT * FROM queen.log_dlq")
    assert d["consumer_group"] == "__timer__" and d["retry_count"] == 5
    assert d["timer_key"] == "bad"  # the fire's dead-letter path names its timer
    assert d["payload"] == {"no": 1}  # the stored bytes, which are JSON


async def test_reschedule_between_fail_and_dlq_keeps_the_row(queen, conn):
    await put(conn, [sched("q", "k", 0)])
    [c] = await store.claim(conn, None, at(0), 30000, 10, 10)
    await conn.execute("UPDATE queen.log_timers SET attempts = 4")
    res = await store.fail(conn, [D], ["q"], ["k"], [c.token], [1000], "boom", True, 5, at(0))
    assert res["exhausted"] == [{"tenant": str(D), "queue": "q", "timerKey": "k", "attempts": 5}]
    assert (await put(conn, [sched("q", "k", 60000)], now=0.5))[0]["status"] == "rescheduled"
    assert await store.dlq(conn, [D], ["q"], ["k"], [{}], 5, at(0.5)) == {
        "archived": 0,
        "skipped": 1,
    }
    assert (await timer_row(conn, "q", "k"))["attempts"] == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 0


# -- §12 17: transient failures spend nothing -----------------------------------------------------


async def test_backend_killed_mid_fire_changes_nothing(queen, conn, db_url):
    rt = queen.rt
    await put(conn, [sched("q", "k", 0)])
    [c] = await fire.claim(rt, now=at(0))
    [batch] = pack([c])
    other = await asyncpg.connect(db_url)
    try:
        tx = other.transaction()
        await tx.start()
        await fire_segments(other, batch, at(0))  # pushed + deleted, not committed
        pid = other.get_server_pid()
        # with a timeout the call returns only once the backend is gone (PostgreSQL 14+)
        assert await conn.fetchval("SELECT pg_terminate_backend($1, 10000)", pid)
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)) as e:
            await tx.commit()
        assert fire.classify_exception(e.value) is FailureClass.TRANSIENT
    finally:
        await other.close()
    row = await timer_row(conn, "q", "k")
    assert row["attempts"] == 0 and row["claim_token"] == c.token
    assert await conn.fetchval("SELECT count(*) FROM queen.log_segments") == 0
    res = await store.fail(conn, [D], ["q"], ["k"], [c.token], [1000], "conn", False, 5, at(0))
    assert res["failed"] == 1
    row = await timer_row(conn, "q", "k")
    assert (row["attempts"], row["claim_token"], row["claimed_until"]) == (0, None, at(1))
    # the re-fire after the rolled-back attempt delivers the id promised at schedule
    assert (await fire.drain(rt, now=at(1))).fired == 1
    [f] = await log_frames(conn)
    assert f["id"] == c.message_id == row["message_id"]


async def test_transient_failure_through_fire_claimed(queen, conn, db_url):
    """A fire that cannot get its partition lock before the statement timeout (57014, class
    57: transient) backs off one second and spends no attempt."""
    from queen_timers.service import Queen

    await put(conn, [sched("q", "seed", -1000), sched("q", "k", 0)])
    assert (
        await fire.fire_claimed(queen.rt, await fire.claim(queen.rt, now=at(-1)), now=at(-1))
    ).fired == 1  # the partition exists now
    q2 = Queen(
        database_url=db_url,
        sweeper=False,
        retention_interval_ms=0,
        sweeper_notify=False,
        statement_timeout_ms=1500,
    )
    await q2.start()
    try:
        [c] = await fire.claim(q2.rt, now=at(0))
        async with conn.transaction():
            await conn.execute("SELECT 1 FROM queen.log_partitions FOR UPDATE")
            r = await asyncio.wait_for(fire.fire_claimed(q2.rt, [c], now=at(0)), 20)
        assert (r.failed_transient, r.failed_permanent, r.fired) == (1, 0, 0)
    finally:
        await q2.stop()
    row = await timer_row(conn, "q", "k")
    assert (row["attempts"], row["claim_token"], row["claimed_until"]) == (0, None, at(1))
    assert row["last_error"].startswith("transient")


# -- §12 21-22: tenants -------------------------------------------------------------------------


async def test_same_names_under_two_tenants_fire_into_two_partitions(queen, conn):
    rt = queen.rt
    a, b = uuid.uuid4(), uuid.uuid4()
    await put(conn, [sched("q", "k", 0, txn="ta")], tenant=a)
    await put(conn, [sched("q", "k", 0, txn="tb")], tenant=b)
    claimed = await fire.claim(rt, now=at(0))
    assert len(claimed) == 2
    [batch] = pack(claimed)
    assert len(batch) == 2  # grouped by (tenant, queue, partition)
    assert (await fire.fire_claimed(rt, claimed, now=at(0))).fired == 2
    assert [f["txn"] for f in await log_frames(conn, tenant=a)] == ["ta"]
    assert [f["txn"] for f in await log_frames(conn, tenant=b)] == ["tb"]
    assert await conn.fetchval("SELECT count(DISTINCT id) FROM queen.log_partitions") == 2


async def test_segment_declared_under_another_tenant_is_stale(queen, conn):
    rt = queen.rt
    a, b = uuid.uuid4(), uuid.uuid4()
    await put(conn, [sched("q", "k", 0, txn="tb")], tenant=b)
    [cb] = await fire.claim(rt, now=at(0))
    forged = dataclasses.replace(cb, tenant=a)
    r = await fire.fire_claimed(rt, [forged], now=at(0))
    assert (r.stale, r.fired) == (1, 0)
    row = await timer_row(conn, "q", "k", tenant=b)
    assert row["claim_token"] == cb.token and row["claimed_until"] == at(30)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_segments") == 0


async def test_dlq_lands_under_the_timers_own_tenant(queen, conn):
    a, b = uuid.uuid4(), uuid.uuid4()
    await put(conn, [sched("q", "k", 0)], tenant=a)
    await put(conn, [sched("q", "k", 0)], tenant=b)
    await conn.execute("UPDATE queen.log_timers SET attempts = 5 WHERE tenant_id = $1", a)
    assert (await store.dlq(conn, [a], ["q"], ["k"], [{}], 5, at(0)))["archived"] == 1
    owners = await conn.fetch(
        "SELECT q.tenant_id FROM queen.log_dlq d JOIN queen.log_partitions p"
        " ON p.id = d.partition_id JOIN queen.queues q ON q.id = p.queue_id"
    )
    assert [r["tenant_id"] for r in owners] == [a]
    assert await timer_row(conn, "q", "k", tenant=b) is not None


# -- what the consumer sees ---------------------------------------------------------------------


async def test_fired_message_created_not_before_deliver_at(queen, ident, conn):
    rt = queen.rt
    res = await queen.timers_apply(ident, [sched("q", "k", 0, txn="t", payload={"hello": 1})])
    r = await fire.drain(rt)  # the database clock, no time travel
    assert r.fired == 1 and len(r.lags_ms) == 1 and r.lags_ms[0] >= 0
    [f] = await log_frames(conn)
    deliver_at = dt.datetime.fromisoformat(res[0]["deliverAt"])
    assert f["createdAt"] >= deliver_at
    assert str(f["id"]) == res[0]["messageId"] and f["txn"] == "t"
    assert f["producerSub"] == "tester"
    popped = await queen.pop(ident, "q")
    m = popped["messages"][0]
    assert (m["id"], m["transactionId"], m["data"], m["producerSub"]) == (
        res[0]["messageId"],
        "t",
        {"hello": 1},
        "tester",
    )


async def test_payload_zstd_is_delivered_decoded(queen, ident, conn):
    import base64

    plain = json.dumps({"big": "y" * 1000}).encode()
    z = base64.b64encode(zstandard.ZstdCompressor().compress(plain)).decode()
    await queen.configure_queue(ident, "enc", {"encryptionEnabled": True})
    res = await queen.timers_apply(
        ident,
        [
            {
                "op": "schedule",
                "queue": "plainq",
                "timerKey": "z",
                "delayMs": 0,
                "txn": "tz",
                "payload": z,
                "payloadZstd": True,
            },
            {
                "op": "schedule",
                "queue": "enc",
                "timerKey": "z",
                "delayMs": 0,
                "txn": "te",
                "payload": z,
                "payloadZstd": True,
            },
        ],
    )
    assert [r["status"] for r in res] == ["scheduled", "scheduled"]
    stored = await timer_row(conn, "plainq", "z")
    assert stored["payload_zstd"] is True and len(stored["payload"]) < len(plain)
    enc = await timer_row(conn, "enc", "z")  # decompressed then encrypted at schedule
    assert (
        enc["payload_zstd"] is False and enc["encrypted"] is True and b"yyyy" not in enc["payload"]
    )
    assert (await fire.drain(queen.rt)).fired == 2
    [fp] = await log_frames(conn, queue="plainq")
    assert fp["payload"] == plain and fp["encrypted"] is False
    [fe] = await log_frames(conn, queue="enc")
    assert fe["encrypted"] is True and queen.rt.cipher.decrypt(fe["payload"]) == plain
    assert (await queen.pop(ident, "enc"))["messages"][0]["data"] == json.loads(plain)


async def test_fire_wakes_parked_pops(queen, conn, monkeypatch):
    woke = []
    monkeypatch.setattr(queen.rt.hub, "queue_pushed", lambda tenant, q: woke.append((tenant, q)))
    await put(conn, [sched("q1", "a", 0), sched("q2", "b", 0)])
    await fire.drain(queen.rt, now=at(0))
    assert sorted(woke) == [(D, "q1"), (D, "q2")]


async def test_release_hands_claims_back(queen, conn):
    rt = queen.rt
    await put(conn, [sched("q", k, 0) for k in "abc"])
    claimed = await fire.claim(rt, now=at(0))
    assert await fire.release(rt, claimed[:2], now=at(1)) == 2
    again = await fire.claim(rt, now=at(1))
    assert sorted(c.timer_key for c in again) == sorted(c.timer_key for c in claimed[:2])
    assert await fire.release(rt, claimed[:2], now=at(1)) == 0  # tokens changed: not ours


# -- fairness inside the claim ------------------------------------------------------------------


async def test_claim_is_fair_across_tenants_inside_a_shard(queen, conn):
    a, b = uuid.uuid4(), uuid.uuid4()
    # same keys -> same shards; tenant a is older and far more numerous
    await put(conn, [sched("q", f"k{i}", -10000) for i in range(40)], tenant=a)
    await put(conn, [sched("q", f"k{i}", 0) for i in range(40)], tenant=b)
    claimed = await store.claim(conn, None, at(0), 30000, 64, 1)  # one per tenant per shard
    tenants = {c.tenant for c in claimed}
    assert tenants == {a, b}
    per: dict[tuple[int, uuid.UUID], int] = {}
    for c in claimed:
        shard = await conn.fetchval(
            "SELECT shard FROM queen.log_timers WHERE tenant_id = $1 AND timer_key = $2",
            c.tenant,
            c.timer_key,
        )
        per.setdefault((shard, c.tenant), 0)
        per[(shard, c.tenant)] += 1
    assert max(per.values()) == 1


async def test_claim_without_a_binding_cap_takes_each_shards_oldest_rows(queen, conn):
    """Default cap (50 >= v_per 8): no tenant pass; a shard gives its oldest due rows, whoever
    owns them, at most v_per (8) of them, in pre-claim visible_at order."""
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)  # a sorts first by id, b is older
    shard_of: dict[int, list[str]] = {}
    keys = [f"k{i}" for i in range(400)]
    for k, sh in await conn.fetch(
        "SELECT k, (hashtextextended(k, 0) & 63)::int FROM unnest($1::text[]) k", keys
    ):
        shard_of.setdefault(sh, []).append(k)
    shard, same = max(shard_of.items(), key=lambda kv: len(kv[1]))
    assert len(same) >= 6
    await put(conn, [sched("q", k, -100 + i) for i, k in enumerate(same[:3])], tenant=a)
    await put(conn, [sched("q", k, -5000 + i) for i, k in enumerate(same[3:6])], tenant=b)
    claimed = await store.claim(conn, [shard], at(0), 30000, 4, 50)
    assert [(c.tenant, c.timer_key) for c in claimed] == [(b, k) for k in same[3:6]] + [
        (a, same[0])
    ]
    more = await store.claim(conn, [shard], at(0), 30000, 200, 50)
    assert sorted(c.timer_key for c in more) == sorted(same[1:3])  # the rest, nothing twice


async def test_claim_columns_map_onto_claimed_timer(queen, conn):
    """ClaimedTimer.from_record is positional: the procedure's columns must be its fields."""
    await put(conn, [sched("q", "k", 0)])
    [r] = await conn.fetch(
        "SELECT * FROM queen.log_timers_claim_v3(NULL, $1, 30000, 10, 50)", at(0)
    )
    names = {"tenant_id": "tenant", "claim_token": "token"}
    assert [names.get(k, k) for k in r.keys()] == [
        f.name for f in dataclasses.fields(store.ClaimedTimer)
    ]
    c = store.ClaimedTimer.from_record(r)
    assert (c.tenant, c.queue, c.timer_key, c.partition, c.txn) == (
        D,
        "q",
        "k",
        "Default",
        "txn-q-k",
    )
    assert isinstance(c.payload, bytes) and c.token == r["claim_token"]


def test_dlq_snapshot_is_json_or_raw_base64():
    import base64

    from queen_timers.timers.fire import dlq_snapshot
    from queen_timers.timers.store import ClaimedTimer

    def row(payload, zstd=False):
        return ClaimedTimer(
            tenant=D,
            queue="q",
            timer_key="k",
            partition="Default",
            txn="t",
            message_id=uuid.uuid4(),
            payload=payload,
            payload_zstd=zstd,
            encrypted=False,
            producer_sub=None,
            attempts=5,
            deliver_at=at(0),
            late_ms=0.0,
            token=uuid.uuid4(),
            visible_at=at(0),
        )

    assert dlq_snapshot(row(b'{"a": 1}'), 1 << 20) == {"a": 1}
    z = zstandard.ZstdCompressor().compress(b"[1, 2]")
    assert dlq_snapshot(row(z, zstd=True), 1 << 20) == [1, 2]
    assert dlq_snapshot(row(b"\xff\x00bin"), 1 << 20) == {
        "_raw_b64": base64.b64encode(b"\xff\x00bin").decode()
    }


async def test_timer_dead_letters_are_listed_with_the_queue(queen, ident, conn):
    await queen.timers_apply(ident, [sched("q", "k", 0, txn="t-dead")])
    await conn.execute("UPDATE queen.log_timers SET attempts = 5")
    await store.dlq(conn, [D], ["q"], ["k"], [{"k": "k"}], 5, None)
    listing = await queen.dlq(ident, queue="q")
    assert "t-dead" in json.dumps(listing) and "__timer__" in json.dumps(listing)
    [m] = listing["messages"]
    assert m["timerKey"] == "k"


async def test_a_fired_payload_that_is_not_json_does_not_poison_its_partition(queen, ident):
    # The wire takes any bytes as a timer payload (base64). A fired frame whose bytes are not
    # JSON made every pop of its partition raise (500) after claiming the lease, so the
    # message, and everything behind it, was never delivered. It is delivered with the
    # dead-letter snapshot's convention instead, and can be acked and dead-lettered.
    import base64

    raw = b"\xff\x00bin"
    await queen.configure_queue(ident, "q", {"retryLimit": 0})
    await queen.timers_apply(
        ident, [{**sched("q", "k", 0, txn="t-raw"), "payload": base64.b64encode(raw).decode()}]
    )
    await queen.push(ident, [{"queue": "q", "payload": {"after": 1}, "transactionId": "t-next"}])
    assert (await fire.drain(queen.rt)).fired == 1
    r = await queen.pop(ident, "q", batch=10)
    assert [m["data"] for m in r["messages"]] == [
        {"after": 1},
        {"_raw_b64": base64.b64encode(raw).decode()},
    ]
    m = r["messages"][1]
    res = await queen.ack(
        ident,
        [
            {
                "transactionId": "t-raw",
                "partitionId": m["partitionId"],
                "leaseId": r["leaseId"],
                "status": "dlq",
                "error": "bad",
            }
        ],
    )
    assert res[0]["success"] is True
    [d] = (await queen.dlq(ident, queue="q"))["messages"]
    assert d["transactionId"] == "t-raw" and d["data"] == {
        "_raw_b64": base64.b64encode(raw).decode()
    }


class _PauseAfterFirstRead(asyncio.Protocol):
    """Test-side: in front of a connection's protocol, forwards one read and then stops the
    socket's reading, so what follows that read (the end of file) waits until resumed."""

    def __init__(self, transport):
        self.transport = transport
        self.inner = transport.get_protocol()
        self.forwarded = asyncio.Event()

    def data_received(self, data):
        self.inner.data_received(data)
        if not self.forwarded.is_set():
            self.forwarded.set()
            self.transport.pause_reading()

    def eof_received(self):
        return self.inner.eof_received()

    def connection_lost(self, exc):
        self.inner.connection_lost(exc)


async def test_a_fire_never_gets_a_pooled_connection_whose_backend_said_goodbye(
    queen, conn, db_url, caplog
):
    """The backend of an idle pooled connection is terminated: PostgreSQL sends FATAL, then
    closes. asyncpg has read the FATAL but not yet the end of file when the next fire takes
    that connection from the pool. Before queen_timers.db.goodbye this fire failed with
    `InternalClientError: cannot switch to state 12; another operation (2) is in progress`
    (a transient failure, the batch backed off); now the pool hands out a fresh connection
    and the fire delivers. The read is held between the FATAL and the end of file by
    pausing the socket, so nothing here races."""
    from queen_timers.db.pool import connect_pool

    pool = await connect_pool(db_url, min_size=1, max_size=1, role="goodbye")
    rt = dataclasses.replace(queen.rt, pool=pool)
    try:
        await put(conn, [sched("q", "k", 0)])
        packed = await fire.pack(rt, await fire.claim(rt, now=at(0)))  # warms the statement
        async with pool.acquire() as c:
            pid = c.get_server_pid()
            transport = c._transport  # type: ignore[attr-defined]  # asyncpg's, private
        gate = _PauseAfterFirstRead(transport)
        transport.set_protocol(gate)
        assert await conn.fetchval("SELECT pg_terminate_backend($1, 10000)", pid)
        await asyncio.wait_for(gate.forwarded.wait(), 10)  # the FATAL is read, the EOF is not
        with caplog.at_level("WARNING", logger="queen_timers.timers"):
            report = await fire.fire_packed(rt, packed, now=at(0))
        assert "cannot switch to state" not in caplog.text
        assert (report.fired, report.failed_transient) == (1, 0), report
        assert len(await log_frames(conn)) == 1
    finally:
        transport.resume_reading()
        await pool.close()
