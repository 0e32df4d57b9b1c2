"""The one error taxonomy: a machine-readable code clients branch on, prose for people.

Every refusal the service makes is a QueenError. Transports render it as the flat envelope
{"error": code, "reason": reason, "detail": detail} with `status` (an HTTP status, reused by
non-HTTP transports as a class of failure) and an optional Retry-After.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SQLSTATES", "QueenError", "TimerRefused", "refusal"]


class QueenError(Exception):
    def __init__(
        self,
        code: str,
        reason: str | None = None,
        detail: str | None = None,
        status: int = 400,
        retry_after: int | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(detail or reason or code)
        self.code = code
        self.reason = reason if reason is not None else code
        self.detail = detail if detail is not None else (reason or code)
        self.status = status
        self.retry_after = retry_after
        self.extra = extra or {}

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "reason": self.reason, "detail": self.detail, **self.extra}

    def __repr__(self) -> str:
        return f"QueenError({self.code!r}, {self.reason!r}, {self.detail!r}, status={self.status})"


# The timers' value rules live in the database (migrations/025, queen._log_timers_refusal_v1),
# for the wire and the SQL API alike. A refusal raises with the SQLSTATE of its class and the
# message 'QTIMER <reason>: <text>'. SQLSTATE -> (the wire's error code, HTTP status): the table
# of docs/guides/sql-api.md.
SQLSTATES: dict[str, tuple[str, int]] = {
    "22023": ("timers_bad_request", 400),
    "22008": ("timer_horizon_exceeded", 403),
    "22001": ("payload_too_large", 413),
    "42501": ("timers_forbidden", 403),
    "55000": ("timers_disabled", 503),
    "54000": ("timers_quota_exceeded", 403),  # the brokers' measured cap (027)
}
_MESSAGE = re.compile(r"^QTIMER ([a-z0-9_]+): (.*)$", re.S)


class TimerRefused(QueenError):
    """The database refused a timer op by one of its rules; `sqlstate` is the error's SQLSTATE."""

    def __init__(self, sqlstate: str, code: str, reason: str, detail: str, status: int):
        super().__init__(code, reason, detail, status)
        self.sqlstate = sqlstate


def refusal(sqlstate: str | None, message: str) -> TimerRefused | None:
    """The refusal a database error stands for, or None when it is not one of the rules'."""
    m = _MESSAGE.match(message or "")
    if sqlstate not in SQLSTATES or m is None:
        return None
    code, status = SQLSTATES[sqlstate]
    return TimerRefused(sqlstate, code, m.group(1), m.group(2), status)
