"""A whole broker inside the calling process: the service plus its transports.

For an application's own test suite: start our broker next to the code under test and drive it
with any client, the official `queen-mq` one included, in the same interpreter.

    async with serving(database_url=url) as broker:
        client = queen.Queen(broker.url)   # the HTTP transport's base URL

With no `database_url` the embedded PostgreSQL starts in a fresh temporary directory and is
removed afterwards. Transports are found through their entry points, as `queen serve` finds
them, and listen on free loopback ports unless the settings say otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..delivery import discover_deliveries
from ..service import Queen
from ..settings import Settings, declared
from ..transport import Transport, discover, settings_classes, start_transports, stop_transports

__all__ = ["RunningBroker", "serving"]

# Loopback and a free port for every built-in transport, unless the caller says otherwise.
_EPHEMERAL = {"http_host": "127.0.0.1", "http_port": 0, "tcp_host": "127.0.0.1", "tcp_port": 0}


@dataclasses.dataclass
class RunningBroker:
    queen: Queen
    transports: dict[str, Transport]
    deliveries: dict[str, Transport] = dataclasses.field(default_factory=dict)

    @property
    def url(self) -> str:
        """Base URL of the HTTP transport (the one the official client speaks)."""
        url = getattr(self.transports.get("http"), "url", None)
        if not isinstance(url, str):
            raise LookupError("the HTTP transport is not running in this broker")
        return url


@contextlib.asynccontextmanager
async def serving(
    *,
    database_url: str | None = None,
    transports: Sequence[str] = ("http",),
    deliveries: Sequence[str] = (),
    **settings: Any,
) -> AsyncIterator[RunningBroker]:
    """Start the service, the named transports and the named deliveries (queen_timers.delivery);
    stop them all on exit (deliveries, then transports). `settings` are broker, transport and
    delivery settings by name (sweeper=True, jwt_secret=...)."""
    factories = discover()
    delivery_factories = discover_deliveries()
    missing = [n for n in transports if n not in factories]
    missing += [n for n in deliveries if n not in delivery_factories]
    if missing:
        raise LookupError(f"plugin(s) not installed: {', '.join(missing)}")
    chosen = [factories[n] for n in transports]
    chosen_deliveries = [delivery_factories[n] for n in deliveries]
    classes = settings_classes([*chosen, *chosen_deliveries])
    names = {s.name for cls in classes for s in declared(cls)}
    overrides = {k: v for k, v in _EPHEMERAL.items() if k in names} | settings
    with contextlib.ExitStack() as cleanup:
        if database_url is None and "data_dir" not in overrides:
            # Short: PostgreSQL's Unix socket lives in the data directory.
            root = tempfile.mkdtemp(prefix="qtp", dir="/tmp")
            cleanup.callback(shutil.rmtree, root, ignore_errors=True)
            overrides["data_dir"] = f"{root}/pg"
        resolved = Settings({"database_url": database_url, **overrides}, extra=classes)
        queen = Queen(resolved)
        await queen.start()
        started: list[Transport] = []
        delivering: list[Transport] = []
        try:
            started = await start_transports(queen, resolved, chosen)
            delivering = await start_transports(queen, resolved, chosen_deliveries)
            yield RunningBroker(
                queen, dict(zip(transports, started)), dict(zip(deliveries, delivering))
            )
        finally:
            await stop_transports(delivering)
            await stop_transports(started)
            await queen.stop()
