"""Helpers of the schedule tests: bodies, instants, and the log read back by txn."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections import Counter
from typing import Any

from queen_timers.log.frames import unpack_segment

UTC = dt.UTC


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def body(queue: str, key: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "queue": queue,
        "scheduleKey": key,
        "payload": base64.b64encode(json.dumps({"s": key}).encode()).decode(),
    }
    out.update(fields)
    return out


async def frames(conn: Any, queue: str) -> list[dict[str, Any]]:
    """Every frame of `queue` (all tenants), in offset order: {txn, id, payload, createdAt}."""
    rows = await conn.fetch(
        "SELECT s.created_at, s.blob FROM queen.log_segments s"
        "  JOIN queen.log_partitions p ON p.id = s.partition_id"
        "  JOIN queen.queues q ON q.id = p.queue_id"
        " WHERE q.name = $1 ORDER BY p.name, s.base_offset",
        queue,
    )
    out = []
    for r in rows:
        for f in unpack_segment(r["blob"]):
            out.append(
                {"txn": f.txn, "id": f.id, "payload": f.payload, "createdAt": r["created_at"]}
            )
    return out


async def occurrence_counts(conn: Any, queue: str) -> Counter[str]:
    """How many frames each occurrence (the instant after '@' in its txn) has in the log."""
    return Counter(f["txn"].split("@", 1)[1] for f in await frames(conn, queue))


async def pending(conn: Any, queue: str) -> list[Any]:
    return list(
        await conn.fetch(
            "SELECT timer_key, txn, deliver_at FROM queen.log_timers WHERE queue = $1"
            " ORDER BY timer_key",
            queue,
        )
    )
