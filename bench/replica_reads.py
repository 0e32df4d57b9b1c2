"""`queen bench console-routes --replica`: the primary's CPU under the operator's reads, with
the reads on the primary and on a hot standby (QUEEN_READ_DATABASE_URL), alternated in one run.

Starts a primary and a hot standby from the embedded server's binaries (or QUEEN_TEST_PG_BIN's;
queen_timers.testing.replication), loads --timers pending timers into the primary as
console-routes does, waits until the standby has replayed them, then runs the console's read
calls (queues overview, queue summary, overview, the three histograms, a list page) --calls
times per phase through two brokers: A reads on the primary, B on the standby. Phases go
A B B A, --rounds times. The figure is the CPU the primary's processes used in each phase
(/proc: the postmaster with its reaped children, plus each live backend), and B/A per pair of
phases; the median of the ratios is the headline.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable

import asyncpg

from bench.harness import Results, median
from bench.queries import BQ
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.testing.replication import ReplicaPair, process_stats, replica_pair

_TICK_S = 0.01  # USER_HZ: /proc counts CPU time in hundredths of a second on Linux

Call = Callable[[Queen, Identity], Awaitable[object]]

READS: list[tuple[str, Call]] = [
    ("queues_overview", lambda q, i: q.queues_overview(i)),
    ("queue_summary", lambda q, i: q.queue_summary(i, "big")),
    ("overview", lambda q, i: q.overview(i)),
    ("histogram hour", lambda q, i: q.timers_histogram(i, "big", "hour")),
    ("histogram day", lambda q, i: q.timers_histogram(i, "big", "day")),
    ("histogram 90d", lambda q, i: q.timers_histogram(i, "big", "90d")),
    ("list page", lambda q, i: q.timers_read(i, "big")),
]


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` (its own and its reaped children's) and of its live children."""
    total = 0
    for me, fields in process_stats():
        if me == pid:  # utime stime cutime cstime
            total += sum(int(f) for f in fields[11:15])
        elif int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total * _TICK_S


def phases(rounds: int) -> list[str]:
    """A B B A, `rounds` times."""
    return ["A", "B", "B", "A"] * rounds


async def _load(pair: ReplicaPair, timers: int) -> None:
    conn = await asyncpg.connect(pair.url)
    try:
        await conn.execute(BQ.console_load, timers)
        await conn.execute(BQ.vacuum_analyze_timers)
    finally:
        await conn.close()
    await pair.caught_up()


async def _phase(q: Queen, ident: Identity, calls: int, postmaster: int) -> tuple[float, float]:
    cpu0, t0 = tree_cpu_s(postmaster), time.perf_counter()
    for _ in range(calls):
        for _name, call in READS:
            await call(q, ident)
    return tree_cpu_s(postmaster) - cpu0, time.perf_counter() - t0


async def main(ns: argparse.Namespace) -> int:
    res = Results("console-routes-replica", ns)
    ident = Identity(subject="bench")
    async with replica_pair(synchronous=False) as pair:
        assert pair.primary is not None
        postmaster = pair.primary.postmaster_pid()
        assert postmaster is not None
        await res.record_server(pair.primary_url, embedded=False)
        brokers = {
            "A": Queen(database_url=pair.url, sweeper=False, retention_interval_ms=0),
            "B": Queen(
                database_url=pair.url,
                read_database_url=pair.read_url,
                sweeper=False,
                retention_interval_ms=0,
            ),
        }
        for q in brokers.values():
            await q.start()  # A first: it migrates the primary
        try:
            t0 = time.perf_counter()
            await _load(pair, ns.timers)
            took = time.perf_counter() - t0
            res.say(f"loaded {ns.timers:,} timers, replayed on the standby, {took:.1f} s")
            spent: dict[str, list[float]] = {"A": [], "B": []}
            for n, which in enumerate(phases(ns.rounds)):
                cpu, wall = await _phase(brokers[which], ident, ns.calls, postmaster)
                spent[which].append(cpu)
                where = "primary" if which == "A" else "replica"
                res.row(f"phase {n + 1}: reads on the {where}", **{
                    "primary CPU s": cpu, "wall s": wall, "calls": ns.calls * len(READS)
                })  # fmt: skip
        finally:
            for q in brokers.values():
                await q.stop()
    ratios = [b / a if a else None for a, b in zip(spent["A"], spent["B"], strict=True)]
    res.data["ratios_b_over_a"] = ratios
    known = [r for r in ratios if r is not None]
    res.data["median_ratio"] = median(known) if known else None
    res.section(
        f"Primary CPU with the reads on the replica / on the primary: median "
        f"{res.data['median_ratio']} over {len(known)} pairs ({ratios})."
    )
    res.finish()
    return 0
