"""queen_timers.service.Queen: the transport-agnostic API of the broker.

Every transport calls these methods and nothing below them. Each method takes the caller's
`Identity` (from authentication, never from a body) as its first argument, then the arguments
of its operation in queen_timers.wire.OPERATIONS (the struct's fields, by keyword), returns
JSON-ready values of the operation's answer type (queen_timers.wire, the Queen wire's shapes:
docs/design/client-wire.md), and raises `queen_timers.errors.QueenError` for every refusal.
tests/wire/test_one_wire.py keeps the signatures and the structs the same.

Start/stop contract: `start()` boots (embedded PostgreSQL when no URL, pool, schema, background
loops); `stop()` is safe before start and twice.

A broker is `Queen(settings)`. A one-shot program that only calls the API (the `queen`
commands) asks for less at construction:
- `background=False`: no sweeper, no maintenance loop, no LISTEN connection and no kill-switch
  refresh loop (the switches are read once at start and again by `switches_get`); its
  schedules still send their best-effort wake-up to the brokers. `queen migrate` is this.
- `Queen.client(settings)`: that, and it neither applies the schema (a database without one is
  refused with `SchemaMissing`) nor launches the embedded PostgreSQL: it joins the one a broker
  on the same `data_dir` runs, or raises `EmbeddedNotRunning`. Its connections are named
  `queen:<pid>:client` in pg_stat_activity, so they never count as a broker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import os
import resource as rusage
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, Protocol, TypeVar, cast

import asyncpg
from prometheus_client import CollectorRegistry

from . import resources, sqlapi, tracing
from . import transaction as transaction_wire
from .crypto import Cipher, parse_key
from .db import EmbeddedPostgres, Q, apply_migrations, connect_pool
from .db.errors import (
    DB_ERRORS,
    FailureClass,
    classify_exception,
    in_doubt,
    unavailable,
    write_in_doubt,
)
from .db.migrate import read_stamp, schema_stamp
from .db.pooler import Link, explain_link, probe_link
from .db.reads import Reads, with_lag
from .db.url import Target, parse_database_url
from .errors import QueenError
from .fairshare import TenantShare
from .firewindow import FireWindow as FireWindowState
from .identity import Identity
from .log import ack as log_ack
from .log import dlq as log_dlq
from .log import pop as log_pop
from .log import push as log_push
from .log import queues as log_queues
from .log.retention import Maintenance
from .metrics import Metrics
from .notify import Notifier, NullNotifier
from .quotas import TenantQuotas
from .runtime import Runtime
from .settings import Settings
from .switches import SwitchBoard, Switches
from .timers import bulk as timer_bulk
from .timers import inspect as timer_inspect
from .timers import ops as timer_ops
from .timers import replay as timer_replay
from .timers import schedules as timer_schedules
from .timers.sweeper import Sweeper
from .wake import WakeHub
from .webhooks import targets as webhook_targets
from .wire import OPERATIONS
from .wire.admin import (
    DlqDeleted,
    DlqItemsJson,
    DlqReplayed,
    FireWindow,
    Overview,
    QueuesOverview,
    QueueSummary,
    QueueSummaryAt,
    SwitchesJson,
    SwitchStates,
    TenantLimitsJson,
    TenantQuota,
    TenantQuotaList,
    TimerCounts,
)
from .wire.log import (
    Acks,
    AcksJson,
    DlqPage,
    OptionsJson,
    Popped,
    PushItemsJson,
    PushResult,
    TransactionJson,
    TransactionResult,
)
from .wire.resources import (
    ConsumerGroupDeleted,
    ConsumerGroupDetail,
    ConsumerGroupSeek,
    ConsumerGroupSummary,
    GroupedQueues,
    LaggingPartition,
    LogMessage,
    MessageAction,
    MessagesPage,
    PartitionsList,
    QueueDeleted,
    QueueDepth,
    QueueDetail,
    StatusQueues,
    SystemMetrics,
    SystemStatus,
    WorkerMetrics,
)
from .wire.schedules import (
    ScheduleDeleted,
    ScheduleRun,
    ScheduleSetJson,
    ScheduleSetResult,
    SchedulesPage,
    ScheduleView,
)
from .wire.timers import (
    CancelPrefixResult,
    Histogram,
    TimerCount,
    TimerOpsJson,
    TimerPeek,
    TimerResult,
    TimersPage,
    TimersRead,
)
from .wire.webhooks import (
    AttemptsPage,
    SecretAdded,
    SecretDeleted,
    TargetDeleted,
    TargetSetJson,
    TargetSetResult,
    TargetsPage,
    TargetView,
)

__all__ = ["OPERATIONS", "Queen", "SchemaMissing"]

log = logging.getLogger("queen_timers")

P = ParamSpec("P")
R = TypeVar("R")


def _database_away_is_503(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """A database that is away for a moment (a lost or terminated connection, a shutdown or
    failover, too many clients, a deadlock or a serialization failure: the transient classes of
    queen_timers.db.errors) answers 503 `unavailable` with Retry-After 1, which every
    transport renders and every client retries, instead of escaping as an unhandled exception: a 500
    logged as a bug. Any other database error is a bug of ours and propagates as one. The
    timer calls and the transaction wire map errors themselves, in their own taxonomy."""

    return _transient_is_503(method, writes=False)


def _write_away_is_503(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """_database_away_is_503 for a call that writes: a lost link may have lost the answer to a
    commit, so it answers 503 `outcome_unknown` (db.errors.in_doubt), which says the retry with
    the same txn is safe."""
    return _transient_is_503(method, writes=True)


def _transient_is_503(
    method: Callable[P, Coroutine[Any, Any, R]], *, writes: bool
) -> Callable[P, Coroutine[Any, Any, R]]:
    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except DB_ERRORS as exc:
            if classify_exception(exc) is not FailureClass.TRANSIENT:
                raise
            if writes and write_in_doubt(exc):
                raise in_doubt(exc, "unavailable", "the write lost its connection") from exc
            raise unavailable(
                exc,
                "unavailable",
                "database_unavailable",
                "the database is unavailable for a moment",
            ) from exc

    return call


async def _close_reads(pool: asyncpg.Pool, reads: Reads) -> None:
    if reads.pool is not pool:
        await reads.pool.close()


class _Service(Protocol):
    """A part of the broker with a lifetime: started by Queen.start, stopped in reverse."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def _trace_arguments(traceparent: object, tracestate: object) -> None:
    """A trace context is text; a malformed one is ignored (the W3C's rule for a header)."""
    for name, value in (("traceparent", traceparent), ("tracestate", tracestate)):
        if value is not None and not isinstance(value, str):
            raise QueenError("bad_request", "bad_trace_context", f"{name} must be a string", 400)


class SchemaMissing(RuntimeError):
    """A client found a database without the queen schema."""


# Connections of a client (Queen.client): it runs one command at a time.
_CLIENT_POOL_MAX = 2


class Queen:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        background: bool = True,
        apply_schema: bool = True,
        launch_embedded: bool = True,
        **overrides: Any,
    ):
        self.settings = settings if settings is not None else Settings(overrides)
        if settings is not None and overrides:
            self.settings = settings.replace(**overrides)
        self.background = background
        self.apply_schema = apply_schema
        self.launch_embedded = launch_embedded
        self.migrations_applied: list[str] = []  # the files start() applied, in order
        self._runtime_built: Runtime | None = None  # by start(); read through `rt`
        self._embedded: EmbeddedPostgres | None = None
        # Built once by start(); request paths only read them.
        self._switchboard: SwitchBoard | None = None
        self._batcher: timer_ops.Batcher | None = None
        self._sweeper: Sweeper | None = None
        self._maintenance: Maintenance | None = None
        self._services: list[_Service] = []  # started services, stopped in reverse
        self._started = False

    @classmethod
    def client(cls, settings: Settings | None = None, **overrides: Any) -> Queen:
        """A Queen that only calls the API on an existing database (the `queen` commands):
        no background loops, no schema applied, no embedded server launched."""
        return cls(
            settings, background=False, apply_schema=False, launch_embedded=False, **overrides
        )

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def embedded(self) -> EmbeddedPostgres | None:
        """The embedded PostgreSQL this Queen uses (None: a QUEEN_DATABASE_URL)."""
        return self._embedded

    @property
    def database_url(self) -> str:
        return self.rt.database_url

    async def start(self) -> None:
        if self._started:
            return
        s = self.settings
        url = s.database_url
        if url:
            parse_database_url(url)  # a malformed URL says so before anything connects
        else:
            self._embedded = EmbeddedPostgres(s.data_dir)
            url = await asyncio.to_thread(
                functools.partial(self._embedded.start, launch=self.launch_embedded)
            )
        client = not self.apply_schema and not self.background
        try:
            key = parse_key(s.encryption_key)
            link = Link() if self._embedded else await probe_link(url, s.pooler_prepared_statements)
            explain_link(link, s.statement_timeout_ms)
            pool = await connect_pool(
                url,
                min_size=1 if client else s.pool_min,
                max_size=min(s.pool_max, _CLIENT_POOL_MAX) if client else s.pool_max,
                role="client" if client else "pool",
                **link.pool_options(s.statement_timeout_ms, s.pooler_command_timeout_ms),
            )
            try:
                async with pool.acquire() as conn:
                    if self.apply_schema:
                        self.migrations_applied = await apply_migrations(conn)
                        await sqlapi.publish_limits(conn, s)
                    elif not await conn.fetchval(Q.schema_ready):
                        raise SchemaMissing(
                            f"the database at {parse_database_url(url)} has no queen schema; "
                            "run `queen migrate` (or start a broker) with the same "
                            "--database-url / --data-dir"
                        )
                reads = await self._reads(pool)
                try:
                    self._runtime_built = self._runtime(
                        pool, url, link, Cipher(key) if key else None, reads
                    )
                except BaseException:
                    await _close_reads(pool, reads)
                    raise
            except BaseException:
                await pool.close()
                raise
        except BaseException:
            # stop() is a no-op before start() finished: the server we started is ours to stop
            if self._embedded is not None:
                await asyncio.to_thread(self._embedded.stop)
                self._embedded = None
            raise
        self._started = True
        try:
            if self.background:
                await self._start_background()
            else:
                await self._start_foreground()
        except BaseException:
            await self.stop()  # the pool, the services already started, the embedded server
            raise

    async def _reads(self, pool: asyncpg.Pool) -> Reads:
        """The operator's reads: a read-only pool on QUEEN_READ_DATABASE_URL (a replica), or
        the primary's own pool."""
        s = self.settings
        if not s.read_database_url:
            return Reads(pool, replica=False)
        link = await probe_link(s.read_database_url, s.pooler_prepared_statements)
        replica = await connect_pool(
            s.read_database_url,
            min_size=1,
            max_size=s.pool_max,
            role="reads",
            read_only=True,
            **link.pool_options(s.statement_timeout_ms, s.pooler_command_timeout_ms),
        )
        return Reads(replica, replica=True)

    def _runtime(
        self, pool: asyncpg.Pool, url: str, link: Link, cipher: Cipher | None, reads: Reads
    ) -> Runtime:
        """The runtime, complete: its notifier and quotas are built here, started later."""
        s = self.settings
        hub = WakeHub()
        metrics = Metrics()
        notifier: Notifier | NullNotifier = NullNotifier()
        if s.sweeper_notify and self.background:
            listen = not link.pooled or bool(s.listen_database_url)
            if not listen:
                log.warning(
                    "QUEEN_DATABASE_URL goes through a connection pooler, where LISTEN cannot "
                    "work, and QUEEN_LISTEN_DATABASE_URL is unset: this broker does not listen "
                    "(peers' timers reach it by its poll, QUEEN_SWEEPER_MAX_SLEEP_MS); set "
                    "QUEEN_LISTEN_DATABASE_URL to a direct URL, or QUEEN_SWEEPER_NOTIFY=false"
                )
            listen_url = s.listen_database_url or url
            notifier = Notifier(s, pool, listen_url, hub, metrics, listen=listen)
        elif s.sweeper_notify:  # a one-shot program only sends
            notifier = Notifier(s, pool, url, hub, metrics, listen=False)
        # A one-shot program's limits are measured at each call's first sight of a tenant
        # rather than by a refresh loop.
        quota_settings = s if self.background else s.replace(timers_tenant_quota_refresh_ms=0)
        return Runtime(
            settings=s,
            pool=pool,
            database_url=url,
            hub=hub,
            cipher=cipher,
            notifier=notifier,
            metrics=metrics,
            switches=Switches(),
            link=link,
            quotas=TenantQuotas(pool, quota_settings, metrics, database_url=url),
            fire_window=FireWindowState(),
            tenant_share=TenantShare(),
            reads=reads,
        )

    async def _start_background(self) -> None:
        """The composition root: every service of the broker is built here, once, from the
        runtime, then started in order (kill switches, quotas, notifications, sweeper,
        maintenance); they stop in reverse order."""
        rt = self._rt()
        s = rt.settings
        self._switchboard = SwitchBoard(
            rt.pool, rt.switches, refresh_ms=s.switches_refresh_ms, database_url=rt.database_url
        )
        self._batcher = timer_ops.schedule_batcher(rt)
        self._sweeper = Sweeper(rt) if s.sweeper else None
        self._maintenance = Maintenance(rt) if s.retention_interval_ms > 0 else None
        if self._sweeper is None:
            log.warning(
                "QUEEN_SWEEPER=false: this broker never fires timers (they wait for a "
                "broker with a sweeper; nothing is lost)"
            )
        services: list[_Service | None] = [
            self._switchboard,
            rt.quotas,
            rt.notifier,
            self._sweeper,
            self._maintenance,
        ]
        for svc in services:
            if svc is not None:
                await svc.start()
                self._services.append(svc)

    async def _start_foreground(self) -> None:
        """The services a one-shot program's calls need, without a loop of their own."""
        rt = self._rt()
        s = rt.settings
        self._switchboard = SwitchBoard(
            rt.pool, rt.switches, refresh_ms=s.switches_refresh_ms, database_url=rt.database_url
        )
        await self._switchboard.refresh()  # the schedule gate reads them
        self._batcher = timer_ops.schedule_batcher(rt)
        # The tenants' limits apply to a program's schedules too; the notifier only sends.
        for svc in (rt.quotas, rt.notifier):
            await svc.start()
            self._services.append(svc)

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for svc in reversed(self._services):
            try:
                await svc.stop()
            except Exception:
                log.exception("stopping %r failed", svc)
        self._services.clear()
        if self._runtime_built is not None:
            await _close_reads(self._runtime_built.pool, self._runtime_built.reads)
            await self._runtime_built.pool.close()
        if self._embedded is not None:
            await asyncio.to_thread(self._embedded.stop)
            self._embedded = None

    async def __aenter__(self) -> Queen:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """The prometheus_client CollectorRegistry of this broker."""
        return self._rt().metrics.registry

    @property
    def sweeper(self) -> Sweeper | None:
        """This broker's sweeper, or None (QUEEN_SWEEPER=false)."""
        return self._sweeper

    def _board(self) -> SwitchBoard:
        assert self._switchboard is not None, "not started"
        return self._switchboard

    @property
    def schedule_batcher(self) -> timer_ops.Batcher:
        """The group commit every schedule outside a caller's transaction goes through."""
        assert self._batcher is not None, "not started"
        return self._batcher

    @property
    def rt(self) -> Runtime:
        """The runtime start() built; a RuntimeError before that."""
        if self._runtime_built is None:
            raise RuntimeError("Queen service is not started")
        return self._runtime_built

    def _rt(self) -> Runtime:
        return self.rt

    @property
    def database_target(self) -> Target:
        """Where the database is: host (or Unix socket directory) and port."""
        return parse_database_url(self.database_url)

    @_database_away_is_503
    async def schema_status(self) -> dict[str, Any]:
        """The schema applied to the database against this installation's migrations:
        {serverVersion, applied: {files, digest, queenTimers, appliedAt} | None,
        installed: {files, digest, queenTimers}, current: bool}."""
        async with self._rt().pool.acquire() as conn:
            version = await conn.fetchval(Q.server_version)
            applied = await read_stamp(conn) if await conn.fetchval(Q.schema_ready) else None
        installed = schema_stamp()
        current = applied is not None and applied.get("digest") == installed["digest"]
        return {
            "serverVersion": version,
            "applied": applied,
            "installed": installed,
            "current": current,
        }

    async def ready(self) -> bool:
        """Database reachable and schema applied."""
        try:
            async with self._rt().pool.acquire() as conn:
                return bool(await conn.fetchval(Q.schema_ready))
        except Exception:  # noqa: BLE001 - readiness is a yes/no question
            return False

    # -- log ----------------------------------------------------------------------------------
    @_write_away_is_503
    async def push(self, ident: Identity, items: PushItemsJson) -> list[PushResult]:
        """Push items [{queue, partition?, payload|data, transactionId?}]; results aligned
        with the input: {index, message_id, transaction_id, queueName, status}."""
        return cast(list[PushResult], await log_push.push(self._rt(), ident, items))

    @_write_away_is_503
    async def configure_queue(
        self,
        ident: Identity,
        queue: str,
        options: OptionsJson,
        *,
        namespace: str | None = None,
        task: str | None = None,
        mode: str = "merge",
    ) -> dict[str, Any]:
        """Create or configure a queue (client-wire §3): camelCase options; unknown keys and
        wrong types are refused with nothing written. Answers the effective options."""
        return await log_queues.configure_queue(
            self._rt(), ident, queue, options, namespace=namespace, task=task, mode=mode
        )

    @_database_away_is_503
    async def pop(
        self,
        ident: Identity,
        queue: str | None = None,
        *,
        partition: str | None = None,
        group: str | None = None,
        batch: int | None = None,
        wait: bool = False,
        timeout_ms: int = 30000,
        auto_ack: bool = False,
        subscription_mode: str | None = None,
        namespace: str | None = None,
        task: str | None = None,
        partitions: int = 1,
        now: dt.datetime | None = None,
    ) -> Popped | None:
        """Pop (client-wire §5). None = nothing to deliver (HTTP answers 204). `now` is for
        tests only (time travel); the database clock is used otherwise."""
        popped = await log_pop.pop(
            self._rt(),
            ident,
            queue,
            partition=partition,
            group=group,
            batch=batch,
            wait=wait,
            timeout_ms=timeout_ms,
            auto_ack=auto_ack,
            subscription_mode=subscription_mode,
            namespace=namespace,
            task=task,
            partitions=partitions,
            now=now,
        )
        return cast(Popped | None, popped)

    @_write_away_is_503
    async def ack(
        self,
        ident: Identity,
        acks: AcksJson,
        *,
        group: str | None = None,
        now: dt.datetime | None = None,
    ) -> Acks:
        """Ack a batch [{transactionId, partitionId, status, leaseId?, error?,
        consumerGroup?}]; answers per item (client-wire §6), HTTP 200 even when some fail."""
        return await log_ack.ack(self._rt(), ident, acks, group=group, now=now)

    @_write_away_is_503
    async def extend_lease(
        self, ident: Identity, lease_id: str, *, now: dt.datetime | None = None
    ) -> dict[str, Any]:
        """Extend every live lease of one pop by the queue's lease time (client-wire §7)."""
        return await log_ack.extend_lease(self._rt(), ident, lease_id, now=now)

    @_database_away_is_503
    async def dlq(
        self,
        ident: Identity,
        *,
        queue: str,
        partition: str | None = None,
        group: str | None = None,
        limit: int = 100,
        offset: int = 0,
        from_: dt.datetime | None = None,
        to: dt.datetime | None = None,
    ) -> DlqPage:
        """Dead letters of a queue, newest first (client-wire §9); `from_` / `to` (aware
        datetimes, inclusive) window the instant each one was dead-lettered (failedAt)."""
        page = await log_dlq.dlq(
            self._rt(),
            ident,
            queue=queue,
            partition=partition,
            group=group,
            limit=limit,
            offset=offset,
            from_=from_,
            to=to,
        )
        return cast(DlqPage, page)

    @property
    def maintenance(self) -> Maintenance | None:
        """This broker's maintenance loop, or None (retention_interval_ms = 0)."""
        return self._maintenance

    # -- timers ------------------------------------------------------------------------------
    async def timers_apply(
        self,
        ident: Identity,
        body: TimerOpsJson,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> list[TimerResult]:
        """Schedule / reschedule / cancel (timers-contract §2.3-§2.6). `body` is a list of ops or
        {"operations": [...]}; results are index-aligned: {ok, status, queue, timerKey, ...}
        with status scheduled | rescheduled | cancelled | absent | too_late.
        `traceparent` / `tracestate`: the caller's W3C trace context, the parent of the schedule
        span with the `[otel]` extra (docs/guides/tracing.md); ignored without it."""
        rt = self._rt()
        t0 = time.perf_counter()
        try:
            otel = tracing.api()
            if otel is None:
                return await timer_ops.apply(rt, self.schedule_batcher, ident, body)
            _trace_arguments(traceparent, tracestate)
            with otel.schedule_span(body, traceparent, tracestate) as (span, carrier):
                results = await timer_ops.apply(rt, self.schedule_batcher, ident, body, carrier)
                otel.scheduled(span, results)
                return results
        finally:
            rt.metrics.timers_apply.observe(time.perf_counter() - t0)

    async def timer_cancel(
        self, ident: Identity, queue: str, timer_key: str, txn: str | None = None
    ) -> TimerResult:
        """Cancel one timer; never blocked by a kill switch. One result element (not wrapped).
        `absent` means no longer pending (maybe already delivered), never "not delivered"."""
        return await timer_ops.cancel(self._rt(), ident, queue, timer_key, txn)

    async def timer_peek(self, ident: Identity, queue: str, timer_key: str) -> TimerPeek:
        """One timer with its payload as stored (base64, not decrypted); {found: false} on a
        miss, including another tenant's key."""
        return await timer_ops.peek(self._rt(), ident, queue, timer_key)

    async def timers_list(
        self,
        ident: Identity,
        queue: str,
        *,
        after: str | None = None,
        limit: int | str | None = None,
    ) -> TimersPage:
        """Keyset page of one queue's timers by timerKey: {rows, truncated, nextAfter}."""
        return await timer_ops.list_timers(self._rt(), ident, queue, after=after, limit=limit)

    async def timers_count(self, ident: Identity, queue: str, prefix: str) -> TimerCount:
        """{count} of the queue's timer keys starting with the literal `prefix`."""
        return await timer_ops.count(self._rt(), ident, queue, prefix)

    async def timers_read(
        self,
        ident: Identity,
        queue: str,
        *,
        mode: str | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | str | None = None,
        window: str | None = None,
    ) -> TimersRead:
        """GET /api/v1/timers/:queue as one call: list, mode=count (with its validation), or
        mode=histogram with `window` (hour | day | 90d; absent: day) and an optional key
        `prefix` (after and limit refused)."""
        if mode == "histogram":
            if after is not None or limit is not None:
                raise QueenError(
                    "timers_bad_request",
                    "timers_histogram_parameters",
                    "mode=histogram takes no after or limit",
                    400,
                )
            hist = await self.timers_histogram(ident, queue, window, prefix=prefix)
            return cast(TimersRead, hist)
        if window is not None:
            raise QueenError(
                "timers_bad_request",
                "timers_window_without_histogram",
                "window goes with mode=histogram only",
                400,
            )
        found = await timer_ops.read(
            self._rt(), ident, queue, mode=mode, prefix=prefix, after=after, limit=limit
        )
        # TimersRead is every mode's keys in one optional-keyed dict (a msgspec schema holds one
        # dict-like type per union); a page or a count is one of its shapes.
        return cast(TimersRead, found)

    async def transaction(
        self,
        ident: Identity,
        body: TransactionJson,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> TransactionResult:
        """The transaction wire (client-wire §8): pushes, acks and a top-level `timers` rider in
        ONE PostgreSQL transaction, timers applied first. {transactionId, success, results}.
        `traceparent` / `tracestate`: as for timers_apply, for the `timers` rider."""
        rt = self._rt()
        otel = tracing.api()
        timers = body.get("timers") if isinstance(body, dict) else None
        if otel is None or not timers:
            return cast(TransactionResult, await transaction_wire.transaction(rt, ident, body))
        _trace_arguments(traceparent, tracestate)
        with otel.schedule_span(timers, traceparent, tracestate) as (_, carrier):
            answer = await transaction_wire.transaction(rt, ident, body, carrier)
            return cast(TransactionResult, answer)

    # -- recurring schedules (docs/guides/schedules.md) ------------------------------------------
    @_write_away_is_503
    async def schedule_set(
        self, ident: Identity, body: ScheduleSetJson, *, now: dt.datetime | None = None
    ) -> ScheduleSetResult:
        """Create or replace a recurring schedule (queue, scheduleKey): cron or everyMs, zone,
        startAt/endAt, payload, partition, jitterMs, catchUp (skip | once | all, with
        catchUpCap), paused. {status: created | updated, schedule}."""
        found = await timer_schedules.upsert(self._rt(), ident, body, now=now)
        return cast(ScheduleSetResult, found)

    @_database_away_is_503
    async def schedules_list(
        self,
        ident: Identity,
        queue: str,
        *,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> SchedulesPage:
        """Keyset page of one queue's schedules by scheduleKey, with a literal key prefix:
        {schedules, truncated, nextAfter}."""
        found = await timer_schedules.list_schedules(
            self._rt(), ident, queue, prefix=prefix, after=after, limit=limit
        )
        return cast(SchedulesPage, found)

    @_database_away_is_503
    async def schedule_peek(
        self,
        ident: Identity,
        queue: str,
        schedule_key: str,
        *,
        count: int | None = None,
        runs: int | None = None,
    ) -> ScheduleView:
        """One schedule, its next `count` occurrences (UTC and local) and its last `runs`
        ledger rows; 404 schedule_not_found."""
        found = await timer_schedules.peek(
            self._rt(), ident, queue, schedule_key, count=count, runs=runs
        )
        return cast(ScheduleView, found)

    @_write_away_is_503
    async def schedule_pause(
        self, ident: Identity, queue: str, schedule_key: str, *, now: dt.datetime | None = None
    ) -> ScheduleView:
        """Pause: the pending occurrence is withdrawn; its instant is kept for resume."""
        found = await timer_schedules.pause(self._rt(), ident, queue, schedule_key, True, now=now)
        return cast(ScheduleView, found)

    @_write_away_is_503
    async def schedule_resume(
        self, ident: Identity, queue: str, schedule_key: str, *, now: dt.datetime | None = None
    ) -> ScheduleView:
        """Resume: the kept instant is staged again; the catch-up policy decides at its fire
        if it has passed."""
        found = await timer_schedules.pause(self._rt(), ident, queue, schedule_key, False, now=now)
        return cast(ScheduleView, found)

    @_write_away_is_503
    async def schedule_delete(
        self, ident: Identity, queue: str, schedule_key: str
    ) -> ScheduleDeleted:
        """Delete a schedule and its pending occurrence: {queue, scheduleKey, deleted}."""
        found = await timer_schedules.delete(self._rt(), ident, queue, schedule_key)
        return cast(ScheduleDeleted, found)

    @_write_away_is_503
    async def schedule_run_now(
        self, ident: Identity, queue: str, schedule_key: str, *, now: dt.datetime | None = None
    ) -> ScheduleRun:
        """One extra occurrence, due now; the cadence does not move."""
        found = await timer_schedules.run_now(self._rt(), ident, queue, schedule_key, now=now)
        return cast(ScheduleRun, found)

    # -- webhook targets (docs/guides/webhooks.md) --------------------------------------------
    @_write_away_is_503
    async def webhook_target_set(self, ident: Identity, body: TargetSetJson) -> TargetSetResult:
        """Create or replace a webhook target {name, queue, url, method, headers, timeoutMs,
        maxAttempts, maxAgeMs, backoffMs, maxBackoffMs, concurrency, ratePerS, paused, secret?}.
        {status: created | updated, target, secret?}: a generated secret is shown once."""
        return cast(TargetSetResult, await webhook_targets.upsert(self._rt(), ident, body))

    @_database_away_is_503
    async def webhook_targets_list(
        self, ident: Identity, *, after: str | None = None, limit: int | None = None
    ) -> TargetsPage:
        """Keyset page of the tenant's targets by name: {targets, truncated, nextAfter}."""
        found = await webhook_targets.list_targets(self._rt(), ident, after=after, limit=limit)
        return cast(TargetsPage, found)

    @_database_away_is_503
    async def webhook_target_get(self, ident: Identity, name: str) -> TargetView:
        """One target (its secrets by id only); 404 webhook_target_not_found."""
        return cast(TargetView, await webhook_targets.get(self._rt(), ident, name))

    @_write_away_is_503
    async def webhook_target_delete(self, ident: Identity, name: str) -> TargetDeleted:
        """Delete a target and its secrets; its queue stays. {name, deleted}."""
        return cast(TargetDeleted, await webhook_targets.delete(self._rt(), ident, name))

    @_write_away_is_503
    async def webhook_target_pause(self, ident: Identity, name: str) -> TargetView:
        """Pause a target: its messages wait in its queue until it is resumed."""
        return cast(TargetView, await webhook_targets.pause(self._rt(), ident, name, True))

    @_write_away_is_503
    async def webhook_target_resume(self, ident: Identity, name: str) -> TargetView:
        """Resume a paused target."""
        return cast(TargetView, await webhook_targets.pause(self._rt(), ident, name, False))

    @_write_away_is_503
    async def webhook_secret_add(
        self, ident: Identity, name: str, *, secret: str | None = None
    ) -> SecretAdded:
        """Add a signing secret (every secret signs until deleted: rotation without a gap);
        without `secret` one is generated and shown in this answer only."""
        found = await webhook_targets.secret_add(self._rt(), ident, name, secret)
        return cast(SecretAdded, found)

    @_write_away_is_503
    async def webhook_secret_delete(
        self, ident: Identity, name: str, secret_id: str
    ) -> SecretDeleted:
        """Remove a signing secret by id; the last one stays (400 webhook_last_secret)."""
        found = await webhook_targets.secret_delete(self._rt(), ident, name, secret_id)
        return cast(SecretDeleted, found)

    @_database_away_is_503
    async def webhook_attempts(
        self,
        ident: Identity,
        name: str,
        *,
        webhook_id: str | None = None,
        before: int | None = None,
        limit: int | None = None,
    ) -> AttemptsPage:
        """A target's newest delivery attempts (or one webhook id's), newest first:
        {target, attempts, nextBefore}."""
        found = await webhook_targets.attempts(
            self._rt(), ident, name, webhook_id=webhook_id, before=before, limit=limit
        )
        return cast(AttemptsPage, found)

    async def webhook_delivery_targets(self) -> list[webhook_targets.Target]:
        """Every tenant's targets with their secrets unsealed: the delivery plugin's read,
        never a wire operation."""
        return await webhook_targets.all_targets(self._rt())

    def tenant_metrics_label(self, tenant: uuid.UUID) -> str:
        """A tenant's label on this broker's metrics: its keyed digest, never its id (the
        first QUEEN_METRICS_TENANT_LABELS tenants; "other" beyond them)."""
        return self._rt().quotas.labels(tenant)

    @_write_away_is_503
    async def webhook_attempts_record(
        self, rows: list[webhook_targets.Attempt], keep: int, *, trim: bool = True
    ) -> None:
        """The delivery plugin's record of attempts; with `trim`, each target named is then
        trimmed to its newest `keep`."""
        await webhook_targets.record_attempts(self._rt(), rows)
        if trim:
            for tenant, target in sorted({(a.tenant, a.target) for a in rows}, key=str):
                await webhook_targets.trim_attempts(self._rt(), tenant, target, keep)

    @_write_away_is_503
    async def webhook_attempts_trim(self, tenant: uuid.UUID, target: str, keep: int) -> None:
        """Keep a target's newest `keep` attempts (the delivery plugin's, now and then)."""
        await webhook_targets.trim_attempts(self._rt(), tenant, target, keep)

    # -- kill switches -----------------------------------------------------------------------
    @_database_away_is_503
    async def switches_get(self, ident: Identity) -> SwitchStates:
        """The kill switches as every broker will see them within a second."""
        await self._board().refresh()
        return cast(SwitchStates, self._rt().switches.as_wire())

    @_write_away_is_503
    async def switches_set(self, ident: Identity, changes: SwitchesJson) -> SwitchStates:
        """Flip kill switches ({timersSchedule?, timersFire?}: booleans). Admin only."""
        if not ident.admin:
            raise QueenError(
                "forbidden",
                "admin_required",
                "flipping the kill switches needs an admin identity",
                403,
            )
        return cast(SwitchStates, await self._board().set(changes))

    # -- per-tenant limits (queen_timers/quotas.py, docs/guides/tenants.md) ----------------------
    @property
    def quotas(self) -> TenantQuotas:
        """This broker's gate of the tenants' limits (tests drive its refresh())."""
        q = self._rt().quotas
        assert q is not None, "not started"
        return q

    @staticmethod
    def _tenant_of(ident: Identity, tenant: Any, *, admin_only: bool) -> uuid.UUID:
        if tenant is None and not admin_only:
            return ident.tenant
        try:
            asked = tenant if isinstance(tenant, uuid.UUID) else uuid.UUID(str(tenant))
        except ValueError:
            raise QueenError(
                "bad_request", "tenant_invalid", f"tenant {tenant!r} is not a UUID", 400
            ) from None
        if not ident.admin and (admin_only or asked != ident.tenant):
            raise QueenError(
                "forbidden",
                "admin_required",
                "another tenant's limits, and setting any, need an admin identity",
                403,
            )
        return asked

    @_database_away_is_503
    async def tenant_quota_get(self, ident: Identity, tenant: str | None = None) -> TenantQuota:
        """A tenant's limits (effective, overrides), its pending count measured now when it
        has a cap, and whether this broker refuses it. Own tenant, or any with admin."""
        t = self._tenant_of(ident, tenant, admin_only=False)
        return cast(TenantQuota, await self.quotas.read(t))

    @_write_away_is_503
    async def tenant_quota_set(
        self, ident: Identity, tenant: str, changes: TenantLimitsJson
    ) -> TenantQuota:
        """Override a tenant's limits ({maxPending?, writesPerSec?, burst?}: a number,
        "unlimited", or null for the broker's setting). Admin only. Every broker adopts it
        within QUEEN_TIMERS_TENANT_QUOTA_REFRESH_MS; this one at once."""
        t = self._tenant_of(ident, tenant, admin_only=True)
        return cast(TenantQuota, await self.quotas.set_override(t, changes))

    @_database_away_is_503
    async def tenant_quotas_list(self, ident: Identity) -> TenantQuotaList:
        """The defaults and every tenant with an override. Admin only."""
        if not ident.admin:
            raise QueenError(
                "forbidden", "admin_required", "listing tenants needs an admin identity", 403
            )
        q = self.quotas
        await q.load_overrides()
        tenants = [cast(TenantQuota, q.view(t)) for t in sorted(q.overrides)]
        return {"defaults": q.defaults(), "tenants": tenants}

    # -- the operator's views and actions (the console, `queen status`) ---------------------
    @_database_away_is_503
    async def queues_overview(
        self, ident: Identity, *, now: dt.datetime | None = None
    ) -> QueuesOverview:
        """Every queue of the caller's tenant that has a log or pending timers, by name:
        {"queues": [QueueSummary], "at"} (QueueSummary: name, id, namespace, task, createdAt,
        partitions, messages {total, pending, processing}, timers {pending, dueNextMinute,
        dueNextHour, dueNextDay, overdue, oldestOverdueMs, backingOff, claimed},
        deadLetters). `now` is for tests (time travel)."""
        rt = self._rt()
        async with rt.reads.acquire() as read:
            at = await timer_inspect.db_now(read.conn, now)
            queues = await timer_inspect.queue_summaries(rt, read.conn, ident, None, at)
        answer: QueuesOverview = {
            "queues": cast(list[QueueSummary], queues),
            "at": timer_inspect.iso(at),
        }
        return with_lag(answer, read.lag_ms)

    @_database_away_is_503
    async def queue_summary(
        self,
        ident: Identity,
        queue: str,
        prefix: str | None = None,
        *,
        now: dt.datetime | None = None,
    ) -> QueueSummaryAt:
        """One QueueSummary; 404 queue_not_found when the queue has neither a log nor pending
        timers in the caller's tenant. With a key `prefix`, its timer figures count the keys
        that start with it (the log figures and dead letters stay the queue's)."""
        rt = self._rt()
        name = timer_inspect.check_queue(queue)
        key_prefix = timer_inspect.check_prefix(prefix)
        async with rt.reads.acquire() as read:
            at = await timer_inspect.db_now(read.conn, now)
            found = await timer_inspect.queue_summaries(rt, read.conn, ident, name, at, key_prefix)
        if not found:
            raise QueenError(
                "queue_not_found",
                "queue_not_found",
                f"queue {name!r} has neither a log nor pending timers",
                404,
            )
        return with_lag(
            cast(QueueSummaryAt, {**found[0], "at": timer_inspect.iso(at)}), read.lag_ms
        )

    @_database_away_is_503
    async def overview(self, ident: Identity, *, now: dt.datetime | None = None) -> Overview:
        """The tenant at a glance (the reference's /resources/overview fields where this
        broker has them: queues, partitions, namespaces, tasks, messages, timestamp), plus the
        timer sums, dead letters, brokers alive, the kill switches and this broker's recent
        fire. The broker list (pid, address) and this broker's fire rate and lag are
        infrastructure: an admin identity sees them, another the count of brokers and the
        window's length only."""
        rt = self._rt()
        await self._board().refresh()
        async with rt.reads.acquire() as read:
            at = await timer_inspect.db_now(read.conn, now)
            queues = await timer_inspect.queue_summaries(rt, read.conn, ident, None, at)
            if not rt.reads.replica:  # one connection, as without a replica
                brokers = await read.conn.fetch(Q.console_brokers)
        if rt.reads.replica:
            # the brokers alive are the primary's sessions: a replica has none of them
            async with rt.pool.acquire() as conn:
                brokers = await conn.fetch(Q.console_brokers)
        answer: Overview = {
            "queues": len(queues),
            "partitions": sum(q["partitions"] for q in queues),
            "namespaces": len({q["namespace"] for q in queues if q["namespace"]}),
            "tasks": len({q["task"] for q in queues if q["task"]}),
            "messages": {
                "total": sum(q["messages"]["total"] for q in queues),
                "pending": sum(q["messages"]["pending"] for q in queues),
                "processing": sum(q["messages"]["processing"] for q in queues),
                "deadLetter": sum(q["deadLetters"] for q in queues),
            },
            "timers": cast(TimerCounts, timer_inspect.timer_sums(queues)),
            "deadLetters": sum(q["deadLetters"] for q in queues),
            "brokers": {
                "alive": len(brokers),
                "list": [
                    {
                        "applicationName": f"queen:{b['pid']}",
                        "pid": int(b["pid"]) if b["pid"].isdigit() else None,
                        "backendStart": timer_inspect.iso(b["backend_start"]),
                        "clientAddr": b["client_addr"],
                    }
                    for b in brokers
                ]
                if ident.admin
                else [],
            },
            "switches": cast(SwitchStates, rt.switches.as_wire()),
            # this broker's fire is every tenant's: its figures are for an admin only
            "thisBroker": cast(
                FireWindow,
                rt.fire_window.snapshot() if ident.admin else rt.fire_window.bare(),
            ),
            "timestamp": timer_inspect.iso(at),
            "at": timer_inspect.iso(at),
        }
        return with_lag(answer, read.lag_ms)

    @_database_away_is_503
    async def timers_histogram(
        self,
        ident: Identity,
        queue: str,
        window: str | None,
        prefix: str | None = None,
        *,
        now: dt.datetime | None = None,
    ) -> Histogram:
        """Pending timers of one queue by due time: {queue, window (hour | day | 90d; None:
        day), bucketMs, from, to, buckets [{start, count}], overdue (due before `from`, i.e.
        now), later (due at or after `to`), pending}; with a key `prefix`, of the keys that
        start with it (and the answer names it)."""
        rt = self._rt()
        async with rt.reads.acquire() as read:
            at = await timer_inspect.db_now(read.conn, now)
            found = await timer_inspect.histogram(rt, read.conn, ident, queue, window, at, prefix)
        return with_lag(cast(Histogram, found), read.lag_ms)

    async def timer_fire_now(self, ident: Identity, queue: str, timer_key: str) -> TimerResult:
        """Reschedule one timer to now, keeping its message id, txn, payload, partition,
        producer, attempts and last error; clears a backoff. {ok, status: rescheduled |
        absent | too_late (claimed by a fire in progress), queue, timerKey, txn?, messageId?,
        deliverAt?}. Refused (503 timers_disabled) while scheduling is paused."""
        return cast(TimerResult, await timer_bulk.fire_now(self._rt(), ident, queue, timer_key))

    async def timers_cancel_prefix(
        self, ident: Identity, queue: str, prefix: str, *, limit: int | None = None
    ) -> CancelPrefixResult:
        """Cancel ONE bounded batch (limit 1..10000, default 1000) of the queue's unclaimed
        timers whose key starts with the literal `prefix`, in key order: {queue, prefix,
        cancelled, absent, tooLate, remaining}. Call again while `remaining` is true. Never
        blocked by a kill switch."""
        found = await timer_bulk.cancel_prefix(self._rt(), ident, queue, prefix, limit)
        return cast(CancelPrefixResult, found)

    @_write_away_is_503
    async def dlq_replay(
        self, ident: Identity, items: DlqItemsJson, mode: str, *, delay_ms: int | None = None
    ) -> DlqReplayed:
        """Replay dead letters [{transactionId, partitionId}] (at most 1000): `push` appends
        each again to its queue and partition, `schedule` schedules it as a timer in
        `delay_ms` (default 0; key and txn `replay:<dead letter id>`). The dead letter is
        deleted once its message is in. {mode, results: [{index, partitionId, transactionId,
        status: replayed | absent | failed, count}]}."""

        async def schedule(who: Identity, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return cast(list[dict[str, Any]], await self.timers_apply(who, ops))

        found = await timer_replay.replay(self._rt(), ident, items, mode, delay_ms, schedule)
        return cast(DlqReplayed, found)

    @_write_away_is_503
    async def dlq_delete(self, ident: Identity, items: DlqItemsJson) -> DlqDeleted:
        """Delete dead letters [{transactionId, partitionId}] (at most 1000): {results:
        [{index, partitionId, transactionId, status: deleted | absent, count}]}."""
        return cast(DlqDeleted, await timer_replay.delete(self._rt(), ident, items))

    # -- the official client's admin surface (queen_timers/resources.py) ---------------------
    async def _summaries(
        self, ident: Identity, now: dt.datetime | None
    ) -> tuple[dt.datetime, list[dict[str, Any]]]:
        rt = self._rt()
        async with rt.pool.acquire() as conn:
            at = await timer_inspect.db_now(conn, now)
            return at, await timer_inspect.queue_summaries(rt, conn, ident, None, at)

    async def _now(self, now: dt.datetime | None) -> dt.datetime:
        async with self._rt().pool.acquire() as conn:
            return await timer_inspect.db_now(conn, now)

    @_database_away_is_503
    async def resources_namespaces(self, ident: Identity) -> GroupedQueues:
        """{namespaces: [{namespace, queues, partitions, messages {total, pending}}]}: the
        tenant's queues summed by namespace (queues without one are not listed)."""
        _, queues = await self._summaries(ident, None)
        return {"namespaces": resources.grouped(queues, "namespace")}

    @_database_away_is_503
    async def resources_tasks(self, ident: Identity) -> GroupedQueues:
        """{tasks: [{task, queues, partitions, messages {total, pending}}]}, as namespaces."""
        _, queues = await self._summaries(ident, None)
        return {"tasks": resources.grouped(queues, "task")}

    @_database_away_is_503
    async def resources_partitions(
        self, ident: Identity, queue: str | None = None, *, now: dt.datetime | None = None
    ) -> PartitionsList:
        """{partitions: [...]}: every partition of the tenant's queues, or of `queue`."""
        at = await self._now(now)
        found = await resources.partitions(self._rt(), ident, queue, at)
        return cast(PartitionsList, {"partitions": found})

    @_database_away_is_503
    async def queue_depth(
        self,
        ident: Identity,
        queue: str,
        group: str | None = None,
        *,
        now: dt.datetime | None = None,
    ) -> QueueDepth:
        """Per-partition backlog of one queue, for queue mode or one consumer group: {queue,
        group, pending, partitionsPending, conflation: false, effectivePending, partitions}."""
        at = await self._now(now)
        return cast(QueueDepth, await resources.depth(self._rt(), ident, queue, group, at))

    @_write_away_is_503
    async def queue_delete(self, ident: Identity, queue: str) -> QueueDeleted:
        """Drop a queue of the caller's tenant in ONE transaction: its pending timers, dead
        letters, partitions, messages and cursors. Admin only. {deleted, existed, queue,
        partitions, messages, timers, deadLetters}."""
        if not ident.admin:
            raise QueenError(
                "forbidden", "admin_required", "deleting a queue needs an admin identity", 403
            )
        return cast(QueueDeleted, await resources.delete_queue(self._rt(), ident, queue))

    @_database_away_is_503
    async def status(self, ident: Identity, *, now: dt.datetime | None = None) -> SystemStatus:
        """The reference's status page, from what this broker measures now: the tenant's
        queues and messages, leases held, dead letters and timers. No stored time series:
        throughput and workers are empty (declared in the guide)."""
        at, queues = await self._summaries(ident, now)
        async with self._rt().pool.acquire() as conn:
            leases = await conn.fetchrow(Q.resources_leases, ident.tenant, at)
        assert leases is not None  # an aggregate answers one row
        dead = sum(q["deadLetters"] for q in queues)
        total = sum(q["messages"]["total"] for q in queues)
        pending = sum(q["messages"]["pending"] for q in queues)
        processing = sum(q["messages"]["processing"] for q in queues)
        return {
            "timeRange": {"from": timer_inspect.iso(at), "to": timer_inspect.iso(at)},
            "throughput": [],
            "queues": [
                {
                    "id": q["id"],
                    "name": q["name"],
                    "namespace": q["namespace"],
                    "task": q["task"],
                    "partitions": q["partitions"],
                    "messages": resources.waiting(q["messages"]),
                }
                for q in queues
            ],
            "messages": {
                "total": total,
                "pending": pending - processing,
                "processing": processing,
                "completed": max(total - pending, 0),
                "deadLetter": dead,
            },
            "leases": {
                "active": int(leases["active"]),
                "partitionsWithLeases": int(leases["partitions"]),
                "totalBatchSize": int(leases["messages"]),
            },
            "deadLetterQueue": {"totalMessages": dead},
            "timers": timer_inspect.timer_sums(queues),
            "workers": [],
            "statsAge": 0,
        }

    @_database_away_is_503
    async def status_queues(
        self,
        ident: Identity,
        *,
        limit: int = 100,
        offset: int = 0,
        namespace: str | None = None,
        task: str | None = None,
        now: dt.datetime | None = None,
    ) -> StatusQueues:
        """{queues: [{id, name, namespace, task, createdAt, partitions, messages}],
        pagination: {limit, offset, total}}, by name, filtered by namespace and task."""
        for what, v, lo in (("limit", limit, 1), ("offset", offset, 0)):
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise QueenError(
                    "bad_request", "bad_parameter", f"{what} must be an integer >= {lo}", 400
                )
        _, queues = await self._summaries(ident, now)
        picked = [
            q
            for q in queues
            if (namespace is None or q["namespace"] == namespace)
            and (task is None or q["task"] == task)
        ]
        page = picked[offset : offset + limit]
        return {
            "queues": [
                {
                    "id": q["id"],
                    "name": q["name"],
                    "namespace": q["namespace"],
                    "task": q["task"],
                    "createdAt": q["createdAt"],
                    "partitions": q["partitions"],
                    "messages": resources.waiting(q["messages"]),
                    "timers": {"pending": q["timers"]["pending"]},
                    "deadLetters": q["deadLetters"],
                }
                for q in page
            ],
            "pagination": {"limit": limit, "offset": offset, "total": len(picked)},
        }

    @_database_away_is_503
    async def queue_detail(
        self, ident: Identity, queue: str, *, now: dt.datetime | None = None
    ) -> QueueDetail:
        """One queue: {queue {id, name, namespace, task, createdAt, config}, partitions
        [{id, name, messages, cursor, lastActivity}], totals {messages}, timers}."""
        rt = self._rt()
        at = await self._now(now)
        found = await resources.queue_detail(rt, ident, queue, at)
        async with rt.pool.acquire() as conn:
            mine = await timer_inspect.queue_summaries(rt, conn, ident, found["queue"]["name"], at)
        timers = mine[0]["timers"] if mine else {}
        return cast(QueueDetail, {**found, "timers": timers})

    @_database_away_is_503
    async def messages_list(
        self,
        ident: Identity,
        queue: str,
        *,
        partition: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        now: dt.datetime | None = None,
    ) -> MessagesPage:
        """The newest messages of one queue, newest first, without data: {messages: [{id,
        transactionId, partitionId, queue, partition, status: pending | processing |
        completed (queue mode), offset, createdAt, ...}], pagination {limit, offset}}."""
        at = await self._now(now)
        page = await resources.messages(
            self._rt(),
            ident,
            queue=queue,
            partition=partition,
            status=status,
            limit=limit,
            offset=offset,
            now=at,
        )
        return cast(MessagesPage, page)

    @_database_away_is_503
    async def message_get(
        self,
        ident: Identity,
        partition_id: str,
        transaction_id: str,
        *,
        now: dt.datetime | None = None,
    ) -> LogMessage:
        """One message with its data; 404 message_not_found past the dedup window or in
        another tenant's partition."""
        at = await self._now(now)
        found = await resources.message(self._rt(), ident, partition_id, transaction_id, at)
        if found is None:
            raise QueenError(
                "message_not_found",
                "message_not_found",
                f"no message {transaction_id!r} in partition {partition_id} (messages are "
                "found by transaction id while the push dedup window keeps it)",
                404,
            )
        return cast(LogMessage, found)

    async def _dead_letter_or_gone(
        self, ident: Identity, partition_id: str, transaction_id: str, verb: str
    ) -> None:
        """No dead letter matched: a message still in the log is refused by what the log is,
        anything else is not found."""
        if await resources.message(
            self._rt(), ident, partition_id, transaction_id, await self._now(None)
        ):
            raise QueenError(
                "not_implemented",
                "log_is_append_only",
                f"cannot {verb} a message of the log: the log is append-only (retention "
                "removes it; ack or seek past it); only a dead letter can be "
                f"{verb}d by its address",
                410,
            )
        raise QueenError(
            "message_not_found",
            "dead_letter_not_found",
            f"no dead letter {transaction_id!r} in partition {partition_id}",
            404,
        )

    @_write_away_is_503
    async def message_delete(
        self, ident: Identity, partition_id: str, transaction_id: str
    ) -> MessageAction:
        """Delete the dead letters of one message (as POST /api/v1/dlq/delete does). A message
        still in the log answers 410 log_is_append_only."""
        item = {"partitionId": partition_id, "transactionId": transaction_id}
        res = (await self.dlq_delete(ident, [item]))["results"][0]
        if res["status"] != "deleted":
            await self._dead_letter_or_gone(ident, partition_id, transaction_id, "delete")
        return {
            "success": True,
            "partitionId": partition_id,
            "transactionId": transaction_id,
            "message": "dead letter deleted",
            "deadLetters": res["count"],
        }

    @_write_away_is_503
    async def message_retry(
        self, ident: Identity, partition_id: str, transaction_id: str
    ) -> MessageAction:
        """Push the dead letters of one message back into their queue (as POST
        /api/v1/dlq/replay with mode push does). A message still in the log answers 410."""
        item = {"partitionId": partition_id, "transactionId": transaction_id}
        res = (await self.dlq_replay(ident, [item], "push"))["results"][0]
        if res["status"] == "failed":
            raise QueenError(
                "replay_failed",
                "replay_failed",
                f"the dead letter {transaction_id!r} could not be pushed again",
                409,
            )
        if res["status"] != "replayed":
            await self._dead_letter_or_gone(ident, partition_id, transaction_id, "retry")
        return {
            "success": True,
            "partitionId": partition_id,
            "transactionId": transaction_id,
            "message": "dead letter pushed again",
            "deadLetters": res["count"],
        }

    def _admin_only(self, ident: Identity, what: str) -> None:
        if not ident.admin:  # this process's figures are every tenant's
            raise QueenError("forbidden", "admin_required", f"{what} needs an admin identity", 403)

    @_database_away_is_503
    async def system_metrics(
        self, ident: Identity, *, now: dt.datetime | None = None
    ) -> SystemMetrics:
        """This broker's process now, as one point of the reference's series: CPU time,
        peak memory, the database pool. Admin only. No history is stored."""
        self._admin_only(ident, "system metrics")
        at = timer_inspect.iso(await self._now(now))
        use = rusage.getrusage(rusage.RUSAGE_SELF)
        pool = self._rt().pool
        size, idle = pool.get_size(), pool.get_idle_size()
        point = {
            "timestamp": at,
            "sampleCount": 1,
            "metrics": {
                "cpu": {
                    "userMicros": int(use.ru_utime * 1e6),
                    "systemMicros": int(use.ru_stime * 1e6),
                },
                # ru_maxrss is in KiB on Linux (the platform this broker ships for)
                "memory": {"maxRssBytes": use.ru_maxrss * 1024},
                "database": {"poolSize": size, "poolIdle": idle, "poolActive": size - idle},
            },
        }
        return {
            "timeRange": {"from": at, "to": at},
            "replicas": [
                {"hostname": os.uname().nodename, "pid": os.getpid(), "timeSeries": [point]}
            ],
            "replicaCount": 1,
            "bucketMinutes": 0,
            "pointCount": 1,
        }

    @_database_away_is_503
    async def worker_metrics(
        self, ident: Identity, *, now: dt.datetime | None = None
    ) -> WorkerMetrics:
        """The brokers alive on this database (their connections) and this broker's recent
        fire. Admin only. No history is stored."""
        self._admin_only(ident, "worker metrics")
        rt = self._rt()
        async with rt.pool.acquire() as conn:
            at = timer_inspect.iso(await timer_inspect.db_now(conn, now))
            brokers = await conn.fetch(Q.console_brokers)
        me = str(os.getpid())
        return {
            "timeRange": {"from": at, "to": at},
            "timeSeries": [{"timestamp": at, **rt.fire_window.snapshot()}],
            "workers": [
                {
                    "workerId": f"queen:{b['pid']}",
                    "pid": int(b["pid"]) if b["pid"].isdigit() else None,
                    "clientAddr": b["client_addr"],
                    "dbConnections": int(b["connections"]),
                    "lastSeen": at,
                    "thisBroker": b["pid"] == me,
                }
                for b in brokers
            ],
        }

    # -- consumer groups -----------------------------------------------------------------------
    @_database_away_is_503
    async def consumer_groups_list(
        self, ident: Identity, *, now: dt.datetime | None = None
    ) -> list[ConsumerGroupSummary]:
        """The tenant's named consumer groups, one row per (group, queue): {name, topics,
        queueName, members (live leases), partitionsWithLag, totalLag (messages), maxTimeLag
        (seconds), state: Stable | Lagging | Dead, subscriptionMode, subscriptionTimestamp,
        subscriptionCreatedAt}."""
        at = await self._now(now)
        found = await resources.consumer_groups(self._rt(), ident, at)
        return cast(list[ConsumerGroupSummary], found)

    @_database_away_is_503
    async def consumer_group_get(
        self, ident: Identity, group: str, *, now: dt.datetime | None = None
    ) -> ConsumerGroupDetail:
        """One group: {queue: {partitions: [{partition, partitionId, workerId, committed,
        totalConsumed, offsetLag, timeLagSeconds, leaseActive, lastConsumedAt: null}]}};
        {} when the tenant has no such group (as the reference answers)."""
        at = await self._now(now)
        found = await resources.consumer_group(self._rt(), ident, group, at)
        return cast(ConsumerGroupDetail, found)

    @_database_away_is_503
    async def consumer_groups_lagging(
        self, ident: Identity, min_lag_seconds: int = 60, *, now: dt.datetime | None = None
    ) -> list[LaggingPartition]:
        """Partitions of named groups whose oldest unconsumed message is older than
        `min_lag_seconds`, most lagging first."""
        at = await self._now(now)
        found = await resources.lagging(self._rt(), ident, min_lag_seconds, at)
        return cast(list[LaggingPartition], found)

    @_write_away_is_503
    async def consumer_group_delete(
        self, ident: Identity, group: str, queue: str, delete_metadata: bool = True
    ) -> ConsumerGroupDeleted:
        """Forget a group on one queue: its cursors and leases in every partition and, with
        `delete_metadata`, its subscription. Its next pop starts afresh (subscriptionMode)."""
        found = await resources.group_delete(self._rt(), ident, group, queue, delete_metadata)
        return cast(ConsumerGroupDeleted, found)

    @_write_away_is_503
    async def consumer_group_seek(
        self,
        ident: Identity,
        group: str,
        queue: str,
        to_end: bool = False,
        timestamp: str | None = None,
    ) -> ConsumerGroupSeek:
        """Move a group's cursors on one queue to the end of the log (`to_end`) or to just
        after the last push made at or before `timestamp` (ISO 8601), releasing its leases.
        Partitions the group never read are left to its subscription."""
        found = await resources.group_seek(self._rt(), ident, group, queue, to_end, timestamp)
        return cast(ConsumerGroupSeek, found)
