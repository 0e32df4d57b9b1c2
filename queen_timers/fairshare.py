"""A per-tenant count of places: one tenant holds at most `cap` of something shared at once.

The timers use it for pooled connections (queen_timers/timers/locks.py): a tenant whose calls
wait, on its own locks or on anything, fills its own places and no one else's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import AsyncIterator

__all__ = ["TenantShare"]


class TenantShare:
    """At most `cap` holders per tenant at once; a tenant's extra callers wait in line (first
    come, first served) for that tenant's own places. Idle tenants cost nothing (their entries
    go away)."""

    def __init__(self) -> None:
        self._held: dict[uuid.UUID, int] = {}
        self._line: dict[uuid.UUID, collections.deque[asyncio.Future[None]]] = {}

    def held(self, tenant: uuid.UUID) -> int:
        return self._held.get(tenant, 0)

    def waiting(self, tenant: uuid.UUID) -> int:
        return len(self._line.get(tenant, ()))

    @contextlib.asynccontextmanager
    async def hold(self, tenant: uuid.UUID, cap: int) -> AsyncIterator[None]:
        await self._acquire(tenant, cap)
        try:
            yield
        finally:
            self._release(tenant)

    async def _acquire(self, tenant: uuid.UUID, cap: int) -> None:
        n = self._held.get(tenant, 0)
        if n < cap and tenant not in self._line:
            self._held[tenant] = n + 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._line.setdefault(tenant, collections.deque()).append(fut)
        try:
            await fut  # _release hands its place over: the count already includes this caller
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release(tenant)  # granted just as the caller went away: pass it on
            else:
                self._leave_line(tenant, fut)
            raise

    def _leave_line(self, tenant: uuid.UUID, fut: asyncio.Future[None]) -> None:
        line = self._line.get(tenant)
        if line is None:
            return
        with contextlib.suppress(ValueError):
            line.remove(fut)
        if not line:
            del self._line[tenant]

    def _release(self, tenant: uuid.UUID) -> None:
        line = self._line.get(tenant)
        while line:
            fut = line.popleft()
            if not fut.done():
                if not line:
                    del self._line[tenant]
                fut.set_result(None)  # the place passes on; the count stays
                return
        self._line.pop(tenant, None)
        n = self._held.get(tenant, 0) - 1
        if n > 0:
            self._held[tenant] = n
        else:
            self._held.pop(tenant, None)
