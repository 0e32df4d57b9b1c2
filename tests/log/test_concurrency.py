"""Competing consumers: every message exactly once, order kept inside each partition."""

import asyncio
from collections import defaultdict

from .helpers import acks_for, later

PARTITIONS = 20
PER_PARTITION = 250  # 5,000 messages
CONSUMERS = 8


async def test_eight_consumers_each_message_exactly_once(queen, ident, conn):
    for p in range(PARTITIONS):
        await queen.push(
            ident,
            [
                {
                    "queue": "work",
                    "partition": f"p{p}",
                    "payload": {"p": p, "n": n},
                    "transactionId": f"{p}-{n}",
                }
                for n in range(PER_PARTITION)
            ],
        )
    total = PARTITIONS * PER_PARTITION
    seen: dict[str, list[int]] = defaultdict(list)  # partition -> data n in delivery order
    txns: list[str] = []
    done = asyncio.Event()

    async def consumer(k: int) -> int:
        got = 0
        while not done.is_set():
            # Long-poll briefly so consumers without work wait instead of spinning.
            r = await queen.pop(ident, "work", batch=37, wait=True, timeout_ms=200)
            if r is None:
                continue
            for m in r["messages"]:
                seen[m["partition"]].append(m["data"]["n"])
                txns.append(m["transactionId"])
            got += len(r["messages"])
            res = await queen.ack(ident, acks_for(r))
            assert all(x["success"] for x in res), res
            if len(txns) >= total:
                done.set()
        return got

    counts = await asyncio.wait_for(asyncio.gather(*(consumer(k) for k in range(CONSUMERS))), 120)
    assert sum(counts) == total
    assert len(txns) == len(set(txns)) == total
    assert sum(1 for c in counts if c) > 1  # the work was actually shared
    for p in range(PARTITIONS):
        assert seen[f"p{p}"] == list(range(PER_PARTITION)), p
    rows = await conn.fetch(
        """SELECT k.committed, k.batch_end, p.last_offset FROM queen.log_consumers k
             JOIN queen.log_partitions p ON p.id = k.partition_id"""
    )
    assert len(rows) == PARTITIONS
    assert all(r["committed"] == r["last_offset"] == PER_PARTITION - 1 for r in rows)
    assert all(r["batch_end"] is None for r in rows)
    assert await queen.pop(ident, "work", now=later(3600)) is None


async def test_concurrent_pops_never_share_a_live_lease(queen, ident):
    await queen.push(ident, [{"queue": "q", "payload": i} for i in range(50)])
    results = await asyncio.gather(*(queen.pop(ident, "q", batch=50) for _ in range(8)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1 and len(winners[0]["messages"]) == 50
