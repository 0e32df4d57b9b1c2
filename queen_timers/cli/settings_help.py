"""The settings as `queen --help`, `queen settings` and the docs list them, and the flags that
carry them on `queen serve` and `queen migrate`."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..delivery import discover_deliveries
from ..settings import Setting, Settings, cross_rules, declared
from ..transport import Transport, discover, settings_classes

__all__ = [
    "add_settings",
    "cross_rule_lines",
    "documented_settings",
    "overrides",
    "settings_epilog",
    "settings_markdown",
    "transport_factories",
    "transports_text",
]


def settings_epilog(settings: Sequence[Setting]) -> str:
    lines = [
        "settings (flag / environment variable / default); a value out of its allowed range "
        "refuses to start:"
    ]
    group = None
    for s in settings:
        if s.group != group:
            group = s.group
            lines.append(f"\n  [{group}]")
        lines.append(f"  {s.flag:<36} {s.env:<38} default: {s.default_text()}")
        lines.append(f"      {s.help}")
        lines.append(f"      allowed: {s.allowed_text()}")
    rules = cross_rule_lines([Settings])
    if rules:
        lines.append("\n  [rules over several settings]")
        lines.extend(f"  {r}" for r in rules)
    return "\n".join(lines)


def cross_rule_lines(classes: Sequence[type]) -> list[str]:
    """Each rule over several settings of `classes`, as a sentence."""
    out = []
    for cls in classes:
        flags = {s.name: s.flag for s in declared(cls)}
        for rule in cross_rules(cls):
            out.append(f"{flags[rule.first]} must be {rule.describe}")
    return out


def transport_factories() -> dict[str, Callable[..., Transport]]:
    """Installed transports, then deliveries (queen_timers.delivery): whose settings a broker
    resolves and `--help` lists."""
    try:
        return {**discover(), **discover_deliveries()}
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not kill `--help`
        logging.getLogger("queen_timers").warning("plugin discovery failed: %s", exc)
        return {}


def documented_settings(
    factories: dict[str, Callable[..., Transport]] | None = None,
) -> list[Setting]:
    """Every setting of this installation, as help and docs list it: the core's, then each
    installed transport's (or those of `factories`)."""
    if factories is None:
        factories = transport_factories()
    classes = [Settings, *settings_classes(factories.values())]
    return [s for cls in classes for s in declared(cls)]


def settings_markdown(settings: Sequence[Setting] | None = None) -> str:
    """The README's settings table (`queen settings` prints it)."""
    if settings is None:
        settings = documented_settings()
    rows = ["| flag | environment | default | allowed | meaning |", "|---|---|---|---|---|"]
    for s in settings:
        rows.append(
            f"| `{s.flag}` | `{s.env}` | `{s.default_text()}` | {s.allowed_text()} | {s.help} |"
        )
    return "\n".join(rows)


def add_settings(p: argparse.ArgumentParser, settings: Sequence[Setting]) -> None:
    for s in settings:
        p.add_argument(s.flag, dest=s.name, default=None, metavar=s.env, help=argparse.SUPPRESS)


def overrides(ns: argparse.Namespace, settings: Sequence[Setting]) -> dict[str, Any]:
    return {s.name: getattr(ns, s.name) for s in settings if getattr(ns, s.name, None) is not None}


def transports_text(factories: dict[str, Callable[..., Transport]]) -> str:
    lines = []
    for name, f in factories.items():
        lines.append(f"{name}\t{getattr(f, '__module__', '?')}")
        for cls in settings_classes([f]):
            for s in declared(cls):
                lines.append(f"  {s.flag:<28} {s.env:<30} default: {s.default_text()}")
                lines.append(f"      allowed: {s.allowed_text()}")
    rules = cross_rule_lines([Settings])
    if rules:
        lines.append("\n  [rules over several settings]")
        lines.extend(f"  {r}" for r in rules)
    return "\n".join(lines)
