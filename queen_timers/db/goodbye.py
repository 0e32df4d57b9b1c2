"""A pooled connection whose server has spoken while it sat idle is closed at once.

When PostgreSQL ends a backend (pg_terminate_backend, a shutdown, idle_session_timeout) it
sends a FATAL ErrorResponse and then closes the socket. asyncpg reads the ErrorResponse of an
idle connection as a protocol error and waits in its "error consume" state for a
ReadyForQuery that never comes; only the end of file, read on a later turn of the event loop,
marks the connection closed. A pool that hands the connection out in between makes the next
statement fail with `InternalClientError: cannot switch to state 12; another operation (2) is
in progress` (tests/timers/test_fire.py reproduces it). Here the connection is terminated the
instant the server speaks out of turn, so the pool connects a fresh one instead.

"Idle" is what the pool says: `acquired` (the pool's setup hook) and `released` (its reset
hook) mark it. A pooled connection receives nothing between a ReadyForQuery and its next
statement, so bytes arriving while idle, or bytes after the last ReadyForQuery of a finished
statement (the FATAL can share a read with the statement's answer), mean the server has
hung up or is about to. The cost is one Python call per read and one comparison per release.
"""

from __future__ import annotations

import asyncio
import logging

from .conn import Conn

__all__ = ["acquired", "released", "watch"]

log = logging.getLogger("queen_timers.db")

# ReadyForQuery without its status byte: 'Z', length 5. Every complete answer ends with it.
_READY = b"Z\x00\x00\x00\x05"


class _Watch(asyncio.Protocol):
    """Sits between the socket and asyncpg's protocol: forwards everything, and terminates
    the connection when the server speaks while the pool holds it idle."""

    __slots__ = ("_conn", "_inner", "_tail", "idle")

    def __init__(self, inner: asyncio.Protocol, conn: Conn) -> None:
        self._inner = inner
        self._conn = conn
        self._tail = _READY + b"I"  # the connection's start-up ended with a ReadyForQuery
        self.idle = True

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)
        self._tail = data if len(data) >= 6 else (self._tail + data)[-6:]
        if self.idle:
            self._conn.terminate()

    def answered(self) -> bool:
        """Did the last bytes received end with a ReadyForQuery (nothing after it)?"""
        return self._tail[-6:-1] == _READY

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def _watch_of(conn: Conn) -> _Watch | None:
    transport = getattr(conn, "_transport", None)
    proto = transport.get_protocol() if transport is not None else None
    return proto if isinstance(proto, _Watch) else None


def watch(conn: Conn) -> None:
    """Put a new pooled connection under watch (the pool's init hook calls this)."""
    transport = getattr(conn, "_transport", None)
    if transport is None or not hasattr(transport, "set_protocol"):
        return  # a transport we cannot sit in front of: asyncpg's own behaviour remains
    transport.set_protocol(_Watch(transport.get_protocol(), conn))


def acquired(conn: Conn) -> None:
    """The pool hands the connection out (its setup hook)."""
    w = _watch_of(conn)
    if w is not None:
        w.idle = False


def released(conn: Conn) -> None:
    """The pool takes the connection back (its reset hook). Bytes after the last
    ReadyForQuery arrived with the statement's answer: the connection is terminated on the
    loop's next turn, before any waiting acquirer can be handed it (the pool wakes that
    acquirer after this hook returns, and its wake-up is queued behind this call)."""
    w = _watch_of(conn)
    if w is None:
        return
    w.idle = True
    if not w.answered():
        asyncio.get_running_loop().call_soon(conn.terminate)
