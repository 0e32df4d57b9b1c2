"""The transport seam: how clients reach the service.

A transport is an object with a `name`, `async start(queen)` and `async stop()`. Transports are
discovered through the entry-point group `queen_timers.transports`; an entry point names a
factory (a class or function) called with the resolved `Settings` that returns the transport.
Built-in transports register exactly like third-party ones.

A factory declares its settings as a frozen dataclass of `queen_timers.settings.setting(...)`
fields in its `settings_class` attribute (`queen serve --help`, `queen transports` and the
docs' settings page list them), and reads them with `own_settings(HttpSettings, settings)`. A
transport that listens calls `warn_if_open(...)` at start: bound beyond loopback without
authentication, every caller is the default tenant with admin rights.

Contract: `start` returns once the transport accepts requests; `stop` is safe before `start`
and twice, and stops accepting before it returns.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec

from .errors import QueenError
from .identity import Authenticator, Identity
from .service import Queen
from .settings import Settings
from .wire import OPERATIONS, Arguments, Operation

__all__ = [
    "ENTRY_POINT_GROUP",
    "Transport",
    "TransportFactory",
    "arguments",
    "call",
    "discover",
    "is_loopback",
    "own_settings",
    "settings_classes",
    "start_transports",
    "stop_transports",
    "warn_if_open",
]

ENTRY_POINT_GROUP = "queen_timers.transports"

S = TypeVar("S")


@runtime_checkable
class Transport(Protocol):
    name: str

    async def start(self, queen: Queen) -> None: ...

    async def stop(self) -> None: ...


class TransportFactory(Protocol):
    """What an entry point loads: called with Settings, returns a Transport. Its
    `settings_class` (a settings dataclass, or None) is what `queen serve --help` lists."""

    settings_class: type | None

    def __call__(self, settings: Settings) -> Transport: ...


def discover(group: str = ENTRY_POINT_GROUP) -> dict[str, Callable[..., Transport]]:
    """Installed transport factories by name (or a delivery's: queen_timers.delivery)."""
    found: dict[str, Callable[..., Transport]] = {}
    for ep in entry_points(group=group):
        found[ep.name] = ep.load()
    return dict(sorted(found.items()))


async def start_transports(
    queen: Queen, settings: Settings, factories: Iterable[Callable[..., Transport]]
) -> list[Transport]:
    """Build and start one transport per factory, in order. When one fails to start, the ones
    already started are stopped before the error propagates, so nothing is left listening."""
    started: list[Transport] = []
    try:
        for factory in factories:
            t = factory(settings)
            await t.start(queen)
            started.append(t)
    except BaseException:
        await stop_transports(started)
        raise
    return started


async def stop_transports(started: Iterable[Transport]) -> None:
    """Stop transports in the reverse order of their start."""
    for t in reversed(list(started)):
        await t.stop()


def settings_classes(factories: Iterable[Callable[..., Transport]]) -> list[type]:
    """The settings dataclasses the given factories declare, in order."""
    out: list[type] = []
    for f in factories:
        cls = getattr(f, "settings_class", None)
        if cls is not None and cls not in out:
            out.append(cls)
    return out


def own_settings(cls: type[S], settings: Settings | None = None) -> S:
    """A transport's settings (`cls`, its settings dataclass) resolved from the broker's
    Settings: the same overrides (CLI flags) and environment. A Settings built without `cls` in
    its `extra` (a program constructing the transport by hand) gives the environment and the
    defaults; None stands for `Settings()`."""
    return (settings if settings is not None else Settings(extra=(cls,))).section(cls)


def is_loopback(host: str) -> bool:
    """A name or address that can only reach this machine: `localhost` and its subdomains
    (browsers resolve *.localhost to loopback themselves), 127.0.0.0/8 and ::1."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def warn_if_open(log: logging.Logger, what: str, host: str, auth: Authenticator) -> bool:
    """Warn (and answer True) when `what` listens beyond loopback with no authentication."""
    if auth.enabled or is_loopback(host):
        return False
    log.warning(
        "%s listens on %s without authentication: every caller is the default tenant with "
        "admin rights; set QUEEN_JWT_SECRET or QUEEN_JWT_PUBLIC_KEY",
        what,
        host,
    )
    return True


# -- dispatch by an operation's name (TCP, the line-JSON example) --------------------------------
def operation(name: object) -> Operation:
    """The operation of that name (queen_timers.wire.operations.OPERATIONS), else the 404."""
    op = OPERATIONS.get(name) if isinstance(name, str) else None
    if op is None:
        raise QueenError("bad_request", "unknown_operation", f"unknown operation {name!r}", 404)
    return op


def arguments(op: Operation, body: Any) -> Arguments:
    """A request's arguments as the operation's struct; a body that is not a map of its names
    is the caller's 400. The names are checked here and the values by the service, which
    refuses each with its own code; so a TypeError raised inside the service is a bug (500),
    never mistaken for the caller's bad arguments."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise QueenError("bad_request", "bad_body", "the body must be a map", 400)
    allowed, required = op.fields(), op.required()
    if not body.keys() <= set(allowed) or not set(required) <= body.keys():
        raise QueenError(
            "bad_request",
            "bad_arguments",
            f"{op.name} takes {sorted(allowed)} (required: {sorted(required)}); "
            f"got {sorted(body, key=str)}",  # msgpack keys may be ints
            400,
        )
    return op.arguments(**body)


async def call(queen: Queen, ident: Identity, name: object, body: Any) -> Any:
    """Serve one request by name: `Queen.<name>(ident, **arguments)`."""
    op = operation(name)
    args = arguments(op, body)
    method = getattr(queen, op.name)
    return await method(ident, **msgspec.structs.asdict(args))
