"""In-process wake-ups: parked long-poll pops and the sweeper.

Local commits call `queue_pushed` / `timer_due` directly (no database round trip); the
cross-broker listener (queen_timers.notify) calls the same methods when a peer's NOTIFY
arrives. A wake is only ever a hint: a parked pop re-queries, a woken sweeper re-probes, and
the fallback poll covers every lost hint.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections import defaultdict
from collections.abc import Iterator

__all__ = ["WakeHub"]


class WakeHub:
    def __init__(self) -> None:
        self._queue_waiters: dict[tuple[uuid.UUID, str], set[asyncio.Event]] = defaultdict(set)
        # Earliest deliver_at (epoch seconds) the sweeper must wake for; +inf when none.
        self._timer_deadline = math.inf
        self._timer_event = asyncio.Event()
        self._hint = math.inf
        self._hint_reason: str | None = None

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

    def wake_all_queues(self) -> None:
        """Every parked pop re-queries (after a lost LISTEN connection came back)."""
        for waiters in self._queue_waiters.values():
            for ev in waiters:
                ev.set()

    def waiting_queues(self) -> list[tuple[uuid.UUID, str]]:
        """The (tenant, queue) keys a pop is parked on (the listener matches digests to them)."""
        return list(self._queue_waiters)

    def has_queue_waiters(self) -> bool:
        return bool(self._queue_waiters)

    # -- timers (sweeper) -------------------------------------------------------------------
    # The sweeper calls begin_cycle() at the top of each cycle and sleep_plan(deadline) before
    # sleeping. A hint that lands anywhere in between is remembered (_hint), so a schedule that
    # commits while the sweeper is probing or firing is never lost: the sweeper then sleeps
    # only until that hint.
    def timer_due(self, at_epoch: float, reason: str = "local") -> bool:
        """A timer due at `at_epoch` was committed (`reason`: "local" for this broker, "notify"
        for a peer's). Wakes the sweeper only if that is earlier than what it already plans
        for (a million timers for next week make one wake-up)."""
        if at_epoch < self._hint:
            self._hint = at_epoch
            self._hint_reason = reason
        if at_epoch < self._timer_deadline:
            self._timer_deadline = at_epoch
            self._timer_event.set()
            return True
        return False

    def begin_cycle(self) -> None:
        self._hint = math.inf
        self._hint_reason = None
        self._timer_deadline = math.inf
        self._timer_event = asyncio.Event()

    def sleep_plan(self, deadline_epoch: float) -> tuple[float, str | None, asyncio.Event]:
        """Before sleeping towards `deadline_epoch`: the effective deadline (earlier when a hint
        arrived during the cycle), the hint's reason if it decided the deadline, and the event
        an even earlier hint will set."""
        reason = None
        if self._hint < deadline_epoch:
            deadline_epoch, reason = self._hint, self._hint_reason
        self._timer_deadline = deadline_epoch
        self._timer_event = asyncio.Event()
        return deadline_epoch, reason, self._timer_event

    @property
    def timer_hint_reason(self) -> str | None:
        return self._hint_reason

    @property
    def timer_deadline(self) -> float:
        return self._timer_deadline
