"""Queue configuration: validate the client's camelCase options, store them, answer with the
effective configuration (client-wire §3).

Validation happens entirely before the database is touched, so a refused configure writes
nothing. Options the log does not enforce (priority, ttl, maxSize, ...) are accepted and
stored, the way the reference stores them.
"""

from __future__ import annotations

from typing import Any

from ..db import Q
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name

__all__ = ["DEFAULTS", "OPTIONS", "configure_queue", "options_to_wire"]

_INT32_MAX = 2**31 - 1

# camelCase wire key -> (column, type, minimum). Defaults live in 001 (DEFAULTS mirrors them;
# a test checks the two agree).
OPTIONS: dict[str, tuple[str, type, int]] = {
    "leaseTime": ("lease_time", int, 1),
    "retryLimit": ("retry_limit", int, 0),
    "priority": ("priority", int, 0),
    "delayedProcessing": ("delayed_processing", int, 0),
    "windowBuffer": ("window_buffer", int, 0),
    "maxSize": ("max_size", int, 0),
    "retentionSeconds": ("retention_seconds", int, 0),
    "completedRetentionSeconds": ("completed_retention_seconds", int, 0),
    "retryDelay": ("retry_delay", int, 0),
    "ttl": ("ttl", int, 0),
    "maxWaitTimeSeconds": ("max_wait_time_seconds", int, 0),
    "minPopWaitTime": ("min_pop_wait_time", int, 0),
    "dedupWindowSeconds": ("dedup_window_seconds", int, 0),
    "retentionSinkHold": ("retention_sink_hold", int, 0),
    "retentionSinkHoldMaxSeconds": ("retention_sink_hold_max_seconds", int, 0),
    "encryptionEnabled": ("encryption_enabled", bool, 0),
    "deadLetterQueue": ("dead_letter_queue", bool, 0),
    "dlqAfterMaxRetries": ("dlq_after_max_retries", bool, 0),
    "retentionEnabled": ("retention_enabled", bool, 0),
}

DEFAULTS: dict[str, Any] = {
    "lease_time": 60,
    "retry_limit": 3,
    "priority": 0,
    "delayed_processing": 0,
    "window_buffer": 0,
    "max_size": 0,
    "retention_seconds": 0,
    "completed_retention_seconds": 0,
    "retry_delay": 0,
    "ttl": 0,
    "max_wait_time_seconds": 0,
    "min_pop_wait_time": 0,
    "dedup_window_seconds": 3600,
    "retention_sink_hold": 0,
    "retention_sink_hold_max_seconds": 604800,
    "encryption_enabled": False,
    "dead_letter_queue": True,
    "dlq_after_max_retries": True,
    "retention_enabled": False,
}

_COLUMN_TO_WIRE = {col: key for key, (col, _, _) in OPTIONS.items()}


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def parse_options(options: Any) -> dict[str, Any]:
    """camelCase options -> {column: value}; refuses unknown keys and wrong types."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise _bad("configure_bad_options", "options must be an object")
    out: dict[str, Any] = {}
    for key, value in options.items():
        spec = OPTIONS.get(key)
        if spec is None:
            raise _bad(
                "configure_unknown_option",
                f"unknown queue option {key!r}; accepted: {sorted(OPTIONS)}",
            )
        col, typ, minimum = spec
        if typ is bool:
            if not isinstance(value, bool):
                raise _bad("configure_bad_option", f"option {key!r} must be a boolean")
        else:
            # bool is a subclass of int in Python; true is not a lease time.
            if not isinstance(value, int) or isinstance(value, bool):
                raise _bad("configure_bad_option", f"option {key!r} must be an integer")
            if value < minimum or value > _INT32_MAX:
                raise _bad(
                    "configure_bad_option",
                    f"option {key!r} must be between {minimum} and {_INT32_MAX}",
                )
        out[col] = value
    return out


def options_to_wire(row: dict[str, Any]) -> dict[str, Any]:
    return {wire: row[col] for col, wire in _COLUMN_TO_WIRE.items() if col in row}


async def configure_queue(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    options: Any,
    *,
    namespace: Any = None,
    task: Any = None,
    mode: str = "merge",
) -> dict[str, Any]:
    queue = check_name(queue, "queue", "configure_bad_queue")
    for what, v in (("namespace", namespace), ("task", task)):
        if v is not None and (not isinstance(v, str) or "\x00" in v):
            raise _bad("configure_bad_" + what, f"{what} must be a string (no NUL) or null")
    if mode not in ("merge", "replace"):
        raise _bad("configure_bad_mode", "mode must be 'merge' or 'replace'")
    cols = parse_options(options)
    if mode == "replace":
        cols = {**DEFAULTS, **cols}
    if cols.get("encryption_enabled") and rt.cipher is None:
        raise QueenError(
            "encryption_unavailable",
            "encryption_key_missing",
            "encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker; none is "
            "configured, and the queue would store plaintext",
            400,
        )
    async with rt.pool.acquire() as conn:
        row = await conn.fetchval(Q.configure_queue, ident.tenant, queue, namespace, task, cols)
    return {
        "configured": True,
        "queueId": row["id"],
        "partitionId": None,
        "queue": queue,
        "namespace": row["namespace"],
        "task": row["task"],
        "storage": "segments",
        "options": options_to_wire(row),
    }
