"""Cross-broker wake-ups through LISTEN/NOTIFY, between two brokers on one database."""

import asyncio
import time

import pytest

from queen_timers.identity import Identity
from queen_timers.notify import Notifier
from queen_timers.service import Queen


def notifier(q: Queen) -> Notifier:
    """The broker's LISTEN/NOTIFY notifier (these tests run with QUEEN_SWEEPER_NOTIFY on)."""
    n = q.rt.notifier
    assert isinstance(n, Notifier)
    return n


@pytest.fixture
async def two_brokers(db_url):
    a = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    b = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await a.start()
    await b.start()
    await asyncio.wait_for(notifier(a).connected.wait(), 10)
    await asyncio.wait_for(notifier(b).connected.wait(), 10)
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()


async def test_a_timer_hint_crosses_brokers(two_brokers):
    a, b = two_brokers
    hub = b.rt.hub
    hub.begin_cycle()
    _, _, ev = hub.sleep_plan(time.time() + 30)
    a.rt.timers_scheduled(time.time() + 0.2)  # due before the peers' next poll
    await asyncio.wait_for(ev.wait(), 5)
    assert hub.timer_hint_reason == "notify"
    assert notifier(b).received >= 1


async def test_a_far_timer_sends_no_notify(two_brokers):
    a, _ = two_brokers
    before = notifier(a).sent
    a.rt.timers_scheduled(time.time() + 3600)  # the peers' poll will find it
    await asyncio.sleep(0)  # let a (wrongly) spawned flush run
    assert notifier(a).sent == before


async def test_hints_are_coalesced(two_brokers):
    a, _ = two_brokers
    n = notifier(a)
    before = n.sent
    now = time.time()
    for i in range(200):
        a.rt.timers_scheduled(now + 0.5 - i * 0.001)
    for _ in range(100):
        if n._timer_task is None or n._timer_task.done():
            break
        await asyncio.sleep(0.01)
    # one in flight plus at most one carrying the earliest instant of the rest
    assert 1 <= n.sent - before <= 2


async def test_queue_hints_leave_at_most_once_per_interval(db_url):
    """A draining sweeper commits a fire every few ms: its 'queue has messages' hints are
    spaced by QUEEN_NOTIFY_QUEUE_INTERVAL_MS and carry every queue pushed meanwhile."""
    import uuid

    q = Queen(
        database_url=db_url, sweeper=False, retention_interval_ms=0, notify_queue_interval_ms=200
    )
    await q.start()
    try:
        n = notifier(q)
        before = n.sent
        t0 = time.monotonic()
        for i in range(30):  # 30 pushes over ~300 ms, one queue each
            n.queue_pushed(uuid.UUID(int=1), f"q{i}")
            await asyncio.sleep(0.01)
        for _ in range(200):
            if not n._pending_queues and (n._queue_task is None or n._queue_task.done()):
                break
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - t0
        # the first at once, then one per 200 ms at most (100 queues fit in one)
        assert 2 <= n.sent - before <= 1 + int(elapsed / 0.2) + 1
        assert not n._pending_queues
    finally:
        await q.stop()


async def test_a_push_wakes_a_parked_consumer_on_another_broker(two_brokers):
    a, b = two_brokers
    ident = Identity(subject="t")
    with b.rt.hub.queue_waiter(ident.tenant, "orders") as ev:
        await a.push(ident, [{"queue": "orders", "payload": 1}])
        await asyncio.wait_for(ev.wait(), 5)


async def test_listener_reconnects_after_its_backend_is_killed(two_brokers, conn):
    a, b = two_brokers
    nb = notifier(b)
    pid = nb.listener_pid
    assert pid is not None
    connections = nb.connections
    assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
    for _ in range(200):  # reconnect with backoff (first retry after ~0.1 s)
        if nb.connections > connections and nb.connected.is_set():
            break
        await asyncio.sleep(0.05)
    assert nb.connections == connections + 1 and nb.listener_pid not in (None, pid)
    # and the next NOTIFY wakes the sweeper side of b
    hub = b.rt.hub
    hub.begin_cycle()
    _, _, ev = hub.sleep_plan(time.time() + 30)
    a.rt.timers_scheduled(time.time() + 0.1)
    await asyncio.wait_for(ev.wait(), 5)
    assert hub.timer_hint_reason == "notify"


async def test_a_failed_notify_is_counted_and_never_raises(db_url):
    q = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await q.start()
    n = notifier(q)
    try:
        await n._send("queen_timers", "x" * 9000)  # over PostgreSQL's 8000-byte payload limit
        assert n.failures == 1
        samples = {s.name: s.value for m in q.metrics_registry.collect() for s in m.samples}
        assert samples["queen_sweeper_notify_failures_total"] == 1
    finally:
        await q.stop()
