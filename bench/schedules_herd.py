"""The top-of-the-hour herd: N schedule occurrences due at one instant, drained beside a burst of
N one-shot timers due at once, in the same run; and what each costs the server.

    queen bench schedules --herd 100000 [--drains 1]

With time travel, no waiting for an hour: N schedules at `0 * * * *` are created with `now` at
2030-01-01T00:30Z, so each stages its 01:00 occurrence; a drain at 01:00:00.050 (the fire's
`now`) fires the herd, and each fire stages the 02:00 occurrence, which the second schedule
phase drains. A one-shot phase schedules N timers due at once (delay 0, real time) and drains
them. Phases alternate A B B A (A: the schedule herd, B: the one-shot burst) on one in-process
broker with no sweeper; each drain is `--drains` concurrent `timers.fire.drain` loops (the
sweeper's claim, pack and fire, claims of QUEEN_SWEEPER_CLAIM_BATCH rows). Autovacuum is off on
the fire's tables, so they are vacuumed and analyzed before each drain, outside what is
measured, as autovacuum would between two herds (without it the plans ran on statistics from
before the first herd, and the drains slowed phase after phase).

Per phase: the drain's rate (fired per second of wall time), and per occurrence or timer the
WAL it wrote (pg_current_wal_insert_lsn before and after, divided by the count) and the
server's CPU (the postmaster and its children from /proc: utime + stime, so the embedded
server only; background processes included, autovacuum off on the tables the fire writes), and
the broker's (this process's CPU time: claim, plan, pack, encode).
For B, the scheduling of the burst is measured too: a one-shot timer's whole cost is its
schedule plus its fire, where an occurrence's fire already includes staging the next one.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import os
import time
from collections import Counter
from collections.abc import Awaitable
from typing import Any

from bench import harness
from bench.env import Target, runtime
from bench.harness import Results
from bench.queries import BQ
from bench.sweeper import schedule_due

__all__ = ["herd_figures", "main", "per_unit_costs", "phase_order"]

QUEUE = "bench-herd"
PAYLOAD = base64.b64encode(b'{"report":"hourly"}').decode()
CREATED_AT = dt.datetime(2030, 1, 1, 0, 30, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
_KEYS = ("rate_per_s", "wal_bytes_per", "server_cpu_us_per", "broker_cpu_us_per")
# every table the fire reads or writes: with autovacuum off, a stale estimate of queen.log_txns
# (analyzed while nearly empty) turned the fire's txn probe into scans that grew phase after
# phase (server CPU per occurrence 514 then 1,866 µs at 10^4)
VACUUM_TIMERS = (
    "VACUUM ANALYZE queen.log_timers, queen.log_txns, queen.log_segments, queen.log_partitions,"
    " queen.schedules, queen.schedule_runs"
)
_TICK_S = 0.01  # USER_HZ: /proc counts CPU time in hundredths of a second on Linux


def phase_order() -> list[str]:
    """A B B A: the schedule herd, the one-shot burst, the burst again, the herd again."""
    return ["A", "B", "B", "A"]


def per_unit_costs(
    n: int, seconds: float, wal_bytes: int, server_cpu_s: float | None, broker_cpu_s: float
) -> dict:
    """One drain's figures: rate (per s), WAL bytes, server and broker CPU (µs) per unit."""
    return {
        "count": n,
        "seconds": seconds,
        "rate_per_s": harness.rate(n, seconds),
        "wal_bytes_per": harness.per_unit(wal_bytes, n),
        "server_cpu_us_per": None
        if server_cpu_s is None
        else harness.per_unit(server_cpu_s * 1e6, n),
        "broker_cpu_us_per": harness.per_unit(broker_cpu_s * 1e6, n),
    }


def herd_figures(phases: list[tuple[str, dict]]) -> dict:
    """Per kind (A, B), the median of its phases, and the ratios A / B of rate and costs."""
    out: dict[str, Any] = {}
    for kind in ("A", "B"):
        mine = [f for k, f in phases if k == kind]
        out[kind] = {
            key: harness.median([f[key] for f in mine if f[key] is not None]) for key in _KEYS
        }
    out["ratio"] = {
        key: (out["A"][key] / out["B"][key]) if out["A"][key] and out["B"][key] else None
        for key in _KEYS
    }
    return out


def _stat_cpu_ticks(pid: int) -> tuple[int, list[int]]:
    """(own + reaped children's ticks of `pid`, pids of its children) from /proc."""
    own = 0
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(entry) == pid:
            own += sum(int(x) for x in fields[11:15])
        elif int(fields[1]) == pid:
            kids.append(int(entry))
            own += int(fields[11]) + int(fields[12])
    return own, kids


def server_cpu_s(postmaster: int | None) -> float | None:
    if postmaster is None:
        return None
    ticks, _ = _stat_cpu_ticks(postmaster)
    return ticks * _TICK_S


def parent_pid(pid: int) -> int | None:
    """The parent of `pid` when it runs on this machine (a backend's: the postmaster)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


async def _create(queen: Any, ident: Any, n: int) -> float:
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        await queen.schedule_set(
            ident,
            {"queue": QUEUE, "scheduleKey": f"h{i:07d}", "cron": "0 * * * *", "payload": PAYLOAD},
            now=CREATED_AT,
        )

    for start in range(0, n, 64):
        await asyncio.gather(*(one(i) for i in range(start, min(n, start + 64))))
    return time.perf_counter() - t0


async def _measured(conn: Any, postmaster: int | None, work: Awaitable[Any]) -> tuple[Any, dict]:
    lsn0 = await conn.fetchval(BQ.wal_insert_lsn)
    cpu0 = server_cpu_s(postmaster)
    own0 = time.process_time()
    t0 = time.perf_counter()
    got = await work
    seconds = time.perf_counter() - t0
    own = time.process_time() - own0
    cpu1 = server_cpu_s(postmaster)
    lsn1 = await conn.fetchval(BQ.wal_insert_lsn)
    wal = int(
        await conn.fetchval(
            "SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)", lsn1, lsn0
        )
    )
    cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    return got, {"seconds": seconds, "wal": wal, "cpu": cpu, "own": own}


async def _drain(rt: Any, drains: int, now: dt.datetime | None) -> int:
    from queen_timers.timers import fire

    reports = await asyncio.gather(*(fire.drain(rt, now=now) for _ in range(drains)))
    return sum(r.fired for r in reports)


async def main(ns: argparse.Namespace) -> int:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.service import Queen

    ident = Identity(subject="bench")
    n = ns.herd
    res = Results("schedules", ns)
    phases: list[tuple[str, dict]] = []
    schedule_costs: list[dict] = []
    async with Target("schedules", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        queen = Queen(database_url=tgt.url, sweeper=False, retention_interval_ms=0)
        await queen.start()
        conn = await connect_one(tgt.url)
        try:
            rt = runtime(queen)
            created_s = await _create(queen, ident, n)
            await conn.execute(BQ.autovacuum_off)
            await conn.execute("VACUUM ANALYZE")
            await conn.execute(BQ.checkpoint)
            postmaster = parent_pid(await conn.fetchval("SELECT pg_backend_pid()"))
            herd_at = CREATED_AT + HOUR / 2  # 01:00, then 02:00
            bursts = 0
            for kind in phase_order():
                # autovacuum is off (WAL and CPU are attributed to one phase at a time), so the
                # planner's statistics and the dead rows of the phase before are brought up to
                # date here, outside the measurement, as autovacuum would between two herds
                await conn.execute(VACUUM_TIMERS)
                if kind == "A":
                    now = herd_at + dt.timedelta(milliseconds=50)
                    herd_at += HOUR
                    fired, m = await _measured(conn, postmaster, _drain(rt, ns.drains, now))
                else:
                    bursts += 1
                    prefix = f"b{bursts}-"
                    _, s = await _measured(conn, postmaster, schedule_due(queen, n, 1, prefix))
                    await conn.execute(VACUUM_TIMERS)
                    schedule_costs.append(
                        per_unit_costs(n, s["seconds"], s["wal"], s["cpu"], s["own"])
                    )
                    fired, m = await _measured(conn, postmaster, _drain(rt, ns.drains, None))
                phases.append(
                    (kind, per_unit_costs(fired, m["seconds"], m["wal"], m["cpu"], m["own"]))
                )
            herd_rows = await conn.fetch(
                "SELECT occurrence_at, outcome, count(*) AS n FROM queen.schedule_runs"
                " WHERE queue = $1 GROUP BY 1, 2",
                QUEUE,
            )
            await conn.execute(BQ.autovacuum_on)
        finally:
            await conn.close()
            await queen.stop()

    figures = herd_figures(phases)
    outcomes = Counter({(r["occurrence_at"].isoformat(), r["outcome"]): r["n"] for r in herd_rows})
    res.data.update(
        {
            "config": {"herd": n, "drains": ns.drains},
            "create_schedules_s": created_s,
            "phases": [{"kind": k, **f} for k, f in phases],
            "oneshot_schedule": schedule_costs,
            "herd": figures,
            "ledger": {f"{at} {o}": c for (at, o), c in sorted(outcomes.items())},
        }
    )
    for kind, f in phases:
        res.row(
            "schedule herd" if kind == "A" else "one-shot burst",
            fired=f["count"],
            seconds=f["seconds"],
            **{
                "fired/s": f["rate_per_s"],
                "WAL B/each": f["wal_bytes_per"],
                "server CPU µs/each": f["server_cpu_us_per"],
                "broker CPU µs/each": f["broker_cpu_us_per"],
            },
        )
    for f in schedule_costs:
        res.row(
            "one-shot schedule (the burst's staging)",
            fired=f["count"],
            seconds=f["seconds"],
            **{
                "fired/s": f["rate_per_s"],
                "WAL B/each": f["wal_bytes_per"],
                "server CPU µs/each": f["server_cpu_us_per"],
                "broker CPU µs/each": f["broker_cpu_us_per"],
            },
        )
    r = figures["ratio"]
    res.section(
        f"A herd of {n} occurrences due at one instant (`0 * * * *`, time travel) beside a burst "
        f"of {n} one-shot timers due at once, A B B A, {ns.drains} drain loop(s). Herd / burst: "
        f"rate {harness.fmt(r['rate_per_s'], 2)} (goal: about 1), WAL per unit "
        f"{harness.fmt(r['wal_bytes_per'], 2)}, server CPU per unit "
        f"{harness.fmt(r['server_cpu_us_per'], 2)}, broker CPU per unit "
        f"{harness.fmt(r['broker_cpu_us_per'], 2)}; creating the schedules took "
        f"{harness.fmt(created_s, 1)} s."
    )
    res.finish()
    return 0
