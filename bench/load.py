"""The load generator of our broker, and the lateness read back from the log.

Schedules go through the service facade (`Queen.timers_apply`, the call every transport
makes) of an in-process `Queen` with its sweeper off; the fire happens in separate broker
processes (`queen serve --transport none`), so that the broker's CPU is measured apart from the
generator's. Lateness per timer is read from the log afterwards: the segment's created_at
(stamped by PostgreSQL inside the fire's transaction, after the partition lock) minus the
deliverAt the schedule answered (computed by PostgreSQL as now + delayMs). Both are the
database's clock; the frame carries the message id that joins them.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import time
import uuid
from typing import Any

from .queries import BQ

__all__ = [
    "Scheduler",
    "deliver_of",
    "parse_deliver_at",
    "payload_b64",
    "read_lateness",
    "schedule",
]


async def schedule(queen: Any, ident: Any, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bench's one call of the service's schedule (`Queen.timers_apply`, what every
    transport calls): the answer per op as a dict (ok, status, txn, messageId, deliverAt)."""
    res = await queen.timers_apply(ident, ops)
    if isinstance(res, dict):
        res = res.get("results", [])
    return list(res)


def deliver_of(answer: dict[str, Any]) -> tuple[bytes, float]:
    """(message id, deliverAt in epoch seconds) of one scheduled op's answer: the key and the
    start of its lateness (read_lateness)."""
    return uuid.UUID(answer["messageId"]).bytes, parse_deliver_at(answer["deliverAt"])


def parse_deliver_at(text: str) -> float:
    """The wire's deliverAt (UTC, microseconds, trailing Z) as epoch seconds."""
    t = text.rstrip("Z")
    if "." not in t:
        t += ".0"
    return dt.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()


def payload_b64(size: int, seq: int) -> str:
    """A JSON document of about `size` bytes, base64 (the wire's payload encoding)."""
    body = {"n": seq, "pad": ""}
    raw = json.dumps(body).encode()
    pad = max(0, size - len(raw))
    body["pad"] = (uuid.uuid4().hex * (pad // 32 + 1))[:pad]
    return base64.b64encode(json.dumps(body).encode()).decode()


class Scheduler:
    """Schedules timers at a paced rate through `queen.timers_apply`, recording for every
    timer its message id -> deliver_at (epoch s) and the step it was scheduled in."""

    def __init__(
        self,
        queen,
        ident,
        queue: str,
        *,
        batch: int = 100,
        partitions: int = 1,
        payload_bytes: int = 100,
        concurrency: int = 4,
    ):
        self.queen = queen
        self.ident = ident
        self.queue = queue
        self.batch = max(1, min(batch, 256))
        self.partitions = max(1, partitions)
        self.payload_bytes = payload_bytes
        self.concurrency = concurrency
        self.deliver: dict[bytes, float] = {}
        self.scheduled = 0
        self.refused = 0
        self.errors: list[str] = []
        self._seq = 0
        self._payloads = [payload_b64(payload_bytes, i) for i in range(64)]

    def ops(self, n: int, delay_ms: float, prefix: str) -> list[dict]:
        ops = []
        for _ in range(n):
            i = self._seq
            self._seq += 1
            key = f"{prefix}{i}"
            op = {
                "op": "schedule",
                "queue": self.queue,
                "timerKey": key,
                "delayMs": delay_ms,
                "txn": key,
                "payload": self._payloads[i % len(self._payloads)],
            }
            if self.partitions > 1:
                op["partition"] = f"p{i % self.partitions}"
            ops.append(op)
        return ops

    async def apply(self, ops: list[dict]) -> int:
        try:
            res = await schedule(self.queen, self.ident, ops)
        except Exception as e:  # noqa: BLE001 - counted and reported, the run goes on
            self.errors.append(f"{type(e).__name__}: {e}")
            return 0
        n = 0
        for r in res:
            if r.get("status") in ("scheduled", "rescheduled"):
                key, at = deliver_of(r)
                self.deliver[key] = at
                n += 1
            else:
                self.refused += 1
        self.scheduled += n
        return n

    async def paced(
        self,
        rate: float,
        seconds: float,
        delay_s: float,
        prefix: str,
    ) -> dict:
        """Offer `rate` timers/s for `seconds` (each due `delay_s` after its schedule). The
        offer is time-boxed: when the calls cannot keep up, fewer timers are scheduled and the
        achieved rate says so."""
        sem = asyncio.Semaphore(self.concurrency)
        tasks: set[asyncio.Task] = set()
        t0 = time.monotonic()
        start_epoch = time.time()
        issued = 0
        before = self.scheduled
        end = t0 + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            want = int(rate * (now - t0)) + 1 - issued
            if want <= 0:
                await asyncio.sleep(min(0.005, end - now))
                continue
            n = min(self.batch, want)
            await sem.acquire()
            if time.monotonic() >= end:
                sem.release()
                break
            ops = self.ops(n, delay_s * 1000.0, prefix)
            issued += n

            async def one(o=ops):
                try:
                    await self.apply(o)
                finally:
                    sem.release()

            t = asyncio.create_task(one())
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        wall = time.monotonic() - t0
        done = self.scheduled - before
        return {
            "offered_rate": rate,
            "seconds": wall,
            "issued": issued,
            "scheduled": done,
            "scheduled_rate": done / wall if wall > 0 else None,
            "start_epoch": start_epoch,
            "end_epoch": start_epoch + wall,
        }


async def read_lateness(
    conn, queue: str, since_epoch: float, deliver: dict[bytes, float]
) -> dict[bytes, tuple[float, float]]:
    """message id -> (deliver_at, fired_at) for every frame of `queue` in the log since
    `since_epoch` whose id is in `deliver` (epoch seconds, the database clock)."""
    from queen_timers.log.frames import unpack_segment

    out: dict[bytes, tuple[float, float]] = {}
    rows = await conn.fetch(BQ.queue_segments, queue, since_epoch - 1.0)
    for r in rows:
        created = r["created_at"]
        for f in unpack_segment(r["blob"]):
            d = deliver.get(f.message_id)
            if d is not None and f.message_id not in out:
                out[f.message_id] = (d, created)
    return out


async def wait_drained(conn, queue: str, timeout: float) -> int:
    """Wait until no timer of `queue` is pending (fired or dead-lettered); returns the number
    still pending at the timeout."""
    t_end = time.monotonic() + timeout
    left = -1
    while time.monotonic() < t_end:
        left = await conn.fetchval(BQ.timers_pending_queue, queue)
        if left == 0:
            return 0
        await asyncio.sleep(0.2)
    return left
