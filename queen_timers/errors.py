"""The one error taxonomy: a machine-readable code clients branch on, prose for people.

Every refusal the service makes is a QueenError. Transports render it as the flat envelope
{"error": code, "reason": reason, "detail": detail} with `status` (an HTTP status, reused by
non-HTTP transports as a class of failure) and an optional Retry-After.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QueenError"]


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
