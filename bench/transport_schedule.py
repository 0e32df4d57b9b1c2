"""Schedule throughput and latency over the HTTP and the TCP transport.

    queen bench transport-schedule [--seconds 10] [--rate 500] [--transports none http tcp]
                                   [--workloads single paced batch] [--host-floor]
                                   [--cpu-probe] [--database-url URL] [--brokers 1]

Starts an embedded PostgreSQL in a fresh temporary directory (unless --database-url is
given) and `queen serve --transport http --transport tcp` on it as a subprocess, then from
this process (with --brokers N: N such processes on the one database, the clients spread over
them round robin), for the service called directly (`none`: no transport, the ceiling) and for each
transport:

  single   16 concurrent clients, each sending one-op schedule requests back to back:
           requests/s and p50/p99 latency;
  paced    the same clients held to 500 requests/s in total (open loop: each request has a
           start time on a fixed grid, and latency counts from that time, so a stall shows up
           as latency instead of silently lowering the rate): p50/p99;
  batch    4 concurrent clients sending 256-op schedule batches: timers/s.

With --host-floor it first measures the machine's own floor at the same rate (bench/host.py):
16 asyncpg clients each committing a one-row INSERT, paced like the schedules; with
--cpu-probe, bench/cpuprobe.py runs beside the floor and the paced runs. Every line ends with
the hypervisor's steal and the iowait over its own window: on a shared virtual machine a tail
above the floor's is the broker's, a tail at the floor's is the host's.

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
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import msgspec
from prometheus_client import generate_latest

from bench.cpuprobe import CpuProbe
from bench.env import command_line
from bench.host import HostCpu, commit_floor, paced_grid, pct, probe_lines

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
        self.queen = None

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

        res = await queen.timers_apply(ANONYMOUS, ops)
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
    """One-op schedules on bench/host.paced_grid's fixed grid, a connection per client:
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


async def run(
    args: argparse.Namespace, http_ports: list[int], tcp_ports: list[int], database_url: str
) -> list[str]:
    import logging

    logging.getLogger("queen_timers").setLevel(logging.ERROR)  # the in-process service's boot notes
    lines = []
    direct = Direct(database_url)
    chosen = {
        "http": Spread([Http(f"http://127.0.0.1:{p}") for p in http_ports]),
        "tcp": Spread([Tcp(p) for p in tcp_ports]),
        "none": direct,
    }
    if args.host_floor:
        with CpuProbe(enabled=args.cpu_probe) as probe:
            f, h = await commit_floor(
                database_url, rate=args.rate, seconds=args.seconds, clients=16
            )
        lines.append(
            f"floor paced   {args.rate:>4.0f} commits/s           p50 {f['p50']:6.2f} ms"
            f"   p99 {f['p99']:6.2f} ms   ({h.describe()})"
        )
        lines.extend(probe_lines(probe, f["spans"], f["lat"], indent="      "))
        print("\n".join(lines), flush=True)

    def line(text: str, lat: list[float], h: HostCpu) -> None:
        lines.append(
            f"{text}p50 {pct(lat, 50) * 1e3:6.2f} ms   p99 {pct(lat, 99) * 1e3:6.2f} ms"
            f"   ({h.describe()})"
        )
        print(lines[-1], flush=True)

    metrics_urls = [f"http://127.0.0.1:{p}/metrics" for p in http_ports]

    def read_brokers() -> dict[float, float]:
        total: dict[float, float] = {}
        for url in metrics_urls:
            for bound, n in apply_buckets(fetch_text(url)).items():
                total[bound] = total.get(bound, 0.0) + n
        return total

    async def paced_run(t, res: dict) -> None:
        # The broker's own clock on the same calls: queen_timers_apply_seconds, read before
        # and after (the in-process service's registry for `none`, GET /metrics otherwise).
        if t is direct:
            registry = direct.queen.metrics_registry
            read = lambda: apply_buckets(generate_latest(registry).decode())  # noqa: E731
        else:
            read = read_brokers
        before = await asyncio.to_thread(read)
        spans: list[tuple[float, float]] = []
        with CpuProbe(enabled=args.cpu_probe) as probe, HostCpu() as h:
            achieved, lat = await paced(t, 16, args.rate, args.seconds, spans)
        line(f"{t.name:<5} paced   {args.rate:>4.0f} req/s    {achieved:>7,.0f} req/s   ", lat, h)
        for text in probe_lines(probe, spans, [x * 1e3 for x in lat], indent="      "):
            lines.append(text)
            print(text, flush=True)
        res["paced_p50_ms"], res["paced_p99_ms"] = pct(lat, 50) * 1e3, pct(lat, 99) * 1e3
        if probe.ran:
            clear = probe.split(spans, lat)[1]
            res["paced_p99_clear_ms"] = pct(clear, 99) * 1e3 if clear else None
        inside = bucket_delta(before, await asyncio.to_thread(read))
        lines.append(
            f"      inside the service: {share_over(inside, 0.01):.1%} of calls over 10 ms "
            f"(client side: {sum(1 for x in lat if x > 0.01) / len(lat):.1%}); p99 "
            f"<= {bucket_quantile(inside, 0.99) * 1e3:g} ms"
        )
        print(lines[-1], flush=True)

    results: dict[str, dict] = {}
    for t in (chosen[n] for n in args.transports):
        res = results[t.name] = {}
        await closed_loop(t, 4, 1, 1.0)  # warm up connections, plans, the pool
        if "single" in args.workloads:
            with HostCpu() as h:
                rps, lat = await closed_loop(t, 16, 1, args.seconds)
            line(f"{t.name:<5} single  16 clients  {rps:>7,} req/s   ", lat, h)
            res["single_rps"], res["single_p50_ms"] = rps, pct(lat, 50) * 1e3
        if "paced" in args.workloads:
            await paced_run(t, res)
        if "batch" in args.workloads:
            with HostCpu() as h:
                bps, lat = await closed_loop(t, 4, 256, args.seconds)
            line(f"{t.name:<5} batch   4 x 256 ops  {bps * 256:>7,} timers/s ", lat, h)
            res["batch_tps"] = bps * 256
        if t is direct and direct.queen is not None:
            await direct.queen.stop()  # its pool must not compete with the brokers' runs
    for text in goal_lines(results):
        lines.append(text)
        print(text, flush=True)
    return lines


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


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"queen serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("queen serve never became ready")


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
        "--host-floor",
        action="store_true",
        help="measure the commit floor (bench/host.py) before the transports",
    )
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py beside the floor and the paced runs (~5%% of each core)",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("QUEEN_DATABASE_URL"),
        help="PostgreSQL to use (default: embedded, in a temporary directory)",
    )
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="`queen serve` processes on the one database; clients spread over them (1)",
    )


def main(args: argparse.Namespace) -> int:
    n = max(1, args.brokers)
    http_ports = [free_port() for _ in range(n)]
    tcp_ports = [free_port() for _ in range(n)]
    tmp = tempfile.mkdtemp(prefix="qbt", dir="/tmp")  # short: the PG socket lives inside
    env = {**os.environ, "QUEEN_HTTP_HOST": "127.0.0.1", "QUEEN_TCP_HOST": "127.0.0.1"}
    for k in ("QUEEN_JWT_SECRET", "QUEEN_JWT_PUBLIC_KEY"):
        env.pop(k, None)
    emb = None
    url = args.database_url
    if not url:
        from queen_timers.db import EmbeddedPostgres

        emb = EmbeddedPostgres(os.path.join(tmp, "pg"))
        url = emb.start()
    env["QUEEN_DATABASE_URL"] = url
    log = open(os.path.join(tmp, "serve.log"), "w")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "queen_timers",
                "--log-level",
                "WARNING",
                "serve",
                "--transport",
                "http",
                "--transport",
                "tcp",
            ],
            env={**env, "QUEEN_HTTP_PORT": str(hp), "QUEEN_TCP_PORT": str(tp)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for hp, tp in zip(http_ports, tcp_ports)
    ]
    try:
        for hp, proc in zip(http_ports, procs):
            wait_ready(f"http://127.0.0.1:{hp}", proc)
        print(
            f"# {command_line()}\n# {os.cpu_count()} cores; client, {n} broker(s) and "
            f"PostgreSQL on this machine; load average before: {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        asyncio.run(run(args, http_ports, tcp_ports, url))
        load = os.getloadavg()[0]
        note = (
            " (above the core count: work competed for the CPU)"
            if load > (os.cpu_count() or 1)
            else ""
        )
        print(f"# load average after: {load:.2f}{note}", flush=True)
    except BaseException:
        log.flush()
        with open(log.name) as f:
            print("--- broker log (tail)\n" + f.read()[-3000:], file=sys.stderr)
        raise
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
        if emb is not None:
            emb.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0
