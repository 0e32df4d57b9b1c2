"""The reads behind the official client's admin surface, and the queue delete.

`client.admin` of queen-mq asks for namespaces, tasks, partitions, a queue's depth and detail,
the status page, the messages of a queue and one message; `client.queue(q).delete()` drops a
queue. Each answer has the reference broker's shape with the fields this broker has
(docs/guides/official-client.md); every figure is the caller's tenant's. The statements are in
migrations/034_resources.sql.

Messages live packed in segments (queen_timers/log/frames.py), so a page of messages is read as
the newest segments of a queue, decoded and cut to size here; one message is found through its
txn digest (queen.log_txns), which is kept for the push dedup window, so a message older than
that window is found by the list only.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from .db import Q
from .errors import QueenError
from .identity import Identity
from .log.frames import txn_hash, unpack_segment
from .log.pop import QUEUE_MODE, data_of, iso_ms
from .runtime import Runtime
from .timers.bulk import pooled_write
from .timers.inspect import check_queue, iso
from .validate import check_name

__all__ = [
    "MESSAGE_STATUSES",
    "check_group",
    "consumer_group",
    "consumer_groups",
    "delete_queue",
    "depth",
    "group_delete",
    "group_seek",
    "grouped",
    "lagging",
    "message",
    "messages",
    "partitions",
    "queue_detail",
    "waiting",
]

MESSAGE_STATUSES = ("pending", "processing", "completed")
# Messages per page: the reference's default (200); the ceiling is a bound, not measured.
MESSAGES_DEFAULT_LIMIT = 200
MESSAGES_MAX_LIMIT = 1000
# A page reads up to offset + limit segments with their blobs: the offset's ceiling bounds
# that read (a bound, not measured); deeper history is the dead letters' or the consumers'.
MESSAGES_MAX_OFFSET = 10_000


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def _counts(r: Any) -> dict[str, int]:
    return {
        "total": int(r["last_offset"] + 1 - r["log_start"]),
        "pending": int(r["pending"]) - int(r["leased"]),
        "processing": int(r["leased"]),
    }


def waiting(messages: dict[str, int]) -> dict[str, int]:
    """A QueueSummary's message counts as the reference's status routes read them: `pending`
    waits for a pop (the summaries count leased messages in it too), `processing` is leased."""
    processing = messages["processing"]
    pending = max(messages["pending"] - processing, 0)
    return {"total": messages["total"], "pending": pending, "processing": processing}


def grouped(queues: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Queue summaries summed by their namespace or task (queues without one are left out,
    as the reference lists only named ones)."""
    rows: dict[str, dict[str, Any]] = {}
    for q in queues:
        name = q[by]
        if not name:
            continue
        row = rows.setdefault(
            name,
            {by: name, "queues": 0, "partitions": 0, "messages": {"total": 0, "pending": 0}},
        )
        row["queues"] += 1
        row["partitions"] += q["partitions"]
        row["messages"]["total"] += q["messages"]["total"]
        row["messages"]["pending"] += waiting(q["messages"])["pending"]
    return [rows[k] for k in sorted(rows)]


async def partitions(
    rt: Runtime, ident: Identity, queue: Any, now: dt.datetime
) -> list[dict[str, Any]]:
    """Every partition of the tenant's queues (or of one), by queue and name; the message
    counts are queue mode's."""
    name = None if queue is None else check_queue(queue)
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(Q.resources_partitions, ident.tenant, name, QUEUE_MODE, now)
    return [
        {
            "id": str(r["partition_id"]),
            "name": r["partition"],
            "queue": r["queue"],
            "namespace": r["namespace"] or None,
            "task": r["task"] or None,
            "createdAt": iso(r["created_at"]),
            "lastActivity": iso(r["last_write_at"]),
            "messages": _counts(r),
            "offsets": {
                "logStart": int(r["log_start"]),
                "last": int(r["last_offset"]),
                "committed": int(r["committed"]),
            },
            "consumerGroups": int(r["consumer_groups"]),
            "deadLetters": int(r["dead_letters"]),
        }
        for r in rows
    ]


async def depth(
    rt: Runtime, ident: Identity, queue: Any, group: Any, now: dt.datetime
) -> dict[str, Any]:
    """Per-partition backlog of one queue for queue mode or one consumer group. Conflation does
    not exist here: effectivePending is pending."""
    name = check_queue(queue)
    g = QUEUE_MODE if group is None else check_group(group)
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(Q.resources_partitions, ident.tenant, name, g, now)
    if not rows:
        raise _queue_not_found(name)
    parts = [{"partition": r["partition"], "pending": int(r["pending"])} for r in rows]
    pending = sum(p["pending"] for p in parts)
    return {
        "queue": name,
        "group": None if group is None else g,
        "pending": pending,
        "partitionsPending": sum(1 for p in parts if p["pending"] > 0),
        "conflation": False,
        "effectivePending": pending,
        "partitions": parts,
    }


def _queue_not_found(name: str) -> QueenError:
    return QueenError("queue_not_found", "queue_not_found", f"queue {name!r} has no log", 404)


async def queue_detail(
    rt: Runtime, ident: Identity, queue: Any, now: dt.datetime
) -> dict[str, Any]:
    """One queue: its configuration, its partitions with queue mode's counts and cursor, and
    the totals (timers are added by the caller)."""
    name = check_queue(queue)
    async with rt.pool.acquire() as conn:
        config = await conn.fetchrow(Q.resources_queue_config, ident.tenant, name)
        rows = await conn.fetch(Q.resources_partitions, ident.tenant, name, QUEUE_MODE, now)
    if config is None:
        raise _queue_not_found(name)
    parts = []
    totals = {"total": 0, "pending": 0, "processing": 0, "completed": 0, "deadLetter": 0}
    for r in rows:
        counts = _counts(r)
        completed = counts["total"] - counts["pending"] - counts["processing"]
        m = {**counts, "completed": completed, "deadLetter": int(r["dead_letters"])}
        for k in totals:
            totals[k] += m[k]
        parts.append(
            {
                "id": str(r["partition_id"]),
                "name": r["partition"],
                "createdAt": iso(r["created_at"]),
                "messages": m,
                "cursor": {
                    "committed": int(r["committed"]),
                    "totalConsumed": int(r["total_consumed"]),
                },
                "lastActivity": iso(r["last_write_at"]),
            }
        )
    return {
        "queue": {
            "id": str(config["id"]),
            "name": config["name"],
            "namespace": config["namespace"] or None,
            "task": config["task"] or None,
            "priority": config["priority"],
            "createdAt": iso(config["created_at"]),
            "config": {
                "leaseTime": config["lease_time"],
                "retryLimit": config["retry_limit"],
                "retryDelay": config["retry_delay"],
                "ttl": config["ttl"],
                "maxQueueSize": config["max_size"],
                "deadLetterQueue": config["dead_letter_queue"],
                "encryptionEnabled": config["encryption_enabled"],
            },
        },
        "partitions": parts,
        "totals": {"messages": totals},
    }


def _status(offset: int, r: Any, now: dt.datetime) -> str:
    if offset <= r["committed"]:
        return "completed"
    live = r["lease_expires_at"] is not None and r["lease_expires_at"] > now
    if live and r["batch_end"] is not None and offset <= r["batch_end"]:
        return "processing"
    return "pending"


def _message(r: Any, frame: Any, offset: int, pid: str, now: dt.datetime) -> Any:
    status = _status(offset, r, now)
    lease = r["lease_expires_at"] if status == "processing" else None
    return {
        "id": str(frame.id),
        "transactionId": frame.txn,
        "partitionId": pid,
        "queuePath": f"{r['queue']}/{r['partition']}",
        "queue": r["queue"],
        "partition": r["partition"],
        "namespace": r["namespace"] or None,
        "task": r["task"] or None,
        "status": status,
        "offset": offset,
        "traceId": None,
        "producerSub": frame.producer_sub,
        "createdAt": iso_ms(r["created_at"]),
        "leaseExpiresAt": None if lease is None else iso_ms(lease),
    }


def _payload(rt: Runtime, frame: Any) -> Any:
    payload = frame.payload
    if frame.encrypted and rt.cipher is not None:
        payload = rt.cipher.decrypt(payload)
    return data_of(payload) if payload else None


def _int(value: Any, what: str, default: int, lo: int, hi: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise _bad("messages_bad_" + what, f"{what} must be an integer from {lo} to {hi}")
    return value


async def messages(
    rt: Runtime,
    ident: Identity,
    *,
    queue: Any,
    partition: Any = None,
    status: Any = None,
    limit: Any = None,
    offset: Any = None,
    now: dt.datetime,
) -> dict[str, Any]:
    """The newest messages of one queue (optionally one partition and one status of queue
    mode), newest first, without payloads."""
    if queue is None:
        raise _bad("messages_queue_required", "queue is required: messages are read per queue")
    name = check_queue(queue)
    part = None if partition is None else check_name(partition, "partition", "bad_partition")
    if status is not None and status not in MESSAGE_STATUSES:
        raise _bad("messages_bad_status", f"status must be one of {', '.join(MESSAGE_STATUSES)}")
    lim = _int(limit, "limit", MESSAGES_DEFAULT_LIMIT, 1, MESSAGES_MAX_LIMIT)
    skip = _int(offset, "offset", 0, 0, MESSAGES_MAX_OFFSET)
    # A segment holds at least one frame: offset + limit segments always cover the page
    # without a status filter; with one, the page may come out short (declared in the guide).
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(Q.resources_segments_recent, ident.tenant, name, part, skip + lim)
    out: list[dict[str, Any]] = []
    seen = 0
    for r in rows:
        pid = str(r["partition_id"])
        frames = unpack_segment(r["blob"])
        for i in range(len(frames) - 1, -1, -1):
            m = _message(r, frames[i], r["base_offset"] + i, pid, now)
            if status is not None and m["status"] != status:
                continue
            seen += 1
            if seen > skip:
                out.append(m)
            if len(out) == lim:
                break
        if len(out) == lim:
            break
    return {"messages": out, "pagination": {"limit": lim, "offset": skip}}


def _partition_id(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise _bad("bad_partition_id", f"partitionId {value!r} is not a UUID") from None


async def message(
    rt: Runtime, ident: Identity, partition_id: Any, transaction_id: Any, now: dt.datetime
) -> dict[str, Any] | None:
    """One message with its data, or None when the tenant's partition holds no message of
    that txn within the dedup window."""
    pid = _partition_id(partition_id)
    if not isinstance(transaction_id, str) or not transaction_id:
        raise _bad("bad_transaction_id", "transactionId must be a non-empty string")
    async with rt.pool.acquire() as conn:
        r = await conn.fetchrow(
            Q.resources_message_find, ident.tenant, pid, txn_hash(transaction_id)
        )
    if r is None:
        return None
    frame = unpack_segment(r["blob"])[r["offset"] - r["base_offset"]]
    if frame.txn != transaction_id:  # a digest collision: not this message
        return None
    return {**_message(r, frame, r["offset"], str(pid), now), "data": _payload(rt, frame)}


async def delete_queue(rt: Runtime, ident: Identity, queue: Any) -> dict[str, Any]:
    """Drop one queue of the tenant in one transaction: pending timers, dead letters, the log
    and its cursors. A queue with nothing answers existed false."""
    name = check_queue(queue)
    async with pooled_write(rt, ident) as conn:
        res: dict[str, Any] = await conn.fetchval(Q.resources_queue_delete, ident.tenant, name)
    return {"deleted": True, "queue": name, **res}


# -- consumer groups -----------------------------------------------------------------------------
# A group whose oldest unconsumed message is older than this is "Lagging" in the list: the
# reference's threshold (300 s), kept so dashboards read the same state.
LAGGING_AFTER_S = 300


def check_group(group: Any) -> str:
    name = check_name(group, "consumerGroup", "bad_group")
    if name.startswith("__"):
        raise _bad(
            "consumer_group_reserved",
            f"{name!r} is reserved (queue mode and the timers' dead letters are not groups)",
        )
    return name


def _lag_s(r: Any, now: dt.datetime) -> int:
    oldest = r["oldest_unconsumed_at"]
    return 0 if oldest is None else max(int((now - oldest).total_seconds()), 0)


async def _group_rows(rt: Runtime, ident: Identity, group: str | None, now: dt.datetime) -> Any:
    async with rt.pool.acquire() as conn:
        return await conn.fetch(Q.resources_consumer_groups, ident.tenant, group, now)


async def consumer_groups(rt: Runtime, ident: Identity, now: dt.datetime) -> list[dict[str, Any]]:
    """One row per (group, queue) of the tenant, by group then queue."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in await _group_rows(rt, ident, None, now):
        key = (r["consumer_group"], r["queue"])
        row = out.get(key)
        if row is None:
            subscribed = r["subscribed_at"]
            row = out[key] = {
                "name": r["consumer_group"],
                "topics": [r["queue"]],
                "queueName": r["queue"],
                "members": 0,
                "partitionsWithLag": 0,
                "totalLag": 0,
                "maxTimeLag": 0,
                "state": "Dead",
                "subscriptionMode": r["subscription_mode"],
                "subscriptionTimestamp": None if subscribed is None else iso_ms(subscribed),
                "subscriptionCreatedAt": None if subscribed is None else iso_ms(subscribed),
                "_consumed": False,
            }
        row["members"] += int(r["lease_active"])
        row["partitionsWithLag"] += int(r["offset_lag"] > 0)
        row["totalLag"] += int(r["offset_lag"])
        row["maxTimeLag"] = max(row["maxTimeLag"], _lag_s(r, now))
        row["_consumed"] = row["_consumed"] or r["total_consumed"] > 0 or r["committed"] >= 0
    for row in out.values():
        consumed = row.pop("_consumed")
        if row["maxTimeLag"] > LAGGING_AFTER_S:
            row["state"] = "Lagging"
        elif consumed or row["members"]:
            row["state"] = "Stable"
    return [out[k] for k in sorted(out)]


async def consumer_group(
    rt: Runtime, ident: Identity, group: Any, now: dt.datetime
) -> dict[str, Any]:
    """{queue: {partitions: [...]}} of one group; {} when the tenant has no such group."""
    name = check_group(group)
    out: dict[str, Any] = {}
    for r in await _group_rows(rt, ident, name, now):
        out.setdefault(r["queue"], {"partitions": []})["partitions"].append(
            {
                "partition": r["partition"],
                "partitionId": str(r["partition_id"]),
                "workerId": r["worker_id"],
                "lastConsumedAt": None,  # not stored here
                "committed": int(r["committed"]),
                "totalConsumed": int(r["total_consumed"]),
                "offsetLag": int(r["offset_lag"]),
                "timeLagSeconds": _lag_s(r, now),
                "leaseActive": bool(r["lease_active"]),
            }
        )
    return out


async def lagging(
    rt: Runtime, ident: Identity, min_lag_seconds: Any, now: dt.datetime
) -> list[dict[str, Any]]:
    """Partitions whose oldest unconsumed message is older than min_lag_seconds, by lag (the
    reference's snake_case rows)."""
    if not isinstance(min_lag_seconds, int) or isinstance(min_lag_seconds, bool):
        raise _bad("bad_min_lag", "minLagSeconds must be an integer")
    rows = []
    for r in await _group_rows(rt, ident, None, now):
        lag = _lag_s(r, now)
        if r["offset_lag"] <= 0 or lag <= min_lag_seconds:
            continue
        oldest = r["oldest_unconsumed_at"]
        rows.append(
            {
                "consumer_group": r["consumer_group"],
                "queue_name": r["queue"],
                "partition_name": r["partition"],
                "partition_id": str(r["partition_id"]),
                "worker_id": r["worker_id"],
                "offset_lag": int(r["offset_lag"]),
                "time_lag_seconds": lag,
                "lag_hours": round(lag / 3600, 2),
                "oldest_unconsumed_at": None if oldest is None else iso_ms(oldest),
                "last_consumed_at": None,
            }
        )
    rows.sort(key=lambda x: -x["time_lag_seconds"])
    return rows


async def group_delete(
    rt: Runtime, ident: Identity, group: Any, queue: Any, delete_metadata: Any
) -> dict[str, Any]:
    name, q = check_group(group), check_queue(queue)
    if not isinstance(delete_metadata, bool):
        raise _bad("bad_delete_metadata", "deleteMetadata must be true or false")
    async with rt.pool.acquire() as conn:
        res = await conn.fetchval(
            Q.resources_consumer_group_delete, ident.tenant, name, q, delete_metadata
        )
    return {
        "success": True,
        "consumerGroup": name,
        "queueName": q,
        "deletedPartitions": int(res["deletedPartitions"]),
        "metadataDeleted": delete_metadata and res["subscriptionsDeleted"] > 0,
    }


async def group_seek(
    rt: Runtime,
    ident: Identity,
    group: Any,
    queue: Any,
    to_end: Any,
    timestamp: Any,
) -> dict[str, Any]:
    name, q = check_group(group), check_queue(queue)
    if not isinstance(to_end, bool):
        raise _bad("seek_bad_to_end", "toEnd must be true or false")
    if to_end == (timestamp is not None):
        raise _bad("seek_target_required", "give exactly one of toEnd: true or timestamp")
    target = None
    if timestamp is not None:
        try:
            target = dt.datetime.fromisoformat(str(timestamp))
        except ValueError:
            raise _bad(
                "seek_bad_timestamp",
                f"timestamp must be an ISO 8601 instant such as 2030-01-01T00:00:00Z; "
                f"got {timestamp!r}",
            ) from None
        if target.tzinfo is None:
            target = target.replace(tzinfo=dt.UTC)
    async with rt.pool.acquire() as conn:
        moved = await conn.fetchval(Q.resources_consumer_group_seek, ident.tenant, name, q, target)
    return {
        "success": True,
        "consumerGroup": name,
        "queueName": q,
        "seekToEnd": to_end,
        "targetTimestamp": None if target is None else iso_ms(target),
        "partitionsUpdated": int(moved),
    }
