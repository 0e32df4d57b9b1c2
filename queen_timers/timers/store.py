"""Thin calls to the timer stored procedures (migrations/025_log_timers.sql).

One function per procedure; no behaviour here. Each takes an asyncpg connection, so callers
decide the transaction (the wire runs `apply` inside its own). `now` is the instant the
procedure reasons with: None means the database's now() (production); tests pass instants.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from ..db import Conn, Q
from ..wire.timers import TimerPeek, TimerResult, TimersPage

__all__ = [
    "ClaimedTimer",
    "apply",
    "apply_checked",
    "claim",
    "count",
    "dlq",
    "due",
    "encrypting_queues",
    "fail",
    "fire",
    "first_refusal",
    "list_page",
    "peek",
    "release",
]

Now = dt.datetime | None

# asyncpg types a fetched value as Any: each call names the shape its procedure answers (jsonb,
# decoded by the pool's codec) by the annotation of `answer`.


@dataclasses.dataclass(slots=True)
class ClaimedTimer:
    """One row taken by a claim: the frame to deliver plus the lease that proves it is ours.
    Not frozen: a frozen dataclass sets each of its fields through object.__setattr__, and
    a drain builds 20,000 of these a second (frozen, building them takes 12% of a draining
    broker's CPU, 2026-11-30; bench/RESULTS.md, "Measurements the code cites")."""

    tenant: uuid.UUID
    queue: str
    timer_key: str
    partition: str
    txn: str
    message_id: uuid.UUID
    payload: bytes
    payload_zstd: bool
    encrypted: bool
    producer_sub: str | None
    attempts: int
    deliver_at: dt.datetime
    late_ms: float
    token: uuid.UUID
    visible_at: dt.datetime  # before the claim: the order frames enter the log
    # The row version the claim wrote, (block, offset): the fire finds it by this instead of
    # a primary-key descent. None where unknown (the fire then goes by primary key).
    tid: tuple[int, int] | None = None
    # The W3C trace context its schedule stored (migrations/036), for the frame; None: none.
    trace_parent: str | None = None
    trace_state: str | None = None

    @classmethod
    def from_record(cls, r: Any) -> ClaimedTimer:
        # Positional: the claim procedure's columns are these fields, in this order (checked
        # by tests/timers/test_fire.py::test_claim_columns_map_onto_claimed_timer).
        return cls(*r)


async def apply(
    conn: Conn,
    ops: list[dict[str, Any]],
    tenant: uuid.UUID,
    producer_sub: str | None,
    now: Now = None,
    limits: dict[str, Any] | None = None,
    lock_wait_ms: int = 0,
) -> list[TimerResult]:
    """`limits`: the value rules' {maxHorizonS, maxPayloadBytes} (sqlapi.limits of the broker's
    settings); None applies the published ones. `lock_wait_ms` > 0: a row lock held longer by
    another transaction fails the call with 55P03 and changes nothing (migrations/029)."""
    answer: list[TimerResult] = await conn.fetchval(
        Q.timers_apply, ops, tenant, producer_sub, now, limits, lock_wait_ms
    )
    return answer


async def first_refusal(
    conn: Conn, ops: list[dict[str, Any]], limits: dict[str, Any]
) -> dict[str, Any] | None:
    """The value rules' first refusal of `ops` ({i, reason, state, detail}), or None; writes
    nothing."""
    row = await conn.fetchrow(Q.timers_first_refusal, ops, limits)
    return dict(row) if row is not None else None


async def apply_checked(
    conn: Conn,
    ops: list[dict[str, Any]],
    tenant: uuid.UUID,
    producer_sub: str | None,
    now: Now,
    plain_queues: Sequence[str],
    limits: dict[str, Any] | None = None,
    lock_wait_ms: int = 0,
) -> list[TimerResult] | dict[str, Any]:
    """apply, unless one of `plain_queues` encrypts at rest: then nothing is written and the
    answer is {"encrypt": [names]}."""
    answer: list[TimerResult] | dict[str, Any] = await conn.fetchval(
        Q.timers_apply_checked,
        ops,
        tenant,
        producer_sub,
        now,
        list(plain_queues),
        limits,
        lock_wait_ms,
    )
    return answer


async def due(conn: Conn, shards: Sequence[int] | None, now: Now, cap: int) -> dict[str, Any]:
    answer: dict[str, Any] = await conn.fetchval(Q.timers_due, shards, now, cap)
    return answer


async def claim(
    conn: Conn,
    shards: Sequence[int] | None,
    now: Now,
    lease_ms: int,
    max_rows: int,
    per_tenant: int,
) -> list[ClaimedTimer]:
    rows = await conn.fetch(Q.timers_claim, shards, now, lease_ms, max_rows, per_tenant)
    return [ClaimedTimer.from_record(r) for r in rows]


async def fire(
    conn: Conn,
    tenants: Sequence[uuid.UUID],
    queues: Sequence[str],
    partitions: Sequence[str],
    counts: Sequence[int],
    blobs: Sequence[bytes],
    seg_of: Sequence[int],
    keys: Sequence[str],
    tokens: Sequence[uuid.UUID],
    hashes: Sequence[uuid.UUID],
    now: Now,
    tids: Sequence[tuple[int, int] | None] | None = None,
) -> list[dict[str, Any]]:
    """`tids`: each row's claimed version (ClaimedTimer.tid); None, or a None in it, means
    that row is found by primary key."""
    if tids is not None and all(t is None for t in tids):
        tids = None
    answer: list[dict[str, Any]] = await conn.fetchval(
        Q.timers_fire,
        tenants,
        queues,
        partitions,
        counts,
        blobs,
        seg_of,
        keys,
        tokens,
        hashes,
        tids,
        now,
    )
    return answer


async def fail(
    conn: Conn,
    tenants: Sequence[uuid.UUID],
    queues: Sequence[str],
    keys: Sequence[str],
    tokens: Sequence[uuid.UUID],
    backoff_ms: Sequence[int],
    error: str,
    count_attempt: bool,
    max_attempts: int,
    now: Now,
) -> dict[str, Any]:
    answer: dict[str, Any] = await conn.fetchval(
        Q.timers_fail,
        tenants,
        queues,
        keys,
        tokens,
        backoff_ms,
        error,
        count_attempt,
        max_attempts,
        now,
    )
    return answer


async def dlq(
    conn: Conn,
    tenants: Sequence[uuid.UUID],
    queues: Sequence[str],
    keys: Sequence[str],
    snapshots: Sequence[object],  # jsonb values
    max_attempts: int,
    now: Now,
) -> dict[str, Any]:
    answer: dict[str, Any] = await conn.fetchval(
        Q.timers_dlq, tenants, queues, keys, snapshots, max_attempts, now
    )
    return answer


async def release(
    conn: Conn,
    tenants: Sequence[uuid.UUID],
    queues: Sequence[str],
    keys: Sequence[str],
    tokens: Sequence[uuid.UUID],
    now: Now,
) -> int:
    answer: int = await conn.fetchval(Q.timers_release, tenants, queues, keys, tokens, now)
    return answer


async def peek(conn: Conn, tenant: uuid.UUID, queue: str, key: str, now: Now = None) -> TimerPeek:
    answer: TimerPeek = await conn.fetchval(Q.timers_peek, tenant, queue, key, now)
    return answer


async def list_page(
    conn: Conn, tenant: uuid.UUID, queue: str, after: str | None, limit: int | None, now: Now = None
) -> TimersPage:
    answer: TimersPage = await conn.fetchval(Q.timers_list, tenant, queue, after, limit, now)
    return answer


async def count(conn: Conn, tenant: uuid.UUID, queue: str, prefix: str) -> int:
    answer: int = await conn.fetchval(Q.timers_count, tenant, queue, prefix)
    return answer


async def encrypting_queues(conn: Conn, tenant: uuid.UUID, queues: Sequence[str]) -> set[str]:
    """Names among `queues` whose at-rest encryption is on (a read of queen.queues; the
    schedule never writes it)."""
    rows = await conn.fetch(Q.timers_queue_encryption, tenant, list(queues))
    return {r["name"] for r in rows}
