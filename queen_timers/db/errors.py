"""What a database failure means, decided in one place for every caller.

A database call can raise three kinds of failure, told apart by SQLSTATE class:

- transient: serialization failure (40001), deadlock (40P01), connection exceptions (class 08),
  insufficient resources (53), operator intervention (57: a cancelled statement, a shutdown),
  system errors (58), and no SQLSTATE at all (the connection went away: OSError, a timeout,
  asyncpg's InterfaceError, or its InternalClientError, seen when a backend is terminated just
  as its connection goes back to the pool). Retrying later succeeds; a request answers 503
  with Retry-After (`unavailable`) and a timer's fire spends no attempt on it.
- config: class 42 (a missing or malformed procedure): the deployment is wrong, not the call.
- permanent: everything else (22xxx data, 23xxx constraints, P0001 raised by a procedure...).

Callers catch `DB_ERRORS`, classify with `classify_exception`, and map by the class: the
service's log calls and the quota gate answer a transient failure with `unavailable` and let
any other propagate as a bug; the timer calls map into the timers' codes (timers.ops.db_error,
which also names the rules' refusals by their SQLSTATE: errors.refusal); the fire decides by
the class whether an attempt is spent; the outage log tells a lost link once (`link_lost`).
"""

from __future__ import annotations

import asyncio
import enum
import socket

import asyncpg

from ..errors import QueenError

__all__ = [
    "DB_ERRORS",
    "FailureClass",
    "classify",
    "classify_exception",
    "in_doubt",
    "link_lost",
    "never_connected",
    "sqlstate_of",
    "unavailable",
    "write_in_doubt",
]

# Everything a database call may raise that is the database's or the link's, not a bug of
# ours. InternalClientError is not a PostgresError: asyncpg's word for a connection whose
# protocol it no longer trusts ("cannot switch to state 12; another operation (2) is in
# progress" on the call after a terminated backend went back to the pool).
DB_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
)

# Failures without a SQLSTATE that a retry on a new connection gets past.
_LINK_ERRORS = (OSError, asyncpg.InterfaceError, asyncpg.InternalClientError)


class FailureClass(str, enum.Enum):
    TRANSIENT = "transient"
    CONFIG = "config"
    PERMANENT = "permanent"


_TRANSIENT_CODES = frozenset({"40001", "40P01"})
_TRANSIENT_CLASSES = frozenset({"08", "53", "57", "58"})
# A lost link: class 08, and 57P0x, the server ending the session (57014, a statement
# timeout, is the statement's own failure, not the link's).
_LINK_STATES = ("08", "57P")


def classify(sqlstate: str | None) -> FailureClass:
    """Case-sensitive on purpose: SQLSTATEs are upper-case; anything else is not one we know."""
    if sqlstate is None:
        return FailureClass.TRANSIENT
    if not isinstance(sqlstate, str) or len(sqlstate) != 5:
        return FailureClass.PERMANENT
    if sqlstate in _TRANSIENT_CODES or sqlstate[:2] in _TRANSIENT_CLASSES:
        return FailureClass.TRANSIENT
    if sqlstate[:2] == "42":
        return FailureClass.CONFIG
    return FailureClass.PERMANENT


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error; None for connection-level failures (OSError, a closed
    connection, a timeout)."""
    code = getattr(exc, "sqlstate", None)
    return code if isinstance(code, str) and code else None


def classify_exception(exc: BaseException) -> FailureClass:
    """By SQLSTATE when the database gave one; a lost connection, a socket error or a timeout is
    transient; any other exception (a bug, a codec error) is permanent, so it cannot loop for
    ever without spending attempts."""
    code = sqlstate_of(exc)
    if code is not None:
        return classify(code)
    if isinstance(exc, (*_LINK_ERRORS, asyncio.TimeoutError)):
        return FailureClass.TRANSIENT
    return FailureClass.PERMANENT


def link_lost(exc: BaseException) -> bool:
    """Is the connection itself gone (not only the statement failed)?"""
    if isinstance(exc, _LINK_ERRORS):
        return True
    return (sqlstate_of(exc) or "").startswith(_LINK_STATES)


def unavailable(exc: BaseException, code: str, reason: str, what: str) -> QueenError:
    """The answer to a transient failure: 503 `code` with Retry-After 1, which every transport
    renders and every client retries. `what` says what could not be done."""
    return QueenError(
        code,
        reason,
        f"{what}: {str(exc) or type(exc).__name__}",
        503,
        retry_after=1,
    )


def never_connected(exc: BaseException) -> bool:
    """A failure to open a connection (refused, no such host, the server starting up or not
    the kind the URL asks for): nothing was sent on it."""
    return isinstance(
        exc,
        (
            ConnectionRefusedError,
            socket.gaierror,
            asyncpg.TargetServerAttributeNotMatched,
            asyncpg.CannotConnectNowError,
        ),
    )


def write_in_doubt(exc: BaseException) -> bool:
    """Did a write lose its link after it may have been sent?"""
    return link_lost(exc) and not never_connected(exc)


def in_doubt(exc: BaseException, code: str, what: str) -> QueenError:
    """The answer to a write whose connection was lost once the write was on it: it may have
    committed or not, and nothing on this side can tell (a failover, a killed backend, a
    dropped link). 503 `code` with reason `outcome_unknown` and Retry-After 1: the retry with
    the same ops is safe, as a schedule is an upsert by name and a txn reaches the log once
    (the push and the fire both look the txn up in the destination's log first)."""
    return QueenError(
        code,
        "outcome_unknown",
        f"{what}, and its outcome is unknown (it may have committed): retry it with the same "
        f"txn. {str(exc) or type(exc).__name__}",
        503,
        retry_after=1,
    )
