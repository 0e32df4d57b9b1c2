"""In-process wake-ups: parked long-poll pops and the sweeper.

Local commits call `queue_pushed` / `timer_scheduled` directly (no database round trip); the
cross-broker listener (queen.notify) calls the same methods when a peer's NOTIFY arrives. A
wake is only ever a hint: a parked pop re-queries, a woken sweeper re-probes, and the fallback
poll covers every lost hint.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections import defaultdict
from typing import Iterator

__all__ = ["WakeHub"]


class WakeHub:
    def __init__(self) -> None:
        self._queue_waiters: dict[tuple[uuid.UUID, str], set[asyncio.Event]] = defaultdict(set)
        # Earliest deliver_at (epoch seconds) the sweeper must wake for; +inf when none.
        self._timer_deadline = math.inf
        self._timer_event = asyncio.Event()

    # -- queues (long-poll pop) -------------------------------------------------------------
    @contextlib.contextmanager
    def queue_waiter(self, tenant: uuid.UUID, queue: str) -> Iterator[asyncio.Event]:
        """Register an event set on the next push to (tenant, queue); unregister on exit."""
        ev = asyncio.Event()
        key = (tenant, queue)
        self._queue_waiters[key].add(ev)
        try:
            yield ev
        finally:
            waiters = self._queue_waiters.get(key)
            if waiters is not None:
                waiters.discard(ev)
                if not waiters:
                    del self._queue_waiters[key]

    def queue_pushed(self, tenant: uuid.UUID, queue: str) -> None:
        for ev in self._queue_waiters.get((tenant, queue), ()):
            ev.set()

    def has_queue_waiters(self) -> bool:
        return bool(self._queue_waiters)

    # -- timers (sweeper) -------------------------------------------------------------------
    def timer_due(self, at_epoch: float) -> bool:
        """A timer due at `at_epoch` was committed. Wakes the sweeper only if that is earlier
        than the deadline it sleeps towards (a million timers for next week make one wake)."""
        if at_epoch < self._timer_deadline:
            self._timer_deadline = at_epoch
            self._timer_event.set()
            return True
        return False

    def arm_timer(self, deadline_epoch: float) -> asyncio.Event:
        """The sweeper is about to sleep until `deadline_epoch`: earlier hints wake it."""
        self._timer_deadline = deadline_epoch
        self._timer_event = asyncio.Event()
        return self._timer_event

    @property
    def timer_deadline(self) -> float:
        return self._timer_deadline

    @staticmethod
    def now() -> float:
        return time.time()
