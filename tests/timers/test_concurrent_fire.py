"""Exactly once under concurrency: four fire loops, each on its own pooled connections, claim
and fire the same backlog at the same time. Every txn must appear once in the log."""

import asyncio
import collections
import random
import uuid

from queen_timers.timers import fire, store

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
        per_tenant[tenant].append(
            sched(
                queue,
                f"key-{i}",
                rnd.randint(-2000, 5000),
                txn=txn,
                partition=part,
                payload={"i": i},
            )
        )
        expected[txn] = (tenant, queue, part)
    for tenant, ops in per_tenant.items():
        for k in range(0, len(ops), 256):
            await store.apply(conn, ops[k : k + 256], tenant, "p", at(0))

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


async def test_cancels_racing_four_fire_loops(queen, conn):
    """Every timer ends exactly one way: delivered once, or cancelled and never delivered.
    `too_late` and `absent` both mean it was (or is being) delivered."""
    rt = queen.rt
    tenant = uuid.uuid4()
    n = 600
    ops = [sched(f"q{i % 3}", f"k{i}", 0, txn=f"t{i}", partition=f"p{i % 4}") for i in range(n)]
    for k in range(0, n, 256):
        await store.apply(conn, ops[k : k + 256], tenant, None, at(0))
    now = at(10)
    verdicts: dict[str, str] = {}
    rnd = random.Random(11)
    order = list(range(n))
    rnd.shuffle(order)

    async def canceller() -> None:
        async with rt.pool.acquire() as c:
            for i in order[: n // 2]:
                [r] = await store.apply(
                    c,
                    [{"op": "cancel", "queue": f"q{i % 3}", "timerKey": f"k{i}"}],
                    tenant,
                    None,
                    now,
                )
                verdicts[f"t{i}"] = r["status"]
                await asyncio.sleep(0)

    async def loop(m: int) -> None:
        while True:
            claimed = await fire.claim(rt, now=now, max_rows=17 + 5 * m)
            if not claimed:
                return
            await fire.fire_claimed(rt, claimed, now=now)

    await asyncio.wait_for(asyncio.gather(canceller(), *(loop(m) for m in range(4))), 120)
    await fire.drain(rt, now=now)  # whatever the loops left after the last cancel
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
    delivered = collections.Counter(f["txn"] for f in await log_frames(conn, tenant=tenant))
    assert max(delivered.values()) == 1
    for i in range(n):
        txn = f"t{i}"
        v = verdicts.get(txn)
        if v == "cancelled":
            assert txn not in delivered
        else:
            assert v in (None, "too_late", "absent") and txn in delivered
    assert set(verdicts.values()) <= {"cancelled", "too_late", "absent"}
