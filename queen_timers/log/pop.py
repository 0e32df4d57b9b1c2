"""Pop: claim a lease over the next messages of a queue and render them (client-wire §5).

The claim is one call of queen.log_pop_v1 (migrations/004): it picks partitions with pending
messages and a free lease (SKIP LOCKED, random order), leases a contiguous run of messages from
each cursor and returns the segment slices. Here the slices are decompressed, decrypted and
rendered.

Long-poll: the waiter is registered on the wake hub BEFORE the first query, so a push that
commits between "found nothing" and "park" still wakes us. A wake is only a hint; a re-check
interval that backs off from `pop_poll_min_ms` to `pop_poll_max_ms` covers lease expiries
(nothing runs at expiry) and wakes that were lost.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec
from asyncpg.pgproto.pgproto import UUID as PgUUID  # built in C: see frames.txn_hash

from ..db import Q, faults
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name
from .frames import unpack_segment

__all__ = ["QUEUE_MODE", "data_of", "iso_ms", "pop"]

log = logging.getLogger("queen_timers.log")

QUEUE_MODE = "__QUEUE_MODE__"
_json_decode = msgspec.json.decode


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def data_of(payload: bytes) -> Any:
    """A frame's JSON value. A timer payload is any bytes (the wire takes base64 of bytes);
    bytes that are not JSON are delivered as the dead-letter snapshot shows them,
    {"_raw_b64": ...}, rather than failing every pop of the partition."""
    try:
        return _json_decode(payload)
    except msgspec.DecodeError:
        return {"_raw_b64": base64.b64encode(payload).decode()}


def iso_ms(ts: dt.datetime) -> str:
    """UTC ISO 8601 with milliseconds and Z, the wire's createdAt."""
    ts = ts.astimezone(dt.UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


async def pop(
    rt: Runtime,
    ident: Identity,
    queue: Any = None,
    *,
    partition: Any = None,
    group: Any = None,
    batch: Any = None,
    wait: bool = False,
    timeout_ms: Any = 30000,
    auto_ack: bool = False,
    subscription_mode: Any = None,
    namespace: Any = None,
    task: Any = None,
    partitions: Any = 1,
    now: dt.datetime | None = None,
) -> dict[str, Any] | None:
    """Pop from a queue (or the queues of a namespace/task). None = nothing to deliver."""
    s = rt.settings
    if queue is not None:
        queue = check_name(queue, "queue", "pop_bad_queue")
    elif namespace is None and task is None:
        raise _bad("pop_bad_queue", "a pop names a queue, or a namespace and/or a task")
    if partition is not None:
        if queue is None:
            raise _bad("pop_bad_partition", "a partition pop also names its queue")
        partition = check_name(partition, "partition", "pop_bad_partition")
    for what, v in (("namespace", namespace), ("task", task)):
        if v is not None and (not isinstance(v, str) or "\x00" in v):
            raise _bad("pop_bad_" + what, f"{what} must be a string without NUL")
    group = QUEUE_MODE if group is None else check_name(group, "consumerGroup", "pop_bad_group")
    batch = s.pop_default_batch if batch is None else batch
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= s.pop_max_batch:
        raise _bad("pop_bad_batch", f"batch must be an integer from 1 to {s.pop_max_batch}")
    if (
        not isinstance(partitions, int)
        or isinstance(partitions, bool)
        or not 1 <= partitions <= s.pop_max_partitions
    ):
        raise _bad(
            "pop_bad_partitions", f"partitions must be an integer from 1 to {s.pop_max_partitions}"
        )
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
        raise _bad("pop_bad_timeout", "timeout must be a non-negative integer (ms)")
    for what, v in (("wait", wait), ("auto_ack", auto_ack)):
        if not isinstance(v, bool):  # "false" is truthy: never guess a flag's meaning
            raise _bad("pop_bad_" + what, f"{what} must be a boolean")
    if subscription_mode not in (None, "all", "new"):
        raise _bad("pop_bad_subscription_mode", "subscriptionMode must be 'all' or 'new'")
    lease_id = "" if auto_ack else str(uuid.uuid4())
    args = (
        ident.tenant,
        queue,
        partition,
        namespace,
        task,
        group,
        subscription_mode or "all",
        batch,
        s.pop_lease_seconds,
        lease_id,
        bool(auto_ack),
        partitions,
        now,
    )
    if not wait:
        return await _claim(rt, args, group, lease_id)

    if queue is not None:
        watch = [queue]
    else:
        async with rt.pool.acquire() as conn:
            watch = [
                r["name"]
                for r in await conn.fetch(Q.queues_matching, ident.tenant, namespace, task)
            ]

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    interval = s.pop_poll_min_ms / 1000
    with contextlib.ExitStack() as stack:
        events = [stack.enter_context(rt.hub.queue_waiter(ident.tenant, q)) for q in watch]
        while True:
            for ev in events:
                ev.clear()  # before the query: a push during it sets the event again
            res = await _claim(rt, args, group, lease_id)
            left = deadline - loop.time()
            if res is not None or left <= 0:
                return res
            woke = await _wait_any(events, min(interval, left))
            interval = (
                s.pop_poll_min_ms / 1000 if woke else min(interval * 2, s.pop_poll_max_ms / 1000)
            )


async def _wait_any(events: list[asyncio.Event], timeout: float) -> bool:
    if not events:
        await asyncio.sleep(timeout)
        return False
    if len(events) == 1:
        try:
            await asyncio.wait_for(events[0].wait(), timeout)
            return True
        except TimeoutError:
            return False
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return bool(done)
    finally:
        for t in tasks:
            t.cancel()


async def _claim(
    rt: Runtime, args: Sequence[object], group: str, lease_id: str
) -> dict[str, Any] | None:
    async with rt.pool.acquire() as conn:
        if faults.hook is not None:
            await faults.hook("log.pop", conn)
        rows = await conn.fetch(Q.pop_claim, *args)
    if not rows:
        return None
    return _render(rt, rows, group, lease_id)


def _render(
    rt: Runtime, rows: Sequence[asyncpg.Record], group: str, lease_id: str
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    claimed: list[str] = []
    cipher = rt.cipher
    for r in rows:
        pid = str(r["r_pid"])
        if not claimed or claimed[-1] != pid:
            claimed.append(pid)
        pname = r["r_partition"]
        created = iso_ms(r["r_created_at"])
        attempt = r["r_attempt"]
        start = r["r_start"]
        offset = r["r_base"] + start
        for f in unpack_segment(r["r_blob"])[start : start + r["r_take"]]:
            payload = f.payload
            if f.encrypted:
                if cipher is not None:
                    payload = cipher.decrypt(payload)
                else:  # served as stored, like the reference; never a silent failure
                    log.warning("encrypted frame at %s/%d and no QUEEN_ENCRYPTION_KEY", pid, offset)
            message: dict[str, Any] = {
                "id": str(PgUUID(f.message_id)),
                "transactionId": f.txn,
                "traceId": None,
                "data": data_of(payload) if payload else None,
                "producerSub": f.producer_sub,
                "createdAt": created,
                "partitionId": pid,
                "partition": pname,
                "leaseId": lease_id,
                "consumerGroup": group,
                "deliveryAttempt": attempt,
                "offset": offset,
            }
            if f.trace_parent is not None:
                # the schedule's W3C context: the consumer extracts the message as a carrier
                message["traceparent"] = f.trace_parent
                if f.trace_state is not None:
                    message["tracestate"] = f.trace_state
            messages.append(message)
            offset += 1
    first = rows[0]
    return {
        "success": True,
        "queue": first["r_queue"],
        "partition": first["r_partition"],
        "partitionId": str(first["r_pid"]),
        "leaseId": lease_id,
        "consumerGroup": group,
        "messages": messages,
        "partitionsClaimed": len(claimed),
    }
