"""One tenant cannot stall the others: its timer writes wait briefly on locks, and hold at most
its share of the pool.

A tenant's application may hold its own timer rows in an open transaction (the SQL API writes
inside the application's transaction). Two things keep that from reaching other tenants:

* the lock bound: a broker write gives up after `timers_lock_wait_ms` on a row another
  transaction holds (migrations/029 sets lock_timeout inside the statement); the caller gets
  `busy()`, 503 timers_busy / timer_locked with Retry-After, and nothing changed;
* the fair share: one tenant's schedules and cancels hold at most `share_cap(settings)`
  pooled connections at once (`Runtime.tenant_share`, queen_timers/fairshare.py). A tenant's
  call beyond that waits for one of that tenant's own connections, never for another
  tenant's. (The schedule batcher's in-flight slots are per tenant too: batcher.py.)

Rows are keyed by tenant first, so a lock one tenant holds can only ever be met by the same
tenant's calls: the bound decides how long those calls stay, the share how many of them there
can be.
"""

from __future__ import annotations

import math
from typing import Any

from ..db import Q
from ..errors import QueenError
from ..settings import Settings

__all__ = [
    "BUSY_CODE",
    "BUSY_REASON",
    "LOCK_NOT_AVAILABLE",
    "bound",
    "busy",
    "is_busy",
    "share_cap",
]

LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout expired (or NOWAIT met a lock)
BUSY_CODE = "timers_busy"
BUSY_REASON = "timer_locked"
RETRY_AFTER_S = 1  # the lock is the application's; a second is a polite first retry


def busy(message: str) -> QueenError:
    """The refusal of a write that met a timer row locked by another transaction."""
    return QueenError(
        BUSY_CODE,
        BUSY_REASON,
        "a timer of this call is held by another open transaction (an application's SQL API "
        "transaction, usually); nothing was changed, retry after it ends "
        f"(PostgreSQL: {message})",
        503,
        retry_after=RETRY_AFTER_S,
    )


def is_busy(e: BaseException) -> bool:
    return isinstance(e, QueenError) and e.code == BUSY_CODE


def share_cap(settings: Settings) -> int:
    """Pooled connections one tenant's timer writes may hold at once (at least one)."""
    return max(1, math.floor(settings.pool_max * settings.timers_tenant_pool_share))


async def bound(conn: Any, lock_wait_ms: int) -> None:
    """Bound the lock waits of the rest of `conn`'s open transaction (the operator's writes,
    which are not the apply of migrations/029: fire now, cancel by prefix). 0: no bound."""
    if lock_wait_ms > 0:
        await conn.execute(Q.timers_lock_wait, f"{lock_wait_ms}ms")
