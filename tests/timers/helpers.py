"""Shared helpers of the timer tests: build ops, read the log back by decoding segments."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid

from queen_timers.log.frames import unpack_segment

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def b64json(value) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def sched(
    queue: str,
    key: str,
    delay_ms: float = 0,
    *,
    txn: str | None = None,
    payload=None,
    partition: str | None = None,
    op: str = "schedule",
    **extra,
) -> dict:
    o = {
        "op": op,
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": txn if txn is not None else f"txn-{queue}-{key}",
        "payload": b64json(payload if payload is not None else {"k": key}),
    }
    if partition is not None:
        o["partition"] = partition
    o.update(extra)
    return o


def cancel(queue: str, key: str, **extra) -> dict:
    return {"op": "cancel", "queue": queue, "timerKey": key, **extra}


async def log_frames(
    conn, tenant: uuid.UUID | None = None, queue: str | None = None, partition: str | None = None
) -> list[dict]:
    """Every frame in the log (optionally of one tenant / queue / partition), in offset order."""
    rows = await conn.fetch(
        "SELECT q.tenant_id, q.name AS queue, p.name AS partition, s.base_offset, s.created_at,"
        "       s.blob"
        "  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id"
        "  JOIN queen.queues q ON q.id = p.queue_id"
        " WHERE ($1::uuid IS NULL OR q.tenant_id = $1) AND ($2::text IS NULL OR q.name = $2)"
        "   AND ($3::text IS NULL OR p.name = $3)"
        " ORDER BY q.tenant_id, q.name, p.name, s.base_offset",
        tenant,
        queue,
        partition,
    )
    out = []
    for r in rows:
        for i, f in enumerate(unpack_segment(r["blob"])):
            out.append(
                {
                    "tenant": r["tenant_id"],
                    "queue": r["queue"],
                    "partition": r["partition"],
                    "offset": r["base_offset"] + i,
                    "createdAt": r["created_at"],
                    "id": f.id,
                    "txn": f.txn,
                    "producerSub": f.producer_sub,
                    "encrypted": f.encrypted,
                    "payload": f.payload,
                }
            )
    return out


async def timer_row(conn, queue: str, key: str, tenant: uuid.UUID | None = None):
    from queen_timers.identity import DEFAULT_TENANT

    return await conn.fetchrow(
        "SELECT * FROM queen.log_timers WHERE tenant_id = $1 AND queue = $2 AND timer_key = $3",
        tenant or DEFAULT_TENANT,
        queue,
        key,
    )
