"""Sweeper benchmarks: fire lateness at a steady rate, drain rate of a burst, idle cost.

    queen bench sweeper steady   [--rate 500] [--seconds 30] [--delay 2]
                                 [--cross [--brokers N]] [--no-notify]
    queen bench sweeper burst    [--timers 20000] [--brokers 1]
    queen bench sweeper idle     [--seconds 30]
    queen bench sweeper all      (the issue's whole table at default sizes)

Every run takes a fresh database of the embedded PostgreSQL (or --database-url's server).
Lateness is measured by the database clock: the log segment's created_at (stamped inside the
fire's transaction) minus the timer's deliver_at (computed by PostgreSQL at schedule). Each
row carries the host's steal over the run (bench/harness.HostCpu): on a shared virtual
machine the hypervisor's steal is part of every tail. `--cpu-probe` runs bench/cpuprobe.py
beside the steady runs and adds the p99 of the timers clear of the machine's slow windows;
`queen bench machine` measures the host's own floors.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.cpuprobe import CpuProbe
from bench.env import Target, fetchrow, runtime
from bench.harness import HostCpu, Results, percentile, stall_starts
from bench.load import deliver_of, read_lateness, schedule
from bench.queries import BQ
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.testing.broker import BrokerProcess

IDENT = Identity(subject="bench")
ADMIN = Identity(admin=True)
_PAYLOAD = base64.b64encode(b'{"bench":true}').decode()


def op(key: str, delay_ms: float, queue: str = "bench") -> dict:
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": key,
        "payload": _PAYLOAD,
    }


LATE_MS = 20.0  # the one-broker p99 goal: a timer later than this is "late"


def late_clusters(lateness: list[tuple[float, float]], over_ms: float = LATE_MS) -> dict:
    """How the late timers (over `over_ms`) are spread: a stall of the machine delays every
    timer due while it lasts, so late timers less than 100 ms apart by deliver_at are one
    cluster. Many timers in few clusters about 1.5 s apart is the host's stall pattern
    (`queen bench machine`); late timers spread evenly would be the broker's own pace."""
    late_at = [at for at, ms in lateness if ms > over_ms]
    starts = stall_starts(late_at)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    return {
        "over_ms": over_ms,
        "late_pct": 100.0 * len(late_at) / max(len(lateness), 1),
        "clusters": len(starts),
        "cluster_every_s": statistics.median(gaps) if gaps else float("nan"),
    }


async def schedule_due(q: Queen, n: int, queues: int = 8, prefix: str = "b") -> None:
    """`n` timers due at once (delay 0), spread round-robin over `queues` queues, in calls of
    256 ops: the backlog the burst and bench/fire_cost.py drain."""
    for i in range(0, n, 256):
        await schedule(
            q,
            IDENT,
            [op(f"{prefix}{j}", 0, queue=f"q{j % queues}") for j in range(i, min(i + 256, n))],
        )


async def wait_count(pool, n: int, timeout: float) -> int:
    """Wait until `n` frames are in the log (polling the partitions' allocator heads, see
    q_common.sql frames_pushed); returns how many are, counted exactly at the end."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        pushed = await pool.fetchval(BQ.frames_pushed)
        if pushed >= n:
            break
        await asyncio.sleep(0.05)
    return int(await pool.fetchval(BQ.frames_count))


async def steady(
    url: str,
    rate: int,
    seconds: int,
    delay_s: float,
    cross: bool,
    notify: bool,
    floor_ms: int | None = None,
    firing: int = 1,
    probe: bool = True,
    samples: bool = False,
) -> dict:
    """Schedule `rate` timers/s for `seconds`, each due `delay_s` later; measure lateness.
    `cross`: the `firing` brokers that fire are processes of their own, and this one only
    schedules (with more than one, they share the work through SKIP LOCKED). `probe`: run
    bench/cpuprobe.py meanwhile and report the lateness of the timers whose wait did not
    overlap a window where the machine itself ran slow. `samples`: also return every timer's
    lateness (ms, "lateness_samples_ms"), for a caller that pools several runs."""
    # floor_ms None: the setting's default (what a broker ships with)
    env = {"QUEEN_SWEEPER_NOTIFY": "true" if notify else "false"}
    floor: dict[str, Any] = {} if floor_ms is None else {"sweeper_min_sleep_ms": floor_ms}
    if floor_ms is not None:
        env["QUEEN_SWEEPER_MIN_SLEEP_MS"] = str(floor_ms)
    brokers: list[BrokerProcess] = []
    if cross:  # the firing brokers are other processes; this one only schedules
        brokers = list(
            await asyncio.gather(
                *(BrokerProcess(url, env=env).start() for _ in range(max(firing, 1)))
            )
        )
    q = Queen(
        database_url=url,
        sweeper=not cross,
        sweeper_notify=notify,
        retention_interval_ms=0,
        **floor,
    )
    await q.start()
    # What `queen serve` does after boot (queen_timers/cli.py): boot objects out of the collector's
    # sight, so a full collection does not walk them while timers are firing.
    gc.collect()
    gc.freeze()
    scheduled: dict[bytes, float] = {}
    try:
        await asyncio.sleep(1.0)
        with CpuProbe(enabled=probe) as cpu:
            total = rate * seconds
            t0 = time.monotonic()
            # Send in ticks of 10 ms so the offered rate is smooth, one call per tick.
            tick = 0.01
            per_tick = rate * tick
            sent = 0
            carry = 0.0
            while sent < total:
                carry += per_tick
                n = min(int(carry), total - sent)
                carry -= n
                if n:
                    ops = [op(f"s{sent + i}", delay_s * 1000) for i in range(n)]
                    scheduled.update(deliver_of(r) for r in await schedule(q, IDENT, ops))
                    sent += n
                nxt = t0 + (sent / rate)
                await asyncio.sleep(max(0.0, min(tick, nxt - time.monotonic())))
            got = await wait_count(runtime(q).pool, total, delay_s + 30)
        fired = await read_lateness(runtime(q).pool, "bench", 0.0, scheduled)
        pairs = sorted((d, (f - d) * 1000.0) for d, f in fired.values())
        late = [ms for _, ms in pairs]
    finally:
        await q.stop()
        await asyncio.gather(*(b.kill() for b in brokers))
    machine = {}
    if cpu.ran:
        share, rest = cpu.split([(at, at + ms / 1000.0) for at, ms in pairs], late, wall=True)
        sm = cpu.summary()
        machine = {
            "cpu_probe": {
                "slow_windows": sm["windows"],
                "slow_pct": sm["slow_share_pct"],
                "slowdown_x": sm["slowdown_x"],
                "bursts_every_s": sm["every_s"],
            },
            "outside_slow_windows": {
                "timers_pct": 100.0 * (1.0 - share),
                "p50": percentile(rest, 50) if rest else float("nan"),
                "p99": percentile(rest, 99) if rest else float("nan"),
            },
        }
    return {
        "scenario": "steady",
        "rate": rate,
        "seconds": seconds,
        "delay_s": delay_s,
        "cross_broker": cross,
        "firing_brokers": len(brokers) if cross else 1,
        "notify": notify,
        "floor_ms": floor_ms,
        "scheduled": len(scheduled),
        "delivered": got,
        "early": sum(1 for x in late if x < 0),
        "lateness_ms": {
            "p50": percentile(late, 50),
            "p99": percentile(late, 99),
            "max": max(late),
            "mean": statistics.fmean(late),
        },
        "late": late_clusters(pairs),
        **machine,
        **({"lateness_samples_ms": late} if samples else {}),
    }


async def burst(url: str, timers: int, brokers: int, probe: bool = True) -> dict:
    """`timers` due at one instant (fire paused while scheduling); drain rate. `probe`: run
    bench/cpuprobe.py during the drain and report how much of it the machine spent slow."""
    q = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await q.start()
    procs = [BrokerProcess(url) for _ in range(brokers)]
    try:
        pool = runtime(q).pool
        await q.switches_set(ADMIN, {"timersFire": False})
        await schedule_due(q, timers)
        await asyncio.gather(*(p.start() for p in procs))
        await asyncio.sleep(1.0)
        with CpuProbe(enabled=probe) as cpu:
            t_resume = await pool.fetchval(BQ.now_epoch)
            await q.switches_set(ADMIN, {"timersFire": True})
            got = await wait_count(pool, timers, 300)
        span = await fetchrow(pool, BQ.drain_span)
        dup = await pool.fetchval(BQ.frames_duplicated)
    finally:
        await asyncio.gather(*(p.kill() for p in procs))
        await q.stop()
    first, last = float(span["first"]), float(span["last"])
    machine = {}
    if cpu.ran:
        machine = {
            "drain_slow_pct": 100.0
            * cpu.slow_seconds(first, last, wall=True)
            / max(last - first, 1e-9),
            "probe_unit_us": 1e6 * cpu.unit_median_s,
        }
    return {
        "scenario": "burst",
        "timers": timers,
        "brokers": brokers,
        "delivered": got,
        "duplicates": dup,
        "drain_s": last - first,
        "timers_per_s": timers / max(last - first, 1e-9),
        "resume_to_last_s": last - float(t_resume),
        **machine,
    }


async def idle(url: str, seconds: int) -> dict:
    """CPU of one idle broker (empty table) plus its PostgreSQL server's processes, in
    millicores."""
    # Only this server's processes: the postmaster (a backend's parent) and its children, so
    # another PostgreSQL on the machine (a test run, another bench) is not counted.
    import asyncpg
    import psutil  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url)
    try:  # ask while the backend lives: once the connection closes it is gone
        postmaster = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).parent()
    except psutil.Error:  # the server runs on another machine: its CPU is not ours to read
        postmaster = None
    finally:
        await conn.close()

    def pg_procs() -> list[psutil.Process]:
        try:
            return [postmaster, *postmaster.children()] if postmaster else []
        except psutil.Error:
            return []

    def cpu(ps: list[psutil.Process]) -> float:
        total = 0.0
        for p in ps:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    async with BrokerProcess(url) as b:
        await asyncio.sleep(3.0)  # let boot settle
        broker = [psutil.Process(b.pid)]
        pgs = pg_procs()
        c0, p0, t0 = cpu(broker), cpu(pgs), time.monotonic()
        await asyncio.sleep(seconds)
        c1, p1, t1 = cpu(broker), cpu(pg_procs()), time.monotonic()
    wall = t1 - t0
    return {
        "scenario": "idle",
        "seconds": round(wall, 1),
        "broker_millicores": (c1 - c0) / wall * 1000,
        "postgres_millicores": (p1 - p0) / wall * 1000 if postmaster else float("nan"),
        "total_millicores": ((c1 - c0) + (p1 - p0)) / wall * 1000,
    }


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("scenario", choices=["steady", "burst", "idle", "all"])
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--delay", type=float, default=2.0)
    ap.add_argument("--cross", action="store_true", help="schedule on a second broker")
    ap.add_argument("--no-notify", action="store_true")
    ap.add_argument(
        "--floor-ms",
        type=int,
        default=None,
        help="QUEEN_SWEEPER_MIN_SLEEP_MS of the firing broker (default: the setting's default)",
    )
    ap.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py beside the steady runs (it takes ~5%% of each core)",
    )
    ap.add_argument(
        "--probe-burst",
        action="store_true",
        help="run bench/cpuprobe.py during each burst's drain too (its ~5%% of each core "
        "is taken from the drain)",
    )
    ap.add_argument("--timers", type=int, default=20000)
    ap.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="burst: brokers draining; steady --cross: brokers firing (default 1)",
    )


async def main(ns: argparse.Namespace) -> int:
    res = Results(f"sweeper-{ns.scenario}", ns)
    runs: list[tuple[str, Callable[[str], Awaitable[dict[str, Any]]]]] = []
    if ns.scenario in ("steady", "all"):
        combos = (
            [(ns.cross, not ns.no_notify)]
            if ns.scenario == "steady"
            else [(False, True), (True, True), (True, False)]
        )
        for cross, notify in combos:
            what = "steady" + (", cross" if cross else "") + ("" if notify else ", poll only")

            def one(u: str, c: bool = cross, n: bool = notify) -> Awaitable[dict[str, Any]]:
                firing = ns.brokers if c else 1
                return steady(u, ns.rate, ns.seconds, ns.delay, c, n, ns.floor_ms, firing,
                              probe=ns.cpu_probe)  # fmt: skip

            runs.append((what, one))
    if ns.scenario in ("burst", "all"):
        # The probe beside a drain only with --probe-burst: it takes ~5% of each core, a cost
        # the drain rate would carry, and it does not explain the drain's swings.
        for b in [ns.brokers] if ns.scenario == "burst" else [1, 2, 3]:

            def drain(u: str, b: int = b) -> Awaitable[dict[str, Any]]:
                return burst(u, ns.timers, b, ns.probe_burst)

            runs.append((f"burst, {b} broker(s)", drain))
    if ns.scenario in ("idle", "all"):
        runs.append(("idle", lambda u: idle(u, int(ns.seconds))))
    results = []
    async with Target("sweeper", ns.database_url, ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.server_url or tgt.url, tgt.embedded)
        for what, fn in runs:
            url = await tgt.fresh()
            res.say(f"{what}...")
            with HostCpu() as cpu:
                result = await fn(url)
            result["host"] = cpu.shares
            res.row(what, **_figures(result))
            results.append(result)
            await tgt.drop(url)
    res.data["runs"] = results
    goals = goal_lines(results)
    if goals:
        res.section("## Goals\n\n" + "\n".join(f"- {g}" for g in goals))
    res.finish()
    return 0


def _figures(r: dict[str, Any]) -> dict[str, Any]:
    """The summary table's columns of one run (result.json keeps every field)."""
    if r["scenario"] == "steady":
        lat, clear = r["lateness_ms"], r.get("outside_slow_windows") or {}
        return {
            "scheduled": r["scheduled"],
            "delivered": r["delivered"],
            "early": r["early"],
            "p50 ms": lat["p50"],
            "p99 ms": lat["p99"],
            "p99 clear ms": clear.get("p99"),
            "steal %": (r["host"] or {}).get("steal_pct"),
        }
    if r["scenario"] == "burst":
        return {
            "delivered": r["delivered"],
            "duplicates": r["duplicates"],
            "timers/s": r["timers_per_s"],
            "steal %": (r["host"] or {}).get("steal_pct"),
        }
    return {"millicores": r["total_millicores"], "steal %": (r["host"] or {}).get("steal_pct")}


def goal_lines(results: list[dict]) -> list[str]:
    """Issue 4's goals against the runs made at the issue's sizes (500/s for 30 s due 2 s
    later, 20,000 timers, one broker); runs at other sizes are not judged."""

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    out = []
    for r in results:
        if r["scenario"] == "steady" and (r["rate"], r["seconds"], r["delay_s"]) == (500, 30, 2.0):
            lat, clear = r["lateness_ms"], r.get("outside_slow_windows")
            if not r["cross_broker"]:
                text = (
                    f"goals  steady, one broker: p50 {lat['p50']:.1f} ms <= 5: "
                    f"{verdict(lat['p50'] <= 5)}; p99 {lat['p99']:.1f} ms <= 20: "
                    f"{verdict(lat['p99'] <= 20)}"
                )
                bound = 20.0
            elif r["notify"] and r["firing_brokers"] == 1:
                text = (
                    f"goals  steady, NOTIFY from a second broker: p99 {lat['p99']:.1f} ms "
                    f"<= 50: {verdict(lat['p99'] <= 50)}"
                )
                bound = 50.0
            else:
                continue
            if clear and clear["p99"] == clear["p99"]:  # not NaN
                text += (
                    f" (clear of slow windows: p99 {clear['p99']:.1f} ms: "
                    f"{verdict(clear['p99'] <= bound)})"
                )
            out.append(text)
        elif r["scenario"] == "burst" and (r["timers"], r["brokers"]) == (20000, 1):
            out.append(
                f"goals  burst, one broker: {r['timers_per_s']:,.0f} timers/s >= 20,000: "
                f"{verdict(r['timers_per_s'] >= 20000)}"
            )
        elif r["scenario"] == "idle":
            out.append(
                f"goals  idle broker plus its server: {r['total_millicores']:.1f} "
                f"millicores <= 20: {verdict(r['total_millicores'] <= 20)}"
            )
    return out
