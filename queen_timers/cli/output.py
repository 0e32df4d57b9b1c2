"""What a command prints: JSON for scripts (`--json`), a rich table for people."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["add_json_flag", "ago", "console", "print_json", "table"]


# Columns of a table printed where no terminal says its width (a pipe, a file): wide enough
# that a timestamp or a key is not folded over two lines.
PIPE_WIDTH = 200


def console() -> Console:
    c = Console(highlight=False)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(highlight=False, width=PIPE_WIDTH)
    return c


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON (for scripts)")


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def table(
    title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = ""
) -> None:
    t = Table(title=title, caption=caption or None, title_justify="left", caption_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    console().print(t)


def ago(ms: float | int | None) -> str:
    """A duration in milliseconds as a person reads it: 850ms, 12.5s, 3m20s, 2h05m, 3d04h."""
    if ms is None:
        return "-"
    s = float(ms) / 1000.0
    if s < 1:
        return f"{int(ms)}ms"
    if s < 60:
        return f"{s:.1f}s"
    d = dt.timedelta(seconds=int(s))
    h, rem = divmod(d.seconds, 3600)
    m, sec = divmod(rem, 60)
    if d.days:
        return f"{d.days}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{sec:02d}s"
