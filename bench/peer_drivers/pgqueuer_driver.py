"""PgQueuer as a peer: jobs with execute_after, one QueueManager on one connection.

    bench/.peers/pgqueuer/.venv/bin/python bench/peer_drivers/pgqueuer_driver.py '<json config>'

Runs in its own venv (PgQueuer and asyncpg live there, not in the broker's environment), so
this file imports only the standard library at the top: the bench's tests read its arithmetic
without PgQueuer installed. Settings, the ones PgQueuer's performance guide recommends:
- one QueueManager on one dedicated asyncpg connection (its LISTEN and its dequeues), the
  producer on a second connection (the guide: a single connection for the QueueManager, the
  producers elsewhere);
- batch_size BATCH (its default is 10; the guide raises it for jobs shorter than a second,
  and a timer's job is a few microseconds);
- its autovacuum profile (`pgq autovac`: Queries.optimize_autovacuum) on its tables;
- durable tables (its default; ours are logged too), everything else at its defaults.
The handler records (due, time it started); due = the job's own execute_after (PgQueuer adds
the delay to the server's now()), lateness = start - due.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import timedelta
from typing import Any

BATCH = 100  # jobs per dequeue: 10x PgQueuer's default of 10, for short jobs (its guide)
INSERT_BATCH = 1000  # jobs per enqueue statement of the burst (the procrastinate driver's)
ENTRYPOINT = "bench_timer"
SETTINGS = {
    "consumer_connections": 1,
    "batch_size": BATCH,
    "autovacuum": "pgq autovac (Queries.optimize_autovacuum)",
    "durability": "durable (default)",
}


def delay_until(due: float, now: float) -> timedelta:
    """The execute_after that makes a job due at the epoch instant `due`, asked at `now`
    (never negative: a due instant already past is due at once)."""
    return timedelta(seconds=max(0.0, due - now))


def steady_want(rate: float, elapsed: float, n: int, sent: int) -> int:
    """How many jobs an open-loop producer of `rate` per second sends now, `elapsed` seconds
    into the run, having sent `sent` of `n` (the other drivers' pacing)."""
    return max(0, min(int(rate * elapsed) + 1, n) - sent)


def burst_chunks(n: int, size: int = INSERT_BATCH) -> list[int]:
    """The sizes of the enqueue statements that schedule a burst of `n`."""
    return [min(size, n - i) for i in range(0, n, size)]


async def main(cfg: dict[str, Any]) -> dict[str, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager  # type: ignore[import-not-found]

    consumer = await asyncpg.connect(cfg["url"])
    producer = await asyncpg.connect(cfg["url"])
    queries = Queries(AsyncpgDriver(producer))
    errors: list[str] = []
    await queries.install()
    await queries.optimize_autovacuum()
    qm = QueueManager(Queries(AsyncpgDriver(consumer)))
    pairs: list[tuple[float, float]] = []
    n = cfg["n"]
    done = asyncio.Event()

    @qm.entrypoint(ENTRYPOINT)
    async def bench_timer(job: Job) -> None:
        pairs.append((job.execute_after.timestamp(), time.time()))
        if len(pairs) >= n:
            done.set()

    worker = asyncio.create_task(qm.run(batch_size=BATCH))

    async def enqueue(k: int, due: float) -> None:
        after = delay_until(due, time.time())
        await queries.enqueue([ENTRYPOINT] * k, [None] * k, [0] * k, [after] * k)

    if cfg["workload"] == "burst":
        for k in burst_chunks(n):
            await enqueue(k, cfg["due"])
    else:
        rate, delay = cfg["rate"], cfg["delay"]
        t0 = time.monotonic()
        sent = 0
        while sent < n:
            want = steady_want(rate, time.monotonic() - t0, n, sent)
            if want == 0:
                await asyncio.sleep(0.005)
                continue
            await enqueue(want, time.time() + delay)
            sent += want
    try:
        await asyncio.wait_for(done.wait(), cfg["timeout"])
    except TimeoutError:
        errors.append("timeout")
    qm.shutdown.set()
    try:
        await asyncio.wait_for(worker, 30.0)
    except Exception as e:  # noqa: BLE001 - the run is over; say why the worker did not stop
        errors.append(f"worker stop: {type(e).__name__}")
    await consumer.close()
    await producer.close()
    return {
        "scheduled": n,
        "delivered": len(pairs),
        "pairs": pairs,
        "errors": errors,
        "settings": SETTINGS,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
