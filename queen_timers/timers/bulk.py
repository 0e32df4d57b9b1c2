"""Operator actions on pending timers: fire one now, cancel by key prefix in bounded batches.

Both keep the closed status taxonomy. Fire now is a reschedule to the database's now that
keeps the message: message id, txn, payload, partition, producer, attempts and last error stay
(queen.log_timers_fire_now_v1), so the delivered frame is the one that was scheduled and the
fire's txn check still refuses a second copy. Like any reschedule it is refused while
scheduling is paused by the kill switch, and it takes a token of the tenant's write rate (429
rate_limited past it; never the cap: it adds no timer); cancelling by prefix, like any cancel,
is never gated.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

from ..db import Q
from ..db.errors import DB_ERRORS
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from . import locks
from .inspect import check_queue
from .ops import MAX_KEY_BYTES, MAX_PREFIX_BYTES, db_error

__all__ = ["CANCEL_PREFIX_DEFAULT", "CANCEL_PREFIX_MAX", "cancel_prefix", "fire_now"]

# One batch of a cancel by prefix: the default, and the most a call may ask. A batch is one
# statement holding its rows' locks until it commits, so the bound is what keeps a cancel of a
# million keys from holding a million row locks; see bench/RESULTS.md for its latency.
CANCEL_PREFIX_DEFAULT = 1000
CANCEL_PREFIX_MAX = 10000


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("timers_bad_request", reason, detail, 400)


def _text(value: Any, what: str, reason: str, max_bytes: int) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(reason, f"{what} is required (a non-empty string)")
    if "\x00" in value:
        raise _bad(reason, f"{what} contains NUL")
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise _bad(reason, f"{what} is not Unicode text (a lone surrogate)") from None
    if size > max_bytes:
        raise _bad(reason, f"{what} is over {max_bytes} bytes (UTF-8)")
    return value


@contextlib.asynccontextmanager
async def pooled(rt: Runtime) -> AsyncIterator[Any]:
    """A pooled connection whose database errors reach the caller in the timers' taxonomy."""
    try:
        async with rt.pool.acquire() as conn:
            yield conn
    except DB_ERRORS as exc:
        raise db_error(exc) from exc


@contextlib.asynccontextmanager
async def pooled_write(rt: Runtime, ident: Identity) -> AsyncIterator[Any]:
    """pooled, for a write that can meet the tenant's own locks: within its share of the pool,
    in a transaction whose lock waits are bounded like a schedule's (timers/locks.py). Two
    more round trips than a bare statement, on operator actions only."""
    async with rt.tenant_share.hold(ident.tenant, locks.share_cap(rt.settings)):
        async with pooled(rt) as conn, conn.transaction():
            await locks.bound(conn, rt.settings.timers_lock_wait_ms)
            yield conn


async def fire_now(rt: Runtime, ident: Identity, queue: Any, timer_key: Any) -> dict[str, Any]:
    queue = check_queue(queue)
    key = _text(timer_key, "timerKey", "timers_timer_key_required", MAX_KEY_BYTES)
    if not rt.switches.timers_schedule_enabled:
        raise QueenError(
            "timers_disabled",
            "timers_disabled",
            "scheduling timers is paused by an operator (kill switch); fire now is a "
            "reschedule and waits with them; cancel still works",
            503,
            retry_after=1,
        )
    # A write like a schedule: one token of the tenant's write rate (never the cap: it adds
    # no timer), given back when the call fails before an answer.
    took = rt.quotas.admit_rate(ident.tenant)
    try:
        async with pooled_write(rt, ident) as conn:
            res: dict[str, Any] = await conn.fetchval(
                Q.console_fire_now, ident.tenant, queue, key, None
            )
    except BaseException:
        if took:
            rt.quotas.give_back(ident.tenant)
        raise
    if res["status"] == "rescheduled":
        rt.timers_scheduled(dt.datetime.fromisoformat(res["deliverAt"]).timestamp())
    return res


async def cancel_prefix(
    rt: Runtime, ident: Identity, queue: Any, prefix: Any, limit: Any = None
) -> dict[str, Any]:
    queue = check_queue(queue)
    p = _text(prefix, "prefix", "timers_cancel_prefix_invalid", MAX_PREFIX_BYTES)
    if limit is None:
        limit = CANCEL_PREFIX_DEFAULT
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= CANCEL_PREFIX_MAX:
        raise _bad("timers_cancel_limit", f"limit must be an integer from 1 to {CANCEL_PREFIX_MAX}")
    async with pooled_write(rt, ident) as conn:
        res = await conn.fetchval(Q.console_cancel_prefix, ident.tenant, queue, p, limit, None)
    return {
        "queue": queue,
        "prefix": p,
        "cancelled": int(res["cancelled"]),
        "absent": int(res["absent"]),
        "tooLate": int(res["tooLate"]),
        "remaining": bool(res["remaining"]),
    }
