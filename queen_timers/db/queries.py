"""Named SQL statements, for the few statements that are not stored procedures.

Statements live in queen_timers/queries/*.sql under `-- name: some_name` headers and are loaded
once. `Q.some_name` is the statement text. Python modules never carry SQL strings of their own.
"""

from __future__ import annotations

import re
from importlib import resources

__all__ = ["Q"]

_HEADER = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.M)


class _Queries:
    def __init__(self) -> None:
        self._q: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in sorted(resources.files("queen_timers.queries").iterdir(), key=lambda p: p.name):
            if not f.name.endswith(".sql"):
                continue
            text = f.read_text()
            parts = _HEADER.split(text)
            for name, body in zip(parts[1::2], parts[2::2]):
                if name in out:
                    raise RuntimeError(f"query {name} defined twice")
                out[name] = body.strip()
        return out

    def __getattr__(self, name: str) -> str:
        if self._q is None:
            self._q = self._load()
        try:
            return self._q[name]
        except KeyError:
            raise AttributeError(f"no named query {name!r}") from None


Q = _Queries()
