"""TcpClient: a small asyncio client of the queen-tcp wire (see queen_tcp.protocol).

    async with await TcpClient.connect("127.0.0.1", 6633, token=jwt) as c:
        res = await c.timers_apply([{"op": "schedule", "queue": "q", "timerKey": "k",
                                     "payload": "MQ==", "delayMs": 1000, "txn": "t"}])

One connection carries any number of concurrent calls (they are pipelined and paired by id),
so a single client shared by many tasks is the intended use. Its methods mirror
queen_timers.service.Queen minus the identity, which the hello frame's token established. A refusal
raises queen_timers.errors.QueenError with the server's code, reason, detail and status.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from queen_timers.errors import QueenError

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
        self._drained: asyncio.Future | None = None
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()

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
        self._pending: dict[int, asyncio.Future] = {}
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

    async def _request(self, rid: int, op: str, body: dict) -> Any:
        if self._closed is not None:
            raise self._closed
        fut = asyncio.get_running_loop().create_future()
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
        options: dict,
        *,
        namespace: str | None = None,
        task: str | None = None,
        mode: str = "merge",
    ) -> dict:
        return await self.call(
            "configure_queue",
            queue=queue,
            options=options,
            namespace=namespace,
            task=task,
            mode=mode,
        )

    async def push(self, items: list) -> list[dict]:
        return await self.call("push", items=items)

    async def pop(self, queue: str | None = None, **kw: Any) -> dict | None:
        return await self.call("pop", queue=queue, **kw)

    async def ack(self, acks: list[dict], *, group: str | None = None) -> list[dict]:
        return await self.call("ack", acks=acks, group=group)

    async def extend_lease(self, lease_id: str) -> dict:
        return await self.call("extend_lease", lease_id=lease_id)

    async def dlq(self, *, queue: str, **kw: Any) -> dict:
        return await self.call("dlq", queue=queue, **kw)

    async def transaction(self, body: dict) -> dict:
        return await self.call("transaction", body=body)

    async def timers_apply(self, body: Any) -> list[dict]:
        return await self.call("timers_apply", body=body)

    async def timer_cancel(self, queue: str, timer_key: str, txn: str | None = None) -> dict:
        return await self.call("timer_cancel", queue=queue, timer_key=timer_key, txn=txn)

    async def timer_peek(self, queue: str, timer_key: str) -> dict:
        return await self.call("timer_peek", queue=queue, timer_key=timer_key)

    async def timers_list(
        self, queue: str, *, after: str | None = None, limit: int | None = None
    ) -> dict:
        return await self.call("timers_list", queue=queue, after=after, limit=limit)

    async def timers_count(self, queue: str, prefix: str) -> dict:
        return await self.call("timers_count", queue=queue, prefix=prefix)

    async def switches_get(self) -> dict:
        return await self.call("switches_get")

    async def switches_set(self, changes: dict) -> dict:
        return await self.call("switches_set", changes=changes)

    async def queues_overview(self) -> dict:
        return await self.call("queues_overview")

    async def queue_summary(self, queue: str) -> dict:
        return await self.call("queue_summary", queue=queue)

    async def overview(self) -> dict:
        return await self.call("overview")

    async def timers_histogram(self, queue: str, window: str | None) -> dict:
        return await self.call("timers_histogram", queue=queue, window=window)

    async def timer_fire_now(self, queue: str, timer_key: str) -> dict:
        return await self.call("timer_fire_now", queue=queue, timer_key=timer_key)

    async def timers_cancel_prefix(
        self, queue: str, prefix: str, *, limit: int | None = None
    ) -> dict:
        return await self.call("timers_cancel_prefix", queue=queue, prefix=prefix, limit=limit)

    async def dlq_replay(self, items: Any, mode: Any, *, delay_ms: Any = None) -> dict:
        return await self.call("dlq_replay", items=items, mode=mode, delay_ms=delay_ms)

    async def dlq_delete(self, items: Any) -> dict:
        return await self.call("dlq_delete", items=items)
