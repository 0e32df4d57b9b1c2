"""One target's delivery loop: pop a batch of its queue, attempt each message (at most
`concurrency` at once, under the rate limit), then settle the whole batch in ONE transaction
fenced by the pop's lease: delivered messages are acked; a retry is acked AND staged as a timer
into the same queue (due after its wait); a permanent failure, or the last allowed attempt, is
acked to the dead-letter queue with its status and an excerpt of the answer.

A broker that dies between the attempt and that transaction leaves the lease to expire: the
message is popped again (by any broker) and sent with the same webhook-id. Nothing is acked
before its answer is known, so nothing is lost; a receiver dedupes on webhook-id.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import time
from typing import Any

import msgspec

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.webhooks.targets import Attempt, Target

from .identity import Delivery, of_message, retry_key, retry_txn
from .metrics import WebhookMetrics, result_class
from .policy import Verdict, backoff_ms, retry_after_ms, verdict
from .ratelimit import Bucket
from .recorder import Recorder
from .sender import Answer, Sender
from .signing import keys, signature

__all__ = ["TargetWorker"]

log = logging.getLogger("queen_webhooks")

_STOPPED_POLL_S = 1.0  # how often a paused target looks again (a refresh wakes it sooner)
# A batch whose attempts outlast this renews its lease, and again each time this passes: slow
# or timing-out receivers must not let the lease lapse (a lapsed batch is popped again and sent
# twice). A third of the default lease time (60 s), so one lost renewal is survived.
RENEW_LEASE_S = 20.0


def _body(data: Any) -> tuple[bytes, str]:
    """The message's bytes as they were scheduled, and their content type."""
    if isinstance(data, dict) and set(data) == {"_raw_b64"}:
        return base64.b64decode(data["_raw_b64"]), "application/octet-stream"
    if data is None:
        return b"", "application/octet-stream"
    return msgspec.json.encode(data), "application/json"


class TargetWorker:
    def __init__(
        self,
        queen: Queen,
        target: Target,
        sender: Sender,
        metrics: WebhookMetrics,
        *,
        batch: int,
        recorder: Recorder,
    ):
        self.queen = queen
        self.sender = sender
        self.metrics = metrics
        self.batch = batch
        self.recorder = recorder
        self.label = f"{queen.tenant_metrics_label(target.tenant)}/{target.name}"
        self.target = target
        self._keys = keys(target.secrets)
        self._slots = asyncio.Semaphore(target.concurrency)
        self._bucket = Bucket(target.rate_per_s) if target.rate_per_s else None
        self._changed = asyncio.Event()
        self._stopping = False
        self._failures = 0
        self.batches = 0  # settled batches: tests and the bench wait on progress
        self.renewals = 0  # lease renewals of slow batches (progress is notified too)
        self.progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"webhooks:{self.target.name}")

    def update(self, target: Target) -> None:
        if target == self.target:
            return
        if target.concurrency != self.target.concurrency:
            self._slots = asyncio.Semaphore(target.concurrency)
        if target.rate_per_s != self.target.rate_per_s:
            self._bucket = Bucket(target.rate_per_s) if target.rate_per_s else None
        self.target = target
        self._keys = keys(target.secrets)
        self._changed.set()

    async def stop(self, grace_s: float) -> None:
        """Finish the batch in hand (up to `grace_s`), then stop. A batch cut short is not
        lost: its lease expires and it is popped again."""
        self._stopping = True
        self._changed.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace_s)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while not self._stopping:
            t = self.target
            if t.paused:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), _STOPPED_POLL_S)
                continue
            ident = Identity(tenant=t.tenant, subject=f"webhooks:{t.name}")
            try:
                popped = await self.queen.pop(
                    ident, t.queue, batch=self.batch, wait=True, timeout_ms=1000
                )
                if popped is not None and popped.get("messages"):
                    await self._settle(ident, t, dict(popped))
            except QueenError as exc:  # the database away, a refused pop: try again soon
                log.warning("webhook target %s: %s", t.name, exc)
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not end delivery for good: log it, go on
                log.exception("webhook target %s: delivery loop failed", t.name)
                await asyncio.sleep(1)

    async def _attempt(self, t: Target, m: dict[str, Any]) -> tuple[Delivery, Answer, bytes]:
        d = of_message(m["id"], m.get("transactionId"), m["createdAt"])
        body, content_type = _body(m.get("data"))
        async with self._slots:
            if self._bucket is not None:
                await self._bucket.take()
            ts = int(time.time())
            headers = {"content-type": content_type, **t.headers}
            headers["webhook-id"] = d.webhook_id
            headers["webhook-timestamp"] = str(ts)
            headers["webhook-signature"] = signature(self._keys, d.webhook_id, ts, body)
            headers["queen-attempt"] = str(d.attempt)
            answer = await self.sender.send(t.method, t.url, headers, body, t.timeout_ms)
        self.metrics.attempts.labels(self.label, result_class(answer.status, answer.blocked)).inc()
        self.metrics.latency.labels(self.label).observe(answer.latency_ms / 1000)
        self.metrics.lag.labels(self.label).set(max(0.0, time.time() - d.first_ms / 1000))
        return d, answer, body

    async def _renew(self, ident: Identity, t: Target, lease: str) -> None:
        while True:
            await asyncio.sleep(RENEW_LEASE_S)
            try:
                await self.queen.extend_lease(ident, lease)
            except QueenError as exc:  # the next renewal may pass; the settle fences anyway
                log.warning("webhook target %s: lease not renewed: %s", t.name, exc)
                continue
            async with self.progress:
                self.renewals += 1
                self.progress.notify_all()

    async def _settle(self, ident: Identity, t: Target, popped: dict[str, Any]) -> None:
        lease = popped["leaseId"]
        messages = popped["messages"]
        renewing = asyncio.create_task(self._renew(ident, t, lease))
        try:
            tried = await asyncio.gather(*(self._attempt(t, m) for m in messages))
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
        now = dt.datetime.now(dt.UTC)
        now_ms = int(now.timestamp() * 1000)
        acks: list[dict[str, Any]] = []
        timers: list[dict[str, Any]] = []
        records: list[Attempt] = []
        outcomes: list[str] = []
        for m, (d, answer, body) in zip(messages, tried, strict=True):
            ack = {
                "type": "ack",
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
            }
            v = Verdict.PERMANENT if answer.blocked else verdict(answer.status)
            why = "address refused" if answer.blocked else "permanent failure"
            wait = 0
            if v is Verdict.RETRY:
                wait = max(
                    backoff_ms(d.attempt, t.backoff_ms, t.max_backoff_ms),
                    retry_after_ms(answer.status, answer.retry_after),
                )
                if d.attempt >= t.max_attempts:
                    v, why = Verdict.PERMANENT, "attempts exhausted"
                elif now_ms + wait > d.first_ms + t.max_age_ms:
                    v, why = Verdict.PERMANENT, "too old to retry"
            if v is Verdict.DELIVERED:
                outcome = "delivered"
                acks.append({**ack, "status": "completed"})
            elif v is Verdict.RETRY:
                outcome = "retry"
                acks.append({**ack, "status": "completed"})
                timers.append(
                    {
                        "op": "schedule",
                        "queue": t.queue,
                        "partition": m["partition"],
                        "timerKey": retry_key(t.name, d),
                        "delayMs": wait,
                        "txn": retry_txn(d),
                        "payload": base64.b64encode(body).decode(),
                    }
                )
            else:
                outcome = "dead"
                acks.append(
                    {
                        **ack,
                        "status": "dlq",
                        "error": f"webhook {t.name} {d.webhook_id} attempt {d.attempt} "
                        f"({why}): {answer.error}",
                    }
                )
            outcomes.append(outcome)
            records.append(
                Attempt(
                    tenant=t.tenant,
                    target=t.name,
                    webhook_id=d.webhook_id,
                    attempt=d.attempt,
                    at=now,
                    status=answer.status,
                    latency_ms=answer.latency_ms,
                    outcome=outcome,
                    error=answer.error,
                )
            )
        bundle = {"operations": acks, "timers": timers, "requiredLeases": [lease]}
        result = await self.queen.transaction(ident, bundle)
        if not result.get("success"):
            # The lease was lost (it expired during slow attempts, or a broker took the
            # partition over): nothing of the batch is applied and it is popped again.
            log.warning("webhook target %s: batch not settled: %s", t.name, result.get("error"))
            return
        for outcome in outcomes:
            self.metrics.deliveries.labels(self.label, outcome).inc()
            if outcome == "delivered":
                self._failures = 0
            else:
                self._failures += 1
        self.metrics.failing.labels(self.label).set(self._failures)
        self.recorder.add(records)  # written off this path (recorder.py)
        async with self.progress:
            self.batches += 1
            self.progress.notify_all()
