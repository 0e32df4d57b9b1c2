"""Kill switches acting on the sweeper across two brokers, metrics, and the idle poll."""

import asyncio

import pytest
from sweeper_helpers import schedule_many, schedule_op, wait_delivered

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.log.frames import txn_hash, unpack_segment
from queen_timers.service import Queen

pytestmark = pytest.mark.slow

IDENT = Identity(subject="s")
ADMIN = Identity(admin=True)


@pytest.fixture
async def two(db_url):
    a = Queen(database_url=db_url, retention_interval_ms=0)
    b = Queen(database_url=db_url, retention_interval_ms=0)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()


async def _until(pred, timeout=5.0):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not pred():
        assert loop.time() - t0 < timeout, "condition not reached"
        await asyncio.sleep(0.02)


async def _cycles(q: Queen, n: int, timeout: float = 10.0) -> None:
    """Wait until q's sweeper has run n more cycles (events the sweeper sets)."""
    for _ in range(n):
        assert q.sweeper is not None
        await asyncio.wait_for(q.sweeper.cycle_done.wait(), timeout)


async def test_pause_scheduling_across_brokers(two, conn):
    a, b = two
    before = await schedule_many(
        b, IDENT, [schedule_op("q", "early", 1500), schedule_op("q", "keep", 3_600_000)]
    )
    await a.switches_set(ADMIN, {"timersSchedule": False})
    await _until(lambda: not b.rt.switches.timers_schedule_enabled, 1.5)
    with pytest.raises(QueenError) as e:
        await b.timers_apply(IDENT, [schedule_op("q", "late", 0)])
    assert e.value.code == "timers_disabled" and e.value.status == 503
    with pytest.raises(QueenError):  # a reschedule is a schedule
        await b.timers_apply(IDENT, [{**schedule_op("q", "keep", 5), "op": "reschedule"}])
    # never blocked: peek, list, cancel (in a POST batch too)
    assert (await b.timer_peek(IDENT, "q", "keep"))["found"] is True
    assert "keep" in [r["timerKey"] for r in (await b.timers_list(IDENT, "q"))["rows"]]
    assert (await b.timers_apply(IDENT, [{"op": "cancel", "queue": "q", "timerKey": "keep"}]))[0][
        "status"
    ] == "cancelled"
    # existing timers still fire
    log = await wait_delivered(conn, 1, timeout=10)
    assert txn_hash(before[0]["txn"]) in log
    await b.switches_set(ADMIN, {"timersSchedule": True})
    await _until(lambda: a.rt.switches.timers_schedule_enabled, 1.5)
    assert (await a.timers_apply(IDENT, [schedule_op("q", "again", 10)]))[0]["ok"]


async def test_pause_fire_holds_timers_and_resume_drains_oldest_first(two, conn):
    a, b = two
    await a.switches_set(ADMIN, {"timersFire": False})
    await _until(lambda: not b.rt.switches.timers_fire_enabled, 1.5)
    # due at once, in reverse order of scheduling
    res = await schedule_many(b, IDENT, [schedule_op("q", f"k{i}", -1000 * i) for i in range(20)])
    await _cycles(a, 2)
    await _cycles(b, 2)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_txns") == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 20
    # One broker drains: two would split the backlog between claims taken at the same moment,
    # and which of two fires commits first is not an order the broker promises.
    await a.stop()
    await b.switches_set(ADMIN, {"timersFire": True})
    await wait_delivered(conn, 20, timeout=10)
    frames = []
    for r in await conn.fetch("SELECT blob FROM queen.log_segments ORDER BY base_offset"):
        frames.extend(unpack_segment(r["blob"]))
    order = [f.txn for f in frames]
    oldest_first = [r["txn"] for r in sorted(res, key=lambda r: r["deliverAt"])]
    assert order == oldest_first


async def test_metrics_count_fires_lag_and_wakeups(db_url, conn):
    q = Queen(database_url=db_url, retention_interval_ms=0)
    await q.start()
    try:
        await schedule_many(q, IDENT, [schedule_op("m", f"k{i}", 30) for i in range(10)])
        await wait_delivered(conn, 10)
        await _cycles(q, 1)
        samples = {}
        for m in q.metrics_registry.collect():
            for s in m.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        assert samples[("queen_timers_fired_total", (("result", "fired"),))] == 10
        assert samples[("queen_timers_fire_lag_seconds_count", ())] == 10
        assert samples[("queen_sweeper_wakeups_total", (("reason", "local"),))] >= 1
        assert samples[("queen_sweeper_listener_connected", ())] == 1
        assert samples[("queen_timers_due", ())] == 0
    finally:
        await q.stop()


async def test_an_idle_sweeper_polls_about_once_a_second(db_url):
    q = Queen(database_url=db_url, retention_interval_ms=0)
    await q.start()
    try:
        await _cycles(q, 1)
        assert q.sweeper is not None
        loop = asyncio.get_running_loop()
        t0, c0 = loop.time(), q.sweeper.cycles
        await _cycles(q, 3)
        elapsed = loop.time() - t0
        assert q.sweeper.cycles - c0 == 3
        assert elapsed >= 2.7, f"3 idle cycles took {elapsed:.2f} s: the poll is too eager"
    finally:
        await q.stop()
