"""Recurring schedules as service calls: upsert, list, peek, pause, resume, delete, run now.

A schedule is named (queue, scheduleKey) per tenant. Its cadence is a cron expression (5
fields, or 6 with seconds first) or a plain `everyMs`, in an IANA zone; each occurrence is an
ordinary timer (timers/occurrences.py, migrations/033_schedules.sql). The first occurrence is
computed here and staged by the upsert; every later one by the fire of the one before.

Refusals: 400 `schedules_bad_request` (reason `schedule_*`; `schedule_too_frequent` under
QUEEN_SCHEDULES_MIN_INTERVAL_MS), the timer rules' own refusals for queue, partition and
payload (`timers_bad_request`, `payload_too_large`), 404 `schedule_not_found`, and the timers'
quota, rate and kill-switch refusals (a schedule's pending occurrence is a pending timer).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any
from zoneinfo import ZoneInfo

from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..sqlapi import limits
from . import ops, quota, schedule_store, store
from .occurrences import cadence_key, recurrence_of
from .recurrence import (
    Recurrence,
    RecurrenceError,
    iso,
    jitter_offset_ms,
    min_gap_ms,
    schedule_id,
    zone,
)

__all__ = [
    "MAX_CATCH_UP_CAP",
    "MAX_KEY_BYTES",
    "delete",
    "list_schedules",
    "pause",
    "peek",
    "run_now",
    "upsert",
]

# Room for the run-now prefix and its instant inside a timer key's 1024 bytes (025).
MAX_KEY_BYTES = 960
# A cap on catch-up `all`: a month of an hourly cadence; beyond it a backlog is a flood.
MAX_CATCH_UP_CAP = 1000
# A jitter window of at most a day: a wider one would reorder a daily cadence.
MAX_JITTER_MS = 86_400_000
MAX_PEEK_OCCURRENCES = 100
MAX_PEEK_RUNS = 100
MAX_LIST = 1000
_CATCH_UP = ("skip", "once", "all")


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("schedules_bad_request", reason, detail, 400)


def _not_found(queue: str, key: str) -> QueenError:
    return QueenError(
        "schedule_not_found",
        "schedule_not_found",
        f"no schedule {key!r} on queue {queue!r} in this tenant",
        404,
    )


def _name(value: Any, what: str, reason: str) -> str:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise _bad(reason, f"{what} is required (a non-empty string without NUL)")
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise _bad(reason, f"{what} is not Unicode text") from None
    if size > MAX_KEY_BYTES:
        raise _bad(reason, f"{what} is {size} bytes; the limit is {MAX_KEY_BYTES}")
    return value


def _instant(value: Any, what: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        at = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise _bad("schedule_bad_instant", f"{what} must be an ISO 8601 instant with an offset")
    return at.astimezone(dt.UTC).replace(microsecond=at.microsecond // 1000 * 1000)


def _int(value: Any, what: str, low: int, high: int, reason: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(reason, f"{what} must be an integer from {low} to {high}")
    return value


def _now(now: dt.datetime | None) -> dt.datetime:
    at = now if now is not None else dt.datetime.now(dt.UTC)
    return at.astimezone(dt.UTC).replace(microsecond=at.microsecond // 1000 * 1000)


def _recurrence(rt: Runtime, body: dict[str, Any], anchor: dt.datetime) -> Recurrence:
    cron, every = body.get("cron"), body.get("everyMs")
    if (cron is None) == (every is None):
        raise _bad(
            "schedule_recurrence_required",
            "a schedule has exactly one of cron (5 or 6 fields) and everyMs",
        )
    if cron is not None and not isinstance(cron, str):
        raise _bad("schedule_bad_cron", "cron must be a string")
    if every is not None:
        _int(every, "everyMs", 1, 2**53, "schedule_bad_every")
    tz = body.get("zone", "UTC")
    if not isinstance(tz, str):
        raise _bad("schedule_bad_zone", "zone must be an IANA time zone name")
    start = _instant(body.get("startAt"), "startAt")
    end = _instant(body.get("endAt"), "endAt")
    if start is not None and end is not None and end <= start:
        raise _bad("schedule_bad_window", "endAt must be after startAt")
    try:
        zone(tz)
    except RecurrenceError as exc:
        raise _bad("schedule_bad_zone", str(exc)) from None
    try:
        rec = Recurrence(cron, every, tz, start if start is not None else anchor, start, end)
    except RecurrenceError as exc:
        raise _bad("schedule_bad_cron", str(exc)) from None
    floor = rt.settings.schedules_min_interval_ms
    gap = min_gap_ms(rec, anchor)
    if gap is not None and gap < floor:
        raise _bad(
            "schedule_too_frequent",
            f"occurrences {gap:g} ms apart; this broker's floor is {floor} ms "
            "(QUEEN_SCHEDULES_MIN_INTERVAL_MS)",
        )
    return rec


_KNOWN = {
    "queue",
    "scheduleKey",
    "cron",
    "everyMs",
    "zone",
    "startAt",
    "endAt",
    "payload",
    "partition",
    "payloadZstd",
    "encrypted",
    "jitterMs",
    "catchUp",
    "catchUpCap",
    "paused",
}


async def upsert(
    rt: Runtime, ident: Identity, body: Any, *, now: dt.datetime | None = None
) -> dict[str, Any]:
    """Create or replace a schedule; a new definition restarts its cadence from the next
    occurrence. {status: created | updated, schedule}."""
    if not isinstance(body, dict):
        raise _bad("schedule_bad_body", "the body is an object")
    unknown = sorted(str(k) for k in body if k not in _KNOWN)
    if unknown:
        raise _bad("schedule_unknown_field", f"unknown fields {unknown}")
    queue = _name(body.get("queue"), "queue", "schedule_queue_required")
    key = _name(body.get("scheduleKey"), "scheduleKey", "schedule_key_required")
    at = _now(now)
    jitter = _int(body.get("jitterMs", 0), "jitterMs", 0, MAX_JITTER_MS, "schedule_bad_jitter")
    policy = body.get("catchUp", "skip")
    if policy not in _CATCH_UP:
        raise _bad("schedule_bad_catch_up", "catchUp is skip, once or all")
    cap = _int(body.get("catchUpCap", 1), "catchUpCap", 1, MAX_CATCH_UP_CAP, "schedule_bad_cap")
    paused = body.get("paused", False)
    if not isinstance(paused, bool):
        raise _bad("schedule_bad_flag", "paused must be a boolean")
    # the payload, partition and queue rules are the timers' (one implementation)
    raw = {
        "op": "schedule",
        "queue": queue,
        "timerKey": cadence_key(key),
        "delayMs": 0,
        "txn": "sched",
        "payload": body.get("payload"),
    }
    for f in ("partition", "payloadZstd", "encrypted"):
        if f in body:
            raw[f] = body[f]
    try:
        (op,) = await ops.validate_in_order(rt, [raw])
    except QueenError as e:
        raise QueenError(e.code, e.reason, e.detail.removeprefix("op 0: "), e.status) from None
    ops.schedule_gate(rt, [op])

    async with rt.pool.acquire() as conn:
        existing = await schedule_store.get(conn, ident.tenant, queue, key, 0)
        anchor = at
        if (
            existing is not None
            and existing.get("everyMs") == body.get("everyMs")
            and body.get("startAt") is None
        ):
            anchor = dt.datetime.fromisoformat(existing["anchorAt"])
        rec = _recurrence(rt, body, anchor)
        sid = schedule_id(ident.tenant, queue, key)
        first = _kept_pending(existing, rec, rec.next_after(at))
        first_due = (
            None
            if first is None
            else first + dt.timedelta(milliseconds=jitter_offset_ms(sid, first, jitter))
        )
        try:
            (rendered,) = await ops.prepare(rt, conn, ident, [op])
            refused = await store.first_refusal(conn, [rendered], limits(rt.settings))
        except QueenError as e:
            raise QueenError(e.code, e.reason, e.detail.removeprefix("op 0: "), e.status) from None
        if refused is not None:
            err = ops.first_rule(refused)
            if err is not None:
                raise QueenError(
                    err.code, err.reason, err.detail.removeprefix("op 0: "), err.status
                )
        definition = {
            "scheduleId": str(sid),
            "cron": rec.cron,
            "everyMs": rec.every_ms,
            "zone": rec.zone_name,
            "startAt": None if rec.start_at is None else iso(rec.start_at),
            "endAt": None if rec.end_at is None else iso(rec.end_at),
            "anchorAt": iso(rec.anchor),
            "partition": op.partition or "Default",
            "payload": rendered["payload"],
            "payloadZstd": rendered["payloadZstd"],
            "encrypted": rendered["encrypted"],
            "jitterMs": jitter,
            "catchUp": policy,
            "catchUpCap": cap,
            "paused": paused,
        }
        stages = first is not None and not paused
        charge = await quota.admit(rt, ident, [op]) if stages and existing is None else None
        try:
            answer = await schedule_store.upsert(
                conn,
                ident.tenant,
                queue,
                key,
                definition,
                first,
                first_due,
                ident.subject,
                now,
            )
        except BaseException as exc:
            quota.failed(rt, charge, exc)
            raise
    rt.quotas.settle(charge, 1 if charge is not None else None)
    if stages and first_due is not None:
        rt.timers_scheduled(first_due.timestamp())
    return answer


def _kept_pending(
    existing: dict[str, Any] | None, rec: Recurrence, first: dt.datetime | None
) -> dt.datetime | None:
    """The first occurrence an upsert stages: the schedule's pending one when the new definition
    still has it (an application that declares its schedules at every boot, at an occurrence's
    instant before a broker fired it, must not skip it), else the first after now. A pending
    instant already in the past is then the fire's to judge (catch-up policy); one already
    delivered is refused by the txn probe, never delivered twice."""
    if existing is None or existing.get("paused") or existing.get("nextAt") is None:
        return first
    pending = dt.datetime.fromisoformat(existing["nextAt"])
    if rec.next_after(pending - dt.timedelta(milliseconds=1)) != pending:
        return first  # a new cadence: it starts from the next occurrence after now
    return pending if first is None or pending < first else first


async def _one(rt: Runtime, ident: Identity, queue: Any, key: Any) -> tuple[str, str]:
    return (
        _name(queue, "queue", "schedule_queue_required"),
        _name(key, "scheduleKey", "schedule_key_required"),
    )


async def peek(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    schedule_key: Any,
    *,
    count: int | None = None,
    runs: int | None = None,
) -> dict[str, Any]:
    """The schedule, its next `count` occurrences (UTC and in its zone, with the jittered due
    time) and its last `runs` ledger rows."""
    q, k = await _one(rt, ident, queue, schedule_key)
    n = 5 if count is None else _int(count, "count", 0, MAX_PEEK_OCCURRENCES, "schedule_bad_count")
    r = 20 if runs is None else _int(runs, "runs", 0, MAX_PEEK_RUNS, "schedule_bad_count")
    async with rt.pool.acquire() as conn:
        found = await schedule_store.get(conn, ident.tenant, q, k, r)
    if found is None:
        raise _not_found(q, k)
    found.pop("payload", None)
    found["next"] = _occurrences(found, n)
    return found


def _occurrences(found: dict[str, Any], n: int) -> list[dict[str, Any]]:
    if n == 0 or found.get("nextAt") is None:
        return []
    row = {
        "cron": found.get("cron"),
        "every_ms": found.get("everyMs"),
        "zone": found["zone"],
        "anchor_at": dt.datetime.fromisoformat(found["anchorAt"]),
        "start_at": None if "startAt" not in found else dt.datetime.fromisoformat(found["startAt"]),
        "end_at": None if "endAt" not in found else dt.datetime.fromisoformat(found["endAt"]),
    }
    first = dt.datetime.fromisoformat(found["nextAt"])
    try:
        ats = [first, *recurrence_of(row).upcoming(first, n - 1)]
    except RecurrenceError:  # a definition written through SQL that cronsim refuses
        ats = [first]
    tz = ZoneInfo(found["zone"])
    sid = uuid.UUID(found["scheduleId"])
    out = []
    for a in ats:
        due = a + dt.timedelta(milliseconds=jitter_offset_ms(sid, a, found["jitterMs"]))
        out.append({"at": iso(a), "local": a.astimezone(tz).isoformat(), "dueAt": iso(due)})
    return out


async def list_schedules(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    *,
    prefix: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Keyset page of one queue's schedules by scheduleKey, filtered by a literal key prefix:
    {schedules, truncated, nextAfter}."""
    q = _name(queue, "queue", "schedule_queue_required")
    if prefix is not None and not isinstance(prefix, str):
        raise _bad("schedule_bad_prefix", "prefix must be a string")
    if after is not None and not isinstance(after, str):
        raise _bad("schedule_bad_after", "after must be a string")
    n = 100 if limit is None else _int(limit, "limit", 1, MAX_LIST, "schedule_bad_limit")
    async with rt.pool.acquire() as conn:
        page = await schedule_store.list_page(
            conn, ident.tenant, q, prefix, q if after is not None else None, after, n
        )
    rows = page["schedules"]
    page["nextAfter"] = rows[-1]["scheduleKey"] if page["truncated"] and rows else None
    return page


async def pause(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    schedule_key: Any,
    paused: bool,
    *,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """Pause (the pending occurrence is withdrawn, its instant kept) or resume (that instant is
    staged again; if it has passed, the catch-up policy decides at its fire)."""
    q, k = await _one(rt, ident, queue, schedule_key)
    async with rt.pool.acquire() as conn:
        found = await schedule_store.pause(conn, ident.tenant, q, k, paused, now)
    if found is None:
        raise _not_found(q, k)
    if not paused and found.get("nextDueAt"):
        rt.timers_scheduled(dt.datetime.fromisoformat(found["nextDueAt"]).timestamp())
    found.pop("payload", None)
    return found


async def delete(rt: Runtime, ident: Identity, queue: Any, schedule_key: Any) -> dict[str, Any]:
    """Delete a schedule and its pending occurrence: {deleted: bool}."""
    q, k = await _one(rt, ident, queue, schedule_key)
    async with rt.pool.acquire() as conn:
        gone = await schedule_store.delete(conn, ident.tenant, q, k)
    return {"queue": q, "scheduleKey": k, "deleted": gone}


async def run_now(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    schedule_key: Any,
    *,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """One extra occurrence, due now; the cadence does not move. {runAt, status, txn?,
    messageId?}."""
    q, k = await _one(rt, ident, queue, schedule_key)
    op = ops.TimerOp(index=0, op="schedule", queue=q, timer_key=cadence_key(k))
    ops.schedule_gate(rt, [op])
    charge = await quota.admit(rt, ident, [op])
    try:
        async with rt.pool.acquire() as conn:
            found = await schedule_store.run_now(conn, ident.tenant, q, k, now)
    except BaseException as exc:
        quota.failed(rt, charge, exc)
        raise
    if found is None:
        rt.quotas.refund(charge)
        raise _not_found(q, k)
    rt.quotas.settle(charge, 1 if found["status"] == "scheduled" else 0)
    rt.timers_scheduled(dt.datetime.fromisoformat(found["runAt"]).timestamp())
    return {"queue": q, "scheduleKey": k, **found}
