"""queen-tcp: a low-latency transport of queen-timers, msgpack frames over TCP.

Registered under the entry-point group `queen_timers.transports` as `tcp`. The wire is described in
queen_tcp.protocol; a client ships in queen_tcp.client (TcpClient).

The server is an asyncio.Protocol (loop.create_server) for latency: a request costs one
data_received slice of a buffer, one asyncio task and one transport.write, with no extra
event-loop turn per receive or answer. A stream-based server measured a p50 above HTTP's for
one-op schedules (2026-11-30, bench/RESULTS.md "Measurements the code cites").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from queen_timers.errors import QueenError
from queen_timers.identity import Authenticator, Identity
from queen_timers.service import Queen
from queen_timers.settings import Settings, at_least, between, host_name, setting
from queen_timers.transport import call, own_settings, warn_if_open

from .protocol import (
    HEADER,
    OK,
    PROTOCOL_VERSION,
    BadFrame,
    decode_request,
    encode_frame,
)

__all__ = ["TcpSettings", "TcpTransport", "__version__"]

__version__ = "0.1.0"

log = logging.getLogger("queen_tcp")


@dataclasses.dataclass(frozen=True)
class TcpSettings:
    """The TCP transport's settings (`queen serve --help` lists them)."""

    tcp_host: str = setting(
        "QUEEN_TCP_HOST",
        "127.0.0.1",
        "Address the TCP transport listens on (beyond loopback: configure JWT auth).",
        group="tcp",
        check=host_name(),
    )
    tcp_port: int = setting(
        "QUEEN_TCP_PORT",
        6633,
        "Port of the TCP transport (0: any free port).",
        group="tcp",
        check=between(0, 65535, "a TCP port; 0: any free one"),
    )
    tcp_max_frame_bytes: int = setting(
        "QUEEN_TCP_MAX_FRAME_BYTES",
        64 * 1024 * 1024,
        "Largest request frame; a larger one is refused (413) and the connection closed.",
        group="tcp",
        check=between(1, 2**32 - 1, "a frame's length prefix is 4 bytes"),
    )
    tcp_max_inflight: int = setting(
        "QUEEN_TCP_MAX_INFLIGHT",
        256,
        "Requests one connection may have in progress; past it the server stops reading "
        "(backpressure). A choice, not measured: 16 benchmark clients never reach it.",
        group="tcp",
        check=at_least(1),
    )


def _refusal(err: QueenError) -> dict[str, Any]:
    body = err.to_dict()
    if err.retry_after is not None:
        body["retryAfter"] = err.retry_after
    return body


class _Caller:
    """Who speaks on one connection: the identity its hello established, and until when.

    The token is verified once, at hello, but a connection may outlive it: every request
    compares the clock with the identity's `expires_at` (the verified token's `exp`; one float
    comparison) and, once it has passed, is refused with exactly what the Authenticator answers
    for that token now, i.e. what hello and every HTTP request answer for an expired token
    (401 unauthorized / invalid_token). Requests accepted before the expiry run to completion;
    the connection stays open so their answers still arrive, and the client may close it and
    reconnect with a fresh token.
    """

    __slots__ = ("_refusal", "_token", "ident")

    def __init__(self, ident: Identity, token: str | None):
        self.ident = ident
        self._token = token
        self._refusal: QueenError | None = None

    def refusal(self, auth: Authenticator) -> QueenError | None:
        """None while the identity holds, else the refusal to answer (an expiry is final)."""
        if self._refusal is not None:
            return self._refusal
        expires = self.ident.expires_at
        if expires is None or time.time() < expires:
            return None
        try:
            auth.identify(self._token)
        except QueenError as err:
            self._refusal = err
        return self._refusal


class TcpTransport:
    name = "tcp"
    settings_class = TcpSettings

    def __init__(self, settings: Settings | None = None):
        cfg = own_settings(TcpSettings, settings)
        self.host = cfg.tcp_host
        self.port = cfg.tcp_port
        self.max_frame = cfg.tcp_max_frame_bytes
        self.max_inflight = cfg.tcp_max_inflight
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._queen: Queen | None = None
        self._auth: Authenticator | None = None

    async def start(self, queen: Queen) -> None:
        if self._server is not None:
            return
        self._queen = queen
        self._auth = Authenticator(queen.settings)  # one identity policy per broker
        warn_if_open(log, "TCP transport", self.host, self._auth)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port)
        if self.port == 0:
            ports = {s.getsockname()[1] for s in self._server.sockets}
            self.port = self._server.sockets[0].getsockname()[1]
            if len(ports) > 1:  # a name of several addresses: listen on one port on all
                self._server.close()
                self._server = await loop.create_server(
                    lambda: _Connection(self), self.host, self.port
                )
        log.info("TCP transport listening on %s:%s", self.host, self.port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()  # no new connections
        tasks: list[asyncio.Task[None]] = []
        for conn in list(self._connections):
            tasks.extend(conn.shut())  # cancels its requests, closes its socket
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    # -- one request -----------------------------------------------------------------------------
    def _hello(self, req: tuple[int, str, Any]) -> tuple[_Caller | None, list[Any]]:
        """The caller hello establishes (None: refused) and the answer to send."""
        rid, op, body = req
        if op != "hello":
            return None, [
                rid,
                400,
                _refusal(
                    QueenError(
                        "bad_request", "hello_required", "the first request must be hello", 400
                    )
                ),
            ]
        token = body.get("token") if isinstance(body, dict) else None
        try:
            assert self._auth is not None
            ident = self._auth.identify(token)
        except QueenError as err:
            return None, [rid, err.status, _refusal(err)]
        # Without authentication the token is not read: the anonymous identity never expires.
        return _Caller(ident, token), [
            rid,
            OK,
            {
                "server": "queen-tcp",
                "protocol": PROTOCOL_VERSION,
                "tenant": str(ident.tenant),
                "subject": ident.subject,
                "admin": ident.admin,
            },
        ]

    async def _serve_one(
        self, conn: _Connection, caller: _Caller, req: tuple[int, str, Any]
    ) -> None:
        rid, op, body = req
        try:
            assert self._auth is not None
            refused = caller.refusal(self._auth)
            if refused is not None:
                frame = [rid, refused.status, _refusal(refused)]
            else:
                frame = [rid, OK, await self._dispatch(caller.ident, op, body)]
        except QueenError as err:
            frame = [rid, err.status, _refusal(err)]
        except Exception:
            log.exception("unhandled error in %s", op)
            frame = [
                rid,
                500,
                {
                    "error": "internal_error",
                    "reason": "internal_error",
                    "detail": "unexpected server error (logged)",
                },
            ]
        await conn.send(frame)

    async def _dispatch(self, ident: Identity, op: str, body: Any) -> Any:
        assert self._queen is not None
        return await call(self._queen, ident, op, body)


class _Connection(asyncio.Protocol):
    """One connection, served from protocol callbacks: data_received cuts length-prefixed
    frames out of a buffer, each request runs as its own task and writes its answer when it
    completes (pipelining, answers out of order), connection_lost cancels what is still running
    (nobody will read those answers, long-polls included)."""

    __slots__ = (
        "_buf",
        "_caller",
        "_closing",
        "_drained",
        "_held",
        "_t",
        "_tasks",
        "_transport",
        "_write_paused",
    )

    def __init__(self, t: TcpTransport):
        self._t = t
        self._transport: asyncio.Transport  # set by connection_made, which asyncio calls first
        self._buf = bytearray()
        self._caller: _Caller | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._held = False  # reading paused: max in-flight requests reached
        self._closing = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None

    # -- protocol callbacks ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._t._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._t._connections.discard(self)
        for task in self._tasks:
            task.cancel()
        self._buf.clear()
        self._wake_writers(ConnectionError("connection lost"))

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._buf += data
        try:
            self._parse()
        except Exception:
            log.exception("TCP connection failed")
            self._close()

    def eof_received(self) -> bool:
        return False  # the peer is done: close, and connection_lost cancels its requests

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writers(None)

    # -- frames ----------------------------------------------------------------------------------
    def _parse(self) -> None:
        buf, t = self._buf, self._t
        limit, inflight = t.max_frame, t.max_inflight
        off, end = 0, len(buf)
        try:
            while end - off >= HEADER:
                if self._caller is not None and len(self._tasks) >= inflight:
                    # Backpressure: stop reading until a request completes.
                    if not self._held:
                        self._held = True
                        self._transport.pause_reading()
                    break
                n = int.from_bytes(buf[off : off + HEADER], "big")
                if n > limit:
                    self._fail(
                        413,
                        QueenError(
                            "payload_too_large",
                            "frame_too_large",
                            f"the frame is {n} bytes; the limit is {limit}",
                            413,
                        ),
                    )
                    return
                if end - off - HEADER < n:
                    break
                start = off + HEADER
                off = start + n
                try:
                    req = decode_request(buf[start:off])
                except BadFrame as bad:
                    self._write([bad.rid, 400, _refusal(bad.error)])
                    if self._caller is None:  # no hello yet: nothing to go on with
                        self._close()
                        return
                    continue
                if self._caller is None:
                    caller, answer = t._hello(req)
                    self._write(answer)
                    if caller is None:
                        self._close()
                        return
                    self._caller = caller
                    continue
                task = asyncio.get_running_loop().create_task(t._serve_one(self, self._caller, req))
                self._tasks.add(task)
                task.add_done_callback(self._done)
        finally:
            if off and not self._closing:
                del buf[:off]

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._held and not self._closing and len(self._tasks) < self._t.max_inflight:
            self._held = False
            try:
                self._parse()  # what arrived meanwhile
            except Exception:
                log.exception("TCP connection failed")
                self._close()
                return
            if not self._held and not self._closing:
                self._transport.resume_reading()

    # -- answers ---------------------------------------------------------------------------------
    def _write(self, frame: list[Any]) -> None:
        if not self._closing:
            self._transport.write(encode_frame(frame))

    async def send(self, frame: list[Any]) -> None:
        if self._closing:
            return  # the answer has nobody to go to
        self._transport.write(encode_frame(frame))
        if self._write_paused:  # the peer reads slower than we answer: wait for it
            if self._drained is None or self._drained.done():
                self._drained = asyncio.get_running_loop().create_future()
            try:
                await asyncio.shield(self._drained)
            except ConnectionError:
                pass

    def _wake_writers(self, exc: BaseException | None) -> None:
        fut, self._drained = self._drained, None
        if fut is not None and not fut.done():
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)
                fut.exception()  # retrieved: nobody may be waiting any more

    def _fail(self, status: int, err: QueenError) -> None:
        """A protocol error: answer it (id 0), then close, cancelling what is in flight."""
        self._write([0, status, _refusal(err)])
        self._close()

    def _close(self) -> None:
        if not self._closing:
            self._closing = True
            for task in self._tasks:
                task.cancel()
            self._transport.close()  # flushes what is buffered first

    def shut(self) -> list[asyncio.Task[None]]:
        """Stop the connection (the transport stops): its requests, to await."""
        tasks = list(self._tasks)
        self._close()
        return tasks
