"""Tenant B's schedule and peek latency while tenant A runs the lock attack (issue 24).

    queen bench tenant-stall [--seconds 10] [--attackers 64] [--clients 8] [--keys 32]
                             [--lock-wait-ms 200] [--pool-share 0.5] [--database-url URL]

The attack: tenant A's application holds --keys of its own timer rows in an open SQL API
transaction (queen.timer_schedule_v1 as a role bound to A), and --attackers concurrent
workers of A cancel and schedule those keys through the broker as fast as it answers, each
retrying at once after every refusal. Tenant B runs --clients closed-loop clients, each
scheduling a new key an hour ahead and then peeking it.

One run, two phases of --seconds each on the same broker: B alone ("quiet"), then B while A
attacks ("attack"). Printed: B's schedule and peek p50/p99 (ms) and calls/s in each phase,
and A's calls/s with how they ended. The goal: B's p99 under 100 ms during the attack.

The broker is the service in this process (no transport), on default settings except the two
that are the defence, so the run can also show the broker without it:
--lock-wait-ms 0 --pool-share 1 (A's calls then wait on the locks up to the statement
timeout, here 5 s so the run ends). Starts an embedded PostgreSQL in a temporary directory
unless --database-url is given (then a fresh database on that server, dropped after; the role
needs CREATEDB and CREATEROLE). Client, broker and PostgreSQL share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import random
import tempfile
import time
import urllib.parse
import uuid

import asyncpg

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.service import Queen

from .harness import Results, percentile

PAYLOAD = base64.b64encode(b'{"orderId":"9f1"}').decode()
QUEUE = "orders"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=10.0, help="length of each phase (10)")
    p.add_argument("--attackers", type=int, default=64, help="A's concurrent workers (64)")
    p.add_argument("--clients", type=int, default=8, help="B's closed-loop clients (8)")
    p.add_argument("--keys", type=int, default=32, help="rows A's transaction holds (32)")
    p.add_argument("--lock-wait-ms", type=int, default=200, help="QUEEN_TIMERS_LOCK_WAIT_MS (200)")
    p.add_argument(
        "--pool-share", type=float, default=0.5, help="QUEEN_TIMERS_TENANT_POOL_SHARE (0.5)"
    )


def _op(key: str, delay_ms: int = 3_600_000) -> dict:
    return {
        "op": "schedule",
        "queue": QUEUE,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": f"t-{key}",
        "payload": PAYLOAD,
    }


def _with_user(url: str, user: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))


async def _tenant_b(q: Queen, b: Identity, clients: int, until: float) -> dict:
    sched: list[float] = []
    peek: list[float] = []
    errors = 0
    keys = itertools.count()

    async def client() -> None:
        nonlocal errors
        while time.monotonic() < until:
            key = f"b-{next(keys)}"
            t0 = time.perf_counter()
            try:
                await q.timers_apply(b, [_op(key)])
                t1 = time.perf_counter()
                await q.timer_peek(b, QUEUE, key)
                t2 = time.perf_counter()
            except QueenError:
                errors += 1
                continue
            sched.append((t1 - t0) * 1000)
            peek.append((t2 - t1) * 1000)

    t0 = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.monotonic() - t0
    return {"sched": sched, "peek": peek, "errors": errors, "wall": wall}


async def _tenant_a(q: Queen, a: Identity, keys: list[str], workers: int, stop: asyncio.Event):
    outcomes: dict[str, int] = {}

    async def worker(i: int) -> None:
        rnd = random.Random(i)
        while not stop.is_set():
            key = rnd.choice(keys)
            try:
                if rnd.random() < 0.5:
                    await q.timer_cancel(a, QUEUE, key)
                else:
                    await q.timers_apply(a, [_op(key, 1_000)])
                end = "ok"
            except QueenError as e:
                end = e.reason
            outcomes[end] = outcomes.get(end, 0) + 1

    await asyncio.gather(*(worker(i) for i in range(workers)))
    return outcomes


def _row(res: Results, phase: str, r: dict) -> None:
    res.row(
        f"B, {phase}",
        **{
            "schedule p50 ms": percentile(r["sched"], 50),
            "schedule p99 ms": percentile(r["sched"], 99),
            "peek p50 ms": percentile(r["peek"], 50),
            "peek p99 ms": percentile(r["peek"], 99),
            "schedule+peek/s": len(r["sched"]) / r["wall"],
            "errors": r["errors"],
        },
    )


@contextlib.asynccontextmanager
async def _broker(ns: argparse.Namespace):
    settings = dict(
        sweeper=False,
        retention_interval_ms=0,
        timers_lock_wait_ms=ns.lock_wait_ms,
        timers_tenant_pool_share=ns.pool_share,
        statement_timeout_ms=5000,
    )
    if ns.database_url is None:
        with tempfile.TemporaryDirectory(prefix="queen-stall-") as d:
            q = Queen(data_dir=d, **settings)
            await q.start()
            try:
                yield q
            finally:
                await q.stop()
        return
    name = f"queen_stall_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ns.database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    parts = urllib.parse.urlsplit(ns.database_url)
    url = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    q = Queen(database_url=url, **settings)
    try:
        await q.start()
        yield q
    finally:
        await q.stop()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main(ns: argparse.Namespace) -> int:
    a = Identity(tenant=uuid.uuid4(), subject="app-a")
    b = Identity(tenant=uuid.uuid4(), subject="app-b")
    keys = [f"held-{i}" for i in range(ns.keys)]
    res = Results("tenant-stall", ns)
    role = f"queen_stall_{uuid.uuid4().hex[:8]}"
    async with _broker(ns) as q:
        url = q.rt.database_url
        admin = await asyncpg.connect(url)
        await admin.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE queen_producer')
        await admin.execute(
            "INSERT INTO queen.timer_producer_roles (role_name, tenant_id) VALUES ($1, $2)",
            role,
            a.tenant,
        )
        app = None
        try:
            await q.timers_apply(a, [_op(k) for k in keys])
            res.say(
                f"pool {q.rt.settings.pool_max}, lock wait "
                f"{ns.lock_wait_ms} ms, tenant share {ns.pool_share}; A holds {ns.keys} rows, "
                f"{ns.attackers} attackers; B {ns.clients} clients; {ns.seconds:g} s a phase"
            )
            quiet = await _tenant_b(q, b, ns.clients, time.monotonic() + ns.seconds)
            _row(res, "quiet", quiet)

            app = await asyncpg.connect(_with_user(url, role))
            tr = app.transaction()
            await tr.start()
            for k in keys:  # A's application holds these rows until it commits
                r = json.loads(
                    await app.fetchval(
                        "SELECT queen.timer_schedule_v1($1, $2, $3, $4)",
                        QUEUE,
                        k,
                        3_600_000,
                        b"held",
                    )
                )
                assert r["ok"], r
            stop = asyncio.Event()
            attack = asyncio.ensure_future(_tenant_a(q, a, keys, ns.attackers, stop))
            await asyncio.sleep(0.5)  # the attack reaches full speed before B is measured
            t0 = time.monotonic()
            loud = await _tenant_b(q, b, ns.clients, time.monotonic() + ns.seconds)
            stop.set()
            outcomes = await attack
            wall = time.monotonic() - t0 + 0.5
            _row(res, "attack", loud)
            total = sum(outcomes.values())
            res.row("A, attack", **{"calls/s": total / wall, **outcomes})
            res.data["goal"] = "B's p99 < 100 ms for schedule and peek under attack"
            await tr.rollback()
        finally:
            if app is not None:
                await app.close()
            await admin.execute("DELETE FROM queen.timer_producer_roles WHERE role_name = $1", role)
            await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
            await admin.close()
    res.finish()
    return 0
