"""Shape checks shared by every surface: names, payload sizes."""

from __future__ import annotations

from .errors import QueenError

__all__ = ["MAX_NAME_CHARS", "check_name", "payload_too_large"]

MAX_NAME_CHARS = 255  # queue and partition names; queen.queues/log_partitions enforce it too


def check_name(value: object, what: str, reason: str) -> str:
    """A queue or partition name: a non-empty string, at most 255 characters, no control
    characters (they break logs, URLs and the catch-all routes)."""
    if not isinstance(value, str) or not value:
        raise QueenError("bad_request", reason, f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_CHARS:
        raise QueenError(
            "bad_request", reason, f"{what} is longer than {MAX_NAME_CHARS} characters"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise QueenError("bad_request", reason, f"{what} contains a control character")
    return value


def payload_too_large(size: int, limit: int, reason: str = "payload_too_large") -> QueenError:
    return QueenError(
        "payload_too_large", reason, f"payload is {size} bytes; the limit is {limit}", 413
    )
