"""Fire lateness of timers scheduled through the SQL API, beside the HTTP path's, in one run.

    queen bench sql-schedule [--rate 500] [--seconds 30] [--delay 2] [--clients 16]
                             [--cpu-probe] [--database-url URL] [--keep-db] [--out DIR]

One broker process (`queen serve --transport http`, its sweeper on, as in production) on a
fresh bench database. From this process, on one open-loop grid, slots alternate between:

  sql   an application transaction (asyncpg, a connection per client) that calls
        queen.timer_schedule_v1 through queen_timers.sqlapi.schedule and commits;
  http  a one-op POST /api/v1/timers on a keep-alive connection per client.

Each path is offered `--rate` timers/s (500), every timer due `--delay` s (2) after its
schedule, into a queue of its own. Lateness per timer is read from the log afterwards
(bench/load.read_lateness): the segment's created_at, stamped by PostgreSQL in the fire's
transaction, minus the deliverAt the schedule answered; both are the database's clock. With
--cpu-probe, bench/cpuprobe.py runs beside the paced run, and each tail is also given clear of
the machine's slow windows. The call latency of each path is reported too (from the slot's
time, so a stall shows as latency).

A timer due 2 s out is beyond the listeners' next poll (1 s), so neither path sends a NOTIFY
for it: the run compares the paths' fire, not their wake-up. `--delay 0.2` measures the wake
(the SQL path's NOTIFY at commit against the HTTP path's in-process hint).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import uuid
from typing import Any

from bench import harness
from bench.cpuprobe import CpuProbe
from bench.env import Target
from bench.harness import Results
from bench.load import parse_deliver_at, read_lateness, wait_drained
from bench.transport_schedule import Http, free_port

__all__ = ["add_arguments", "main"]

QUEUES = {"sql": "bench-sql", "http": "bench-http"}
PAYLOAD = b'{"orderId":"9f1","amount":42}'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, default=500.0, help="timers/s offered per path (500)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of the paced run (30)")
    p.add_argument(
        "--delay", type=float, default=2.0, help="seconds from schedule to deliver_at (2)"
    )
    p.add_argument("--clients", type=int, default=16, help="concurrent clients per path (16)")
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py beside the paced run (off by default: ~5%% of each core)",
    )


class Paths:
    """The two ways to schedule, each recording message id -> deliverAt and call spans."""

    def __init__(self, url: str, http_url: str, delay_ms: float):
        self.url = url
        self.http = Http(http_url)
        self.delay_ms = delay_ms
        self.deliver: dict[str, dict[bytes, float]] = {"sql": {}, "http": {}}
        self.spans: dict[str, list[tuple[float, float]]] = {"sql": [], "http": []}
        self.errors: dict[str, list[str]] = {"sql": [], "http": []}
        self._keys = itertools.count()

    def reset(self) -> None:
        """Forget what was recorded (the warm-up's timers fire, and are not counted)."""
        for d in (self.deliver, self.spans, self.errors):
            for v in d.values():
                v.clear()

    def _record(self, path: str, res: dict) -> None:
        self.deliver[path][uuid.UUID(res["messageId"]).bytes] = parse_deliver_at(res["deliverAt"])

    async def sql(self, conn) -> None:
        import queen_timers

        key = f"s{next(self._keys)}"
        async with conn.transaction():
            res = await queen_timers.schedule(
                conn, QUEUES["sql"], key, int(self.delay_ms), PAYLOAD, txn=key
            )
        self._record("sql", res)

    async def http_call(self, hconn) -> None:
        key = f"h{next(self._keys)}"
        op = {
            "op": "schedule",
            "queue": QUEUES["http"],
            "timerKey": key,
            "delayMs": self.delay_ms,
            "txn": key,
            "payload": _b64(PAYLOAD),
        }
        doc = await self.http.send(hconn, [op])
        self._record("http", doc["results"][0])


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


async def paced_both(paths: Paths, clients: int, rate: float, seconds: float) -> float:
    """One open-loop grid at 2 x rate; slot n goes to sql when even, http when odd, so the
    two paths share every moment of the run. Returns the wall time of the grid."""
    import asyncpg

    conns = [await asyncpg.connect(paths.url) for _ in range(clients)]
    hconns = [await paths.http.open() for _ in range(clients)]
    total = int(2 * rate * seconds)
    slots = itertools.count()
    start = time.perf_counter() + 0.05

    async def worker(i: int) -> None:
        while (n := next(slots)) < total:
            due = start + n / (2 * rate)
            if (wait := due - time.perf_counter()) > 0:
                await asyncio.sleep(wait)
            path = "sql" if n % 2 == 0 else "http"
            try:
                if path == "sql":
                    await paths.sql(conns[i])
                else:
                    await paths.http_call(hconns[i])
            except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
                paths.errors[path].append(f"{type(exc).__name__}: {exc}")
                continue
            paths.spans[path].append((due, time.perf_counter()))

    try:
        await asyncio.gather(*(worker(i) for i in range(clients)))
    finally:
        for c in conns:
            await c.close()
        for h in hconns:
            await paths.http.close(h)
    return time.perf_counter() - start


async def main(ns: argparse.Namespace) -> int:
    from queen_timers.db.pool import connect_one
    from queen_timers.testing.broker import BrokerProcess

    port = free_port()
    res = Results("sql-schedule", ns)
    async with Target("sqlschedule", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        broker = BrokerProcess(
            tgt.url,
            env={"QUEEN_HTTP_PORT": str(port), "QUEEN_HTTP_HOST": "127.0.0.1"},
            transports=("http",),
        )
        await broker.start()
        paths = Paths(tgt.url, f"http://127.0.0.1:{port}", ns.delay * 1000.0)
        t_begin = time.time()
        try:
            await paced_both(paths, 4, 20, 0.5)  # warm up connections and plans
            paths.reset()
            with CpuProbe(enabled=ns.cpu_probe) as probe:
                wall = await paced_both(paths, ns.clients, ns.rate, ns.seconds)
            conn = await connect_one(tgt.url)
            try:
                left = {p: await wait_drained(conn, q, ns.delay + 30.0) for p, q in QUEUES.items()}
                fired = {
                    p: await read_lateness(conn, q, t_begin, paths.deliver[p])
                    for p, q in QUEUES.items()
                }
            finally:
                await conn.close()
        finally:
            await broker.terminate()

    out_paths = {}
    for p in QUEUES:
        pairs = list(fired[p].values())
        late = [(f - d) * 1000.0 for d, f in pairs]
        calls = [(end - due) * 1000.0 for due, end in paths.spans[p]]
        entry: dict[str, Any] = {
            "scheduled": len(paths.deliver[p]),
            "scheduled_rate": len(paths.spans[p]) / wall if wall > 0 else None,
            "fired": len(pairs),
            "pending_at_end": left[p],
            "early": sum(1 for x in late if x < 0),
            "lateness_ms": harness.summarize(late),
            "call_ms": harness.summarize(calls),
            "errors": paths.errors[p][:20],
        }
        if probe.ran:
            share, rest = probe.split(pairs, late, wall=True)
            entry["timers_in_slow_windows_pct"] = 100.0 * share
            entry["lateness_clear_ms"] = harness.summarize(rest)
        out_paths[p] = entry

    res.data.update(
        {
            "config": {
                "rate_per_path": ns.rate,
                "seconds": ns.seconds,
                "delay_s": ns.delay,
                "clients": ns.clients,
            },
            "paths": out_paths,
            "cpu_probe": probe.summary() if probe.ran else None,
        }
    )
    for path, e in out_paths.items():
        lat, clear = e["lateness_ms"], e.get("lateness_clear_ms") or {}
        res.row(
            path,
            scheduled=e["scheduled"],
            **{"achieved /s": e["scheduled_rate"]},
            fired=e["fired"],
            early=e["early"],
            **{"late p50 ms": lat["p50"], "late p99 ms": lat["p99"], "late max ms": lat["max"]},
            **{"late p99 clear ms": clear.get("p99")},
            **{"call p50 ms": e["call_ms"]["p50"], "call p99 ms": e["call_ms"]["p99"]},
        )
    res.section(
        f"SQL API against HTTP: {ns.rate:g} timers/s each, due {ns.delay:g} s later, "
        f"{ns.seconds:g} s, one broker. Lateness: segment created_at (the fire's transaction) "
        "minus the answered deliverAt, both PostgreSQL's clock. Call: from the slot's time to "
        "the answer (the SQL call includes its COMMIT), so an achieved rate under the offered "
        "one shows as call latency; add --clients when the generator, not the broker, falls "
        "behind. " + (probe.describe() if probe.ran else "CPU probe off.")
    )
    res.finish()
    return 0
