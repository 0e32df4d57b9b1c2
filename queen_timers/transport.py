"""The transport seam: how clients reach the service.

A transport is an object with a `name`, `async start(queen)` and `async stop()`, plus the
settings it reads (`settings`, a list of queen_timers.settings.Setting). Transports are discovered
through the entry-point group `queen_timers.transports`; an entry point names a factory (a class or
function) called with the resolved `Settings` that returns the transport. Built-in transports
register exactly like third-party ones.

Contract: `start` returns once the transport accepts requests; `stop` is safe before `start`
and twice, and stops accepting before it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .settings import Setting, Settings

if TYPE_CHECKING:
    from .service import Queen

__all__ = ["ENTRY_POINT_GROUP", "Transport", "TransportFactory", "discover"]

ENTRY_POINT_GROUP = "queen_timers.transports"


@runtime_checkable
class Transport(Protocol):
    name: str

    async def start(self, queen: Queen) -> None: ...

    async def stop(self) -> None: ...


class TransportFactory(Protocol):
    """What an entry point loads: called with Settings, returns a Transport. It may carry a
    `settings` attribute (list of Setting) so `queen serve --help` can list them."""

    settings: list[Setting]

    def __call__(self, settings: Settings) -> Transport: ...


def discover() -> dict[str, Callable[..., Transport]]:
    """Installed transport factories by name."""
    found: dict[str, Callable[..., Transport]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.load()
    return dict(sorted(found.items()))


def transport_settings(factories: dict[str, Callable[..., Transport]]) -> list[Setting]:
    out: list[Setting] = []
    for f in factories.values():
        out.extend(getattr(f, "settings", []) or [])
    return out
