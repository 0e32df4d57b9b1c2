"""The floor: a hand-written asyncpg claim+delete loop on a table of the staging table's shape.

    python -m bench.peer_drivers.floor_driver '<json config>'

One consumer loop (like a sweeper with parallelism 1): one statement claims up to BATCH due
rows with FOR UPDATE SKIP LOCKED, deletes them and records each delivery in a table, in one
transaction; an empty claim sleeps 5 ms (the sweeper's floor). No packing, no log, no fairness,
no leases: the least work that durably moves a due row out of staging.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import asyncpg

from bench.queries import BQ

BATCH = 500  # rows per claim; the floor's own choice (larger than the sweeper's 200)


async def main(cfg: dict) -> dict:
    conn = await asyncpg.connect(cfg["url"])
    prod = await asyncpg.connect(cfg["url"])
    await conn.execute(BQ.floor_schema)
    pairs: list[tuple[float, float]] = []
    n = cfg["n"]
    stop = asyncio.Event()

    async def consume() -> None:
        while not stop.is_set():
            rows = await conn.fetch(BQ.floor_claim_delete, BATCH)
            pairs.extend((r["due"], r["at"]) for r in rows)
            if len(pairs) >= n:
                return
            if not rows:
                await asyncio.sleep(0.005)

    task = asyncio.create_task(consume())
    errors: list[str] = []
    if cfg["workload"] == "burst":
        for i in range(0, n, 5000):
            await prod.execute(
                BQ.floor_insert_at, [f"b{j}" for j in range(i, min(i + 5000, n))], cfg["due"]
            )
    else:
        rate, delay = cfg["rate"], cfg["delay"]
        t0 = time.monotonic()
        sent = 0
        while sent < n:
            want = min(int(rate * (time.monotonic() - t0)) + 1, n) - sent
            if want <= 0:
                await asyncio.sleep(0.005)
                continue
            keys = [f"s{j}" for j in range(sent, sent + want)]
            await prod.execute(BQ.floor_insert_at, keys, time.time() + delay)
            sent += want
    try:
        await asyncio.wait_for(task, cfg["timeout"])
    except TimeoutError:
        stop.set()
        errors.append("timeout")
    await conn.close()
    await prod.close()
    return {"scheduled": n, "delivered": len(pairs), "pairs": pairs, "errors": errors}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
