"""The machine alone: the floors every latency tail of the bench stands on.

    queen bench machine [--seconds 10] [--rate 500] [--clients 16] [--cpu-probe]

A tail measured on a shared virtual machine is the broker's tail plus the host's. On the
2-core test rig the hypervisor took 0-2% of the CPU in a quiet hour and 26-35% in a busy one,
and even with no steal the tail of anything paced there came in stalls of 10-30 ms every
1.2-1.6 s (the CPU probe's slow windows). Run this in the same hour as a scenario, and compare
its tail with these rows:

  fsync    16 KiB appended and fdatasync'ed every 2 ms (PostgreSQL's wal_sync_method on
           Linux) in the temporary directory: what every durable commit waits for;
  jitter   a thread sleeping 1 ms at a time: how late the kernel and the hypervisor wake it;
  select1  --clients asyncpg clients paced at --rate (open loop), each request `SELECT 1`;
  commit   the same with a one-row INSERT committed synchronously: the cheapest durable
           write, the floor under a schedule's latency.

Each row carries the host's steal and iowait over its own window; with --cpu-probe the paced
rows also carry their tail clear of the machine's slow windows (bench/cpuprobe.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from typing import Any

import asyncpg

from .cpuprobe import CpuProbe
from .env import Target
from .harness import HostCpu, Results, paced_grid, summarize

__all__ = ["add_arguments", "commit_floor", "fsync_floor", "main", "sleep_jitter"]

FLOOR_TABLE = "CREATE TABLE IF NOT EXISTS bench_commit_floor (id bigserial PRIMARY KEY, b bytea)"
FLOOR_INSERT = "INSERT INTO bench_commit_floor (b) VALUES ($1)"


def fsync_floor(seconds: float, nbytes: int = 16384) -> list[float]:
    """fdatasync latencies (ms) in the temporary directory (run in a thread: it blocks)."""
    fd, path = tempfile.mkstemp(prefix="queen-fsync-")
    lat: list[float] = []
    try:
        data = os.urandom(nbytes)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.write(fd, data)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1000.0)
            time.sleep(0.002)
    finally:
        os.close(fd)
        os.unlink(path)
    return lat


def sleep_jitter(seconds: float) -> list[float]:
    """How late each 1 ms sleep wakes up, in ms (run in a thread: it blocks)."""
    late: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        time.sleep(0.001)
        late.append((time.perf_counter() - t - 0.001) * 1e3)
    return late


async def paced_floor(
    url: str, sql: str, args: tuple[Any, ...], *, rate: float, seconds: float, clients: int
) -> list[tuple[float, float]]:
    """`clients` connections sending `sql` on a fixed grid of `rate` per second: every
    request's (slot, end) on CLOCK_MONOTONIC."""
    pool = await asyncpg.create_pool(url, min_size=clients, max_size=clients)
    try:
        for _ in range(clients * 4):  # warm every connection's plan
            await pool.execute(sql, *args)
        spans, _ = await paced_grid(
            lambda _i: pool.execute(sql, *args), clients=clients, rate=rate, seconds=seconds
        )
    finally:
        await pool.close()
    return spans


async def commit_floor(
    url: str, *, rate: float, seconds: float, clients: int
) -> list[tuple[float, float]]:
    """The paced one-row commit floor in a table of its own, dropped afterwards."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(FLOOR_TABLE)
        return await paced_floor(
            url, FLOOR_INSERT, (b"x" * 64,), rate=rate, seconds=seconds, clients=clients
        )
    finally:
        await conn.execute("DROP TABLE IF EXISTS bench_commit_floor")
        await conn.close()


def _row(lat_ms: list[float], host: HostCpu, **more: Any) -> dict[str, Any]:
    s = summarize(lat_ms)
    return {
        "count": s["count"],
        "p50 ms": s["p50"],
        "p99 ms": s["p99"],
        "max ms": s["max"],
        **more,
        "steal %": (host.shares or {}).get("steal_pct"),
        "iowait %": (host.shares or {}).get("iowait_pct"),
    }


async def main(ns: argparse.Namespace) -> int:
    res = Results("machine", ns)
    with HostCpu() as h:
        lat = await asyncio.to_thread(fsync_floor, ns.seconds)
    res.row("fsync (fdatasync of 16 KiB)", **_row(lat, h))
    with HostCpu() as h:
        lat = await asyncio.to_thread(sleep_jitter, min(ns.seconds, 5.0))
    res.row("jitter (1 ms sleeps, late by)", **_row(lat, h))
    async with Target("machine", ns.database_url, ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        shape = {"rate": ns.rate, "seconds": ns.seconds, "clients": ns.clients}
        for name in ("select1", "commit"):
            with CpuProbe(enabled=ns.cpu_probe) as probe, HostCpu() as h:
                if name == "select1":
                    spans = await paced_floor(tgt.url, "SELECT 1", (), **shape)
                else:
                    spans = await commit_floor(tgt.url, **shape)
            lat = [(end - due) * 1e3 for due, end in spans]
            res.row(
                f"{name} ({ns.clients} clients, {ns.rate:g}/s)",
                **_row(lat, h, **probe.clear_figures(spans, lat)),
            )
            if probe.ran:
                res.section(f"{name}: {probe.describe()}")
    res.finish()
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=10.0, help="length of each floor (10)")
    p.add_argument("--rate", type=float, default=500.0, help="requests/s of the paced floors")
    p.add_argument("--clients", type=int, default=16, help="clients of the paced floors (16)")
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py beside the paced floors (~5%% of each core)",
    )
