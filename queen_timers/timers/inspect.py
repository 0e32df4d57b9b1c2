"""What is pending, when it fires, what is stuck: the operator's read-only views of timers.

Queue summaries (log counts, timer counts, dead letters), the tenant overview's sums, and the
due-time histogram of one queue. Every figure is one tenant's (the caller's identity) and
exact; the statements and the index each one reads are in migrations/028_timer_console.sql
and 032_console.sql. A queue's timer figures and its histogram can be narrowed to the keys
that start with a literal prefix, so every figure the console shows beside a prefix filter
counts what a "cancel by prefix" would cancel.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..db import Q
from ..db.conn import Conn
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name
from .ops import check_prefix as check_key_prefix

__all__ = [
    "HISTOGRAM_WINDOWS",
    "check_prefix",
    "histogram",
    "horizon",
    "queue_summaries",
    "timer_sums",
]

DAY = dt.timedelta(days=1)

# window -> (span, bucket): 60 one-minute buckets, 48 half-hours, 90 days. Bucket counts a
# chart draws legibly at a phone's width; a choice, not measured.
HISTOGRAM_WINDOWS: dict[str, tuple[dt.timedelta, dt.timedelta]] = {
    "hour": (dt.timedelta(hours=1), dt.timedelta(minutes=1)),
    "day": (DAY, dt.timedelta(minutes=30)),
    "90d": (dt.timedelta(days=90), DAY),
}

# Pending timers are counted exactly up to this many per queue; past it the summary says
# "at least" (pendingExact false). 2026-12-02, measured at 10^6 pending in one queue: the
# capped count takes 47 ms, the full one 167-240 ms (bench/RESULTS.md, "The operator's routes
# at 10^6 pending"); the cap keeps a summary's cost flat however large the queue grows.
PENDING_EXACT_UP_TO = 100_000

_TIMER_FIELDS = (
    "pending",
    "dueNextMinute",
    "dueNextHour",
    "dueNextDay",
    "overdue",
    "backingOff",
    "claimed",
)


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def horizon(rt: Runtime, now: dt.datetime, span: dt.timedelta = DAY) -> dt.datetime:
    """The upper bound of the visible_at ranges read for the near-term figures: past `span`
    and past any lease or backoff this broker gives (a row whose deliver_at is past shows in
    the index at its lease or backoff expiry). A peer configured with a longer backoff than
    this broker's (and over a day) would have its backing-off rows missed: declared."""
    s = rt.settings
    reach_ms = max(s.sweeper_lease_ms, s.sweeper_backoff_max_ms, s.sweeper_transient_backoff_ms, 0)
    return now + max(span, dt.timedelta(milliseconds=reach_ms)) + dt.timedelta(minutes=1)


async def db_now(conn: Conn, now: dt.datetime | None) -> dt.datetime:
    """`now` for tests (time travel), the database's clock otherwise."""
    if now is not None:
        if now.utcoffset() is None:
            raise QueenError("bad_request", "bad_now", "now must carry a UTC offset", 400)
        return now
    clock: dt.datetime = await conn.fetchval(Q.console_now)
    return clock


def _empty_timers() -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(_TIMER_FIELDS, 0)
    out["pendingExact"] = True
    out["oldestOverdueMs"] = None
    return out


def check_prefix(prefix: Any) -> str | None:
    """A literal key prefix (checked as mode=count checks it), or None for "" and None: no
    filter."""
    if prefix is None or prefix == "":
        return None
    return check_key_prefix(prefix)


async def _timer_blocks(
    rt: Runtime,
    conn: Conn,
    ident: Identity,
    queue: str | None,
    now: dt.datetime,
    prefix: str | None = None,
) -> dict[str, dict[str, Any]]:
    blocks: dict[str, dict[str, Any]] = {}
    pending = await conn.fetch(
        Q.console_timers_pending, ident.tenant, queue, PENDING_EXACT_UP_TO, prefix
    )
    for r in pending:
        b = blocks.setdefault(r["queue"], _empty_timers())
        b["pending"], b["pendingExact"] = int(r["pending"]), bool(r["exact"])
    near = await conn.fetch(
        Q.console_timers_near, ident.tenant, queue, now, horizon(rt, now), prefix
    )
    for r in near:
        b = blocks.setdefault(r["queue"], _empty_timers())
        b["dueNextMinute"] = int(r["due_minute"])
        b["dueNextHour"] = int(r["due_hour"])
        b["dueNextDay"] = int(r["due_day"])
        b["overdue"] = int(r["overdue"])
        b["backingOff"] = int(r["backing_off"])
        b["claimed"] = int(r["claimed"])
        oldest = r["oldest_overdue"]
        b["oldestOverdueMs"] = (
            None if oldest is None else int((now - oldest).total_seconds() * 1000)
        )
    return blocks


async def queue_summaries(
    rt: Runtime,
    conn: Conn,
    ident: Identity,
    queue: str | None,
    now: dt.datetime,
    prefix: str | None = None,
) -> list[dict[str, Any]]:
    """One QueueSummary per queue of the tenant that has a log or pending timers (or only
    `queue`), by name. A queue that exists only through its timers has no id and 0 partitions
    (it is born at the first fire). With a `prefix` (which needs a `queue`: key ranges are per
    queue), the timer figures count the keys that start with it; the log figures and dead
    letters stay the queue's."""
    timers = await _timer_blocks(rt, conn, ident, queue, now, prefix)
    stats = await conn.fetch(Q.console_queue_stats, ident.tenant, queue, now)
    logs = {r["queue"]: r for r in stats}
    names = set(timers) | set(logs)
    if prefix is not None and queue is not None and not names:
        # No key of the prefix: the queue still exists while it holds other timers, and its
        # summary says 0 rather than "not found".
        if await conn.fetch(Q.console_timers_pending, ident.tenant, queue, 1, None):
            names.add(queue)
    out = []
    for name in sorted(names):
        r = logs.get(name)
        out.append(
            {
                "name": name,
                "id": None if r is None else str(r["id"]),
                "namespace": None if r is None else (r["namespace"] or None),
                "task": None if r is None else (r["task"] or None),
                "createdAt": None if r is None else iso(r["created_at"]),
                "partitions": 0 if r is None else int(r["partitions"]),
                "messages": {
                    "total": 0 if r is None else int(r["total"]),
                    "pending": 0 if r is None else int(r["pending"]),
                    "processing": 0 if r is None else int(r["processing"]),
                },
                "timers": timers.get(name, _empty_timers()),
                "deadLetters": 0 if r is None else int(r["dead_letters"]),
            }
        )
    return out


def timer_sums(queues: list[dict[str, Any]]) -> dict[str, Any]:
    """The tenant's timer figures: sums, and the oldest lateness of any queue."""
    out = _empty_timers()
    for q in queues:
        t = q["timers"]
        for f in _TIMER_FIELDS:
            out[f] += t[f]
        out["pendingExact"] = out["pendingExact"] and t["pendingExact"]
        if t["oldestOverdueMs"] is not None:
            old = out["oldestOverdueMs"]
            out["oldestOverdueMs"] = max(old or 0, t["oldestOverdueMs"])
    return out


def check_queue(queue: Any) -> str:
    return check_name(queue, "queue", "bad_queue")


async def histogram(
    rt: Runtime,
    conn: Conn,
    ident: Identity,
    queue: Any,
    window: Any,
    now: dt.datetime,
    prefix: Any = None,
) -> dict[str, Any]:
    queue = check_queue(queue)
    prefix = check_prefix(prefix)
    if window is None or window == "":
        window = "day"
    if window not in HISTOGRAM_WINDOWS:
        raise QueenError(
            "timers_bad_request",
            "timers_histogram_window",
            f"window must be one of {', '.join(HISTOGRAM_WINDOWS)}; got {window!r}",
            400,
        )
    span, bucket = HISTOGRAM_WINDOWS[window]
    to = now + span
    mode = "index"
    if span > DAY:
        # The source follows the whole queue's count, prefix or not: 'key' reads the queue's
        # key range, which stays bounded only while the whole queue is within the cap.
        counted = await conn.fetch(
            Q.console_timers_pending, ident.tenant, queue, PENDING_EXACT_UP_TO, None
        )
        mode = "key" if all(r["exact"] for r in counted) else "sample"
    res = await conn.fetchval(
        Q.console_histogram,
        ident.tenant,
        queue,
        now,
        to,
        int(bucket.total_seconds() * 1000),
        horizon(rt, now, span),
        mode,
        PENDING_EXACT_UP_TO,
        prefix,
    )
    counts = res["counts"]
    n = int(span / bucket)
    out: dict[str, Any] = {
        "queue": queue,
        "window": window,
        "bucketMs": int(bucket.total_seconds() * 1000),
        "from": iso(now),
        "to": iso(to),
        "buckets": [
            {"start": iso(now + i * bucket), "count": int(counts.get(str(i), 0))} for i in range(n)
        ],
        "overdue": int(res["overdue"]),
        "later": int(res["later"]),
        "pending": int(res["pending"]),
        # False past PENDING_EXACT_UP_TO: the hour and day windows' `later` and `pending` are
        # then lower bounds; the 90-day window is a block sample of samplePercent %, scaled.
        "exact": bool(res["exact"]),
        "samplePercent": res["samplePercent"],
    }
    if prefix is not None:
        out["prefix"] = prefix
    return out
