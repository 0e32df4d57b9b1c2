"""What a timer costs the claim and the fire: each step's time per timer, batch by batch.

    queen bench fire-cost [--timers 40000] [--queues 8] [--sizes 200,500] [--rounds 2] [--steps]

Each round takes a fresh database of the embedded PostgreSQL (or --database-url's server),
schedules --timers timers due at once over --queues queues, then claims, packs and fires them
in sequence on one connection until none is due: no sweeper, no pipelining, so each step's
time is its own. Consecutive batches rotate through the kinds below, so the machine's speed
swings (bench/cpuprobe.py) fall on every kind alike:

  - a claim of each size in --sizes, fired by the row versions the claim wrote (the
    sweeper's path: queen.log_timers_fire_v2 finds rows by ctid);
  - a claim of the first size, fired by primary key (the fire's fallback, no ctids): the
    difference is what the lookup by version saves.

Per kind: the median wall time per timer of the claim, the pack and the fire, and the bench
process's CPU per timer (time.thread_time over the three: asyncpg's encoding and decoding,
packing and compressing; a broker spends the same). Only full claims count (the drain's tail
is left out). --steps adds the fire's own steps (1-9 of fire_v2 in migrations/025) for the
sweeper's path at the first size, from a copy of the fire that raises a NOTICE with
clock_timestamp() before each step, installed in the round's scratch database only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import time

from bench.env import command_line
from bench.sweeper import _Server, schedule_due
from queen_timers.db.migrate import migration_files
from queen_timers.service import Queen
from queen_timers.timers import fire, store

_STEP = re.compile(r"^  -- (\d+[ab]?)\. ")


def instrumented_fire() -> str:
    """fire_v2's text with `RAISE NOTICE 'QSTEP <step> <clock_timestamp()>'` before each
    numbered step and before its final RETURN."""
    text = next(f for f in migration_files() if f.name.startswith("025_")).read_text()
    start = text.index("CREATE OR REPLACE FUNCTION queen.log_timers_fire_v2(")
    end = text.index("END $$;", start) + len("END $$;")
    out = []
    for line in text[start:end].splitlines():
        m = _STEP.match(line)
        if m:
            out.append(f"  RAISE NOTICE 'QSTEP % %', '{m.group(1)}', clock_timestamp();")
        elif line.startswith("  RETURN ("):
            out.append("  RAISE NOTICE 'QSTEP % %', 'return', clock_timestamp();")
        out.append(line)
    return "\n".join(out)


def step_durations(marks: list[tuple[str, dt.datetime]]) -> dict[str, float]:
    """{step: seconds until the next mark} from one fire's ordered (step, instant) marks."""
    return {a: (tb - ta).total_seconds() for (a, ta), (_, tb) in zip(marks, marks[1:])}


def kinds_of(sizes: list[int]) -> list[tuple[int, str]]:
    return [(s, "ctid") for s in sizes] + [(sizes[0], "key")]


async def one_round(url: str, timers: int, queues: int, sizes: list[int], steps: bool) -> dict:
    q = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await q.start()
    rt = q.rt
    kinds = kinds_of(sizes)
    per: dict[tuple[int, str], list[tuple[float, ...]]] = {k: [] for k in kinds}
    fire_steps: dict[str, list[float]] = {}
    try:
        if steps:
            await rt.pool.execute(instrumented_fire())
        await schedule_due(q, timers, queues)
        marks: list[tuple[str, dt.datetime]] = []

        def on_notice(_conn, msg) -> None:
            if msg.message.startswith("QSTEP "):
                _, step, at = msg.message.split(" ", 2)
                marks.append((step, dt.datetime.fromisoformat(at)))

        s = rt.settings
        async with rt.pool.acquire() as conn:
            await conn.execute("VACUUM ANALYZE queen.log_timers")
            conn.add_log_listener(on_notice)
            n = 0
            while True:
                size, how = kinds[n % len(kinds)]
                n += 1
                c0, w0 = time.thread_time(), time.perf_counter()
                claimed = await store.claim(
                    conn,
                    fire.shard_ring(),
                    None,
                    s.sweeper_lease_ms,
                    size,
                    s.sweeper_fire_rate_per_tenant,
                )
                w1 = time.perf_counter()
                if not claimed:
                    break
                packed = await fire.pack(rt, claimed)
                w2 = time.perf_counter()
                if how == "key":
                    for t in claimed:
                        t.tid = None
                marks.clear()
                for batch in packed.batches:
                    await fire.fire_statement(conn, batch, None)
                c3, w3 = time.thread_time(), time.perf_counter()
                if len(claimed) < size:
                    continue  # the tail of the drain: not a full claim
                per[(size, how)].append(
                    ((w1 - w0) / size, (w2 - w1) / size, (w3 - w2) / size, (c3 - c0) / size)
                )
                if steps and (size, how) == kinds[0] and len(packed.batches) == 1:
                    for step, sec in step_durations(marks).items():
                        fire_steps.setdefault(step, []).append(sec)
            conn.remove_log_listener(on_notice)
    finally:
        await q.stop()
    return {"per": per, "fire_steps": fire_steps}


def kind_line(size: int, how: str, rows: list[tuple[float, ...]]) -> str:
    if not rows:
        return f"claim {size:>4}, fire by {how:4}: no full claims"
    med = [1e6 * statistics.median(r[i] for r in rows) for i in range(4)]
    return (
        f"claim {size:>4}, fire by {how:4}: claim {med[0]:5.1f}  pack {med[1]:4.1f}  "
        f"fire {med[2]:5.1f}  = {med[0] + med[1] + med[2]:5.1f} us/timer (wall); "
        f"bench CPU {med[3]:4.1f} us/timer ({len(rows)} claims)"
    )


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--database-url")
    ap.add_argument("--timers", type=int, default=40000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument(
        "--sizes",
        default="200,500",
        help="claim sizes, comma-separated (default 200,500; the first is the "
        "sweeper's default QUEEN_SWEEPER_CLAIM_BATCH)",
    )
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", action="store_true", help="time the fire's own steps too")


async def main(ns: argparse.Namespace) -> int:
    sizes = [int(x) for x in ns.sizes.split(",") if x.strip()]
    if not sizes or min(sizes) < 1 or ns.timers < 1 or ns.queues < 1:
        raise SystemExit("bench fire-cost: --sizes, --timers and --queues must be positive")
    print("command: " + command_line())
    print(f"machine: {os.cpu_count()} cores")
    async with _Server(ns.database_url) as srv:
        for r in range(ns.rounds):
            url = await srv.fresh()
            res = await one_round(url, ns.timers, ns.queues, sizes, ns.steps)
            await srv.dbs.drop(url)
            print(
                f"round {r + 1}: {ns.timers:,} timers due at once in {ns.queues} queues", flush=True
            )
            for (size, how), rows in res["per"].items():
                print("  " + kind_line(size, how, rows), flush=True)
            if res["fire_steps"]:
                parts = [
                    f"{k} {1e3 * statistics.median(v):.2f}" for k, v in res["fire_steps"].items()
                ]
                print(
                    f"  fire steps at claim {sizes[0]} (ms, median): " + ", ".join(parts),
                    flush=True,
                )
    return 0
