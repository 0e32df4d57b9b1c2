"""Log throughput: push (batches of 1 and of 500) and pop+ack (1 and 4 consumers, batches of 500).

A benchmark, not a test:

    queen bench log-push-pop                       # embedded PostgreSQL in /tmp
    queen bench log-push-pop --database-url postgresql://...

Runs through the transport-agnostic service (queen_timers.service.Queen), so it measures the core:
validation, packing, zstd, the stored procedures and asyncpg, without HTTP. Every phase uses a
fresh queue of one fresh database.

Every figure is the best of --rounds rounds (a shared machine is noisy); the current numbers
are in docs/guides/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.env import Target
from bench.harness import Results
from queen_timers.identity import Identity
from queen_timers.service import Queen


def _payload(i: int, size: int) -> dict:
    return {"i": i, "pad": "x" * max(0, size - 20)}


async def push_phase(
    q: Queen,
    ident: Identity,
    queue: str,
    total: int,
    batch: int,
    producers: int,
    partitions: int,
    size: int,
) -> float:
    per = total // producers
    items_per_producer = [
        [
            {"queue": queue, "partition": f"p{k % partitions}", "payload": _payload(i, size)}
            for i in range(per)
        ]
        for k in range(producers)
    ]

    async def producer(k: int) -> None:
        mine = items_per_producer[k]
        for s in range(0, per, batch):
            res = await q.push(ident, mine[s : s + batch])
            assert res[-1]["status"] == "queued", res[-1]

    t0 = time.perf_counter()
    await asyncio.gather(*(producer(k) for k in range(producers)))
    return per * producers / (time.perf_counter() - t0)


async def pop_ack_phase(
    q: Queen, ident: Identity, queue: str, total: int, batch: int, consumers: int
) -> float:
    got = 0

    async def consumer() -> None:
        nonlocal got
        idle = 0
        while got < total and idle < 50:
            r = await q.pop(ident, queue, batch=batch)
            if r is None:
                idle += 1
                await asyncio.sleep(0.001)
                continue
            idle = 0
            msgs = r["messages"]
            res = await q.ack(
                ident,
                [
                    {
                        "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"],
                        "leaseId": m["leaseId"],
                        "status": "completed",
                    }
                    for m in msgs
                ],
            )
            assert res[-1]["success"], res[-1]
            got += len(msgs)

    t0 = time.perf_counter()
    await asyncio.gather(*(consumer() for _ in range(consumers)))
    elapsed = time.perf_counter() - t0
    assert got == total, f"consumed {got} of {total}"
    return got / elapsed


async def main(ns: argparse.Namespace) -> int:
    res = Results("log-push-pop", ns)
    best: dict[str, float] = {}
    async with Target("logpushpop", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        q = Queen(
            database_url=tgt.url,
            sweeper=False,
            sweeper_notify=False,
            retention_interval_ms=0,
            pool_max=ns.pool,
        )
        await q.start()
        ident = Identity(subject="bench")
        shape = (ns.producers, ns.partitions, ns.payload_bytes)
        try:
            for r in range(ns.rounds):
                rates = {
                    "push batch=1": await push_phase(
                        q, ident, f"single{r}", ns.single_messages, 1, *shape
                    ),
                    "push batch=500": await push_phase(
                        q, ident, f"one{r}", ns.messages, 500, *shape
                    ),
                    "pop+ack batch=500, 1 consumer": await pop_ack_phase(
                        q, ident, f"one{r}", ns.messages, 500, 1
                    ),
                }
                await push_phase(q, ident, f"four{r}", ns.messages, 500, *shape)
                rates["pop+ack batch=500, 4 consumers"] = await pop_ack_phase(
                    q, ident, f"four{r}", ns.messages, 500, 4
                )
                for label, rate in rates.items():
                    res.say(f"round {r + 1}: {label}: {rate:,.0f} msg/s")
                    best[label] = max(best.get(label, 0.0), rate)
        finally:
            await q.stop()
    for label, rate in best.items():
        res.row(label, msg_per_s=rate)
    res.data["config"] = {
        k: getattr(ns, k)
        for k in ("messages", "single_messages", "partitions", "producers", "payload_bytes")
    }
    res.section(f"Best of {ns.rounds} round(s), messages of ~{ns.payload_bytes} B.")
    res.finish()
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--messages", type=int, default=100_000, help="messages of the 500 phases")
    p.add_argument(
        "--single-messages", type=int, default=5_000, help="messages of the batch=1 push phase"
    )
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--producers", type=int, default=4)
    p.add_argument("--payload-bytes", type=int, default=100)
    p.add_argument("--pool", type=int, default=16)
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat everything; the table holds each figure's best round (a shared machine "
        "is noisy)",
    )
