"""The brokers' notification channels, tried by a tenant's SQL role: LISTEN reveals no tenant
id and no queue name, and a NOTIFY of its own (garbage, huge, many, a replayed capture) is
dropped before it costs the brokers any work or changes a delivery."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest
from timers.helpers import sched

from queen_timers.identity import Identity
from queen_timers.notify import LOG_CHANNEL, TIMERS_CHANNEL, Notifier
from queen_timers.service import Queen

SECRET_QUEUE = "payroll-of-tenant-a"


class Heard:
    """Every payload a LISTEN on the brokers' channels receives."""

    def __init__(self) -> None:
        self.by_channel: dict[str, list[str]] = {TIMERS_CHANNEL: [], LOG_CHANNEL: []}
        self.changed = asyncio.Event()

    def __call__(self, _conn, _pid, channel: str, payload: str) -> None:
        self.by_channel[channel].append(payload)
        self.changed.set()

    async def until(self, channel: str, n: int, timeout: float = 10.0) -> list[str]:
        end = time.monotonic() + timeout
        while len(self.by_channel[channel]) < n:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), max(0.0, end - time.monotonic()))
        return self.by_channel[channel]


async def wait_for_count(read, at_least: int, timeout: float = 10.0) -> None:
    """Notifications arrive asynchronously: wait until a counter reaches its mark."""
    end = time.monotonic() + timeout
    while read() < at_least:
        assert time.monotonic() < end, f"counter stuck at {read()}, wanted {at_least}"
        await asyncio.sleep(0.01)


@pytest.fixture
async def two_brokers(db_url):
    a = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    b = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await a.start()
    await b.start()
    try:
        assert isinstance(b.rt.notifier, Notifier)
        await asyncio.wait_for(b.rt.notifier.connected.wait(), 10)
        yield a, b
    finally:
        await a.stop()
        await b.stop()


async def spy_listening(roles, tenant: uuid.UUID) -> tuple[asyncpg.Connection, Heard]:
    """Another tenant's SQL role, listening on both channels."""
    spy = await roles.connect(await roles.create(tenant))
    heard = Heard()
    await spy.add_listener(TIMERS_CHANNEL, heard)
    await spy.add_listener(LOG_CHANNEL, heard)
    return spy, heard


async def test_a_listening_tenant_learns_no_tenant_id_and_no_queue_name(two_brokers, roles):
    a, b = two_brokers
    tenant_a, tenant_b = uuid.uuid4(), uuid.uuid4()
    spy, heard = await spy_listening(roles, tenant_b)
    app = await roles.connect(await roles.create(tenant_a))
    ident = Identity(tenant=tenant_a, subject="app")

    # tenant A schedules through the SQL API and through the broker, and pushes
    async with app.transaction():
        await app.fetchval(
            "SELECT queen.timer_schedule_v1($1, 'k-sql', 0, '{}'::bytea)", SECRET_QUEUE
        )
    await a.timers_apply(ident, [sched(SECRET_QUEUE, "k-broker", 100)])
    with b.rt.hub.queue_waiter(tenant_a, SECRET_QUEUE) as parked:
        await a.push(ident, [{"queue": SECRET_QUEUE, "payload": {"n": 1}}])
        # the peer broker still matches the hint to its parked pop
        await asyncio.wait_for(parked.wait(), 10)

    timer_hints = await heard.until(TIMERS_CHANNEL, 2)
    queue_hints = await heard.until(LOG_CHANNEL, 1)
    for payload in timer_hints + queue_hints:
        for secret in (str(tenant_a), tenant_a.hex, SECRET_QUEUE, "payroll"):
            assert secret not in payload, payload

    # and the secret the digests are keyed with is out of the role's reach
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await spy.fetchval("SELECT secret FROM queen.broker_secret")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await spy.fetchval("SELECT queen._broker_mac_v1('q|x|y')")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await spy.fetchval("SELECT queen.tenant_metrics_label_v1($1)", tenant_a)
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await spy.fetchval("SELECT queen._notify_timer_payload_v1('sql', now())")


async def test_forged_notifications_are_dropped_without_work(two_brokers, roles):
    a, b = two_brokers
    tenant_a = uuid.uuid4()
    spy, heard = await spy_listening(roles, uuid.uuid4())
    nb = b.rt.notifier
    hub = b.rt.hub
    hub.begin_cycle()
    _, _, sweeper_woken = hub.sleep_plan(time.time() + 30)  # b's sweeper asleep for 30 s

    # a real hint, captured by the spy and seen by b
    a.rt.timers_scheduled(time.time())
    [captured] = await heard.until(TIMERS_CHANNEL, 1)
    await wait_for_count(lambda: nb.received, 1)
    hub.begin_cycle()
    _, _, sweeper_woken = hub.sleep_plan(time.time() + 30)
    received, dropped = nb.received, nb.dropped

    now_ms = int(time.time() * 1000)
    forged = [
        "garbage",
        "",
        "[]",
        '{"broker": "x", "at_ms": 0}',
        '["x", 0]',  # the shape before signatures
        '["x", "00", 0, "00000000000000000000000000000000"]',
        f'["x", "01", {now_ms}, "not hex \\u202e \u00e9"]',
        f'["x", "02", {10**30}, "00"]',
        '["x", "03", 1, [], "00"]',
        "[" * 7000,
        "x" * 7990,  # near PostgreSQL's 8000-byte limit
    ]
    many = [f'["x", "{i:04x}", {now_ms}, "{i:032x}"]' for i in range(2000)]
    async with spy.transaction():
        for payload in forged + many:
            await spy.execute("SELECT pg_notify($1, $2)", TIMERS_CHANNEL, payload)
        for payload in forged[:4] + many[:200]:
            await spy.execute("SELECT pg_notify($1, $2)", LOG_CHANNEL, payload)
    for _ in range(20):  # a replay, one transaction each (PostgreSQL folds repeats in one)
        await spy.execute("SELECT pg_notify($1, $2)", TIMERS_CHANNEL, captured)
    expected = 2 * len(forged) + len(many) + 200 - len(forged) + 4 + 20
    await wait_for_count(lambda: nb.dropped - dropped, expected)

    assert nb.received == received
    assert not sweeper_woken.is_set()
    samples = {
        (s.name, s.labels.get("reason")): s.value
        for m in b.metrics_registry.collect()
        for s in m.samples
    }
    assert samples[("queen_sweeper_notify_dropped_total", "replayed")] == 20
    assert samples[("queen_sweeper_notify_dropped_total", "forged")] >= expected - 20

    # the brokers still wake each other, for a timer and for a queue
    a.rt.timers_scheduled(time.time())
    await asyncio.wait_for(sweeper_woken.wait(), 10)
    assert hub.timer_hint_reason == "notify"
    ident = Identity(tenant=tenant_a, subject="app")
    with b.rt.hub.queue_waiter(tenant_a, "q") as parked:
        await a.push(ident, [{"queue": "q", "payload": 1}])
        await asyncio.wait_for(parked.wait(), 10)


async def test_a_stale_signed_hint_is_dropped(two_brokers, conn):
    """A capture replayed after the replay window has no remembered signature to match: its
    instant, outside the window, drops it (signed with the brokers' own secret here)."""
    _, b = two_brokers
    nb = b.rt.notifier
    old = await conn.fetchval(
        "SELECT queen._notify_timer_payload_v1('sql', now() - interval '1 hour')"
    )
    dropped = nb.dropped
    await conn.execute("SELECT pg_notify($1, $2)", TIMERS_CHANNEL, old)
    await wait_for_count(lambda: nb.dropped - dropped, 1)
    samples = {
        (s.name, s.labels.get("reason")): s.value
        for m in b.metrics_registry.collect()
        for s in m.samples
    }
    assert samples[("queen_sweeper_notify_dropped_total", "stale")] == 1


async def test_a_timer_due_in_the_past_still_wakes_a_peer(two_brokers, roles):
    """A negative delay's instant lies days back, outside the replay window: it is sent as
    now, so the freshness check never costs it the millisecond wake."""
    a, b = two_brokers
    hub = b.rt.hub
    nb = b.rt.notifier
    hub.begin_cycle()
    _, _, woken = hub.sleep_plan(time.time() + 30)
    a.rt.timers_scheduled(time.time() - 86_400)
    await asyncio.wait_for(woken.wait(), 10)
    assert hub.timer_hint_reason == "notify"

    app = await roles.connect(await roles.create(uuid.uuid4()))
    received = nb.received
    hub.begin_cycle()
    _, _, woken = hub.sleep_plan(time.time() + 30)
    async with app.transaction():
        await app.fetchval("SELECT queen.timer_schedule_v1('q', 'k', -86400000, '{}'::bytea)")
    await asyncio.wait_for(woken.wait(), 10)
    assert nb.received == received + 1 and hub.timer_hint_reason == "notify"
