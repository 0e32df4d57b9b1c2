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

What a listener learns, and what a writer can do: PostgreSQL lets any role LISTEN on any channel
and NOTIFY any payload, a tenant's SQL role included. So a payload names no tenant and no queue
(a queue is its keyed digest), and every payload is signed with the brokers' secret
(migrations/031_broker_secret.sql) and carries a random nonce. A listener drops, before any
work, a payload that does not parse, whose signature is wrong (a forgery), whose signature it
has seen within the replay window (a replay), or whose instant lies outside that window (an old
capture): a flood of forged notifications costs one HMAC each, never a probe, a wrong delivery
or a stall. A timer hint carries its instant (under one poll period ahead when it is sent),
never whose timer it is.

Listening holds one dedicated connection outside the pool (a pooled connection runs UNLISTEN *
when released), pings it every keepalive period and reconnects with exponential backoff. After
a reconnect it wakes the local sweeper once, since hints may have been missed while down.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
import math
import random
import secrets
import time
import uuid

import asyncpg
import msgspec

from . import brokersecret
from .background import cancel_and_wait
from .db.outage import absorbed
from .db.pool import connect_one
from .db.queries import Q
from .metrics import Metrics
from .settings import Settings
from .wake import WakeHub

__all__ = [
    "LOG_CHANNEL",
    "REPLAY_WINDOW_S",
    "TIMERS_CHANNEL",
    "Notifier",
    "NullNotifier",
    "queue_digest",
]

log = logging.getLogger("queen_timers.notify")

TIMERS_CHANNEL = "queen_timers"
LOG_CHANNEL = "queen_log"
# A NOTIFY payload must stay under 8000 bytes; a queue digest is 32 hex characters, so 100 of
# them per notification always fit.
_QUEUES_PER_NOTIFY = 100
# How long a signature is remembered (a replay within it is dropped) and how far a hint's
# instant may lie from this broker's clock (a capture older than it is dropped). Generous
# against clock skew between brokers; a dropped late hint costs at most one poll period.
REPLAY_WINDOW_S = 10.0
# Signatures remembered at most: legitimate hints only (a forgery is dropped before), and the
# oldest go first when a burst exceeds it.
_SEEN_MAX = 65_536
# A malformed or forged notification is logged at most this often (a flood must not flood the
# log too); the metric counts every one.
_DROP_LOG_EVERY_S = 60.0


class _TimerHint(msgspec.Struct, array_like=True):
    broker: str
    nonce: str
    at_ms: int
    tag: str


class _QueueHint(msgspec.Struct, array_like=True):
    broker: str
    nonce: str
    sent_ms: int
    queues: list[str]  # keyed digests of (tenant, queue): queue_digest()
    tag: str


def queue_digest(secret: bytes, tenant: uuid.UUID, queue: str) -> str:
    """What a queue hint carries instead of (tenant, queue)."""
    return brokersecret.mac(secret, f"q|{tenant}|{queue}")


def timer_payload(secret: bytes, sender: str, at_ms: int) -> str:
    nonce = secrets.token_hex(8)
    tag = brokersecret.mac(secret, f"t|{sender}|{nonce}|{at_ms}")
    return msgspec.json.encode(_TimerHint(sender, nonce, at_ms, tag)).decode()


def queue_payload(secret: bytes, sender: str, digests: list[str], sent_ms: int) -> str:
    nonce = secrets.token_hex(8)
    tag = brokersecret.mac(secret, _queue_signed(sender, nonce, sent_ms, digests))
    return msgspec.json.encode(_QueueHint(sender, nonce, sent_ms, digests, tag)).decode()


def _queue_signed(sender: str, nonce: str, sent_ms: int, digests: list[str]) -> str:
    return f"l|{sender}|{nonce}|{sent_ms}|{','.join(digests)}"


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
        self._pending_queues: set[tuple[uuid.UUID, str]] = set()
        self._queue_task: asyncio.Task[None] | None = None
        self._queue_interval_s = max(0, s.notify_queue_interval_ms) / 1000.0
        self._last_queue_notify = -math.inf
        self._listen_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._conn: asyncpg.Connection | None = None
        self._secret: bytes | None = None
        self._seen: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._digests: dict[tuple[uuid.UUID, str], str] = {}
        self._last_drop_log = -math.inf
        # Observable state, for tests and metrics.
        self.connected = asyncio.Event()
        self.connections = 0
        self.sent = 0
        self.failures = 0
        self.received = 0
        self.dropped = 0

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
        self._pending_queues.add((tenant, queue))
        if self._queue_task is None or self._queue_task.done():
            self._queue_task = asyncio.create_task(self._flush_queues())

    async def _flush_timers(self) -> None:
        while self._pending_timer < math.inf and not self._stopping:
            at, self._pending_timer = self._pending_timer, math.inf
            # a listener drops an instant far from its clock (a stale capture): a timer due in
            # the past (a negative delay) is due now
            at = max(at, time.time())
            secret = await self._load_secret()
            if secret is not None:
                await self._send(
                    TIMERS_CHANNEL, timer_payload(secret, self.broker_id, int(at * 1000))
                )

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
            batch = sorted(self._pending_queues, key=str)[:_QUEUES_PER_NOTIFY]
            self._pending_queues.difference_update(batch)
            self._last_queue_notify = time.monotonic()
            secret = await self._load_secret()
            if secret is None:
                continue
            digests = [self._digest(secret, key) for key in batch]
            sent_ms = int(time.time() * 1000)
            await self._send(LOG_CHANNEL, queue_payload(secret, self.broker_id, digests, sent_ms))

    async def _load_secret(self) -> bytes | None:
        """The brokers' signing secret (031), read once; None (counted as a failed NOTIFY) while
        the database cannot answer."""
        if self._secret is None:
            try:
                self._secret = await brokersecret.load(self.pool)
            except Exception as exc:  # noqa: BLE001 - a wake-up is best effort, never an error
                self.failures += 1
                if self.metrics is not None:
                    self.metrics.notify_failures.inc()
                log.warning("reading the notification secret failed (peers poll): %s", exc)
        return self._secret

    def _digest(self, secret: bytes, key: tuple[uuid.UUID, str]) -> str:
        d = self._digests.get(key)
        if d is None:
            if len(self._digests) >= _SEEN_MAX:
                self._digests.clear()  # a cache: recomputed on demand
            d = self._digests[key] = queue_digest(secret, *key)
        return d

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
        secret = self._secret
        if secret is None:
            return  # not listening yet (the secret is read before LISTEN)
        try:
            if channel == TIMERS_CHANNEL:
                hint = msgspec.json.decode(payload, type=_TimerHint)
                signed = f"t|{hint.broker}|{hint.nonce}|{hint.at_ms}"
                if self._admit(secret, signed, hint.tag, hint.at_ms, hint.broker):
                    self.received += 1
                    self.hub.timer_due(hint.at_ms / 1000.0, "notify")
            elif channel == LOG_CHANNEL:
                qh = msgspec.json.decode(payload, type=_QueueHint)
                signed = _queue_signed(qh.broker, qh.nonce, qh.sent_ms, qh.queues)
                if self._admit(secret, signed, qh.tag, qh.sent_ms, qh.broker):
                    self.received += 1
                    self._wake_queues(secret, set(qh.queues))
        except (msgspec.DecodeError, ValueError, OverflowError):
            self._drop("forged", channel)

    def _admit(self, secret: bytes, signed: str, tag: str, at_ms: int, sender: str) -> bool:
        """Whether a parsed payload is a peer's, fresh and seen for the first time."""
        if not hmac.compare_digest(brokersecret.mac(secret, signed).encode(), tag.encode()):
            self._drop("forged", None)
            return False
        if sender == self.broker_id:
            return False  # our own: the local wake already happened
        now = time.time()
        if abs(at_ms / 1000.0 - now) > REPLAY_WINDOW_S + self._poll_s:
            self._drop("stale", None)
            return False
        seen = self._seen
        while seen and next(iter(seen.values())) < now - REPLAY_WINDOW_S:
            seen.popitem(last=False)
        if tag in seen:
            self._drop("replayed", None)
            return False
        if len(seen) >= _SEEN_MAX:
            seen.popitem(last=False)
        seen[tag] = now
        return True

    def _wake_queues(self, secret: bytes, digests: set[str]) -> None:
        for key in self.hub.waiting_queues():
            if self._digest(secret, key) in digests:
                self.hub.queue_pushed(*key)

    def _drop(self, reason: str, channel: str | None) -> None:
        self.dropped += 1
        if self.metrics is not None:
            self.metrics.notify_dropped.labels(reason).inc()
        now = time.monotonic()
        if now - self._last_drop_log >= _DROP_LOG_EVERY_S:
            self._last_drop_log = now
            log.warning(
                "dropped a %s notification%s (another role NOTIFYs on the brokers' channels?);"
                " queen_sweeper_notify_dropped_total counts them",
                reason,
                f" on {channel}" if channel else "",
            )

    async def _listen_loop(self) -> None:
        backoff = 0.1
        while not self._stopping:
            lost = asyncio.Event()
            try:
                if await self._load_secret() is None:
                    raise ConnectionError("the notification secret is unreadable")
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
