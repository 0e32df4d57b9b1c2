"""The bench's one harness: the common options, the percentiles, the summary table and
result.json, the same for every scenario.

    add_common(parser)        --database-url, --keep-db, --out, --json, --no-progress
    percentile / summarize    linear interpolation between closest ranks, in one place
    Results(name, ns)         bench/results/<date>-<name>/: result.json (every figure, the
                              machine, PostgreSQL's settings, the commit and the command),
                              summary.md (its tables) and PNGs; `finish()` prints the
                              summary table, or the whole document with --json
    paced_grid                the open-loop pacer every paced run uses
    HostCpu                   the host's busy / iowait / steal shares over a window

Pure arithmetic here is tested in bench/tests/ without a database.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "REPO_ROOT",
    "HostCpu",
    "Results",
    "add_common",
    "command_line",
    "explained",
    "fmt",
    "ints",
    "md_records",
    "md_table",
    "median",
    "ms",
    "paced_grid",
    "per_unit",
    "percentile",
    "positive_ints",
    "rate",
    "stall_starts",
    "summarize",
]

REPO_ROOT = Path(__file__).resolve().parents[1]


# -- the common options --------------------------------------------------------------------


def add_common(p: argparse.ArgumentParser) -> None:
    """The options every scenario takes: where it runs and where its results go."""
    p.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL server to use (a fresh database is created on it and dropped after; "
        "the role needs CREATEDB). Default: a temporary embedded PostgreSQL, removed after.",
    )
    p.add_argument("--keep-db", action="store_true", help="leave the bench database in place")
    p.add_argument(
        "--out", default=None, help="results root (default: bench/results/ in the checkout)"
    )
    p.add_argument(
        "--json", action="store_true", help="print result.json instead of the summary table"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress lines")


def ints(text: str) -> list[int]:
    """A comma-separated list of whole numbers (an argparse type)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list: {text!r}") from None


def positive_ints(text: str) -> list[int]:
    out = ints(text)
    if not out or any(x <= 0 for x in out):
        raise argparse.ArgumentTypeError(f"not a list of positive numbers: {text!r}")
    return out


# -- percentiles -----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (the
    definition numpy calls "linear"). None for an empty sequence."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile out of range: {q}")
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(xs[lo]) + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """count, mean, min, p50, p90, p99, p99.9, max of `values` (None fields when empty)."""
    xs = sorted(values)
    n = len(xs)
    return {
        "count": n,
        "mean": sum(xs) / n if n else None,
        "min": float(xs[0]) if n else None,
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "p999": percentile(xs, 99.9),
        "max": float(xs[-1]) if n else None,
    }


def stall_starts(instants: Sequence[float], gap_s: float = 0.1) -> list[float]:
    """Start instants of the clusters of slow events: a stall delays everything in flight at
    once, so slow events less than `gap_s` apart belong to one stall."""
    out: list[float] = []
    last: float | None = None
    for t in sorted(instants):
        if last is None or t - last > gap_s:
            out.append(t)
        last = t
    return out


# -- pacing and the host ------------------------------------------------------------------------


async def paced_grid(
    call: Callable[[int], Awaitable[Any]], *, clients: int, rate: float, seconds: float
) -> tuple[list[tuple[float, float]], float]:
    """Open loop: `clients` workers take slots on a fixed grid of `rate` per second for
    `seconds`, and worker i awaits `call(i)` at its slot's time. Latency counts from each
    request's slot, so a stall is not hidden by a lower rate. Returns every request's (slot,
    end) on CLOCK_MONOTONIC, in completion order, and the rate achieved."""
    spans: list[tuple[float, float]] = []
    total = int(rate * seconds)
    slots = itertools.count()
    start = time.perf_counter() + 0.05

    async def worker(i: int) -> None:
        while (n := next(slots)) < total:
            due = start + n / rate
            if (wait := due - time.perf_counter()) > 0:
                await asyncio.sleep(wait)
            await call(i)
            spans.append((due, time.perf_counter()))

    await asyncio.gather(*(worker(i) for i in range(clients)))
    return spans, total / (time.perf_counter() - start)


_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _cpu_ticks() -> list[int] | None:
    try:
        with open("/proc/stat") as f:
            first = f.readline().split()
    except OSError:
        return None
    return [int(x) for x in first[1 : 1 + len(_FIELDS)]]


class HostCpu:
    """Shares of all CPUs' time over a window: `with HostCpu() as h: ...; h.shares`.

    busy = user + nice + system + irq + softirq (this machine's own work, ours or not),
    iowait = idle while I/O was outstanding, steal = wanted to run but the hypervisor ran
    someone else: on a shared virtual machine part of every tail. Linux only (n/a elsewhere).
    """

    def __init__(self) -> None:
        self._start: list[int] | None = None
        self.shares: dict[str, float] | None = None

    def __enter__(self) -> HostCpu:
        self._start = _cpu_ticks()
        return self

    def __exit__(self, *exc: object) -> None:
        end = _cpu_ticks()
        if self._start is None or end is None:
            return
        d = dict(zip(_FIELDS, (b - a for a, b in zip(self._start, end))))
        total = sum(d.values()) or 1
        busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
        self.shares = {
            "busy_pct": 100 * busy / total,
            "iowait_pct": 100 * d["iowait"] / total,
            "steal_pct": 100 * d["steal"] / total,
        }

    def describe(self) -> str:
        if self.shares is None:
            return "steal n/a"
        s = self.shares
        return (
            f"steal {s['steal_pct']:.0f}%, iowait {s['iowait_pct']:.0f}%, busy {s['busy_pct']:.0f}%"
        )


# -- the record of a run ----------------------------------------------------------------------


def fmt(v: Any, digits: int = 1) -> str:
    """A number for a table: thousands separators, fixed digits, '-' for None."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "-"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"
    return str(v)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(fmt(c, digits) for c in r) + " |" for r in rows)
    return "\n".join(out)


def md_records(records: Sequence[dict[str, Any]], digits: int = 1) -> str:
    """A Markdown table of dicts, one row each, the columns in first-seen key order."""
    headers: list[str] = []
    for r in records:
        headers.extend(k for k in r if k not in headers)
    return md_table(headers, [[r.get(h) for h in headers] for r in records], digits)


def command_line() -> str:
    prog = Path(sys.argv[0]).name
    if prog == "__main__.py":  # python -m bench
        prog = "python -m bench"
    return " ".join([prog, *(shlex.quote(a) for a in sys.argv[1:])])


def machine_info() -> dict[str, Any]:
    import psutil  # type: ignore[import-untyped]

    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores_logical": psutil.cpu_count(),
        "cpu_model": model,
        "memory_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "load_avg_at_start": os.getloadavg(),
    }


def git_info() -> dict[str, Any]:
    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
            )
            return out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):  # a tarball has no git
            return None

    return {
        "commit": run("rev-parse", "HEAD"),
        "branch": run("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(run("status", "--porcelain", "--untracked-files=no")),
    }


# The settings a summary's header shows (result.json records bench/env.PG_SETTINGS, all).
_HEADER_SETTINGS = (
    "shared_buffers",
    "autovacuum_max_workers",
    "autovacuum_naptime",
    "autovacuum_vacuum_cost_delay",
    "synchronous_commit",
    "wal_compression",
    "max_wal_size",
)


class Results:
    """One run's record: `res.row(...)` adds to the summary table, `res.data` holds every
    figure, `res.section(md)` adds prose or tables to summary.md; `finish()` writes
    bench/results/<date>-<name>/ and prints the summary table (or result.json with --json)."""

    def __init__(self, scenario: str, ns: argparse.Namespace | None = None):
        self.scenario = scenario
        self.ns = ns
        self.started = dt.datetime.now(dt.UTC)
        out_root = getattr(ns, "out", None)
        root = Path(out_root) if out_root else REPO_ROOT / "bench" / "results"
        self.dir = root / f"{self.started:%Y-%m-%d-%H%M%S}-{scenario}"
        self.meta: dict[str, Any] = {
            "scenario": scenario,
            "started_utc": self.started.isoformat(),
            "command": command_line(),
            "machine": machine_info(),
            "git": git_info(),
        }
        self.data: dict[str, Any] = {}
        self.rows: list[tuple[str, dict[str, Any]]] = []
        self.md: list[str] = []
        self.plots: list[str] = []

    @property
    def quiet(self) -> bool:
        return bool(getattr(self.ns, "no_progress", False) or getattr(self.ns, "json", False))

    def say(self, text: str) -> None:
        """A progress line (stdout), unless --no-progress or --json."""
        if not self.quiet:
            print(f"{self.scenario}: {text}", flush=True)

    async def record_server(self, url: str, embedded: bool) -> None:
        from .env import server_info

        self.meta["postgres"] = {**await server_info(url), "embedded": embedded}

    def row(self, what: str, **figures: Any) -> None:
        """One line of the summary table: `what` and its figures (columns in first-seen
        order; a missing figure prints as '-')."""
        self.rows.append((what, figures))
        self.data.setdefault("rows", []).append({"what": what, **figures})

    def table(self, digits: int = 2) -> str:
        return md_records([{"what": what, **f} for what, f in self.rows], digits)

    def section(self, text: str) -> None:
        self.md.append(text.rstrip() + "\n")

    def plot(self, name: str, draw: Callable[[Any], None]) -> None:
        """draw(fig) fills a matplotlib figure; saved as <name>.png (Agg: no display)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.dir.mkdir(parents=True, exist_ok=True)
        fig = plt.figure(figsize=(10, 6), dpi=100)
        try:
            draw(fig)
            fig.tight_layout()
            fig.savefig(self.dir / f"{name}.png")
            self.plots.append(f"{name}.png")
        finally:
            plt.close(fig)

    def _header(self) -> str:
        m, mach = self.meta, self.meta["machine"]
        pg = m.get("postgres", {})
        st = pg.get("settings", {})
        git = m["git"]
        return "\n".join(
            [
                f"# bench {self.scenario}: {m['started_utc']}",
                "",
                f"- command: `{m['command']}`",
                f"- git: {git.get('commit')} ({git.get('branch')}"
                f"{', dirty tree' if git.get('dirty') else ''})",
                f"- machine: {mach['cores_logical']} cores ({mach.get('cpu_model')}), "
                f"{mach['memory_bytes'] / 2**30:.1f} GiB, load at start "
                f"{', '.join(f'{x:.2f}' for x in mach['load_avg_at_start'])}",
                f"- PostgreSQL: {str(pg.get('version', '?')).split(' on ')[0]}"
                f"{' (embedded)' if pg.get('embedded') else ''}; "
                + ", ".join(f"{k}={st[k]}" for k in _HEADER_SETTINGS if k in st),
                "",
            ]
        )

    def document(self) -> dict[str, Any]:
        return {"meta": self.meta, **self.data}

    def finish(self) -> Path:
        """Write result.json and summary.md, print the summary (its table and sections; with
        --json, result.json instead) and where they are. Returns the directory."""
        self.meta["finished_utc"] = dt.datetime.now(dt.UTC).isoformat()
        self.meta["load_avg_at_end"] = os.getloadavg()
        self.dir.mkdir(parents=True, exist_ok=True)
        doc = json.dumps(self.document(), indent=1, default=str)
        (self.dir / "result.json").write_text(doc)
        body = [self._header()]
        if self.rows:
            body.append(self.table() + "\n")
        body.extend(self.md)
        if self.plots:
            body.append("## Plots\n")
            body.extend(f"![{p}]({p})" for p in self.plots)
            body.append("")
        (self.dir / "summary.md").write_text("\n".join(body))
        if getattr(self.ns, "json", False):
            print(doc)
        else:
            print("\n".join(body[1:]), flush=True)
            print(f"{self.scenario}: results in {self.dir}", flush=True)
        return self.dir


def explained(doc: Any) -> dict[str, Any]:
    """The figures of one `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`: execution ms, buffers
    (hit + read), of them read, and the top node's rows."""
    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    top = doc[0]
    plan = top["Plan"]
    return {
        "ms": top.get("Execution Time"),
        "buffers": (plan.get("Shared Hit Blocks") or 0) + (plan.get("Shared Read Blocks") or 0),
        "read": plan.get("Shared Read Blocks") or 0,
        "rows": plan.get("Actual Rows"),
    }


def per_unit(total: float, units: int) -> float | None:
    """total / units, None when there were no units (never a division by zero)."""
    return None if units <= 0 else total / units


def rate(count: int, seconds: float) -> float | None:
    """Events per second over an interval; None for an empty interval."""
    return None if seconds <= 0 else count / seconds


def ms(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile of durations in seconds, in milliseconds."""
    v = percentile(values, q)
    return None if v is None else v * 1000.0
