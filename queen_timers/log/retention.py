"""The maintenance loop: retention, the txn-hash purge, dead-partition cleanup.

Every `retention_interval_ms` (0 = off) one broker at a time (a lease row, renewed while the
cycle runs, so it holds behind a transaction pooler; the others skip the cycle) runs the steps
of migrations/006 with cutoffs computed once per cycle from the database clock. Each step is
its own short transaction and is repeated until it reports done, so a big backlog never
becomes one long transaction.

Start/stop contract: stop() is safe before start() and twice; stop() waits for the running step.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import time
import uuid
from typing import Any

from ..db import Q
from ..db.conn import Conn
from ..runtime import Runtime

__all__ = ["MAINTENANCE_LEASE_MS", "Maintenance"]

log = logging.getLogger("queen_timers.log.retention")

# Lease of the maintenance cycle, renewed after a third of it (a choice, not measured: one step
# deletes at most QUEEN_RETENTION_BATCH_ROWS rows, seconds at worst). A broker that dies
# mid-cycle holds off the others' maintenance this long at most.
MAINTENANCE_LEASE_MS = 60_000


class Maintenance:
    def __init__(self, rt: Runtime):
        self.rt = rt
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.cycles = 0  # completed cycles (tests and metrics read it)
        self.cycle_done = asyncio.Event()  # set after every completed cycle
        self.holder = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._renewed = -float("inf")

    async def start(self) -> None:
        if self._task is not None or self.rt.settings.retention_interval_ms <= 0:
            return
        self._stop.clear()
        self._task = asyncio.create_task(self._loop(), name="queen-maintenance")

    async def stop(self) -> None:
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await task
            except Exception:  # noqa: BLE001 - already logged by the loop
                pass

    async def _loop(self) -> None:
        interval = self.rt.settings.retention_interval_ms / 1000
        while not self._stop.is_set():
            try:
                await self.run_once()
            except Exception:
                log.exception("maintenance cycle failed")
            try:
                await asyncio.wait_for(self._stop.wait(), interval)
            except TimeoutError:
                pass

    async def run_once(self, now: dt.datetime | None = None) -> dict[str, Any] | None:
        """One cycle; `now` lets tests time-travel. None when another broker holds the lease."""
        s = self.rt.settings
        rows = s.retention_batch_rows
        out = {"segments": 0, "txns": 0, "partitions": 0}
        async with self.rt.pool.acquire() as conn:
            if not await self._hold(conn, renew=True):
                return None
            try:
                now = await conn.fetchval(Q.maintenance_now, now)
                for r in await conn.fetch(Q.retention_work, now):
                    while not self._stop.is_set():
                        v = await conn.fetchval(
                            Q.retention_step, r["pid"], r["all_cutoff"], r["completed_cutoff"], rows
                        )
                        out["segments"] += v["deleted"]
                        await self._hold(conn)
                        if v["done"]:
                            break
                for r in await conn.fetch(Q.txns_purge_work, now, s.txns_min_retention_s):
                    v = await conn.fetchval(Q.txns_purge_step, r["pid"], r["cutoff"], rows)
                    out["txns"] += v["deleted"]
                    await self._hold(conn)
                cutoff = now - dt.timedelta(days=max(1, s.partition_cleanup_days))
                while not self._stop.is_set():
                    n = await conn.fetchval(Q.partition_cleanup_step, cutoff, rows)
                    out["partitions"] += n
                    await self._hold(conn)
                    if n < rows:
                        break
            finally:
                await conn.fetchval(Q.maintenance_release, self.holder)
        self.cycles += 1
        self.cycle_done.set()
        return out

    async def _hold(self, conn: Conn, renew: bool = False) -> bool:
        """Take the lease (renew=True) or renew it once a third of it has run."""
        t = time.monotonic()
        if not renew and t - self._renewed < MAINTENANCE_LEASE_MS / 3000:
            return True
        held = await conn.fetchval(Q.maintenance_take, self.holder, MAINTENANCE_LEASE_MS)
        if held:
            self._renewed = t
        return bool(held)
