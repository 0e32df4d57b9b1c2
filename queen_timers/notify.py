"""Cross-broker wake-ups over PostgreSQL LISTEN/NOTIFY.

Why this is safe although the reference broker refused NOTIFY: a NOTIFY here is never part of
the user's transaction. It is sent after the schedule (or push) has committed, on a pooled
connection, best effort; a full notification queue or a lost connection can only delay a
wake-up, never fail or lose a schedule. The sweeper's one-second fallback poll keeps "no
earlier than" and bounds the lateness when a notification is lost.

Publishing is coalesced: at most one NOTIFY in flight per channel per broker; while one is in
flight, new hints merge into the next (timers keep the earliest instant, pushes the set of
queues). A timer hint is only sent when the timer is due before the listeners' next poll
(otherwise their poll finds it anyway).

Listening holds one dedicated connection outside the pool (a pooled connection runs UNLISTEN *
when released), pings it every keepalive period and reconnects with exponential backoff. After
a reconnect it wakes the local sweeper once, since hints may have been missed while down.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import uuid

import asyncpg
import msgspec

from .background import cancel_and_wait
from .db.outage import absorbed
from .db.pool import connect_one
from .db.queries import Q
from .metrics import Metrics
from .settings import Settings
from .wake import WakeHub

__all__ = ["LOG_CHANNEL", "TIMERS_CHANNEL", "Notifier", "NullNotifier"]

log = logging.getLogger("queen_timers.notify")

TIMERS_CHANNEL = "queen_timers"
LOG_CHANNEL = "queen_log"
# A NOTIFY payload must stay under 8000 bytes; queue names are at most 255 characters, so 20
# (tenant, queue) pairs per notification always fit.
_QUEUES_PER_NOTIFY = 20


class _TimerHint(msgspec.Struct, array_like=True):
    broker: str
    at_ms: int


class _QueueHint(msgspec.Struct, array_like=True):
    broker: str
    queues: list[tuple[str, str]]  # (tenant uuid text, queue name)


class Notifier:
    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        database_url: str,
        hub: WakeHub,
        metrics: Metrics,
        *,
        listen: bool = True,
    ):
        self.pool = pool
        self.database_url = database_url
        self.hub = hub
        self.metrics = metrics
        self.broker_id = uuid.uuid4().hex[:12]
        self.listen_enabled = listen
        s = settings
        self._poll_s = s.sweeper_max_sleep_ms / 1000.0
        self._keepalive_s = s.sweeper_listen_keepalive_ms / 1000.0
        self._pending_timer = math.inf
        self._timer_task: asyncio.Task[None] | None = None
        self._pending_queues: set[tuple[str, str]] = set()
        self._queue_task: asyncio.Task[None] | None = None
        self._queue_interval_s = max(0, s.notify_queue_interval_ms) / 1000.0
        self._last_queue_notify = -math.inf
        self._listen_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._conn: asyncpg.Connection | None = None
        # Observable state, for tests and metrics.
        self.connected = asyncio.Event()
        self.connections = 0
        self.sent = 0
        self.failures = 0
        self.received = 0

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        if self.listen_enabled and self._listen_task is None:
            self._listen_task = asyncio.create_task(self._listen_loop(), name="queen-listen")

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._listen_task, self._timer_task, self._queue_task)
        self._listen_task = self._timer_task = self._queue_task = None
        if self._conn is not None:
            await self._close_conn()

    @property
    def listener_pid(self) -> int | None:
        """Backend pid of the LISTEN connection (tests terminate it)."""
        c = self._conn
        return c.get_server_pid() if c is not None and not c.is_closed() else None

    # -- publishing ---------------------------------------------------------------------------
    def timer_scheduled(self, at_epoch: float) -> None:
        if self._stopping:
            return
        # Peers poll at least every max_sleep: a timer due later is found by their poll.
        if at_epoch > time.time() + self._poll_s:
            return
        self._pending_timer = min(self._pending_timer, at_epoch)
        if self._timer_task is None or self._timer_task.done():
            self._timer_task = asyncio.create_task(self._flush_timers())

    def queue_pushed(self, tenant: uuid.UUID, queue: str) -> None:
        if self._stopping:
            return
        self._pending_queues.add((str(tenant), queue))
        if self._queue_task is None or self._queue_task.done():
            self._queue_task = asyncio.create_task(self._flush_queues())

    async def _flush_timers(self) -> None:
        while self._pending_timer < math.inf and not self._stopping:
            at, self._pending_timer = self._pending_timer, math.inf
            payload = msgspec.json.encode(_TimerHint(self.broker_id, int(at * 1000))).decode()
            await self._send(TIMERS_CHANNEL, payload)

    async def _flush_queues(self) -> None:
        # Queue hints leave at most once per QUEEN_NOTIFY_QUEUE_INTERVAL_MS, carrying every
        # queue pushed meanwhile: a draining sweeper commits a fire every few milliseconds,
        # and a NOTIFY per fire costs 13% of a draining broker's CPU plus a transaction each
        # (2026-11-30, bench/RESULTS.md "Measurements the code cites"). The price: a pop
        # parked on another broker wakes up to one interval later.
        while self._pending_queues and not self._stopping:
            wait = self._last_queue_notify + self._queue_interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            batch = sorted(self._pending_queues)[:_QUEUES_PER_NOTIFY]
            self._pending_queues.difference_update(batch)
            payload = msgspec.json.encode(_QueueHint(self.broker_id, batch)).decode()
            self._last_queue_notify = time.monotonic()
            await self._send(LOG_CHANNEL, payload)

    async def _send(self, channel: str, payload: str) -> None:
        try:
            await self.pool.execute(Q.notify, channel, payload)
            self.sent += 1
        except Exception as exc:  # noqa: BLE001 - a wake-up is best effort, never an error
            self.failures += 1
            self.metrics.notify_failures.inc()
            log.warning("NOTIFY on %s failed (peers fall back to their poll): %s", channel, exc)

    # -- listening ----------------------------------------------------------------------------
    def _on_notify(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        if not isinstance(payload, str):  # asyncpg hands every payload over as text
            return
        try:
            if channel == TIMERS_CHANNEL:
                hint = msgspec.json.decode(payload, type=_TimerHint)
                if hint.broker != self.broker_id:
                    self.received += 1
                    self.hub.timer_due(hint.at_ms / 1000.0, "notify")
            elif channel == LOG_CHANNEL:
                qh = msgspec.json.decode(payload, type=_QueueHint)
                if qh.broker != self.broker_id:
                    self.received += 1
                    for tenant, queue in qh.queues:
                        self.hub.queue_pushed(uuid.UUID(tenant), queue)
        except (msgspec.DecodeError, ValueError):
            log.warning("ignored a malformed notification on %s", channel)

    async def _listen_loop(self) -> None:
        backoff = 0.1
        while not self._stopping:
            lost = asyncio.Event()
            try:
                conn = await connect_one(self.database_url, role="listen")
                self._conn = conn
                conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                await conn.add_listener(TIMERS_CHANNEL, self._on_notify)
                await conn.add_listener(LOG_CHANNEL, self._on_notify)
                self.connections += 1
                if self.connections > 1:
                    self.metrics.listener_reconnects.inc()
                    log.debug("LISTEN connection re-established")
                    # Hints sent while we were down are lost: re-probe once, wake pops.
                    self.hub.timer_due(time.time(), "notify")
                    self.hub.wake_all_queues()
                self.metrics.listener_connected.set(1)
                self.connected.set()
                backoff = 0.1
                while not self._stopping:
                    try:
                        await asyncio.wait_for(lost.wait(), self._keepalive_s)
                        break  # the connection is gone
                    except TimeoutError:
                        pass
                    await conn.execute(Q.listen_keepalive, timeout=self._keepalive_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reconnect whatever happened
                if not self._stopping and not absorbed(self.database_url, exc):
                    log.warning("LISTEN connection lost: %s (the poll covers meanwhile)", exc)
            finally:
                self.connected.clear()
                self.metrics.listener_connected.set(0)
                await self._close_conn()
            if self._stopping:
                break
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 5.0)

    async def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not conn.is_closed():
                await asyncio.wait_for(conn.close(), 2)
        except Exception:  # noqa: BLE001 - it may already be dead
            conn.terminate()


class NullNotifier:
    """The notifier of a broker that sends no wake-ups (QUEEN_SWEEPER_NOTIFY=false): hints go
    nowhere, and peers find the work by their poll."""

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def timer_scheduled(self, at_epoch: float) -> None:
        pass

    def queue_pushed(self, tenant: uuid.UUID, queue: str) -> None:
        pass
