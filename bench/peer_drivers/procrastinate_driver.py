"""procrastinate as a peer: deferred jobs with schedule_at, two workers in one process.

    bench/.peers/venv/bin/python bench/peer_drivers/procrastinate_driver.py '<json config>'

Runs in the bench's own venv (procrastinate and psycopg live there, not in the broker's
environment). The task records (due, time it started running); lateness = start - due.
Worker settings: WORKERS workers, each with concurrency CONCURRENCY and
fetch_job_polling_interval POLL_S (1 s, the same
fallback poll as our sweeper; procrastinate's default is 5 s), LISTEN/NOTIFY on (its default),
finished jobs deleted (like our fire deletes the staging row).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import time

from procrastinate import App, PsycopgConnector  # type: ignore[import-not-found]

WORKERS = 2  # two workers (two fetch loops: a worker fetches one job per round trip)
CONCURRENCY = 10
POLL_S = 1.0
BATCH = 1000


async def main(cfg: dict) -> dict:
    app = App(connector=PsycopgConnector(conninfo=cfg["conninfo"]))
    pairs: list[tuple[float, float]] = []
    n = cfg["n"]
    done = asyncio.Event()

    @app.task(name="bench_timer", queue="bench")
    async def bench_timer(due: float) -> None:
        pairs.append((due, time.time()))
        if len(pairs) >= n:
            done.set()

    errors: list[str] = []
    async with app.open_async():
        try:
            await app.schema_manager.apply_schema_async()
        except Exception as e:  # noqa: BLE001 - already applied by the other workload
            errors.append(f"schema: {type(e).__name__}")
        workers = [
            asyncio.create_task(
                app.run_worker_async(
                    queues=["bench"],
                    concurrency=CONCURRENCY,
                    fetch_job_polling_interval=POLL_S,
                    install_signal_handlers=False,
                    delete_jobs="always",
                    wait=True,
                    name=f"bench-{i}",
                )
            )
            for i in range(WORKERS)
        ]
        if cfg["workload"] == "burst":
            at = dt.datetime.fromtimestamp(cfg["due"], dt.UTC)
            for i in range(0, n, BATCH):
                k = min(BATCH, n - i)
                await bench_timer.configure(schedule_at=at).batch_defer_async(
                    *[{"due": cfg["due"]} for _ in range(k)]
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
                due = time.time() + delay
                at = dt.datetime.fromtimestamp(due, dt.UTC)
                await bench_timer.configure(schedule_at=at).batch_defer_async(
                    *[{"due": due} for _ in range(want)]
                )
                sent += want
        try:
            await asyncio.wait_for(done.wait(), cfg["timeout"])
        except TimeoutError:
            errors.append("timeout")
        for w in workers:
            w.cancel()
        for w in workers:
            try:
                await w
            except BaseException:  # noqa: BLE001 - cancelled on purpose
                pass
    return {
        "scheduled": n,
        "delivered": len(pairs),
        "pairs": pairs,
        "errors": errors,
        "settings": {
            "workers": WORKERS,
            "concurrency": CONCURRENCY,
            "fetch_job_polling_interval": POLL_S,
        },
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
