"""The command seam: subcommands of `queen` that other distributions add.

An installed distribution adds a subcommand by registering, under the entry-point group
`queen_timers.commands`, a function `register(subparsers)` that receives the
`argparse` sub-parsers of `queen` and adds its own parser with
`set_defaults(command_main=main)`, where `main(namespace) -> int` runs the command and
answers the exit code. The benchmark suite registers `queen bench` this way; the core never
names it.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "register_all"]

ENTRY_POINT_GROUP = "queen_timers.commands"

log = logging.getLogger("queen_timers")


def register_all(subparsers: Any) -> list[str]:
    """Add every installed command to `subparsers` (an argparse sub-parsers action); a command
    that fails to load or register is skipped with a warning, so `queen --help` still works.
    Answers the names registered."""
    names = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = (
                ep.load()
            )
            register(subparsers)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not kill `queen`
            log.warning("command %s failed to register: %s", ep.name, exc)
            continue
        names.append(ep.name)
    return names
