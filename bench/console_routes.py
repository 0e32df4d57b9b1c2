"""What the operator's routes cost with a million pending timers (issue 16).

    queen bench console-routes [--timers 1000000] [--calls 30] [--database-url URL]
    queen bench console-routes --replica [--timers N] [--calls N] [--rounds N]

Loads --timers pending timers into one queue of the default tenant with ONE
INSERT ... SELECT generate_series through the table's own defaults (keys k/0000000 ..., due
uniformly over the next 90 days, 0.1% of them overdue by up to an hour), plus 1,000 dead
letters, then VACUUM ANALYZE (what autovacuum reaches soon after such a load). Then calls each
service operation --calls times on a started broker without background loops and prints
p50 / p99 in milliseconds. The service call is what every transport adds its wire to.

With --replica: the primary's CPU under the read calls, with the reads on the primary and on
a hot standby (QUEEN_READ_DATABASE_URL), alternated (bench/replica_reads.py).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable

import asyncpg

from bench import replica_reads
from bench.env import Target
from bench.harness import Results, percentile
from bench.queries import BQ
from queen_timers.identity import Identity
from queen_timers.service import Queen


async def timed(calls: int, fn: Callable[[int], Awaitable[object]]) -> list[float]:
    out = []
    for i in range(calls):
        t0 = time.perf_counter()
        await fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--timers", type=int, default=1_000_000)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument(
        "--replica",
        action="store_true",
        help="measure the primary's CPU with the reads on a hot standby against on the primary",
    )
    ap.add_argument("--rounds", type=int, default=3, help="with --replica: A B B A rounds")


async def main(ns: argparse.Namespace) -> int:
    if ns.replica:
        if ns.rounds < 1 or ns.calls < 1 or ns.timers < 1:
            raise SystemExit("bench console-routes --replica: --rounds, --calls, --timers >= 1")
        return await replica_reads.main(ns)
    if not 1 <= ns.calls <= 500 or ns.timers < 1:
        # the calls replay and delete distinct dead letters of the 1,000 loaded
        raise SystemExit("bench console-routes: --calls is 1..500 and --timers positive")
    res = Results("console-routes", ns)
    ident = Identity(subject="bench")
    async with Target("console", ns.database_url, ns.keep_db) as t:
        await res.record_server(t.url, t.embedded)
        conn = await asyncpg.connect(t.url)
        try:
            t0 = time.perf_counter()
            await conn.execute(BQ.console_load, ns.timers)
            res.say(f"loaded {ns.timers:,} timers in {time.perf_counter() - t0:.1f} s")
        finally:
            await conn.close()
        q = Queen(database_url=t.url, sweeper=False, retention_interval_ms=0)
        await q.start()
        try:
            [pushed] = await q.push(ident, [{"queue": "dlq", "payload": {"n": 0}}])
            conn = await asyncpg.connect(t.url)
            try:
                await conn.execute(BQ.console_dead, pushed["partitionId"])
                await conn.execute(BQ.vacuum_analyze_timers)
                await conn.execute(BQ.vacuum_analyze_dlq)
            finally:
                await conn.close()
            pid = pushed["partitionId"]
            n = ns.calls
            runs: list[tuple[str, Callable[[int], Awaitable[object]]]] = [
                ("queues_overview (GET /resources/queues)", lambda i: q.queues_overview(ident)),
                (
                    "queue_summary (GET /resources/queues/big)",
                    lambda i: q.queue_summary(ident, "big"),
                ),
                ("overview (GET /resources/overview)", lambda i: q.overview(ident)),
                ("histogram hour", lambda i: q.timers_histogram(ident, "big", "hour")),
                ("histogram day", lambda i: q.timers_histogram(ident, "big", "day")),
                ("histogram 90d", lambda i: q.timers_histogram(ident, "big", "90d")),
                ("list page of 100 (with state)", lambda i: q.timers_list(ident, "big")),
                ("fire now", lambda i: q.timer_fire_now(ident, "big", f"k/{i * 7919:07d}")),
                (
                    "cancel-prefix, a batch of 1000",
                    lambda i: q.timers_cancel_prefix(ident, "big", f"k/{i + 500:04d}"),
                ),
                (
                    "dlq replay (push), 1 item",
                    lambda i: q.dlq_replay(
                        ident, [{"transactionId": f"dead-{i}", "partitionId": pid}], "push"
                    ),
                ),
                (
                    "dlq delete, 1 item",
                    lambda i: q.dlq_delete(
                        ident, [{"transactionId": f"dead-{500 + i}", "partitionId": pid}]
                    ),
                ),
            ]
            for name, fn in runs:
                lat = await timed(n, fn)
                res.row(name, calls=n, **{"p50 ms": percentile(lat, 50)},
                        **{"p99 ms": percentile(lat, 99)})  # fmt: skip
        finally:
            await q.stop()
    res.finish()
    return 0
