"""`queen bench <scenario>` and `python -m bench <scenario>`.

Scenarios: soak (fixed rate or ramp), amplification (WAL/HOT/bloat of the staging-table
variants, and the backoff trade), peers (our broker, procrastinate, pg-boss and a raw asyncpg
floor on the same PostgreSQL). Each writes bench/results/<date>-<scenario>/.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

__all__ = ["add_bench_parser", "main"]


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


def _run(coro_factory):
    def func(ns: argparse.Namespace) -> int:
        try:
            return asyncio.run(coro_factory(ns))
        except KeyboardInterrupt:
            print("bench: interrupted", file=sys.stderr)
            return 130

    return func


async def _soak(ns):
    from .soak import run

    return await run(ns)


async def _amplification(ns):
    from .amplification import run

    return await run(ns)


async def _peers(ns):
    from .peers import run

    return await run(ns)


def add_bench_parser(subparsers) -> argparse.ArgumentParser:
    """Add `bench` with one sub-command per scenario; each sets ns.bench_func(ns) -> exit code."""
    bench = subparsers.add_parser(
        "bench",
        help="run a benchmark scenario (bench/; pip install -e '.[dev,bench]')",
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
    soak.add_argument(
        "--no-cpu-probe",
        action="store_true",
        help="do not run bench/cpuprobe.py through the steps (it takes ~5%% of each core)",
    )
    soak.set_defaults(bench_func=_run(_soak))

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
    amp.set_defaults(bench_func=_run(_amplification))

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
    peers.add_argument(
        "--no-cpu-probe",
        action="store_true",
        help="do not run bench/cpuprobe.py beside each system's run (it takes ~5%% of each core)",
    )
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
    peers.set_defaults(bench_func=_run(_peers))
    return bench


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    sub = parser.add_subparsers(dest="command", required=True)
    bench = add_bench_parser(sub)
    args = list(sys.argv[1:] if argv is None else argv)
    # `python -m bench soak ...` is `queen bench soak ...`
    if not args or args[0] != "bench":
        args = ["bench", *args]
    ns = parser.parse_args(args)
    del bench
    return ns.bench_func(ns)
