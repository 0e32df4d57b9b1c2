"""The delivery seam: what carries fired messages onward without a client asking, beside the
transports, which answer clients.

A delivery (the webhooks plugin is the first) has the transport's shape: a `name`,
`async start(queen)` and `async stop()`, a factory called with the resolved `Settings`, and a
`settings_class`. It is discovered through the entry-point group `queen_timers.deliveries`;
`queen serve` starts every installed delivery after the transports and stops it before them.
A delivery consumes queues through the service like any consumer: the fire into the log stays
exactly once whatever a delivery does.
"""

from __future__ import annotations

from collections.abc import Callable

from .transport import Transport, discover

__all__ = ["ENTRY_POINT_GROUP", "discover_deliveries"]

ENTRY_POINT_GROUP = "queen_timers.deliveries"


def discover_deliveries() -> dict[str, Callable[..., Transport]]:
    """Installed delivery factories by name."""
    return discover(ENTRY_POINT_GROUP)
