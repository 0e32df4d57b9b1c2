"""Named fault points: where the code holds a connection it is about to use, a test may fault it.

A test installs `hook` (queen_timers.testing.chaos.killing does) and the code awaits it at
each point with the connection in hand, so the test terminates the backend of exactly that
connection at exactly that point, as often as it chose, instead of racing a poller against
statements. Production never installs a hook: a point costs one module attribute read.

The points (each is reached once per statement it names):
  log.push                   a push's append statement is next (queen_timers.log.push)
  log.pop                    a pop's claim statement is next (queen_timers.log.pop)
  timers.schedule            a schedule batch's apply statement is next (timers.ops)
  timers.probe               the sweeper's probe statement is next (timers.fire)
  timers.claim               a claim statement is next (timers.fire)
  timers.fire                a fire statement is next (timers.fire)
  transaction.timers_applied a transaction bundle's timer step has run inside its open
                             transaction, its push step is next (queen_timers.log.transaction)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["POINTS", "hook"]

POINTS = frozenset(
    {
        "log.push",
        "log.pop",
        "timers.schedule",
        "timers.probe",
        "timers.claim",
        "timers.fire",
        "transaction.timers_applied",
    }
)

hook: Callable[[str, Any], Awaitable[None]] | None = None
