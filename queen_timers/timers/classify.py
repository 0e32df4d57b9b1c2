"""The one SQLSTATE classifier of the fire (a pure function).

Transient: serialization failure (40001), deadlock (40P01), connection exceptions (class 08),
insufficient resources (53), operator intervention (57, e.g. a cancelled statement or a
shutdown), system errors (58), and no SQLSTATE at all (the connection went away). A transient
failure spends no attempt: five minutes of database trouble must not dead-letter every timer.
Config: class 42 (a missing or malformed procedure): the deployment is wrong, not the timer.
Permanent: everything else (22xxx data, 23xxx constraints, P0001 raised by a procedure...).
"""

from __future__ import annotations

import asyncio
import enum

import asyncpg

__all__ = ["FailureClass", "classify", "classify_exception", "sqlstate_of"]


class FailureClass(str, enum.Enum):
    TRANSIENT = "transient"
    CONFIG = "config"
    PERMANENT = "permanent"


_TRANSIENT_CODES = frozenset({"40001", "40P01"})
_TRANSIENT_CLASSES = frozenset({"08", "53", "57", "58"})


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
    """The SQLSTATE of an asyncpg error; None for connection-level failures (OSError, a closed
    connection, a timeout), which therefore classify as transient."""
    code = getattr(exc, "sqlstate", None)
    return code if isinstance(code, str) and code else None


def classify_exception(exc: BaseException) -> FailureClass:
    """SQLSTATE when the database gave one; a lost connection, a socket error, a timeout or a
    connection whose protocol asyncpg no longer trusts (InternalClientError: seen when a
    backend is terminated just as its connection goes back to the pool) is transient; any
    other exception (a bug, a codec error) is permanent, so it cannot loop for ever without
    spending attempts."""
    code = sqlstate_of(exc)
    if code is not None:
        return classify(code)
    if isinstance(
        exc, (OSError, asyncio.TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError)
    ):
        return FailureClass.TRANSIENT
    return FailureClass.PERMANENT
