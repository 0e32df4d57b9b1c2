"""TcpClient: a small asyncio client of the queen-tcp wire (see queen_tcp.protocol).

    async with await TcpClient.connect("127.0.0.1", 6633, token=jwt) as c:
        res = await c.timers_apply([{"op": "schedule", "queue": "q", "timerKey": "k",
                                     "payload": "MQ==", "delayMs": 1000, "txn": "t"}])

One connection carries any number of concurrent calls (they are pipelined and paired by id),
so a single client shared by many tasks is the intended use. Its methods mirror
queen_timers.service.Queen minus the identity, which the hello frame's token established. A refusal
raises queen_timers.errors.QueenError with the server's code, reason, detail and status.

Arguments and answers are typed by queen_timers.wire (the same types as the service's): an
answer is the server's frame as decoded, cast to its operation's type, not checked again.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

from queen_timers.errors import QueenError
from queen_timers.wire.admin import (
    DlqDeleted,
    DlqItemsJson,
    DlqReplayed,
    Overview,
    QueuesOverview,
    QueueSummaryAt,
    SwitchesJson,
    SwitchStates,
    TenantLimitsJson,
    TenantQuota,
    TenantQuotaList,
)
from queen_timers.wire.log import (
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
from queen_timers.wire.timers import (
    CancelPrefixResult,
    Histogram,
    TimerCount,
    TimerOpsJson,
    TimerPeek,
    TimerResult,
    TimersPage,
)

from .protocol import DECODER, HEADER, OK, PROTOCOL_VERSION, encode_frame

__all__ = ["TcpClient"]


class _Wire(asyncio.Protocol):
    """The client's end of one connection: answers are cut out of a buffer in data_received
    and handed to the waiting calls, with no reader task and no per-frame await."""

    def __init__(self, client: TcpClient):
        self._client = client
        self._buf = bytearray()
        self.transport: asyncio.Transport  # set by connection_made, which asyncio calls first
        self.paused = False
        self._drained: asyncio.Future[None] | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        off, end = 0, len(buf)
        client = self._client
        try:
            while end - off >= HEADER:
                n = int.from_bytes(buf[off : off + HEADER], "big")
                if end - off - HEADER < n:
                    break
                start = off + HEADER
                off = start + n
                if not client._answer(DECODER.decode(buf[start:off])):
                    off = end  # refused as a whole: the server closes, so do we
                    self.transport.close()
                    break
        except Exception as exc:  # noqa: BLE001 - a frame we cannot read: the wire is lost
            client._fail_all(ConnectionError(f"unreadable answer from the server: {exc!r}"))
            off = end
            self.transport.close()
        finally:
            del buf[:off]

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._client._fail_all(
            exc
            if isinstance(exc, (ConnectionError, OSError))
            else ConnectionError("the server closed the connection")
        )
        self.resume_writing()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        fut, self._drained = self._drained, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def drain(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)


class TcpClient:
    def __init__(self) -> None:
        self._wire = _Wire(self)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._closed: BaseException | None = None
        self.server: dict[str, Any] = {}

    @classmethod
    async def connect(
        cls, host: str = "127.0.0.1", port: int = 6633, token: str | None = None
    ) -> TcpClient:
        client = cls()
        await asyncio.get_running_loop().create_connection(lambda: client._wire, host, port)
        try:
            client.server = await client._request(
                0, "hello", {"token": token, "protocol": PROTOCOL_VERSION}
            )
        except BaseException:
            await client.aclose()
            raise
        return client

    async def __aenter__(self) -> TcpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._fail_all(ConnectionError("client closed"))
        transport = self._wire.transport
        if transport is not None:
            transport.close()
            await self._wire.closed

    # -- plumbing --------------------------------------------------------------------------------
    def _fail_all(self, exc: BaseException) -> None:
        if self._closed is None:
            self._closed = exc
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    def _answer(self, frame: Any) -> bool:
        """Hand one answer to its call; False once the connection is refused as a whole."""
        rid, status, body = frame
        fut = self._pending.pop(rid, None)
        if status != OK:
            err = QueenError(
                body.get("error"),
                body.get("reason"),
                body.get("detail"),
                status,
                body.get("retryAfter"),
            )
            if fut is None:  # a connection-level refusal (id 0): fails every call
                self._fail_all(err)
                return False
            if not fut.done():
                fut.set_exception(err)
        elif fut is not None and not fut.done():
            fut.set_result(body)
        return True

    async def _request(self, rid: int, op: str, body: dict[str, Any]) -> Any:
        if self._closed is not None:
            raise self._closed
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        wire = self._wire
        wire.transport.write(encode_frame([rid, op, body]))
        if wire.paused:
            await wire.drain()
        return await fut

    async def call(self, op: str, **body: Any) -> Any:
        """Any service operation by name, with its keyword arguments."""
        return await self._request(next(self._ids), op, body)

    # -- the service, mirrored --------------------------------------------------------------------
    async def configure_queue(
        self,
        queue: str,
        options: OptionsJson,
        *,
        namespace: str | None = None,
        task: str | None = None,
        mode: str = "merge",
    ) -> dict[str, Any]:
        return cast(
            "dict[str, Any]",
            await self.call(
                "configure_queue",
                queue=queue,
                options=options,
                namespace=namespace,
                task=task,
                mode=mode,
            ),
        )

    async def push(self, items: PushItemsJson) -> list[PushResult]:
        return cast("list[PushResult]", await self.call("push", items=items))

    async def pop(self, queue: str | None = None, **kw: Any) -> Popped | None:
        return cast("Popped | None", await self.call("pop", queue=queue, **kw))

    async def ack(self, acks: AcksJson, *, group: str | None = None) -> Acks:
        return cast("Acks", await self.call("ack", acks=acks, group=group))

    async def extend_lease(self, lease_id: str) -> dict[str, Any]:
        return cast("dict[str, Any]", await self.call("extend_lease", lease_id=lease_id))

    async def dlq(self, *, queue: str, **kw: Any) -> DlqPage:
        return cast("DlqPage", await self.call("dlq", queue=queue, **kw))

    async def transaction(
        self,
        body: TransactionJson,
        *,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> TransactionResult:
        """`traceparent` / `tracestate`: the caller's W3C trace context, as HTTP's headers."""
        extra = _trace_context(traceparent, tracestate)
        return cast("TransactionResult", await self.call("transaction", body=body, **extra))

    async def timers_apply(
        self,
        body: TimerOpsJson,
        *,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> list[TimerResult]:
        """`traceparent` / `tracestate`: the caller's W3C trace context, as HTTP's headers (the
        schedule span's parent with the broker's `[otel]` extra; docs/guides/tracing.md)."""
        extra = _trace_context(traceparent, tracestate)
        return cast("list[TimerResult]", await self.call("timers_apply", body=body, **extra))

    async def timer_cancel(self, queue: str, timer_key: str, txn: str | None = None) -> TimerResult:
        answer = await self.call("timer_cancel", queue=queue, timer_key=timer_key, txn=txn)
        return cast("TimerResult", answer)

    async def timer_peek(self, queue: str, timer_key: str) -> TimerPeek:
        answer = await self.call("timer_peek", queue=queue, timer_key=timer_key)
        return cast("TimerPeek", answer)

    async def timers_list(
        self, queue: str, *, after: str | None = None, limit: int | str | None = None
    ) -> TimersPage:
        answer = await self.call("timers_list", queue=queue, after=after, limit=limit)
        return cast("TimersPage", answer)

    async def timers_count(self, queue: str, prefix: str) -> TimerCount:
        answer = await self.call("timers_count", queue=queue, prefix=prefix)
        return cast("TimerCount", answer)

    async def switches_get(self) -> SwitchStates:
        return cast("SwitchStates", await self.call("switches_get"))

    async def switches_set(self, changes: SwitchesJson) -> SwitchStates:
        return cast("SwitchStates", await self.call("switches_set", changes=changes))

    async def tenant_quota_get(self, tenant: str | None = None) -> TenantQuota:
        return cast("TenantQuota", await self.call("tenant_quota_get", tenant=tenant))

    async def tenant_quota_set(self, tenant: str, changes: TenantLimitsJson) -> TenantQuota:
        answer = await self.call("tenant_quota_set", tenant=tenant, changes=changes)
        return cast("TenantQuota", answer)

    async def tenant_quotas_list(self) -> TenantQuotaList:
        return cast("TenantQuotaList", await self.call("tenant_quotas_list"))

    async def queues_overview(self) -> QueuesOverview:
        return cast("QueuesOverview", await self.call("queues_overview"))

    async def queue_summary(self, queue: str, prefix: str | None = None) -> QueueSummaryAt:
        answer = await self.call("queue_summary", queue=queue, prefix=prefix)
        return cast("QueueSummaryAt", answer)

    async def overview(self) -> Overview:
        return cast("Overview", await self.call("overview"))

    async def timers_histogram(
        self, queue: str, window: str | None, prefix: str | None = None
    ) -> Histogram:
        answer = await self.call("timers_histogram", queue=queue, window=window, prefix=prefix)
        return cast("Histogram", answer)

    async def timer_fire_now(self, queue: str, timer_key: str) -> TimerResult:
        answer = await self.call("timer_fire_now", queue=queue, timer_key=timer_key)
        return cast("TimerResult", answer)

    async def timers_cancel_prefix(
        self, queue: str, prefix: str, *, limit: int | None = None
    ) -> CancelPrefixResult:
        answer = await self.call("timers_cancel_prefix", queue=queue, prefix=prefix, limit=limit)
        return cast("CancelPrefixResult", answer)

    async def dlq_replay(
        self, items: DlqItemsJson, mode: str, *, delay_ms: int | None = None
    ) -> DlqReplayed:
        answer = await self.call("dlq_replay", items=items, mode=mode, delay_ms=delay_ms)
        return cast("DlqReplayed", answer)

    async def dlq_delete(self, items: DlqItemsJson) -> DlqDeleted:
        return cast("DlqDeleted", await self.call("dlq_delete", items=items))


def _trace_context(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """The trace arguments that are set: a request without them is the one it always was."""
    out = {}
    if traceparent is not None:
        out["traceparent"] = traceparent
    if tracestate is not None:
        out["tracestate"] = tracestate
    return out
