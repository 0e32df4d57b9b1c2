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
from rich.text import Text

__all__ = ["add_json_flag", "ago", "console", "print_json", "shown", "table"]


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


def shown(text: Any) -> str:
    """A name a tenant chose (a timer key above all), printable without ambiguity: every
    character that shows as nothing, as a blank or as a reordering of its neighbours (controls,
    bidirectional overrides, zero-width and format characters, separators other than the
    space: what str.isprintable refuses) is written as its escape, \\xNN, \\uNNNN or
    \\UNNNNNNNN, and a backslash as two, so no key reads as another. The console writes the
    same escapes (dom.js shown)."""
    text = str(text)
    if text.isprintable() and "\\" not in text:
        return str(text)
    return "".join(ch if ch.isprintable() and ch != "\\" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def table(
    title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = ""
) -> None:
    t = Table(
        title=Text(title) if title else None,
        caption=Text(caption) if caption else None,
        title_justify="left",
        caption_justify="left",
    )
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        # Text, not a str: rich would read "[red]" in a key as markup
        t.add_row(*(Text("" if v is None else str(v)) for v in r))
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
