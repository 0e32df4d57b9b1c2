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
import re
import time

from bench import harness
from bench.env import Target, runtime
from bench.harness import Results, md_table, median
from bench.sweeper import schedule_due
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
    rt = runtime(q)
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


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--timers", type=int, default=40000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument(
        "--sizes",
        type=harness.positive_ints,
        default=[1000, 200],
        help="claim sizes, comma-separated (default 1000,200; the first is the "
        "sweeper's default QUEEN_SWEEPER_CLAIM_BATCH, 200 until 2026-12-06)",
    )
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", action="store_true", help="time the fire's own steps too")


async def main(ns: argparse.Namespace) -> int:
    sizes = ns.sizes
    if ns.timers < 1 or ns.queues < 1:
        raise SystemExit("bench fire-cost: --timers and --queues must be positive")
    res = Results("fire-cost", ns)
    rounds = []
    async with Target("firecost", ns.database_url, ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.server_url or tgt.url, tgt.embedded)
        for r in range(ns.rounds):
            url = await tgt.fresh()
            got = await one_round(url, ns.timers, ns.queues, sizes, ns.steps)
            await tgt.drop(url)
            res.say(f"round {r + 1}: {ns.timers:,} timers due at once in {ns.queues} queues")
            rounds.append(got)
    for size, how in kinds_of(sizes):
        rows = [x for got in rounds for x in got["per"][(size, how)]]
        med = [1e6 * (median([x[i] for x in rows]) or 0.0) for i in range(4)] if rows else []
        res.row(
            f"claim {size}, fire by {how}",
            **{"claims": len(rows)},
            **dict(zip(("claim us", "pack us", "fire us", "bench CPU us"), med)),
        )
    steps: dict[str, list[float]] = {}
    for got in rounds:
        for k, v in got["fire_steps"].items():
            steps.setdefault(k, []).extend(v)
    if steps:
        res.section(
            f"## The fire's steps at claim {sizes[0]} (ms, median)\n\n"
            + md_table(["step", "ms"], [[k, 1e3 * (median(v) or 0.0)] for k, v in steps.items()], 3)
        )
    res.data["fire_steps_ms"] = {k: 1e3 * (median(v) or 0.0) for k, v in steps.items()}
    res.section(
        "Per timer, the median over full claims of every round: wall time of the claim, the "
        "pack and the fire, and the bench process's CPU over the three."
    )
    res.finish()
    return 0
