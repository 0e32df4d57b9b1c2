"""Exactly once under concurrency: four fire loops, each on its own pooled connections, claim
and fire the same backlog at the same time. Every txn must appear once in the log."""

import asyncio
import collections
import random
import uuid

from queen.timers import fire, store

from .helpers import at, log_frames, sched


async def test_thousand_timers_four_loops_each_delivered_once(queen, conn):
    rt = queen.rt
    tenants = [uuid.uuid4() for _ in range(3)]
    rnd = random.Random(7)
    expected = {}
    per_tenant = collections.defaultdict(list)
    for i in range(1000):
        tenant = tenants[i % 3]
        queue, part = f"q{(i // 3) % 5}", f"p{(i // 15) % 7}"
        txn = f"txn-{i}"
        per_tenant[tenant].append(sched(queue, f"key-{i}", rnd.randint(-2000, 5000), txn=txn,
                                        partition=part, payload={"i": i}))
        expected[txn] = (tenant, queue, part)
    for tenant, ops in per_tenant.items():
        for k in range(0, len(ops), 256):
            await store.apply(conn, ops[k:k + 256], tenant, "p", at(0))

    now = at(10)
    reports = []

    async def loop(n: int) -> None:
        while True:
            claimed = await fire.claim(rt, now=now, max_rows=23 + 11 * n)
            if not claimed:
                return
            reports.append(await fire.fire_claimed(rt, claimed, now=now))

    await asyncio.wait_for(asyncio.gather(*(loop(n) for n in range(4))), 120)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
    assert sum(r.fired for r in reports) == 1000
    assert sum(r.failed_permanent + r.failed_transient + r.duplicate for r in reports) == 0
    frames = await log_frames(conn)
    counts = collections.Counter(f["txn"] for f in frames)
    assert len(frames) == 1000 and set(counts) == set(expected)
    assert max(counts.values()) == 1
    for f in frames:
        assert (f["tenant"], f["queue"], f["partition"]) == expected[f["txn"]]
    # offsets are contiguous per partition: no gap, no overlap
    by_part = collections.defaultdict(list)
    for f in frames:
        by_part[(f["tenant"], f["queue"], f["partition"])].append(f["offset"])
    assert len(by_part) == 3 * 5 * 7
    for offs in by_part.values():
        assert sorted(offs) == list(range(len(offs)))
    assert await conn.fetchval("SELECT count(*) FROM queen.log_txns") == 1000
