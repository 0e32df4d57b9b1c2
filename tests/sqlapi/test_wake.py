"""The wake: a timer committed through the SQL API wakes a running broker's sweeper through
NOTIFY (PostgreSQL sends it at COMMIT); a rolled-back one sends nothing, and neither does a
timer due after the listeners' next poll or a call with wake => false."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import asyncpg
import msgspec
from timers.helpers import log_frames, timer_row

import queen_timers
from queen_timers.notify import TIMERS_CHANNEL, Notifier, _TimerHint
from queen_timers.service import Queen
from queen_timers.testing.fixtures import started_broker

from .helpers import set_limit


def notifier(q: Queen) -> Notifier:
    """The broker's LISTEN/NOTIFY notifier (these tests run with QUEEN_SWEEPER_NOTIFY on)."""
    n = q.rt.notifier
    assert isinstance(n, Notifier)
    return n


class Hints:
    """A LISTEN on the broker's timers channel, on a connection of the test's own."""

    def __init__(self) -> None:
        self.got: asyncio.Queue[_TimerHint] = asyncio.Queue()

    def __call__(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        assert isinstance(payload, str)
        self.got.put_nowait(msgspec.json.decode(payload, type=_TimerHint))

    async def next(self, timeout: float = 10.0) -> _TimerHint:
        return await asyncio.wait_for(self.got.get(), timeout)


async def listening(db_url: str) -> tuple[asyncpg.Connection, Hints]:
    c = await asyncpg.connect(db_url)
    hints = Hints()
    await c.add_listener(TIMERS_CHANNEL, hints)
    return c, hints


def at_ms(result: dict) -> int:
    t = dt.datetime.fromisoformat(result["deliverAt"].replace("Z", "+00:00"))
    return int(t.timestamp() * 1000)


async def marker(conn) -> dict:
    """A committed timer due at once: its hint is the next one the listener sees."""
    async with conn.transaction():
        return await queen_timers.schedule(conn, "q", "marker", 0, b"{}")


async def test_a_committed_timer_wakes_the_sweeper_side_of_a_broker(db_url, conn):
    async with started_broker(db_url) as q:
        await asyncio.wait_for(notifier(q).connected.wait(), 10)
        hub = q.rt.hub
        hub.begin_cycle()
        _, _, ev = hub.sleep_plan(time.time() + 30)  # a sweeper asleep for 30 s
        async with conn.transaction():
            await queen_timers.schedule(conn, "q", "k", 0, b"{}")
            await asyncio.sleep(0)
            assert not ev.is_set()  # nothing before the commit
        await asyncio.wait_for(ev.wait(), 10)
        assert hub.timer_hint_reason == "notify"
        assert notifier(q).received == 1


async def test_a_live_sweeper_fires_a_sql_timer_on_its_notify(db_url, conn):
    async with Queen(database_url=db_url, retention_interval_ms=0) as q:
        await asyncio.wait_for(notifier(q).connected.wait(), 10)
        async with conn.transaction():
            res = await queen_timers.schedule(conn, "q", "k", 0, b'{"a":1}')
        sweeper = q.sweeper
        assert sweeper is not None
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        while await timer_row(conn, "q", "k") is not None:  # one check per sweeper cycle
            assert loop.time() < end, "the sweeper never fired the timer"
            await asyncio.wait_for(sweeper.cycle_done.wait(), 30)
        [f] = await log_frames(conn, queue="q")
        assert str(f["id"]) == res["messageId"]
        assert notifier(q).received >= 1


async def test_the_hint_is_one_the_broker_listener_reads(db_url, conn):
    c, hints = await listening(db_url)
    try:
        res = await marker(conn)
        hint = await hints.next()
        assert hint.broker == "sql" and hint.at_ms == at_ms(res)
    finally:
        await c.close()


async def test_a_rolled_back_timer_leaves_no_row_and_sends_no_wake(db_url, conn):
    c, hints = await listening(db_url)
    try:
        tr = conn.transaction()
        await tr.start()
        await queen_timers.schedule(conn, "q", "gone", 0, b"{}")
        await tr.rollback()
        res = await marker(conn)
        # notifications arrive in commit order: the first one is the marker's
        assert (await hints.next()).at_ms == at_ms(res)
        assert hints.got.empty()
        assert await timer_row(conn, "q", "gone") is None
    finally:
        await c.close()


async def test_no_wake_for_a_far_timer_or_when_asked(db_url, conn):
    c, hints = await listening(db_url)
    try:
        async with conn.transaction():
            await queen_timers.schedule(conn, "q", "far", 60_000, b"{}")  # the poll finds it
        async with conn.transaction():
            await queen_timers.schedule(conn, "q", "quiet", 0, b"{}", wake=False)
        res = await marker(conn)
        assert (await hints.next()).at_ms == at_ms(res)
        assert hints.got.empty()
    finally:
        await c.close()


async def test_no_wake_when_the_notification_queue_is_over_the_threshold(db_url, conn):
    """The guard that keeps a NOTIFY from ever failing the caller's commit: over the
    threshold, the timer is written and the wake skipped (a threshold under 0 stands for a
    full queue, which this test cannot fill)."""
    c, hints = await listening(db_url)
    try:
        await set_limit(conn, "notifyMaxQueueUsage", -1)
        async with conn.transaction():
            await queen_timers.schedule(conn, "q", "crowded", 0, b"{}")
        assert await timer_row(conn, "q", "crowded") is not None
        await set_limit(conn, "notifyMaxQueueUsage", 0.5)
        res = await marker(conn)
        assert (await hints.next()).at_ms == at_ms(res)
        assert hints.got.empty()
    finally:
        await c.close()


async def test_a_prepared_transaction_can_schedule_without_the_wake(conn):
    """Two-phase commit refuses a transaction that has sent a NOTIFY: wake => false is the
    way to schedule in one (skipped when the server allows no prepared transactions)."""
    if await conn.fetchval("SELECT current_setting('max_prepared_transactions')::int") == 0:
        import pytest

        pytest.skip("max_prepared_transactions = 0 on this server")
    await conn.execute("BEGIN")
    await queen_timers.schedule(conn, "q", "k", 0, b"{}", wake=False)
    await conn.execute("PREPARE TRANSACTION 'qt_sqlapi'")
    await conn.execute("COMMIT PREPARED 'qt_sqlapi'")
    assert await timer_row(conn, "q", "k") is not None
