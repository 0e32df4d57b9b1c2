"""TcpClient: a small asyncio client of the queen-tcp wire (see queen_tcp.protocol).

    async with await TcpClient.connect("127.0.0.1", 6633, token=jwt) as c:
        res = await c.timers_apply([{"op": "schedule", "queue": "q", "timerKey": "k",
                                     "payload": "MQ==", "delayMs": 1000, "txn": "t"}])

One connection carries any number of concurrent calls (they are pipelined and paired by id),
so a single client shared by many tasks is the intended use. Its methods mirror
queen.service.Queen minus the identity, which the hello frame's token established. A refusal
raises queen.errors.QueenError with the server's code, reason, detail and status.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from queen.errors import QueenError

from .protocol import DECODER, HEADER, OK, PROTOCOL_VERSION, decode_length, encode_frame

__all__ = ["TcpClient"]


class TcpClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._closed: BaseException | None = None
        self._reading: asyncio.Task | None = None
        self.server: dict[str, Any] = {}

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 6633,
                      token: str | None = None) -> "TcpClient":
        reader, writer = await asyncio.open_connection(host, port)
        client = cls(reader, writer)
        client._reading = asyncio.create_task(client._read_loop(), name="queen-tcp-client")
        try:
            client.server = await client._request(0, "hello", {"token": token,
                                                               "protocol": PROTOCOL_VERSION})
        except BaseException:
            await client.aclose()
            raise
        return client

    async def __aenter__(self) -> "TcpClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            try:
                await self._reading
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._reading = None
        self._fail_all(ConnectionError("client closed"))
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    # -- plumbing --------------------------------------------------------------------------------
    def _fail_all(self, exc: BaseException) -> None:
        if self._closed is None:
            self._closed = exc
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()

    async def _read_loop(self) -> None:
        try:
            while True:
                header = await self._reader.readexactly(HEADER)
                rid, status, body = DECODER.decode(
                    await self._reader.readexactly(decode_length(header)))
                fut = self._pending.pop(rid, None)
                if status != OK:
                    err = QueenError(body.get("error"), body.get("reason"), body.get("detail"),
                                     status, body.get("retryAfter"))
                    if fut is None:  # a connection-level refusal (id 0): fails every call
                        self._fail_all(err)
                        return
                    if not fut.done():
                        fut.set_exception(err)
                elif fut is not None and not fut.done():
                    fut.set_result(body)
        except asyncio.IncompleteReadError:
            self._fail_all(ConnectionError("the server closed the connection"))
        except (ConnectionError, OSError) as exc:
            self._fail_all(exc)

    async def _request(self, rid: int, op: str, body: dict) -> Any:
        if self._closed is not None:
            raise self._closed
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._writer.write(encode_frame([rid, op, body]))
        await self._writer.drain()
        return await fut

    async def call(self, op: str, **body: Any) -> Any:
        """Any service operation by name, with its keyword arguments."""
        return await self._request(next(self._ids), op, body)

    # -- the service, mirrored --------------------------------------------------------------------
    async def configure_queue(self, queue: str, options: dict, *, namespace: str | None = None,
                              task: str | None = None, mode: str = "merge") -> dict:
        return await self.call("configure_queue", queue=queue, options=options,
                               namespace=namespace, task=task, mode=mode)

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

    async def timers_list(self, queue: str, *, after: str | None = None,
                          limit: int | None = None) -> dict:
        return await self.call("timers_list", queue=queue, after=after, limit=limit)

    async def timers_count(self, queue: str, prefix: str) -> dict:
        return await self.call("timers_count", queue=queue, prefix=prefix)

    async def switches_get(self) -> dict:
        return await self.call("switches_get")

    async def switches_set(self, changes: dict) -> dict:
        return await self.call("switches_set", changes=changes)
