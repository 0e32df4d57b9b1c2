"""The bench's named SQL statements (bench/sql/*.sql under `-- name: x` headers).

Same convention as queen_timers.db.Q: Python modules carry no SQL strings of their own. The bench's
statements are kept apart from the core's because several of them (the variants of the
staging table, the floor loop) must never be loaded by a broker.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["BQ", "sql_file"]

_HEADER = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.M)
_DIR = Path(__file__).resolve().parent / "sql"


def sql_file(name: str) -> str:
    """The whole text of bench/sql/<name> (scripts run as one multi-statement string)."""
    return (_DIR / name).read_text()


class _Queries:
    def __init__(self) -> None:
        self._q: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in sorted(_DIR.glob("q_*.sql")):
            parts = _HEADER.split(f.read_text())
            for name, body in zip(parts[1::2], parts[2::2]):
                if name in out:
                    raise RuntimeError(f"bench query {name} defined twice")
                out[name] = body.strip()
        return out

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._q is None:
            self._q = self._load()
        try:
            return self._q[name]
        except KeyError:
            raise AttributeError(f"no bench query {name!r}") from None


BQ = _Queries()
