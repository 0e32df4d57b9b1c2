"""Occurrence lateness of recurring schedules beside one-shot timers due at the same instants.

    queen bench schedules [--schedules 1000] [--minutes 2] [--jitter-ms 0]
                          [--database-url URL] [--keep-db] [--out DIR]
    queen bench schedules --herd 100000 [--drains 1]   (bench/schedules_herd.py)

One broker process (`queen serve`, its sweeper on) on a fresh bench database. From this
process, `--schedules` schedules at `* * * * *` (each minute) are created through the service,
and as many one-shot timers are scheduled, in a queue of their own, for each of the next
`--minutes` minute boundaries: the same herd, twice. After the last boundary the run waits
until both are delivered, then reads:

  schedules  each occurrence's ledger row (queen.schedule_runs): late_ms is the fire's
             transaction time minus its due time (with jitter), both PostgreSQL's clock;
  one-shot   each frame's segment created_at (the fire's transaction) minus the deliverAt the
             schedule answered (bench/load.read_lateness), PostgreSQL's clock too.

It checks what the issue's goal asks: occurrences counted per schedule (none missing, none
twice), none before its due time, and the p99 ratio of the two paths (goal: within 1.5x).
With `--jitter-ms`, each schedule fires at its deterministic offset inside the window, and its
one-shot twin is due at the same offset (the same spread herd, twice).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import time
import uuid
from collections import Counter
from typing import Any

from bench import harness, schedules_herd
from bench.env import Target
from bench.harness import Results
from bench.load import deliver_of, read_lateness, schedule, wait_drained

__all__ = ["add_arguments", "main"]

QUEUE_SCHEDULES = "bench-schedules"
QUEUE_ONESHOT = "bench-oneshot"
PAYLOAD = base64.b64encode(b'{"report":"hourly"}').decode()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schedules", type=int, default=1000, help="schedules, each minute (1000)")
    p.add_argument("--minutes", type=int, default=2, help="minute boundaries measured (2)")
    p.add_argument("--jitter-ms", type=int, default=0, help="each schedule's jitter window (0)")
    p.add_argument(
        "--herd",
        type=int,
        default=0,
        help="instead: a herd of N occurrences due at one instant (time travel) beside a "
        "one-shot burst of N, A B B A, with WAL and server CPU per unit (0: off)",
    )
    p.add_argument("--drains", type=int, default=1, help="with --herd: concurrent drain loops (1)")


async def _create(queen: Any, ident: Any, n: int, jitter: int) -> None:
    async def one(i: int) -> None:
        await queen.schedule_set(
            ident,
            {
                "queue": QUEUE_SCHEDULES,
                "scheduleKey": key_of(i),
                "cron": "* * * * *",
                "payload": PAYLOAD,
                "jitterMs": jitter,
            },
        )

    for start in range(0, n, 64):
        await asyncio.gather(*(one(i) for i in range(start, min(n, start + 64))))


def jitter_offsets(
    tenant: uuid.UUID, n: int, boundaries: list[int], jitter_ms: int
) -> dict[tuple[int, int], float]:
    """{(schedule i, boundary): ms}: the offset inside the jitter window at which schedule i
    fires at that boundary, which its one-shot twin then gets too (the same herd, twice)."""
    from queen_timers.timers.recurrence import jitter_offset_ms, schedule_id

    out = {}
    for i in range(n):
        sid = schedule_id(tenant, QUEUE_SCHEDULES, key_of(i))
        for at in boundaries:
            instant = dt.datetime.fromtimestamp(at, dt.UTC)
            out[i, at] = float(jitter_offset_ms(sid, instant, jitter_ms))
    return out


def key_of(i: int) -> str:
    return f"s{i:07d}"


async def main(ns: argparse.Namespace) -> int:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.service import Queen
    from queen_timers.testing.broker import BrokerProcess

    if ns.herd:
        return await schedules_herd.main(ns)
    ident = Identity(subject="bench")
    res = Results("schedules", ns)
    async with Target("schedules", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        setup = Queen(database_url=tgt.url, sweeper=False, retention_interval_ms=0)
        await setup.start()
        broker = BrokerProcess(tgt.url)
        try:
            await broker.start()
            # created well before a boundary, so the first boundary counted is whole
            gap = 60 - time.time() % 60
            if gap < 5 + ns.schedules / 500:
                await asyncio.sleep(gap + 0.5)
            t_begin = time.time()
            await _create(setup, ident, ns.schedules, ns.jitter_ms)
            created = time.time()
            first = (int(created // 60) + 1) * 60
            boundaries = [first + 60 * m for m in range(ns.minutes)]
            offsets = jitter_offsets(ident.tenant, ns.schedules, boundaries, ns.jitter_ms)
            deliver: dict[bytes, float] = {}
            for at in boundaries:
                for start in range(0, ns.schedules, 256):
                    now = time.time()
                    ops = [
                        {
                            "op": "schedule",
                            "queue": QUEUE_ONESHOT,
                            "timerKey": f"t{at}-{i}",
                            "delayMs": (at - now) * 1000.0 + offsets[i, at],
                            "txn": f"t{at}-{i}",
                            "payload": PAYLOAD,
                        }
                        for i in range(start, min(ns.schedules, start + 256))
                    ]
                    deliver.update(deliver_of(a) for a in await schedule(setup, ident, ops))
            # past the last boundary and its jitter window, then until both are drained
            end = boundaries[-1] + ns.jitter_ms / 1000.0 + 2.0
            await asyncio.sleep(max(0.0, end - time.time()))
            for i in range(ns.schedules):  # stop the cadence: nothing after the last boundary
                await setup.schedule_pause(ident, QUEUE_SCHEDULES, key_of(i))
            conn = await connect_one(tgt.url)
            try:
                left = await wait_drained(conn, QUEUE_ONESHOT, 60.0)
                fired = await read_lateness(conn, QUEUE_ONESHOT, t_begin, deliver)
                runs = await conn.fetch(
                    "SELECT schedule_key, occurrence_at, outcome, late_ms,"
                    " fired_at >= due_at AS on_or_after FROM queen.schedule_runs"
                )
            finally:
                await conn.close()
        finally:
            await broker.terminate()
            await setup.stop()

    first_at = dt.datetime.fromtimestamp(boundaries[0], dt.UTC)
    last_at = dt.datetime.fromtimestamp(boundaries[-1], dt.UTC)
    counted = [r for r in runs if first_at <= r["occurrence_at"] <= last_at]
    per_occurrence = Counter((r["schedule_key"], r["occurrence_at"]) for r in counted)
    sched_late = [float(r["late_ms"]) for r in counted if r["outcome"] == "fired"]
    one_late = [(f - d) * 1000.0 for d, f in fired.values()]
    expected = ns.schedules * ns.minutes
    paths = {
        "schedules": {
            "expected": expected,
            "fired": sum(1 for r in counted if r["outcome"] == "fired"),
            "missing": expected - len(per_occurrence),
            "duplicated": sum(n - 1 for n in per_occurrence.values() if n > 1)
            + sum(1 for r in counted if r["outcome"] == "duplicate"),
            "skipped": sum(1 for r in counted if r["outcome"] == "skipped"),
            "early": sum(1 for r in counted if not r["on_or_after"]),
            "lateness_ms": harness.summarize(sched_late),
        },
        "one-shot": {
            "expected": expected,
            "fired": len(fired),
            "missing": expected - len(fired),
            "pending_at_end": left,
            "early": sum(1 for x in one_late if x < 0),
            "lateness_ms": harness.summarize(one_late),
        },
    }
    p99s = (paths["schedules"]["lateness_ms"]["p99"], paths["one-shot"]["lateness_ms"]["p99"])
    ratio = p99s[0] / p99s[1] if p99s[0] is not None and p99s[1] else None
    res.data.update(
        {
            "config": {
                "schedules": ns.schedules,
                "minutes": ns.minutes,
                "jitter_ms": ns.jitter_ms,
            },
            "paths": paths,
            "p99_ratio": ratio,
        }
    )
    for name, e in paths.items():
        lat = e["lateness_ms"]
        res.row(
            name,
            expected=e["expected"],
            fired=e["fired"],
            missing=e["missing"],
            duplicated=e.get("duplicated"),
            early=e["early"],
            **{"late p50 ms": lat["p50"], "late p99 ms": lat["p99"], "late max ms": lat["max"]},
        )
    res.section(
        f"{ns.schedules} schedules at `* * * * *` (jitter {ns.jitter_ms} ms) beside as many "
        f"one-shot timers due at the same {ns.minutes} minute boundaries, one broker process. "
        f"p99 ratio schedules / one-shot: {harness.fmt(ratio, 2)} (goal: at most 1.5)."
    )
    res.finish()
    return 0
