"""Group commit of schedules (queen_timers/timers/batcher.py): concurrent calls share a statement,
and nothing a caller sees changes: its own results in its own order, its own errors only."""

import asyncio
import json

import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.chaos import Kill, killing
from queen_timers.testing.fixtures import started_broker
from queen_timers.timers.batcher import ScheduleBatcher

from .helpers import sched, timer_row


class _Op:
    def __init__(self, queue, key):
        self.queue, self.timer_key = queue, key


class _Recorder:
    """A stand-in for the statement: records what each statement carried. (The batcher's own
    logic; the database is exercised by the tests below that go through the service.)"""

    def __init__(self, fail_on=None, gate=None):
        self.calls: list[tuple] = []
        self.fail_on = fail_on
        self.gate = gate

    async def __call__(self, ident, ops):
        self.calls.append((ident, [o.timer_key for o in ops]))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_on is not None and any(o.timer_key == self.fail_on for o in ops):
            raise QueenError("timers_bad_request", "bad", f"bad op {self.fail_on}", 400)
        return [{"key": o.timer_key} for o in ops]


async def _burst(b, calls):
    """The first call takes the slot and runs alone; the others arrive while it runs."""
    first = asyncio.ensure_future(b.submit(*calls[0]))
    for _ in range(3):
        await asyncio.sleep(0)
    rest = await asyncio.gather(*(b.submit(i, ops) for i, ops in calls[1:]), return_exceptions=True)
    try:
        return [await first] + rest
    except Exception as e:  # noqa: BLE001
        return [e] + rest


async def test_calls_waiting_for_a_slot_share_one_statement_and_keep_their_results():
    gate = asyncio.Event()
    rec = _Recorder(gate=gate)
    b = ScheduleBatcher(rec, inflight=1, max_ops=256)
    me = Identity(subject="a")
    calls = [(me, [_Op("q", f"k{i}"), _Op("q", f"k{i}b")]) for i in range(5)]
    task = asyncio.ensure_future(_burst(b, calls))
    await asyncio.sleep(0)  # every call queued; the first statement is running
    gate.set()
    res = await task
    assert [[r["key"] for r in x] for x in res] == [[f"k{i}", f"k{i}b"] for i in range(5)]
    assert len(rec.calls) == 2 and b.statements == 2  # the first alone, the other 4 merged
    assert rec.calls[1][1] == ["k1", "k1b", "k2", "k2b", "k3", "k3b", "k4", "k4b"]


async def test_no_merge_across_identities_repeated_keys_or_the_op_cap():
    gate = asyncio.Event()
    rec = _Recorder(gate=gate)
    b = ScheduleBatcher(rec, inflight=1, max_ops=3)
    a, other = Identity(subject="a"), Identity(subject="other")
    calls = [
        (a, [_Op("q", "first")]),
        (a, [_Op("q", "x")]),
        (other, [_Op("q", "y")]),
        (a, [_Op("q", "x")]),
        (a, [_Op("q", "z1"), _Op("q", "z2")]),
    ]
    task = asyncio.ensure_future(_burst(b, calls))
    await asyncio.sleep(0)
    gate.set()
    res = await task
    assert not any(isinstance(r, Exception) for r in res)
    for _ident, keys in rec.calls:  # one identity per statement, a key at most once
        assert len(keys) == len(set(keys)) <= 3
    by_stmt = [(i.subject, k) for i, k in rec.calls]
    assert ("other", ["y"]) in by_stmt
    assert sum(k.count("x") for _, k in by_stmt) == 2


async def test_a_bad_call_never_fails_the_call_it_was_merged_with():
    gate = asyncio.Event()
    rec = _Recorder(fail_on="bad", gate=gate)
    b = ScheduleBatcher(rec, inflight=1, max_ops=256)
    me = Identity(subject="a")
    task = asyncio.ensure_future(
        _burst(b, [(me, [_Op("q", "first")]), (me, [_Op("q", "good")]), (me, [_Op("q", "bad")])])
    )
    await asyncio.sleep(0)
    gate.set()
    first, good, bad = await task
    assert first == [{"key": "first"}] and good == [{"key": "good"}]
    assert isinstance(bad, QueenError) and "bad op" in bad.detail
    # the merged statement failed, then each call was replayed on its own
    assert [k for _, k in rec.calls] == [["first"], ["good", "bad"], ["good"], ["bad"]]


async def test_a_transient_failure_reaches_every_merged_call_without_replay():
    gate = asyncio.Event()

    async def run(ident, ops):
        await gate.wait()
        raise QueenError("timers_unavailable", "connection", "lost", 503, retry_after=1)

    b = ScheduleBatcher(run, inflight=1, max_ops=256)
    me = Identity(subject="a")
    task = asyncio.ensure_future(_burst(b, [(me, [_Op("q", f"k{i}")]) for i in range(3)]))
    await asyncio.sleep(0)
    gate.set()
    res = await task
    assert all(isinstance(r, QueenError) and r.status == 503 for r in res)
    assert b.statements == 2


async def test_a_caller_that_goes_away_before_its_turn_never_runs():
    gate = asyncio.Event()
    rec = _Recorder(gate=gate)
    b = ScheduleBatcher(rec, inflight=1, max_ops=256)
    me = Identity(subject="a")
    first = asyncio.ensure_future(b.submit(me, [_Op("q", "first")]))
    gone = asyncio.ensure_future(b.submit(me, [_Op("q", "gone")]))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    gate.set()
    assert await first == [{"key": "first"}]
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert [k for _, k in rec.calls] == [["first"]]


async def test_inflight_zero_is_one_statement_per_call():
    rec = _Recorder()
    b = ScheduleBatcher(rec, inflight=0, max_ops=256)
    me = Identity(subject="a")
    await _burst(b, [(me, [_Op("q", f"k{i}")]) for i in range(4)])
    assert len(rec.calls) == 4


# -- through the service, on the database ---------------------------------------------------


async def test_merged_schedules_on_the_database(db_url, conn, tenant_ident):
    async with started_broker(db_url, timers_schedule_inflight=1) as q:
        a, b = tenant_ident("alice"), tenant_ident("bob")
        await q.configure_queue(a, "enc", {"encryptionEnabled": True})
        calls = (
            [(a, [sched("q", f"k{i}", 60000, payload={"i": i})]) for i in range(6)]
            + [(b, [sched("q", "k0", 60000, payload={"who": "b"})])]
            + [(a, [sched("q", "k1", 60000, payload={"again": 1})])]  # repeated key
            + [(a, [sched("enc", "bad", 0, encrypted=True)])]  # refused alone
            + [(a, [sched("enc", "ok", 0, payload={"secret": "s3cr3t"})])]
        )
        res = await asyncio.gather(
            *(q.timers_apply(i, ops) for i, ops in calls), return_exceptions=True
        )
        batcher = q.schedule_batcher
        assert batcher.merged_calls >= 2  # calls shared a statement
        assert isinstance(res[8], QueenError) and res[8].reason == "timers_encrypted_conflict"
        ok = [r for i, r in enumerate(res) if i != 8]
        assert all(isinstance(r, list) for r in ok), ok
        first = [r[0] for r in ok if isinstance(r, list)]  # calls 0-7 and 9, in order
        assert [r["status"] for r in first[:6]] == ["scheduled"] * 6
        assert [r["timerKey"] for r in first[:6]] == [f"k{i}" for i in range(6)]
        assert first[6]["status"] == "scheduled"  # bob's k0 is his own row
        assert first[7]["status"] == "rescheduled"
        assert first[8]["status"] == "scheduled"
        row = await timer_row(conn, "q", "k0", tenant=b.tenant)
        assert json.loads(row["payload"]) == {"who": "b"} and row["producer_sub"] == "bob"
        row = await timer_row(conn, "q", "k1", tenant=a.tenant)
        assert json.loads(row["payload"]) == {"again": 1} and row["producer_sub"] == "alice"
        enc = await timer_row(conn, "enc", "ok", tenant=a.tenant)
        assert enc["encrypted"] is True and b"s3cr3t" not in enc["payload"]
        assert await timer_row(conn, "enc", "bad", tenant=a.tenant) is None
        assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 8


async def test_schedules_while_the_pool_backends_are_killed(queen, ident, conn):
    """16 callers schedule 25 timers each while the backend of the connection a schedule
    batch is about to use is terminated (fault point timers.schedule, every 2nd batch, 8
    times: 400 calls make at least 25 batches of at most 16). A call either answers ok (and
    its timer is staged with its txn) or fails with the transient 503 a client retries
    (never a 500, never a wrong result); a refused call wrote nothing, and its retry
    schedules it once; afterwards the pool has healed and a call succeeds. Before DB_ERRORS
    held asyncpg's InternalClientError (a connection whose backend died as it went back to
    the pool), one run in two let it escape as an unhandled exception."""
    oks: list[tuple[str, dict]] = []  # (key, its result)
    failed: list[tuple[str, QueenError]] = []
    kills = Kill(every=2, times=8)

    async def caller(i: int) -> None:
        for j in range(25):
            key = f"c{i}-{j}"
            try:
                [r] = await queen.timers_apply(ident, [sched("chaos", key, 60_000)])
                oks.append((key, r))
            except QueenError as e:
                failed.append((key, e))

    async with killing(conn, {"timers.schedule": kills}) as chaos:
        await asyncio.gather(*(caller(i) for i in range(16)))
    chaos.assert_done()
    # Each termination fails the whole batch that reached the point: at least one call each.
    assert kills.times <= len(failed) <= kills.times * 16, len(failed)
    for key, e in failed:
        assert e.status == 503 and e.code == "timers_unavailable", (key, e.to_dict())
        assert e.retry_after == 1
    staged = {
        r["timer_key"]: r["txn"]
        for r in await conn.fetch(
            "SELECT timer_key, txn FROM queen.log_timers WHERE queue = 'chaos'"
        )
    }
    assert len(staged) == len(oks) == 400 - len(failed)
    for key, r in oks:
        assert r["ok"] is True and r["status"] == "scheduled"
        assert staged.get(key) == r["txn"], key
    assert not [k for k, _ in failed if k in staged], "a refused schedule was written"
    # Retrying a refused call schedules it once; repeating an answered one reschedules it:
    # the same key is never a second timer.
    [r] = await queen.timers_apply(ident, [sched("chaos", failed[0][0], 60_000)])
    assert r["status"] == "scheduled"
    [r] = await queen.timers_apply(ident, [sched("chaos", oks[0][0], 60_000)])
    assert r["status"] == "rescheduled"
    [r] = await queen.timers_apply(ident, [sched("chaos", "after", 60_000)])
    assert r["status"] == "scheduled"
