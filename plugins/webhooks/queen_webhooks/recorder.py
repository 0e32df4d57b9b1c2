"""The attempts record, written off the delivery's path: a worker hands its batch's attempts
over and goes on; one task writes what has gathered in one statement, and trims each target
to its newest N at most once per TRIM_EVERY_S.

The record is a view for operators (the log and the dead-letter queue are the authority), so
a broker that dies loses at most the last flush interval of it. Written inside the delivery's
critical path it cost 55-71 % of a batch (bench/RESULTS.md, "queen bench webhooks").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from queen_timers.errors import QueenError
from queen_timers.service import Queen
from queen_timers.webhooks.targets import Attempt

__all__ = ["Recorder"]

log = logging.getLogger("queen_webhooks")

FLUSH_EVERY_S = 0.5
TRIM_EVERY_S = 10.0
MAX_PENDING = 100_000  # the database away for long: the oldest unwritten attempts are dropped


class Recorder:
    def __init__(self, queen: Queen, keep: int):
        self.queen = queen
        self.keep = keep
        self._pending: list[Attempt] = []
        self._lock = asyncio.Lock()  # one write at a time: flush() and the loop
        self._task: asyncio.Task[None] | None = None
        self._trimmed: dict[tuple[object, str], float] = {}

    def add(self, rows: list[Attempt]) -> None:
        self._pending.extend(rows)
        if len(self._pending) > MAX_PENDING:
            del self._pending[: len(self._pending) - MAX_PENDING]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="webhooks:record")

    async def flush(self) -> None:
        """Write every attempt handed over so far (tests, and the stop)."""
        async with self._lock:
            rows, self._pending = self._pending, []
            if not rows:
                return
            try:
                await self.queen.webhook_attempts_record(rows, self.keep, trim=False)
            except QueenError as exc:
                log.warning("webhook attempts not recorded (%d): %s", len(rows), exc)
                self._pending[:0] = rows  # the next flush tries them again
                return
            now = time.monotonic()
            due = {(a.tenant, a.target) for a in rows}
            due = {k for k in due if now - self._trimmed.get(k, 0.0) >= TRIM_EVERY_S}
            for tenant, target in sorted(due, key=str):
                try:
                    await self.queen.webhook_attempts_trim(tenant, target, self.keep)
                except QueenError as exc:
                    log.warning("webhook attempts of %s not trimmed: %s", target, exc)
                    continue
                self._trimmed[(tenant, target)] = now

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY_S)
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not end the record for good
                log.exception("webhook attempts record failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await self.flush()
