"""Results on disk: bench/results/<date>-<scenario>/ with result.json, summary.md and PNGs.

Every result records the machine (cores, memory, load at start), the PostgreSQL version and
the settings that matter to autovacuum and WAL, the git commit and the exact command line.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .env import REPO_ROOT, command_line, git_info, machine_info, server_info, utc_now

__all__ = ["Results", "fmt", "md_table"]


def fmt(v: Any, digits: int = 1) -> str:
    """A number for a Markdown table: thousands separators, fixed digits, '-' for None."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "-"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    return str(v)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(fmt(c, digits) for c in r) + " |")
    return "\n".join(out)


class Results:
    def __init__(self, scenario: str, out_root: str | None = None):
        self.scenario = scenario
        self.started = utc_now()
        root = Path(out_root) if out_root else REPO_ROOT / "bench" / "results"
        name = f"{self.started:%Y-%m-%d-%H%M%S}-{scenario}"
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.meta: dict[str, Any] = {
            "scenario": scenario,
            "started_utc": self.started.isoformat(),
            "command": command_line(),
            "machine": machine_info(),
            "git": git_info(),
        }
        self.data: dict[str, Any] = {}
        self.md: list[str] = []
        self.plots: list[str] = []

    async def record_server(self, url: str, embedded: bool) -> None:
        info = await server_info(url)
        info["embedded"] = embedded
        self.meta["postgres"] = info

    def section(self, text: str) -> None:
        self.md.append(text.rstrip() + "\n")

    def plot(self, name: str, draw) -> None:
        """draw(fig) fills a matplotlib figure; saved as <name>.png (Agg: no display)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(10, 6), dpi=100)
        try:
            draw(fig)
            fig.tight_layout()
            fig.savefig(self.dir / f"{name}.png")
            self.plots.append(f"{name}.png")
        finally:
            plt.close(fig)

    def _header(self) -> str:
        m = self.meta
        mach = m["machine"]
        pg = m.get("postgres", {})
        st = pg.get("settings", {})
        keys = [
            "shared_buffers",
            "autovacuum_max_workers",
            "autovacuum_naptime",
            "autovacuum_vacuum_cost_delay",
            "autovacuum_vacuum_cost_limit",
            "synchronous_commit",
            "wal_compression",
            "full_page_writes",
            "max_wal_size",
        ]
        return "\n".join(
            [
                f"# bench {self.scenario}: {m['started_utc']}",
                "",
                f"- command: `{m['command']}`",
                f"- git: {m['git'].get('commit')} ({m['git'].get('branch')}"
                f"{', dirty tree' if m['git'].get('dirty') else ''})",
                f"- machine: {mach['cores_logical']} cores ({mach.get('cpu_model')}), "
                f"{mach['memory_bytes'] / 2**30:.1f} GiB, load at start "
                f"{', '.join(f'{x:.2f}' for x in mach['load_avg_at_start'])}",
                f"- PostgreSQL: {pg.get('version', '?').split(' on ')[0]}"
                f"{' (embedded)' if pg.get('embedded') else ''}; "
                + ", ".join(f"{k}={st[k]}" for k in keys if k in st),
                "",
            ]
        )

    def write(self) -> Path:
        self.meta["finished_utc"] = utc_now().isoformat()
        self.meta["load_avg_at_end"] = os.getloadavg()
        doc = {"meta": self.meta, **self.data}
        (self.dir / "result.json").write_text(json.dumps(doc, indent=1, default=str))
        body = [self._header(), *self.md]
        if self.plots:
            body.append("## Plots\n")
            body.extend(f"![{p}]({p})" for p in self.plots)
            body.append("")
        (self.dir / "summary.md").write_text("\n".join(body))
        return self.dir
