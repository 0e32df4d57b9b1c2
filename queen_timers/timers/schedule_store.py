"""The recurring schedules' statements (migrations/033_schedules.sql), one function each."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from ..db import Conn, Q

__all__ = [
    "delete",
    "fire",
    "for_fire",
    "get",
    "list_page",
    "pause",
    "run_now",
    "skip",
    "upsert",
]

Now = dt.datetime | None


async def for_fire(
    conn: Conn, tenants: Sequence[uuid.UUID], queues: Sequence[str], keys: Sequence[str]
) -> list[Any]:
    return list(await conn.fetch(Q.schedules_for_fire, tenants, queues, keys))


async def fire(conn: Conn, args: Sequence[Any], items: list[dict[str, Any]]) -> Any:
    """queen.schedule_fire_v1: the timer fire's eleven arguments, then the occurrences."""
    return await conn.fetchval(Q.schedules_fire, *args, items)


async def skip(conn: Conn, items: list[dict[str, Any]], now: Now) -> int:
    n: int = await conn.fetchval(Q.schedules_skip, items, now)
    return n


async def upsert(
    conn: Conn,
    tenant: uuid.UUID,
    queue: str,
    key: str,
    definition: dict[str, Any],
    first_at: dt.datetime | None,
    first_due: dt.datetime | None,
    producer_sub: str | None,
    now: Now,
) -> dict[str, Any]:
    answer: dict[str, Any] = await conn.fetchval(
        Q.schedules_upsert, tenant, queue, key, definition, first_at, first_due, producer_sub, now
    )
    return answer


async def pause(
    conn: Conn, tenant: uuid.UUID, queue: str, key: str, paused: bool, now: Now
) -> dict[str, Any] | None:
    answer: dict[str, Any] | None = await conn.fetchval(
        Q.schedules_pause, tenant, queue, key, paused, now
    )
    return answer


async def delete(conn: Conn, tenant: uuid.UUID, queue: str, key: str) -> bool:
    return bool(await conn.fetchval(Q.schedules_delete, tenant, queue, key))


async def run_now(
    conn: Conn, tenant: uuid.UUID, queue: str, key: str, now: Now
) -> dict[str, Any] | None:
    answer: dict[str, Any] | None = await conn.fetchval(
        Q.schedules_run_now, tenant, queue, key, now
    )
    return answer


async def get(
    conn: Conn, tenant: uuid.UUID, queue: str, key: str, runs: int
) -> dict[str, Any] | None:
    answer: dict[str, Any] | None = await conn.fetchval(Q.schedules_get, tenant, queue, key, runs)
    return answer


async def list_page(
    conn: Conn,
    tenant: uuid.UUID,
    queue: str | None,
    prefix: str | None,
    after_queue: str | None,
    after_key: str | None,
    limit: int,
) -> dict[str, Any]:
    answer: dict[str, Any] = await conn.fetchval(
        Q.schedules_list, tenant, queue, prefix, after_queue, after_key, limit
    )
    return answer
