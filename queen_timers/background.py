"""Background loops of a broker (the listener, the switch and quota refreshers): how they end."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel each task given (None: nothing runs) and wait until all have ended. What a loop
    raises while it ends is dropped: a loop failing at shutdown is not a failure of the
    shutdown, and every loop logs its own errors while it runs."""
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    for t in live:
        try:
            await t
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
            pass
