"""`queen bench <scenario>` and `python -m bench <scenario>`.

Every scenario takes the common options of bench/harness.py (--database-url, --keep-db,
--out, --json, --no-progress), runs on a database of its own, prints one summary and writes
bench/results/<date>-<scenario>/ (result.json, summary.md, plots). `queen bench machine`
measures the machine alone (fsync, wake-up jitter, the paced round-trip and commit floors,
the CPU probe); --cpu-probe beside a paced scenario splits its tail into the part the slow
machine caused and the rest. `queen bench compare --against REV SCENARIO ...` runs one scenario
on this build and on REV, alternated, and reports each figure's medians and B/A.

The bench distribution (bench/pyproject.toml) registers `bench` under the entry-point group
queen_timers.commands; `queen` finds it there and never imports bench itself.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Sequence
from typing import Any

from . import SCENARIOS, compare, harness

__all__ = ["add_bench_parser", "main", "register"]

# command -> (module, one line of help)
_HELP = {
    "soak": "fixed-rate or ramped schedule+fire through a broker process, sampled every 100 ms",
    "amplification": "WAL, HOT and bloat of the staging table's variants, and the backoff trade",
    "peers": "our broker against pg-boss, procrastinate, PgQueuer and a raw asyncpg floor",
    "sweeper": "fire lateness at a steady rate, drain rate of a burst, idle cost",
    "transport-schedule": "schedule throughput and latency over the HTTP and the TCP transport",
    "fire-cost": "what a timer costs the claim and the fire, step by step",
    "log-push-pop": "log throughput: push, and pop+ack",
    "console-routes": "latency of the operator's routes with a million pending timers",
    "sql-schedule": "fire lateness of SQL-API timers beside HTTP",
    "schedules": "occurrence lateness of recurring schedules beside one-shot timers",
    "pending": "every cost as the pending set grows, 10^4 to 10^7 timers",
    "tenant-stall": "tenant B's latency while tenant A holds its locks",
    "tracing-cost": "the schedule, fire and pop with the [otel] extra and without it",
    "machine": "the machine alone: fsync, wake-up jitter, round-trip and commit floors",
    "webhooks": "webhook deliveries/s with 1 and 16 targets; due-to-receipt lateness beside pop",
    "tail-trace": "where a timer's lateness goes, step by step; a burst's batches",
}


def _entry(module: Any) -> Any:
    """A scenario's entry: `module.main(ns)` (a coroutine function runs in a fresh loop)."""

    def func(ns: argparse.Namespace) -> int:
        try:
            if inspect.iscoroutinefunction(module.main):
                return int(asyncio.run(module.main(ns)) or 0)
            return int(module.main(ns) or 0)
        except KeyboardInterrupt:
            print("bench: interrupted", file=sys.stderr)
            return 130

    return func


def register(subparsers: Any) -> None:
    """The queen_timers.commands entry point: adds `queen bench`."""
    add_bench_parser(subparsers)


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `bench` with one sub-command per scenario; each sets ns.command_main(ns) -> exit
    code."""
    bench = subparsers.add_parser(
        "bench",
        help="run a benchmark scenario (bench/; pip install -e bench)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sc = bench.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    for command in SCENARIOS:
        mod = importlib.import_module(f"bench.{command.replace('-', '_')}")
        p = sc.add_parser(
            command,
            help=_HELP[command],
            description=mod.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        harness.add_common(p)
        p.set_defaults(command_main=_entry(mod))
    # Not a scenario: it runs one, on two builds (bench/compare.py).
    p = sc.add_parser(
        "compare",
        help="one scenario on this build and on another revision, alternated: medians, B/A",
        description=compare.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_arguments(p)
    harness.add_common(p)
    p.set_defaults(command_main=_entry(compare))
    return bench


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m")
    sub = parser.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    args = list(sys.argv[1:] if argv is None else argv)
    # `python -m bench soak ...` is `queen bench soak ...`
    if not args or args[0] != "bench":
        args = ["bench", *args]
    ns = parser.parse_args(args)
    return int(ns.command_main(ns))
