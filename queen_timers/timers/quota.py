"""The schedule path's side of the per-tenant limits (queen_timers/quotas.py): admit a call
before the database, then settle its charge on commit or give it back.

Only schedules and reschedules are charged; a call of cancels only is never gated. A call that
did not commit gets its charge back, except when the commit is unknown (a statement timeout,
reason `timers_timeout`): that charge stays until a measurement replaces it, so an unknown
commit can only refuse early.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..db.errors import DB_ERRORS, FailureClass, classify_exception, sqlstate_of, unavailable
from ..errors import QueenError
from ..identity import Identity
from ..quotas import Charge
from ..runtime import Runtime

__all__ = ["admit", "failed", "refused", "settle"]


async def admit(rt: Runtime, ident: Identity, ops: Sequence[Any]) -> Charge | None:
    """Raise the tenant's refusal (403 timers_quota_exceeded, 429 rate_limited), or answer
    the charge of `ops` (TimerOps; None: nothing to account)."""
    n = sum(1 for t in ops if t.schedules)
    if n == 0:
        return None
    try:
        return await rt.quotas.admit(ident.tenant, n)
    except DB_ERRORS as exc:
        if classify_exception(exc) is not FailureClass.TRANSIENT:
            raise
        raise unavailable(
            exc,
            "timers_unavailable",
            "timers_quota_unmeasured",
            "the tenant's pending timers could not be measured",
        ) from exc


def settle(rt: Runtime, charge: Charge | None, results: Sequence[dict[str, Any]]) -> None:
    """The call committed with `results`: what it charged is what it added (new rows)."""
    if charge is not None:
        rt.quotas.settle(charge, sum(1 for r in results if r.get("status") == "scheduled"))


def failed(rt: Runtime, charge: Charge | None, exc: BaseException) -> None:
    """The call raised `exc`: give its charge back unless its commit is unknown."""
    if charge is None:
        return
    unknown = isinstance(exc, QueenError) and exc.reason == "timers_timeout"
    unknown = unknown or sqlstate_of(exc) == "57014"
    # a caller cancelled while its statement ran cannot know whether it committed
    unknown = unknown or isinstance(exc, asyncio.CancelledError)
    if unknown:
        rt.quotas.settle(charge)
    else:
        rt.quotas.refund(charge)


def refused(rt: Runtime, charge: Charge | None, answer: dict[str, Any]) -> None:
    """A transaction-wire bundle answered success false: rolled back, so its charge is given
    back; `misaligned` is the one verdict reached after the commit, so that charge stays."""
    if charge is None:
        return
    if answer.get("reason") == "misaligned":
        rt.quotas.settle(charge)
    else:
        rt.quotas.refund(charge)
