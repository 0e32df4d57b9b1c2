"""`queen serve` (a broker: the service and every enabled transport) and `queen migrate`."""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..db.url import redacted
from ..delivery import discover_deliveries
from ..service import Queen
from ..settings import Settings, declared
from ..transport import Transport, discover, start_transports, stop_transports
from .failures import ListenFailed, Refusal
from .remembered import remember

__all__ = ["banner", "migrate", "serve"]

# What the banner's curl line schedules: a harmless timer a person can watch fire.
_CURL_OP = (
    '[{"op":"schedule","queue":"demo","timerKey":"hello","delayMs":5000,'
    '"payload":"aGVsbG8=","txn":"hello-1"}]'
)


def _address(t: Transport) -> str:
    url = getattr(t, "url", None)
    if isinstance(url, str):
        return url
    host, port = getattr(t, "host", None), getattr(t, "port", None)
    if host is None or port is None:
        return "(address not reported)"
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _listen_setting(factory: Callable[..., Transport], settings: Settings) -> tuple[str, str]:
    """The flag (with its environment variable) that moves a transport, and where it tried to
    listen: its settings' `*_port` and `*_host` fields."""
    cls = getattr(factory, "settings_class", None)
    if cls is None:
        return "port setting", "its address"
    own = settings.section(cls)
    ports = [s for s in declared(cls) if s.name.endswith("_port")]
    hosts = [s for s in declared(cls) if s.name.endswith("_host")]
    flag = f"{ports[0].flag} ({ports[0].env})" if ports else "port setting"
    host = getattr(own, hosts[0].name) if hosts else "?"
    port = getattr(own, ports[0].name) if ports else "?"
    return flag, f"{host}:{port}"


async def _start_each(
    queen: Queen,
    settings: Settings,
    chosen: Sequence[tuple[str, Callable[..., Transport]]],
    started: list[Transport],
) -> None:
    """Start the transports in order into `started` (the caller stops them); a port that
    cannot be bound is a ListenFailed naming the flag to change."""
    for name, factory in chosen:
        try:
            started.extend(await start_transports(queen, settings, [factory]))
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                raise
            flag, address = _listen_setting(factory, settings)
            raise ListenFailed(name, address, flag, exc) from exc


def banner(
    queen: Queen, started: Sequence[tuple[str, Transport]], remembered_in: Path | None = None
) -> str:
    """What `queen serve` prints once every transport accepts requests. `remembered_in`: the
    state file that now names the embedded data directory."""
    lines = [f"queen: serving (pid {os.getpid()})"]
    for name, t in started:
        lines.append(f"  {name:<10} {_address(t)}")
    if not started:
        lines.append("  (no transports: this broker fires timers and runs maintenance only)")
    emb = queen.embedded
    if emb is not None:
        lines.append(f"  {'data':<10} embedded PostgreSQL in {emb.data_dir}")
        lines.append(
            f"  {'share':<10} QUEEN_DATABASE_URL='{queen.database_url}' (other brokers and "
            "`queen` commands)"
        )
        if remembered_in is not None:
            lines.append(
                f"  {'remembered':<10} in {remembered_in}: `queen` commands find this data "
                "without --data-dir"
            )
    else:
        lines.append(f"  {'data':<10} {redacted(queen.database_url)}")
    http = next((_address(t) for _, t in started if _address(t).startswith("http")), None)
    if http is not None:
        lines.append(
            f"  {'try':<10} curl -s {http}/api/v1/timers -H 'content-type: application/json' "
            f"-d '{_CURL_OP}'"
        )
    lines.append(f"  {'stop':<10} Ctrl-C, or kill -TERM {os.getpid()}")
    return "\n".join(lines)


async def serve(settings: Settings, transports: list[str] | None) -> int:
    factories = discover()
    names = transports if transports else list(factories)
    if names == ["none"]:  # a broker with no front end: sweeper and maintenance only
        names = []
    missing = [n for n in names if n not in factories]
    if missing:
        raise Refusal(
            f"transport(s) not installed: {', '.join(missing)}; installed: "
            f"{', '.join(factories) or 'none'} (--transport)",
            2,
        )
    queen = Queen(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await queen.start()
    started: list[Transport] = []
    delivering: list[Transport] = []
    remembered_in = remember(queen.embedded.data_dir) if queen.embedded is not None else None
    try:
        await _start_each(queen, settings, [(n, factories[n]) for n in names], started)
        delivering = await start_transports(queen, settings, discover_deliveries().values())
        # Everything allocated at boot (modules, plans, pools) lives as long as the process:
        # out of the collector's sight, a full collection does not walk it on the hot path
        # (fire lateness p99 37 -> 27 ms, 2026-11-29, bench/RESULTS.md "Measurements the code
        # cites").
        gc.collect()
        gc.freeze()
        print(banner(queen, list(zip(names, started, strict=True)), remembered_in), flush=True)
        await stop.wait()
    finally:
        await stop_transports(delivering)
        await stop_transports(started)
        await queen.stop()
    return 0


async def migrate(settings: Settings) -> int:
    # No background loops: a migration fires nothing and says nothing about the sweeper.
    queen = Queen(settings, background=False)
    await queen.start()
    try:
        status = await queen.schema_status()
        where = (
            f"the embedded PostgreSQL in {queen.embedded.data_dir}"
            if queen.embedded is not None
            else redacted(queen.database_url)
        )
        print(f"queen: schema applied to {where} (PostgreSQL {status['serverVersion']})")
        for name in queen.migrations_applied:
            print(f"  {name}")
        installed = status["installed"]
        print(f"schema digest {installed['digest']} (queen-timers {installed['queenTimers']})")
    finally:
        await queen.stop()
    sys.stdout.flush()
    return 0
