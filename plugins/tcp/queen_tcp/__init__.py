"""queen-tcp: a low-latency transport of queen-timers, msgpack frames over TCP (anyio).

Registered under the entry-point group `queen.transports` as `tcp`. The wire is described in
queen_tcp.protocol; a client ships in queen_tcp.client (TcpClient).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from typing import Any

import anyio
import msgspec
from anyio.abc import SocketAttribute

from queen.errors import QueenError
from queen.identity import Authenticator, Identity
from queen.settings import Setting, Settings

from .protocol import (DECODER, HEADER, OK, OPERATIONS, PROTOCOL_VERSION, decode_length,
                       encode_frame)

__all__ = ["TcpTransport", "SETTINGS"]

log = logging.getLogger("queen.tcp")

SETTINGS: list[Setting] = [
    Setting("tcp_host", "QUEEN_TCP_HOST", "127.0.0.1",
            "Address the TCP transport listens on (beyond loopback: configure JWT auth).",
            str, "tcp"),
    Setting("tcp_port", "QUEEN_TCP_PORT", 6633,
            "Port of the TCP transport (0: any free port).", int, "tcp"),
    Setting("tcp_max_frame_bytes", "QUEEN_TCP_MAX_FRAME_BYTES", 64 * 1024 * 1024,
            "Largest request frame; a larger one is refused (413) and the connection closed.",
            int, "tcp"),
    Setting("tcp_max_inflight", "QUEEN_TCP_MAX_INFLIGHT", 256,
            "Requests one connection may have in progress; past it the server stops reading "
            "(backpressure). A choice, not measured: 16 benchmark clients never reach it.",
            int, "tcp"),
]


def _own(settings: Settings) -> dict[str, Any]:
    out = {}
    for s in SETTINGS:
        try:
            out[s.name] = getattr(settings, s.name)
        except AttributeError:  # a Settings built without our declarations
            out[s.name] = s.resolve({}, os.environ)
    return out


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refusal(err: QueenError) -> dict[str, Any]:
    body = err.to_dict()
    if err.retry_after is not None:
        body["retryAfter"] = err.retry_after
    return body


_SERVER_ONLY_PARAMS = frozenset({"now"})


def _report_death(task: asyncio.Task) -> None:
    # Connection handlers never raise, so this is a bug or the listener's socket failing;
    # either way the transport no longer accepts and the operator must hear of it.
    if not task.cancelled() and task.exception() is not None:
        log.error("TCP transport stopped accepting", exc_info=task.exception())


class _Closed(Exception):
    pass


class _Caller:
    """Who speaks on one connection: the identity its hello established, and until when.

    The token is verified once, at hello, but a connection may outlive it: every request
    compares the clock with the token's `exp` (one float comparison) and, once it has passed,
    is refused with exactly what the Authenticator answers for that token now, i.e. what hello
    and every HTTP request answer for an expired token (401 unauthorized / invalid_token).
    Requests accepted before the expiry run to completion; the connection stays open so their
    answers still arrive, and the client may close it and reconnect with a fresh token.
    """

    __slots__ = ("ident", "_token", "_expires", "_refusal")

    def __init__(self, ident: Identity, token: str | None, expires: float | None):
        self.ident = ident
        self._token = token
        self._expires = expires
        self._refusal: QueenError | None = None

    def refusal(self, auth: Authenticator) -> QueenError | None:
        """None while the identity holds, else the refusal to answer (an expiry is final)."""
        if self._refusal is not None:
            return self._refusal
        if self._expires is None or time.time() < self._expires:
            return None
        try:
            auth.identify(self._token)
        except QueenError as err:
            self._refusal = err
        return self._refusal


def _expiry(token: str) -> float | None:
    """The `exp` of a token the Authenticator has just accepted (so its signature holds and
    `exp`, when present, is an integer), or None when it never expires."""
    import jwt

    exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
    return None if exp is None else float(int(exp))


# How a conversation ends: the peer left, or we closed on a protocol error.
_GONE = (_Closed, anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
         anyio.ClosedResourceError, ConnectionError)


class TcpTransport:
    name = "tcp"
    settings = SETTINGS

    def __init__(self, settings: Settings | None = None):
        cfg = _own(settings if settings is not None else Settings())
        self.host: str = cfg["tcp_host"]
        self.port: int = cfg["tcp_port"]
        self.max_frame: int = cfg["tcp_max_frame_bytes"]
        self.max_inflight: int = cfg["tcp_max_inflight"]
        self._listener: Any = None
        self._task: asyncio.Task | None = None
        self._queen: Any = None
        self._auth: Authenticator | None = None
        self._params: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    async def start(self, queen: Any) -> None:
        if self._task is not None:
            return
        self._queen = queen
        self._auth = Authenticator(queen.settings)  # one identity policy per broker
        if not self._auth.enabled and not _is_loopback(self.host):
            log.warning("TCP transport listens on %s without authentication: every caller is "
                        "the default tenant with admin rights; set QUEEN_JWT_SECRET or "
                        "QUEEN_JWT_PUBLIC_KEY", self.host)
        for op in OPERATIONS:
            fn = getattr(queen, op, None)
            if fn is not None:
                # Minus ident, and minus `now`: the service's clock override exists for tests
                # and must not be reachable from the network.
                params = [p for p in list(inspect.signature(fn).parameters.values())[1:]
                          if p.name not in _SERVER_ONLY_PARAMS]
                kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
                self._params[op] = (
                    frozenset(p.name for p in params if p.kind in kinds),
                    frozenset(p.name for p in params
                              if p.kind in kinds and p.default is inspect.Parameter.empty))
        self._listener = await anyio.create_tcp_listener(local_host=self.host,
                                                         local_port=self.port)
        if self.port == 0:
            self.port = self._listener.extra(SocketAttribute.local_port)
        # The listener is bound: connections queue in the backlog until serve() runs.
        self._task = asyncio.create_task(self._listener.serve(self._connection),
                                         name="queen-tcp-serve")
        self._task.add_done_callback(_report_death)
        log.info("TCP transport listening on %s:%s", self.host, self.port)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()  # cancels every connection handler too (serve's task group)
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.aclose()

    # -- one connection ------------------------------------------------------------------------
    async def _connection(self, stream: Any) -> None:
        # Nothing may escape this handler: an exception here would end the listener's task
        # group, and with it every other connection.
        try:
            async with stream:
                await self._converse(stream)
        except _GONE:
            pass
        except Exception:  # noqa: BLE001
            log.exception("TCP connection failed")

    async def _converse(self, stream: Any) -> None:
        reader = _FrameReader(stream, self.max_frame)
        lock = anyio.Lock(fast_acquire=True)  # uncontended: no trip through the loop

        async def send(frame: list) -> None:
            data = encode_frame(frame)
            async with lock:
                await stream.send(data)

        caller = await self._hello(reader, send)
        if caller is None:
            return
        slots = anyio.Semaphore(self.max_inflight, fast_acquire=True)
        async with anyio.create_task_group() as tg:
            try:
                while True:
                    req = await self._read(reader, send)
                    await slots.acquire()
                    tg.start_soon(self._serve_one, caller, req, send, slots)
            except _GONE:
                # The client went away (or broke the protocol): nobody will read the answers
                # of what is still running, long-polls included.
                tg.cancel_scope.cancel()

    async def _read(self, reader: "_FrameReader", send) -> Any:
        try:
            raw = await reader.next()
        except _FrameTooLarge as exc:
            await send([0, 413, _refusal(QueenError(
                "payload_too_large", "frame_too_large",
                f"the frame is {exc.args[0]} bytes; the limit is {self.max_frame}", 413))])
            raise _Closed from None
        try:
            req = DECODER.decode(raw)
        except msgspec.DecodeError:
            req = None
        if not (isinstance(req, list) and len(req) == 3 and isinstance(req[0], int)
                and isinstance(req[1], str)):
            await send([0, 400, _refusal(QueenError(
                "bad_request", "bad_frame", "a request is [id, op, body] in msgpack", 400))])
            raise _Closed
        return req

    async def _hello(self, reader: "_FrameReader", send) -> _Caller | None:
        rid, op, body = await self._read(reader, send)
        if op != "hello":
            await send([rid, 400, _refusal(QueenError(
                "bad_request", "hello_required", "the first request must be hello", 400))])
            return None
        token = body.get("token") if isinstance(body, dict) else None
        try:
            assert self._auth is not None
            ident = self._auth.identify(token)
        except QueenError as err:
            await send([rid, err.status, _refusal(err)])
            return None
        # Without authentication the token is not read, and the anonymous identity never ends.
        expires = _expiry(token) if self._auth.enabled else None
        await send([rid, OK, {"server": "queen-tcp", "protocol": PROTOCOL_VERSION,
                              "tenant": str(ident.tenant), "subject": ident.subject,
                              "admin": ident.admin}])
        return _Caller(ident, token, expires)

    async def _serve_one(self, caller: _Caller, req: list, send,
                         slots: anyio.Semaphore) -> None:
        rid, op, body = req
        try:
            try:
                assert self._auth is not None
                refused = caller.refusal(self._auth)
                if refused is not None:
                    frame = [rid, refused.status, _refusal(refused)]
                else:
                    frame = [rid, OK, await self._dispatch(caller.ident, op, body)]
            except QueenError as err:
                frame = [rid, err.status, _refusal(err)]
            except Exception:  # noqa: BLE001 - answer the envelope, log the bug
                log.exception("unhandled error in %s", op)
                frame = [rid, 500, {"error": "internal_error", "reason": "internal_error",
                                    "detail": "unexpected server error (logged)"}]
            await send(frame)
        except _GONE:
            pass  # the answer has nobody to go to
        finally:
            slots.release()

    async def _dispatch(self, ident: Identity, op: str, body: Any) -> Any:
        spec = self._params.get(op)
        if spec is None:
            raise QueenError("bad_request", "unknown_operation",
                             f"unknown operation {op!r}", 404)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise QueenError("bad_request", "bad_body", "the body must be a map", 400)
        allowed, required = spec
        # Checked before the call, so a TypeError raised inside the service is a bug (500),
        # never mistaken for the caller's bad arguments.
        if not body.keys() <= allowed or not required <= body.keys():
            raise QueenError("bad_request", "bad_arguments",
                             f"{op} takes {sorted(allowed)} (required: {sorted(required)}); "
                             f"got {sorted(body, key=str)}", 400)  # msgpack keys may be ints
        return await getattr(self._queen, op)(ident, **body)


class _FrameTooLarge(Exception):
    pass


class _FrameReader:
    """Length-prefixed frames from a byte stream. Reads whatever the socket has (many
    pipelined frames arrive in one read) instead of two exact reads per frame: anyio's
    per-receive checkpoints were the largest cost of a small request in a profile
    (2026-11-29, 16 clients of one-op schedules)."""

    def __init__(self, stream: Any, max_frame: int):
        self._stream = stream
        self._max = max_frame
        self._buf = bytearray()

    async def next(self) -> bytes:
        buf = self._buf
        while True:
            if len(buf) >= HEADER:
                n = decode_length(buf[:HEADER])
                if n > self._max:
                    raise _FrameTooLarge(n)
                if len(buf) >= HEADER + n:
                    raw = bytes(buf[HEADER:HEADER + n])
                    del buf[:HEADER + n]
                    return raw
            buf += await self._stream.receive(65536)
