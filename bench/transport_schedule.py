"""Schedule throughput and latency over the HTTP and the TCP transport.

    queen bench transport-schedule [--seconds 10] [--rate 500] [--transports none http tcp]
                                   [--workloads single paced batch] [--cpu-probe]
                                   [--database-url URL] [--brokers 1]

Starts `queen serve --transport http --transport tcp` as a subprocess on a fresh bench
database, then from
this process (with --brokers N: N such processes on the one database, the clients spread over
them round robin), for the service called directly (`none`: no transport, the ceiling) and for each
transport:

  single   16 concurrent clients, each sending one-op schedule requests back to back:
           requests/s and p50/p99 latency;
  paced    the same clients held to 500 requests/s in total (open loop: each request has a
           start time on a fixed grid, and latency counts from that time, so a stall shows up
           as latency instead of silently lowering the rate): p50/p99;
  batch    4 concurrent clients sending 256-op schedule batches: timers/s.

With --cpu-probe, bench/cpuprobe.py runs beside the paced runs, whose rows then carry their
tail clear of the machine's slow windows. Every row carries the hypervisor's steal over its
own window; `queen bench machine --rate 500` measures the one-row commit floor paced the same
way: a tail above the floor's is the broker's, a tail at the floor's is the host's.

Every op schedules a new key an hour ahead, so the sweeper (left on, as in production) has
nothing to fire. Goals (issue 5): single >= 2,000 req/s, paced p99 <= 10 ms, batch >= 20,000
timers/s, TCP p50 below HTTP's. Client, broker and PostgreSQL share this machine's cores, so
the numbers are a floor for the broker, not its ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import os
import socket
import time
import urllib.request
from typing import Any

import msgspec
from prometheus_client import generate_latest

from bench.cpuprobe import CpuProbe
from bench.env import Target
from bench.harness import HostCpu, Results, ms, paced_grid
from bench.load import schedule
from queen_timers.testing.broker import BrokerProcess

PAYLOAD = base64.b64encode(b'{"orderId":"9f1","amount":42}').decode()
DELAY_MS = 3_600_000
_keys = itertools.count()


def op(worker: int) -> dict:
    return {
        "op": "schedule",
        "queue": "bench",
        "timerKey": f"w{worker}-{next(_keys)}",
        "payload": PAYLOAD,
        "delayMs": DELAY_MS,
        "txn": f"t{next(_keys)}",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- clients --------------------------------------------------------------------------------------
class Http:
    """A minimal HTTP/1.1 keep-alive client (one connection per client): the bench measures
    the broker, and a full client library would spend this machine's two cores on itself
    (aiohttp's client cost about as much CPU per request as the server side)."""

    name = "http"

    def __init__(self, url: str):
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        # The broker answers only a Host naming itself with its port (against DNS rebinding).
        self._head = b"POST /api/v1/timers HTTP/1.1\r\nHost: %s:%d\r\n" % (
            host.encode(),
            self.port,
        )

    async def open(self):
        return await asyncio.open_connection(self.host, self.port)

    async def send(self, conn, ops: list[dict]) -> dict:
        reader, writer = conn
        body = msgspec.json.encode({"operations": ops})
        writer.write(
            self._head
            + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        doc = msgspec.json.decode(await reader.readexactly(length))
        if status != 200 or not all(x.get("ok") for x in doc["results"]):
            raise RuntimeError(f"schedule failed: {status} {str(doc)[:200]}")
        return doc

    @staticmethod
    async def close(conn) -> None:
        conn[1].close()


class Tcp:
    name = "tcp"

    def __init__(self, port: int):
        self.port = port

    async def open(self):
        from queen_tcp.client import TcpClient

        return await TcpClient.connect("127.0.0.1", self.port)

    @staticmethod
    async def send(client, ops: list[dict]) -> None:
        res = await client.timers_apply(ops)
        if not all(x.get("ok") for x in res):
            raise RuntimeError(f"schedule failed: {str(res)[:200]}")

    @staticmethod
    async def close(client) -> None:
        await client.aclose()


class Spread:
    """One transport's clients spread over several brokers, round robin by connection."""

    def __init__(self, targets: list):
        self.targets = targets
        self.name = targets[0].name
        self._next = itertools.cycle(targets)

    async def open(self):
        t = next(self._next)
        return t, await t.open()

    @staticmethod
    async def send(conn, ops: list[dict]) -> None:
        t, c = conn
        await t.send(c, ops)

    @staticmethod
    async def close(conn) -> None:
        t, c = conn
        await t.close(c)


class Direct:
    """No transport: the service called in this process, against the same database. The
    ceiling a transport can approach, and what it costs on top of the service."""

    name = "none"

    def __init__(self, database_url: str):
        self.database_url = database_url
        self.queen: Any = None

    async def open(self):
        if self.queen is None:
            from queen_timers.service import Queen

            self.queen = Queen(
                database_url=self.database_url, sweeper=False, retention_interval_ms=0
            )
            await self.queen.start()
        return self.queen

    @staticmethod
    async def send(queen, ops: list[dict]) -> None:
        from queen_timers.identity import ANONYMOUS

        res = await schedule(queen, ANONYMOUS, ops)
        if not all(x.get("ok") for x in res):
            raise RuntimeError(f"schedule failed: {str(res)[:200]}")

    @staticmethod
    async def close(queen) -> None:
        pass  # shared by the clients; stopped at the end of the run


# -- the broker's own view: the queen_timers_apply_seconds histogram ------------------------------
def fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def apply_buckets(exposition: str) -> dict[float, float]:
    """Cumulative counts of queen_timers_apply_seconds by upper bound (inf included)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[float, float] = {}
    for fam in text_string_to_metric_families(exposition):
        if fam.name == "queen_timers_apply_seconds":
            for smp in fam.samples:
                if smp.name.endswith("_bucket"):
                    out[float(smp.labels["le"])] = smp.value
    return out


def bucket_delta(before: dict[float, float], after: dict[float, float]) -> dict[float, float]:
    return {le: after[le] - before.get(le, 0.0) for le in after}


def share_over(cumulative: dict[float, float], bound: float) -> float:
    """Share of the observations above `bound` (which must be a bucket bound)."""
    total = cumulative.get(float("inf"), 0.0)
    return (total - cumulative.get(bound, 0.0)) / total if total else float("nan")


def bucket_quantile(cumulative: dict[float, float], q: float) -> float:
    """The smallest bucket bound holding at least q of the observations (inf: beyond all)."""
    total = cumulative.get(float("inf"), 0.0)
    for le in sorted(cumulative):
        if total and cumulative[le] >= q * total:
            return le
    return float("nan")


# -- workloads ------------------------------------------------------------------------------------
async def closed_loop(t, clients: int, batch: int, seconds: float) -> tuple[int, list[float]]:
    conns = [await t.open() for _ in range(clients)]
    lat: list[float] = []
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(i: int) -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            ops = [op(i) for _ in range(batch)]
            t0 = time.perf_counter()
            await t.send(conns[i], ops)
            lat.append(time.perf_counter() - t0)
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    elapsed = time.perf_counter() - t0
    for c in conns:
        await t.close(c)
    return int(done / elapsed), lat


async def paced(
    t, clients: int, rate: float, seconds: float, spans: list[tuple[float, float]] | None = None
) -> tuple[float, list[float]]:
    """One-op schedules on harness.paced_grid's fixed grid, a connection per client:
    (achieved rate, latencies in seconds). `spans`, if given, receives each request's (slot,
    end) on CLOCK_MONOTONIC, in the order of the latencies."""
    conns = [await t.open() for _ in range(clients)]
    grid, achieved = await paced_grid(
        lambda i: t.send(conns[i], [op(i)]), clients=clients, rate=rate, seconds=seconds
    )
    for c in conns:
        await t.close(c)
    if spans is not None:
        spans.extend(grid)
    return achieved, [end - due for due, end in grid]


async def run(ns: argparse.Namespace, res: Results, http_ports: list[int], tcp_ports: list[int],
              database_url: str) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Every chosen transport's workloads, one row each; the figures goal_lines judges."""
    direct = Direct(database_url)
    chosen: dict[str, Any] = {
        "http": Spread([Http(f"http://127.0.0.1:{p}") for p in http_ports]),
        "tcp": Spread([Tcp(p) for p in tcp_ports]),
        "none": direct,
    }
    metrics_urls = [f"http://127.0.0.1:{p}/metrics" for p in http_ports]

    def read_brokers() -> dict[float, float]:
        total: dict[float, float] = {}
        for url in metrics_urls:
            for bound, n in apply_buckets(fetch_text(url)).items():
                total[bound] = total.get(bound, 0.0) + n
        return total

    def read_direct() -> dict[float, float]:
        assert direct.queen is not None
        return apply_buckets(generate_latest(direct.queen.metrics_registry).decode())

    def lat_row(lat: list[float], h: HostCpu) -> dict[str, Any]:
        return {
            "p50 ms": ms(lat, 50),
            "p99 ms": ms(lat, 99),
            "steal %": (h.shares or {}).get("steal_pct"),
        }

    results: dict[str, dict[str, Any]] = {}
    for t in (chosen[n] for n in ns.transports):
        r = results[t.name] = {}
        await closed_loop(t, 4, 1, 1.0)  # warm up connections, plans, the pool
        if "single" in ns.workloads:
            with HostCpu() as h:
                rps, lat = await closed_loop(t, 16, 1, ns.seconds)
            res.row(f"{t.name}: single-op, 16 clients", **{"req/s": rps}, **lat_row(lat, h))
            r["single_rps"], r["single_p50_ms"] = rps, ms(lat, 50)
        if "paced" in ns.workloads:
            # The broker's own clock on the same calls: queen_timers_apply_seconds, read
            # before and after (the in-process registry for `none`, GET /metrics otherwise).
            read = read_direct if t is direct else read_brokers
            before = await asyncio.to_thread(read)
            spans: list[tuple[float, float]] = []
            with CpuProbe(enabled=ns.cpu_probe) as probe, HostCpu() as h:
                achieved, lat = await paced(t, 16, ns.rate, ns.seconds, spans)
            inside = bucket_delta(before, await asyncio.to_thread(read))
            clear = probe.clear_figures(spans, [x * 1e3 for x in lat])
            res.row(
                f"{t.name}: paced at {ns.rate:g}/s",
                **{"req/s": achieved},
                **lat_row(lat, h),
                **clear,
                **{"service over 10 ms %": 100.0 * share_over(inside, 0.01)},
            )
            r["paced_p50_ms"], r["paced_p99_ms"] = ms(lat, 50), ms(lat, 99)
            r["paced_p99_clear_ms"] = clear.get("p99 clear ms")
        if "batch" in ns.workloads:
            with HostCpu() as h:
                bps, lat = await closed_loop(t, 4, 256, ns.seconds)
            res.row(f"{t.name}: 256-op batches, 4 clients", **{"timers/s": bps * 256},
                    **lat_row(lat, h))  # fmt: skip
            r["batch_tps"] = bps * 256
        if t is direct and direct.queen is not None:
            await direct.queen.stop()  # its pool must not compete with the brokers' runs
    return results


def goal_lines(results: dict[str, dict]) -> list[str]:
    """Issue 5's goals against this run, per transport (the in-process `none` has none), for
    the workloads measured."""

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    out = []
    for name in ("http", "tcp"):
        r = results.get(name)
        if not r:
            continue
        parts = []
        if "single_rps" in r:
            parts.append(
                f"single-op {r['single_rps']:,} req/s >= 2,000: {verdict(r['single_rps'] >= 2000)}"
            )
        if "paced_p99_ms" in r:
            text = f"paced p99 {r['paced_p99_ms']:.1f} ms <= 10: {verdict(r['paced_p99_ms'] <= 10)}"
            if r.get("paced_p99_clear_ms") is not None:
                text += (
                    f" (clear of slow windows {r['paced_p99_clear_ms']:.1f} ms: "
                    f"{verdict(r['paced_p99_clear_ms'] <= 10)})"
                )
            parts.append(text)
        if "batch_tps" in r:
            parts.append(
                f"batched {r['batch_tps']:,} timers/s >= 20,000: {verdict(r['batch_tps'] >= 20000)}"
            )
        if parts:
            out.append(f"goals  {name:<5} " + "; ".join(parts))
    h, t = results.get("http", {}), results.get("tcp", {})
    for key, what in (("single_p50_ms", "single-op"), ("paced_p50_ms", "paced")):
        if key in h and key in t:
            out.append(
                f"goals  TCP's {what} p50 {t[key]:.2f} ms below HTTP's {h[key]:.2f} ms: "
                f"{verdict(t[key] < h[key])}"
            )
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    p.add_argument("--rate", type=float, default=500.0, help="total rate of the paced run")
    p.add_argument(
        "--transports",
        nargs="+",
        default=["none", "http", "tcp"],
        choices=["none", "http", "tcp"],
        help="what to measure; none = the service called in-process (the ceiling)",
    )
    p.add_argument(
        "--workloads",
        nargs="+",
        default=["single", "paced", "batch"],
        choices=["single", "paced", "batch"],
        help="which measurements to make for each transport (default: all three)",
    )
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py beside the paced runs (~5%% of each core)",
    )
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="`queen serve` processes on the one database; clients spread over them (1)",
    )


async def main(ns: argparse.Namespace) -> int:
    import logging

    logging.getLogger("queen_timers").setLevel(logging.ERROR)  # the in-process service's notes
    n = max(1, ns.brokers)
    http_ports = [free_port() for _ in range(n)]
    tcp_ports = [free_port() for _ in range(n)]
    res = Results("transport-schedule", ns)
    async with Target("transport", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        brokers = [
            BrokerProcess(
                tgt.url,
                env={
                    "QUEEN_HTTP_HOST": "127.0.0.1",
                    "QUEEN_TCP_HOST": "127.0.0.1",
                    "QUEEN_HTTP_PORT": str(hp),
                    "QUEEN_TCP_PORT": str(tp),
                    "QUEEN_JWT_SECRET": "",
                    "QUEEN_JWT_PUBLIC_KEY": "",
                },
                transports=("http", "tcp"),
            )
            for hp, tp in zip(http_ports, tcp_ports)
        ]
        try:
            await asyncio.gather(*(b.start() for b in brokers))
            results = await run(ns, res, http_ports, tcp_ports, tgt.url)
        finally:
            await asyncio.gather(*(b.terminate() for b in brokers))
    res.data["results"] = results
    goals = goal_lines(results)
    res.section(
        f"Client, {n} broker(s) and PostgreSQL on this machine's {os.cpu_count()} cores."
        + ("\n\n## Goals\n\n" + "\n".join(f"- {g}" for g in goals) if goals else "")
    )
    res.finish()
    return 0
