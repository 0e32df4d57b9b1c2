"""What the machine itself allowed while a benchmark ran: CPU taken by the hypervisor, and the
latency floor of the cheapest durable round trip.

    queen bench sweeper steady --host-floor [--cpu-probe]
    queen bench transport-schedule --host-floor [--cpu-probe]

A latency tail measured on a shared virtual machine is the broker's tail plus the host's. On
the 2-core test rig the hypervisor took 0-2% of the CPU in a quiet hour and 26-35% in a busy
one (`steal` in /proc/stat), when a plain `SELECT 1` paced at 500/s had a p99 near 90 ms; and
even with no steal, the tail of anything paced there comes in stalls of 10-30 ms every
1.2-1.6 s: the machine's slow phases, which bench/cpuprobe.py finds (both cores 10-15x slower
for ~20 ms, then ~80 ms of recovery). So every latency benchmark here reports the host's
steal and iowait over its own window (`HostCpu`), and this command measures, at the same
moment:

  jitter   a thread sleeping 1 ms at a time: how late the kernel and the hypervisor wake it;
  select1  16 asyncpg clients paced at --rate, each request `SELECT 1`: the round trip;
  commit   the same with a one-row INSERT in its own transaction, committed synchronously:
           the cheapest durable write, the floor under a schedule's latency (a schedule is one
           such commit, plus its own work).

Beside each paced floor it runs the CPU probe and prints its slow windows and the floor's
tail without the requests that overlapped one or the 100 ms after it. A schedule p99 can be
compared with the
commit floor's p99 of the same hour; the gap between them is what the broker costs. Linux
only (steal and iowait come from /proc/stat; elsewhere they print as "n/a").
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = [
    "HostCpu",
    "commit_floor",
    "paced_floor",
    "paced_grid",
    "pct",
    "probe_lines",
    "sleep_jitter",
    "stall_starts",
]

_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def _cpu_ticks() -> list[int] | None:
    try:
        with open("/proc/stat") as f:
            first = f.readline().split()
    except OSError:
        return None
    return [int(x) for x in first[1 : 1 + len(_FIELDS)]]


class HostCpu:
    """Shares of all CPUs' time over a window: `with HostCpu() as h: ...; h.shares`.

    busy = user + nice + system + irq + softirq (this machine's own work, ours or not),
    iowait = idle while I/O was outstanding, steal = wanted to run but the hypervisor ran
    someone else. Percentages of the window's total ticks, all CPUs together.
    """

    def __init__(self) -> None:
        self._start: list[int] | None = None
        self.shares: dict[str, float] | None = None

    def __enter__(self) -> HostCpu:
        self._start = _cpu_ticks()
        return self

    def __exit__(self, *exc: object) -> None:
        end = _cpu_ticks()
        if self._start is None or end is None:
            return
        d = dict(zip(_FIELDS, (b - a for a, b in zip(self._start, end))))
        total = sum(d.values()) or 1
        busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
        self.shares = {
            "busy_pct": 100 * busy / total,
            "iowait_pct": 100 * d["iowait"] / total,
            "steal_pct": 100 * d["steal"] / total,
        }

    def describe(self) -> str:
        if self.shares is None:
            return "steal n/a"
        s = self.shares
        return (
            f"steal {s['steal_pct']:.0f}%, iowait {s['iowait_pct']:.0f}%, busy {s['busy_pct']:.0f}%"
        )


def sleep_jitter(seconds: float) -> dict[str, float]:
    """How late a 1 ms sleep wakes up, in ms (run in a thread: it blocks)."""
    late: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        time.sleep(0.001)
        late.append((time.perf_counter() - t - 0.001) * 1e3)
    return {"p50": pct(late, 50), "p99": pct(late, 99), "max": max(late)}


async def paced_grid(
    call: Callable[[int], Awaitable[Any]], *, clients: int, rate: float, seconds: float
) -> tuple[list[tuple[float, float]], float]:
    """Open loop: `clients` workers take slots on a fixed grid of `rate` per second for
    `seconds`, and worker i awaits `call(i)` at its slot's time. Latency counts from each
    request's slot, so a stall is not hidden by a lower rate. Returns every request's (slot,
    end) on CLOCK_MONOTONIC, in completion order, and the rate achieved."""
    spans: list[tuple[float, float]] = []
    total = int(rate * seconds)
    slots = itertools.count()
    start = time.perf_counter() + 0.05

    async def worker(i: int) -> None:
        while (n := next(slots)) < total:
            due = start + n / rate
            if (wait := due - time.perf_counter()) > 0:
                await asyncio.sleep(wait)
            await call(i)
            spans.append((due, time.perf_counter()))

    await asyncio.gather(*(worker(i) for i in range(clients)))
    return spans, total / (time.perf_counter() - start)


async def paced_floor(
    url: str, sql: str, args: tuple, *, rate: float, seconds: float, clients: int
) -> dict:
    """`clients` connections sending `sql` on a fixed grid of `rate` per second (paced_grid)."""
    import asyncpg

    pool = await asyncpg.create_pool(url, min_size=clients, max_size=clients)
    try:
        for _ in range(clients * 4):  # warm every connection's plan
            await pool.execute(sql, *args)
        spans, _ = await paced_grid(
            lambda _i: pool.execute(sql, *args), clients=clients, rate=rate, seconds=seconds
        )
    finally:
        await pool.close()
    lat = [(end - due) * 1e3 for due, end in spans]
    late = [due for (due, _), ms in zip(spans, lat) if ms > STALL_MS]  # slots of slow requests
    stalls = stall_starts(late)
    gaps = [b - a for a, b in zip(stalls, stalls[1:])]
    return {
        "p50": pct(lat, 50),
        "p99": pct(lat, 99),
        "max": max(lat),
        "over_stall_pct": 100.0 * len(late) / max(len(lat), 1),
        "stalls": len(stalls),
        "stall_every_s": pct(gaps, 50) if gaps else float("nan"),
        "lat": lat,
        "spans": spans,
    }


STALL_MS = 10.0  # a request slower than this is "in a stall"


def stall_starts(offsets: list[float], gap_s: float = 0.1) -> list[float]:
    """Start instants of the clusters of slow requests: a stall delays every request in flight
    at once, so slow requests less than `gap_s` apart belong to one stall."""
    out: list[float] = []
    last = None
    for t in sorted(offsets):
        if last is None or t - last > gap_s:
            out.append(t)
        last = t
    return out


FLOOR_TABLE = "CREATE TABLE IF NOT EXISTS bench_commit_floor (id bigserial PRIMARY KEY, b bytea)"
FLOOR_INSERT = "INSERT INTO bench_commit_floor (b) VALUES ($1)"


async def commit_floor(
    url: str, *, rate: float, seconds: float, clients: int
) -> tuple[dict, HostCpu]:
    """The paced one-row commit floor in a table of its own, dropped afterwards (the database
    may be a broker's), with the host's shares over the run."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(FLOOR_TABLE)
        with HostCpu() as h:
            r = await paced_floor(
                url, FLOOR_INSERT, (b"x" * 64,), rate=rate, seconds=seconds, clients=clients
            )
    finally:
        await conn.execute("DROP TABLE IF EXISTS bench_commit_floor")
        await conn.close()
    return r, h


async def measure(
    url: str, rate: float, seconds: float, clients: int, probe: bool = True
) -> list[str]:
    from bench.cpuprobe import CpuProbe

    lines = []
    with HostCpu() as h:
        j = await asyncio.to_thread(sleep_jitter, min(seconds, 5.0))
    lines.append(
        f"jitter   1 ms sleeps, late by     p50 {j['p50']:6.2f} ms   p99 {j['p99']:6.2f} ms"
        f"   max {j['max']:6.1f} ms   ({h.describe()})"
    )

    def report(name: str, r: dict, h: HostCpu, p: CpuProbe) -> None:
        lines.append(
            f"{name:<8} {clients} clients, {rate:.0f}/s     p50 {r['p50']:6.2f} ms   "
            f"p99 {r['p99']:6.2f} ms   max {r['max']:6.1f} ms   ({h.describe()})"
        )
        lines.append(
            f"         {r['over_stall_pct']:.1f}% of requests over {STALL_MS:g} ms, in "
            f"{r['stalls']} stalls, one every {r['stall_every_s']:.2f} s (median)"
        )
        lines.extend(probe_lines(p, r["spans"], r["lat"]))

    with CpuProbe(enabled=probe) as p, HostCpu() as h:
        r = await paced_floor(url, "SELECT 1", (), rate=rate, seconds=seconds, clients=clients)
    report("select1", r, h, p)
    with CpuProbe(enabled=probe) as p:
        r, h = await commit_floor(url, rate=rate, seconds=seconds, clients=clients)
    report("commit", r, h, p)
    return lines


def probe_lines(
    p,
    spans: list[tuple[float, float]],
    lat_ms: list[float],
    *,
    wall: bool = False,
    indent: str = "         ",
) -> list[str]:
    """What bench/cpuprobe.py saw during a paced run, and the run's tail without the
    requests that overlapped a window where the CPU itself ran slow, or the 100 ms after it."""
    if not p.ran:
        return []
    share, rest = p.split(spans, lat_ms, wall=wall)
    out = [indent + p.describe()]
    if rest:
        out.append(
            f"{indent}{share:.1%} of requests overlapped a slow-CPU window or the 100 ms "
            f"after it; the others: "
            f"p50 {pct(rest, 50):.2f} ms, p99 {pct(rest, 99):.2f} ms"
        )
    return out
