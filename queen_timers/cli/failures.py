"""Failures a person can act on: one line each, naming the cause and the setting to change.

`queen` prints `queen: <line>` on stderr and exits non-zero, with no traceback (`--log-level
DEBUG` adds it). A failure not named here is a bug of ours: it gets a line too, and the advice
to rerun with DEBUG for the traceback.
"""

from __future__ import annotations

import errno
import socket

import asyncpg

from ..crypto import EncryptionKeyError
from ..db.embedded import DataDirError, EmbeddedNotRunning
from ..db.pool import ServerVersionError
from ..db.url import BadDatabaseUrl, Target
from ..errors import QueenError
from ..service import SchemaMissing
from ..settings import SettingRefused

__all__ = ["ListenFailed", "Refusal", "explain"]

_URL = "QUEEN_DATABASE_URL (--database-url)"


class Refusal(Exception):
    """A command refuses with a message for a person; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


class ListenFailed(Exception):
    """A transport could not listen; `flag` is the setting that moves it."""

    def __init__(self, transport: str, address: str, flag: str, cause: OSError):
        self.transport, self.address, self.flag, self.cause = transport, address, flag, cause
        super().__init__(str(cause))

    def __str__(self) -> str:
        why = (
            "the address is already in use"
            if self.cause.errno == errno.EADDRINUSE
            else (self.cause.strerror or str(self.cause))
        )
        return (
            f"the {self.transport} transport cannot listen on {self.address}: {why}; pass "
            f"another {self.flag}, or stop what listens there"
        )


def _connect_failure(exc: OSError, target: Target | None) -> str:
    where = f"PostgreSQL at {target}" if target else "PostgreSQL"
    if isinstance(exc, socket.gaierror):
        host = target.host if target else "the host"
        return f"the host name {host} of {_URL} does not resolve ({exc.strerror})"
    refused = isinstance(exc, ConnectionRefusedError) or "Connect call failed" in str(exc)
    if refused or exc.errno == errno.ECONNREFUSED:
        return f"{where} refuses connections; start it, or fix the host and port in {_URL}"
    if isinstance(exc, TimeoutError):
        return f"{where} did not answer in time; check the host and port in {_URL}"
    return f"cannot connect to {where}: {exc.strerror or exc}; check {_URL}"


def explain(exc: BaseException, target: Target | None = None) -> str | None:
    """The one line for a failure a person can act on, or None for a bug. `target` is where
    the database URL points, when there is one."""
    if isinstance(exc, Refusal | DataDirError | EmbeddedNotRunning | SchemaMissing):
        return str(exc)
    # Their messages name the setting.
    if isinstance(exc, SettingRefused | EncryptionKeyError | ListenFailed):
        return str(exc)
    if isinstance(exc, BadDatabaseUrl):
        return f"{_URL} is malformed: {exc}"
    if isinstance(exc, ServerVersionError):
        return f"{exc}; point {_URL} at a newer server"
    if isinstance(
        exc, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
    ):
        return (
            f"PostgreSQL at {target} refused the login: {exc}; fix the user or password in {_URL}"
        )
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return f"PostgreSQL at {target}: {exc}; fix the database name in {_URL}"
    if isinstance(exc, asyncpg.TooManyConnectionsError):
        return f"PostgreSQL at {target} has no connection to spare: {exc}"
    if isinstance(exc, asyncpg.CannotConnectNowError):
        return f"PostgreSQL at {target} is starting or stopping: {exc}; try again"
    if isinstance(exc, QueenError):
        return f"{exc.reason}: {exc.detail}" if exc.detail else exc.reason
    if isinstance(exc, OSError):
        return _connect_failure(exc, target)
    return None
