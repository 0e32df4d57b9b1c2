"""`queen bench <scenario>` and `python -m bench <scenario>`.

Scenarios that write bench/results/<date>-<scenario>/: soak (fixed rate or ramp),
amplification (WAL/HOT/bloat of the staging-table variants, and the backoff trade), peers (our
broker, procrastinate, pg-boss and a raw asyncpg floor on the same PostgreSQL). Scenarios that
print their numbers: sweeper (fire lateness, burst drain, idle cost), transport-schedule
(schedule latency and throughput over HTTP and TCP), fire-cost (the claim and the fire per
timer), log-push-pop (log throughput), console-routes (the operator's routes at 10^6
pending), pending (every cost against the size of the pending set, 10^4 to 10^7 timers).
`digest` prints the newest results as the tables of bench/RESULTS.md.

The machine diagnostics are opt-in flags, off by default: --cpu-probe (bench/cpuprobe.py beside
the paced runs of soak, peers, sweeper and transport-schedule; ~5% of each core), --host-floor
(bench/host.py's latency floors before sweeper steady and transport-schedule) and --fsync (the
disk's fdatasync latency, bench/fsync.py, before any scenario).

The bench distribution (bench/pyproject.toml) registers `bench` under the entry-point group
queen_timers.commands; `queen` finds it there and never imports bench itself.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import fsync

__all__ = ["add_bench_parser", "main", "register"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL server to use (a fresh database is created on it and "
        "dropped after; the role needs CREATEDB). Default: a temporary "
        "embedded PostgreSQL, removed after the run.",
    )
    p.add_argument(
        "--out", default=None, help="results root (default: bench/results/ in the checkout)"
    )
    p.add_argument(
        "--keep-db", action="store_true", help="leave the bench database in place for inspection"
    )
    p.add_argument("--no-progress", action="store_true", help="no live progress display")


def _cpu_probe(p: argparse.ArgumentParser, where: str) -> None:
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help=f"run bench/cpuprobe.py {where} (off by default: it takes ~5%% of each core)",
    )


def _fsync(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fsync",
        action="store_true",
        help="first measure the disk's fdatasync latency for 10 s (bench/fsync.py)",
    )


def _rates(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of rates: {text!r}") from None
    if not out or any(r <= 0 for r in out):
        raise argparse.ArgumentTypeError("rates must be positive")
    return out


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list: {text!r}") from None


def _run(target: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """A scenario's entry: the opted-in fsync floor first, then `target(ns)` (a coroutine
    function is run in a fresh event loop)."""

    def func(ns: argparse.Namespace) -> int:
        try:
            if getattr(ns, "fsync", False):
                print(fsync.measure(), flush=True)
            if inspect.iscoroutinefunction(target):
                return int(asyncio.run(target(ns)) or 0)
            return int(target(ns) or 0)
        except KeyboardInterrupt:
            print("bench: interrupted", file=sys.stderr)
            return 130

    return func


def _add_module_scenario(
    sc: Any, command: str, module: str, help_text: str, *, fsync: bool = True
) -> None:
    mod = importlib.import_module(f"bench.{module}")
    p = sc.add_parser(
        command,
        help=help_text,
        description=mod.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mod.add_arguments(p)
    if fsync:
        _fsync(p)
    p.set_defaults(command_main=_run(mod.main))


async def _soak(ns):
    from .soak import run

    return await run(ns)


async def _amplification(ns):
    from .amplification import run

    return await run(ns)


async def _peers(ns):
    from .peers import run

    return await run(ns)


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

    soak = sc.add_parser(
        "soak",
        help="fixed-rate or ramped schedule+fire soak through the broker, sampled every 100 ms",
        description="Schedule and fire at a fixed rate R (each timer due "
        "--delay seconds after scheduling) through a broker "
        "process; --ramp steps R up until the broker cannot "
        "keep up.",
    )
    _common(soak)
    soak.add_argument("--rate", type=int, default=500, help="timers/s in fixed mode (500)")
    soak.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds of a fixed-rate run, or of each ramp step (fixed: 180; "
        "ramp: 70, more than autovacuum_naptime so that every step can "
        "see a vacuum)",
    )
    soak.add_argument(
        "--delay", type=float, default=2.0, help="seconds from schedule to deliver_at (2)"
    )
    soak.add_argument("--ramp", action="store_true", help="step the rate up (see --rates)")
    soak.add_argument(
        "--rates",
        type=_rates,
        default=[250, 500, 1000, 2000, 3000, 4000, 6000, 8000],
        help="ramp steps, comma separated (250,500,1000,2000,3000,4000,6000,8000); "
        "the ramp "
        "stops at the first step the broker does not keep up with",
    )
    soak.add_argument("--brokers", type=int, default=1, help="broker processes that fire (1)")
    soak.add_argument(
        "--budget",
        type=float,
        default=500.0,
        help="ramp: start no step that would end later than this many seconds "
        "after the first (500, so the default run stays under 10 minutes)",
    )
    soak.add_argument(
        "--sweeper-parallelism",
        type=int,
        default=None,
        help="QUEEN_SWEEPER_PARALLELISM of the broker process(es) (their default)",
    )
    soak.add_argument(
        "--batch", type=int, default=100, help="schedule ops per timers_apply call (100)"
    )
    soak.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="destination partitions the timers are spread over (1)",
    )
    soak.add_argument("--payload-bytes", type=int, default=100, help="payload size (100)")
    _cpu_probe(soak, "through the steps")
    _fsync(soak)
    soak.set_defaults(command_main=_run(_soak))

    amp = sc.add_parser(
        "amplification",
        help="WAL per phase, HOT ratio and bloat of staging-table variants "
        "A/B/C, and the cost of a claim pass with K timers in backoff",
        description="Variants (bench database only): A = (shard, visible_at) "
        "fillfactor 70 (the design); B = the same, fillfactor 100; "
        "C = (shard, deliver_at) with a claim that filters leased "
        "rows (the rejected alternative).",
    )
    _common(amp)
    amp.add_argument("--variants", default="A,B,C", help="variants to run (A,B,C)")
    amp.add_argument(
        "--timers", type=int, default=20000, help="timers per phase measurement (20000)"
    )
    amp.add_argument(
        "--sustain-seconds",
        type=float,
        default=75.0,
        help="seconds of the sustained schedule+fire run per variant (75: more "
        "than autovacuum_naptime, so autovacuum visits each variant)",
    )
    amp.add_argument(
        "--sustain-rate", type=int, default=1000, help="timers/s of the sustained run (1000)"
    )
    amp.add_argument(
        "--backoff",
        type=_ints,
        default=[0, 1000, 10000, 100000],
        help="K values: timers in permanent backoff (0,1000,10000,100000)",
    )
    amp.add_argument(
        "--due",
        type=int,
        default=200,
        help="due timers the claim pass finds besides the backoff rows (200)",
    )
    amp.add_argument(
        "--repeats", type=int, default=15, help="claim passes measured per (variant, K) (15)"
    )
    _fsync(amp)
    amp.set_defaults(command_main=_run(_amplification))

    peers = sc.add_parser(
        "peers",
        help="our broker vs procrastinate vs pg-boss vs a raw "
        "asyncpg floor, on the same PostgreSQL",
        description="Two workloads on every system: a burst (N timers due at "
        "one instant) and a steady rate. Peers are installed on "
        "demand: procrastinate with pip into the current "
        "environment, pg-boss with npm into bench/.peers/.",
    )
    _common(peers)
    peers.add_argument(
        "--systems",
        default="floor,queen,procrastinate,pgboss",
        help="systems to run (floor,queen,procrastinate,pgboss)",
    )
    peers.add_argument("--burst", type=int, default=20000, help="timers due at one instant (20000)")
    peers.add_argument("--steady-rate", type=int, default=500, help="steady timers/s (500)")
    _cpu_probe(peers, "beside each system's run")
    peers.add_argument(
        "--steady-seconds", type=float, default=30.0, help="seconds of the steady workload (30)"
    )
    peers.add_argument(
        "--delay", type=float, default=2.0, help="steady workload: seconds from schedule to due (2)"
    )
    peers.add_argument(
        "--no-install",
        action="store_true",
        help="never install a missing peer; skip it with the reason",
    )
    peers.add_argument(
        "--peer-timeout",
        type=float,
        default=120.0,
        help="seconds a peer may take to drain one workload before it is "
        "stopped and reported as not drained (120)",
    )
    _fsync(peers)
    peers.set_defaults(command_main=_run(_peers))

    _add_module_scenario(
        sc,
        "sweeper",
        "sweeper",
        "fire lateness at a steady rate, drain rate of a burst, idle cost",
    )
    _add_module_scenario(
        sc,
        "transport-schedule",
        "transport_schedule",
        "schedule throughput and latency over the HTTP and the TCP transport",
    )
    _add_module_scenario(
        sc, "fire-cost", "fire_cost", "what a timer costs the claim and the fire, step by step"
    )
    _add_module_scenario(sc, "log-push-pop", "log_push_pop", "log throughput: push, and pop+ack")
    _add_module_scenario(
        sc,
        "console-routes",
        "console_routes",
        "latency of the operator's routes with a million pending timers",
    )
    _add_module_scenario(
        sc, "sql-schedule", "sql_schedule", "fire lateness of SQL-API timers beside HTTP"
    )
    _add_module_scenario(
        sc, "pending", "pending", "every cost as the pending set grows, 10^4 to 10^7 timers"
    )
    _add_module_scenario(
        sc, "tenant-stall", "tenant_stall", "tenant B's latency while tenant A holds its locks"
    )
    _add_module_scenario(
        sc,
        "digest",
        "digest",
        "print the newest results of each scenario as bench/RESULTS.md's tables",
        fsync=False,
    )
    return bench


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m")
    sub = parser.add_subparsers(dest="command", required=True)
    bench = add_bench_parser(sub)
    args = list(sys.argv[1:] if argv is None else argv)
    # `python -m bench soak ...` is `queen bench soak ...`
    if not args or args[0] != "bench":
        args = ["bench", *args]
    ns = parser.parse_args(args)
    del bench
    return int(ns.command_main(ns))
