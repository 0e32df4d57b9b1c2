"""The fire, as service calls: probe, claim, fire_claimed, release, drain.

The sweeper (queen_timers/timers/sweeper.py) drives these; tests drive them directly with `now`
instants instead of sleeping. The sequence for one pass:

1. `claim` commits a lease on due rows (FOR UPDATE SKIP LOCKED, a fresh token per row);
2. `fire_claimed` packs and compresses them OUTSIDE any transaction, then fires each batch in
   ONE transaction (queen.log_timers_fire_v2: verify tokens with SKIP LOCKED, provision,
   pre-lock partitions in ascending id order, push, delete the rows it holds);
3. a failed batch is classified (queen_timers/db/errors.py). A non-transient failure of a
batch
   of several segments is replayed one segment per call, so one poisoned timer does not hold
   back the others; a failure of a single segment (or a transient one) takes the fail path:
   backoff, an attempt counted only when permanent, dead-letter past the attempt limit.

After each commit that delivered something, `rt.pushed(tenant, queues)` wakes parked pops.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
import itertools
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from .. import tracing
from ..db import Conn, faults
from ..db.errors import FailureClass, classify_exception, sqlstate_of
from ..db.outage import absorbed
from ..runtime import Runtime
from . import occurrences, schedule_store, store
from .backoff import backoff_ms
from .pack import PayloadError, Segment, frame_bytes, pack_batches
from .store import ClaimedTimer

__all__ = [
    "SHARDS",
    "ClaimedTimer",
    "FireReport",
    "Packed",
    "Probe",
    "claim",
    "classify_exception",
    "drain",
    "fire_claimed",
    "fire_packed",
    "fire_statement",
    "pack",
    "probe",
    "release",
    "shard_ring",
]

log = logging.getLogger("queen_timers.timers")

SHARDS = 64  # fixed permanently by the schema (generated column `shard`); not a setting

# Above this many payload bytes, packing (zstd) runs in a worker thread so the event loop keeps
# serving requests; below it a thread hop costs more than the compression. Not measured.
PACK_IN_THREAD_BYTES = 256 * 1024

# Where the next shard ring starts. Seeded from the wall clock so brokers started together do
# not all begin on shard 0; it only spreads contention, correctness never depends on it.
_ring_start = itertools.count(int(time.time() * 1000) % SHARDS)


def shard_ring(start: int | None = None) -> list[int]:
    """All 64 shards, starting at `start` (next rotation when None)."""
    s = next(_ring_start) % SHARDS if start is None else start % SHARDS
    return [(s + i) % SHARDS for i in range(SHARDS)]


@dataclasses.dataclass
class Probe:
    next_in_ms: float | None  # min(visible_at) - now; None when there is no timer at all
    due: int  # rows with visible_at <= now, capped at sweeper_due_cap
    due_capped: bool
    late_ms: float  # now - oldest visible_at when overdue, else 0
    # The shards whose earliest row is due; None when unknown: claim all 64.
    due_shards: list[int] | None = None
    # The shards whose earliest row falls due within the next second, and that row's ms from
    # the probe's now (signed, aligned with soon_shards).
    soon_shards: list[int] = dataclasses.field(default_factory=list)
    soon_in_ms: list[float] = dataclasses.field(default_factory=list)

    def shards_due_within(self, ms: float) -> list[int]:
        """The shards whose earliest row is due `ms` after the probe's now."""
        return [s for s, at in zip(self.soon_shards, self.soon_in_ms) if at <= ms]


@dataclasses.dataclass
class FireReport:
    """Counts are timers (rows), not segments."""

    fired: int = 0
    duplicate: int = 0  # txn already in the log: deleted, not appended again
    stale: int = 0  # rows of segments whose lease was no longer ours
    released: int = 0  # rows handed back for repacking (siblings of stale/duplicate)
    failed_transient: int = 0
    failed_permanent: int = 0  # permanent and config failures (an attempt spent)
    dead_lettered: int = 0
    skipped: int = 0  # schedule occurrences missed and dropped by their catch-up policy
    poisoned: int = 0  # multi-segment batches replayed one segment per call
    lags_ms: list[float] = dataclasses.field(default_factory=list)  # deliver_at -> commit

    def merge(self, other: FireReport) -> FireReport:
        for f in dataclasses.fields(self):
            if f.name == "lags_ms":
                self.lags_ms.extend(other.lags_ms)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    @property
    def moved(self) -> int:
        """Rows whose state changed for good (delivered, dropped as duplicate, archived)."""
        return self.fired + self.duplicate + self.dead_lettered + self.skipped


async def probe(rt: Runtime, *, now: dt.datetime | None = None) -> Probe:
    async with rt.pool.acquire() as conn:
        if faults.hook is not None:
            await faults.hook("timers.probe", conn)
        p = await store.due(conn, None, now, rt.settings.sweeper_due_cap)
    return Probe(
        next_in_ms=None if p["nextInMs"] is None else float(p["nextInMs"]),
        due=int(p["due"]),
        due_capped=bool(p["dueCapped"]),
        late_ms=float(p["lateMs"]),
        due_shards=[int(x) for x in p["dueShards"]],
        soon_shards=[int(x) for x in p["soonShards"]],
        soon_in_ms=[float(x) for x in p["soonInMs"]],
    )


async def claim(
    rt: Runtime,
    *,
    now: dt.datetime | None = None,
    shards: list[int] | None = None,
    max_rows: int | None = None,
) -> list[ClaimedTimer]:
    s = rt.settings
    ring = shard_ring() if shards is None else list(shards)
    async with rt.pool.acquire() as conn:
        if faults.hook is not None:
            await faults.hook("timers.claim", conn)
        return await store.claim(
            conn,
            ring,
            now,
            s.sweeper_lease_ms,
            max_rows if max_rows is not None else s.sweeper_claim_batch,
            s.sweeper_fire_rate_per_tenant,
        )


async def release(
    rt: Runtime, claimed: Sequence[ClaimedTimer], *, now: dt.datetime | None = None
) -> int:
    """Hand back claims that will not be fired (graceful shutdown): due again at once."""
    if not claimed:
        return 0
    async with rt.pool.acquire() as conn:
        return await store.release(
            conn,
            [t.tenant for t in claimed],
            [t.queue for t in claimed],
            [t.timer_key for t in claimed],
            [t.token for t in claimed],
            now,
        )


@dataclasses.dataclass
class Packed:
    """Claimed rows packed into fire batches (outside any transaction), ready to fire."""

    claimed: Sequence[ClaimedTimer]
    batches: list[list[Segment]]
    unpackable: list[tuple[ClaimedTimer, str]]
    # The recurring schedules' occurrences among `claimed` (None: there are none): what their
    # fire stages next, and the missed ones dropped instead of packed (timers/occurrences.py).
    occurrences: occurrences.OccurrencePlan | None = None


async def pack(
    rt: Runtime, claimed: Sequence[ClaimedTimer], *, now: dt.datetime | None = None
) -> Packed:
    """Pack and compress claimed rows (step 2's first half). Separate from the fire so the
    sweeper can pack the next claim while the previous batch's transaction runs. Schedule
    occurrences are planned first (one read of their definitions): a missed one that its
    catch-up policy skips is not packed."""
    if not claimed:
        return Packed(claimed, [], [])
    s = rt.settings
    plan = None
    if any(occurrences.parse_key(t.timer_key) for t in claimed):
        try:
            async with rt.pool.acquire() as conn:
                plan = await occurrences.plan(conn, claimed, now, s.schedules_misfire_grace_ms)
        except Exception:
            # hand the claims back at once rather than at their lease's end (best effort: the
            # database that failed the read may fail this too, and the lease still covers it)
            with contextlib.suppress(Exception):
                await release(rt, claimed, now=now)
            raise
    all_claimed = claimed
    if plan is not None and plan.skip:
        dropped = plan.skipped_keys()
        claimed = [t for t in claimed if (t.tenant, t.queue, t.timer_key) not in dropped]
    args = (claimed, s.sweeper_max_fire_bytes, s.zstd_level, s.timers_max_payload_bytes)
    if sum(len(t.payload) for t in claimed) > PACK_IN_THREAD_BYTES:
        batches, unpackable = await asyncio.to_thread(pack_batches, *args)
    else:
        batches, unpackable = pack_batches(*args)
    return Packed(all_claimed, batches, unpackable, plan)


async def fire_packed(rt: Runtime, packed: Packed, *, now: dt.datetime | None = None) -> FireReport:
    """Fire what `pack` produced: one transaction per batch; unpackable rows take the fail
    path on their own."""
    report = FireReport()
    plan = packed.occurrences
    if plan is not None and plan.skip:
        await _skip(rt, plan, now, report)
    for t, why in packed.unpackable:
        await _fail(rt, [t], f"payload: {why}", FailureClass.PERMANENT, now, report)
    for batch in packed.batches:
        await _fire_batch(
            rt, batch, now, report, isolate=rt.settings.sweeper_isolate_on_permanent, plan=plan
        )
    return report


async def fire_claimed(
    rt: Runtime, claimed: Sequence[ClaimedTimer], *, now: dt.datetime | None = None
) -> FireReport:
    if not claimed:
        return FireReport()
    return await fire_packed(rt, await pack(rt, claimed, now=now), now=now)


def could_fire_at(t: ClaimedTimer) -> dt.datetime:
    """The instant a timer's lateness counts from: its deliver_at, but never before it was
    scheduled. A negative delay (legal: it orders a timer before others) puts deliver_at in
    the past, and measured from there its fire would read as days late and trip the lateness
    alert for every tenant. The schedule instant is the message id's: a uuid7 stamped when the
    timer was (re)scheduled, by the broker (ops.prepare) or by SQL (queen._uuid7_v1)."""
    mid = t.message_id.bytes
    if mid[6] >> 4 != 7:
        return t.deliver_at  # not a uuid7: no instant to bound it by
    scheduled = dt.datetime.fromtimestamp(int.from_bytes(mid[:6]) / 1000.0, dt.UTC)
    return max(t.deliver_at, scheduled)


async def drain(
    rt: Runtime, *, now: dt.datetime | None = None, max_rows: int | None = None
) -> FireReport:
    """Claim and fire until nothing is due (at `now`). `max_rows` is the size of each claim.
    Stops early when a pass moved nothing and released nothing (every row failed into a
    backoff, or every row was taken by someone else), so it always terminates."""
    total = FireReport()
    while True:
        claimed = await claim(rt, now=now, max_rows=max_rows)
        if not claimed:
            return total
        r = await fire_claimed(rt, claimed, now=now)
        total.merge(r)
        if r.moved == 0 and r.released == 0:
            return total


# -- internals ------------------------------------------------------------------------------


async def fire_statement(
    conn: Conn,
    batch: list[Segment],
    now: dt.datetime | None,
    plan: occurrences.OccurrencePlan | None = None,
) -> list[dict[str, Any]]:
    """The fire procedure on `conn` for one batch of packed segments, as is: its per-segment
    results, or its exception (the caller classifies). Rows carry the version their claim
    wrote (ClaimedTimer.tid), so the procedure finds them without a primary-key descent.
    A batch holding schedule occurrences goes through queen.schedule_fire_v1, which is this
    fire plus, in the same transaction, each occurrence's ledger row and next occurrence."""
    rows = [t for seg in batch for t in seg.rows]
    items: list[dict[str, Any]] = []
    if plan is not None and plan.items:
        for i, seg in enumerate(batch):
            for t in seg.rows:
                item = plan.items.get((t.tenant, t.queue, t.timer_key))
                if item is not None:
                    items.append({**item, "seg": i + 1})
    if items:
        tids = [t.tid for t in rows]
        answer: list[dict[str, Any]] = await schedule_store.fire(
            conn,
            (
                [seg.tenant for seg in batch],
                [seg.queue for seg in batch],
                [seg.partition for seg in batch],
                [len(seg.rows) for seg in batch],
                [seg.blob for seg in batch],
                [i + 1 for i, seg in enumerate(batch) for _ in seg.rows],
                [t.timer_key for t in rows],
                [t.token for t in rows],
                [h for seg in batch for h in seg.hashes],
                None if all(t is None for t in tids) else tids,
                now,
            ),
            items,
        )
        return answer
    return await store.fire(
        conn,
        [seg.tenant for seg in batch],
        [seg.queue for seg in batch],
        [seg.partition for seg in batch],
        [len(seg.rows) for seg in batch],
        [seg.blob for seg in batch],
        [i + 1 for i, seg in enumerate(batch) for _ in seg.rows],
        [t.timer_key for t in rows],
        [t.token for t in rows],
        [h for seg in batch for h in seg.hashes],
        now,
        [t.tid for t in rows],
    )


async def _skip(
    rt: Runtime, plan: occurrences.OccurrencePlan, now: dt.datetime | None, report: FireReport
) -> None:
    """Drop the missed occurrences the catch-up policy skips (one transaction). On failure
    their lease expires and the next claim plans them again."""
    try:
        async with rt.pool.acquire() as conn:
            report.skipped += await schedule_store.skip(conn, plan.skip, now)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the lease expires and the rows are planned again
        if not absorbed(rt.database_url, exc):
            log.warning("skipping missed schedule occurrences failed (%s)", _describe(exc))


async def _fire_batch(
    rt: Runtime,
    batch: list[Segment],
    now: dt.datetime | None,
    report: FireReport,
    *,
    isolate: bool,
    plan: occurrences.OccurrencePlan | None = None,
) -> None:
    otel = tracing.api()
    if otel is None:
        return await _fire_one(rt, batch, now, report, isolate=isolate, plan=plan)
    rows = [t for seg in batch for t in seg.rows]
    contexts: list[tracing.Carrier] = [
        (t.trace_parent, t.trace_state) for t in rows if t.trace_parent is not None
    ]
    with otel.fire_span([seg.queue for seg in batch], contexts) as span:
        fired, failed = report.fired, report.failed_permanent + report.failed_transient
        await _fire_one(rt, batch, now, report, isolate=isolate, plan=plan)
        failed = report.failed_permanent + report.failed_transient - failed
        otel.fired(span, messages=len(rows), fired=report.fired - fired, failed=failed)


async def _fire_one(
    rt: Runtime,
    batch: list[Segment],
    now: dt.datetime | None,
    report: FireReport,
    *,
    isolate: bool,
    plan: occurrences.OccurrencePlan | None = None,
) -> None:
    try:
        # One statement is one transaction (autocommit): the fire procedure verifies, pushes
        # and deletes atomically without a BEGIN/COMMIT pair (two round trips saved per fire).
        async with rt.pool.acquire() as conn:
            if faults.hook is not None:
                await faults.hook("timers.fire", conn)
            results = await fire_statement(conn, batch, now, plan)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - classified below; nothing is swallowed silently
        cls = classify_exception(exc)
        if cls is not FailureClass.TRANSIENT and len(batch) > 1 and isolate:
            report.poisoned += 1
            log.warning(
                "timer fire failed for a batch of %d segments (%s); replaying one segment per call",
                len(batch),
                _describe(exc),
            )
            for seg in batch:
                await _fire_batch(rt, [seg], now, report, isolate=False, plan=plan)
            return
        if cls is FailureClass.CONFIG:
            log.warning(
                "timer fire misconfigured (%s); destination queues: %s",
                _describe(exc),
                sorted({seg.queue for seg in batch}),
            )
        elif not (cls is FailureClass.TRANSIENT and absorbed(rt.database_url, exc)):
            log.warning("timer fire failed (%s, %s)", cls.value, _describe(exc))
        await _fail(rt, [t for seg in batch for t in seg.rows], _describe(exc), cls, now, report)
        return

    woke: dict[uuid.UUID, set[str]] = {}
    for seg, res in zip(batch, results):
        kind = res.get("result")
        if kind == "fired":
            report.fired += len(seg.rows)
            created = dt.datetime.fromisoformat(res["createdAt"])
            report.lags_ms.extend(
                (created - could_fire_at(t)).total_seconds() * 1000.0 for t in seg.rows
            )
            woke.setdefault(seg.tenant, set()).add(seg.queue)
        elif kind == "duplicate":
            report.duplicate += len(res.get("dups") or [])
            report.released += int(res.get("released") or 0)
        else:
            report.stale += len(seg.rows)
            report.released += int(res.get("released") or 0)
    for tenant, queues in woke.items():
        rt.pushed(tenant, queues)


async def _fail(
    rt: Runtime,
    rows: list[ClaimedTimer],
    error: str,
    cls: FailureClass,
    now: dt.datetime | None,
    report: FireReport,
) -> None:
    s = rt.settings
    counted = cls is not FailureClass.TRANSIENT
    try:
        async with rt.pool.acquire() as conn:
            res = await store.fail(
                conn,
                [t.tenant for t in rows],
                [t.queue for t in rows],
                [t.timer_key for t in rows],
                [t.token for t in rows],
                [backoff_ms(s, t.attempts, cls) for t in rows],
                f"{cls.value}: {error}",
                counted,
                s.sweeper_max_attempts,
                now,
            )
            if counted:
                report.failed_permanent += int(res["failed"])
            else:
                report.failed_transient += int(res["failed"])
            exhausted = res["exhausted"] if counted else []
            if exhausted:
                by_key = {(t.tenant, t.queue, t.timer_key): t for t in rows}
                picked = [
                    by_key[(uuid.UUID(str(e["tenant"])), e["queue"], e["timerKey"])]
                    for e in exhausted
                ]
                d = await store.dlq(
                    conn,
                    [t.tenant for t in picked],
                    [t.queue for t in picked],
                    [t.timer_key for t in picked],
                    [dlq_snapshot(t, s.timers_max_payload_bytes) for t in picked],
                    s.sweeper_max_attempts,
                    now,
                )
                report.dead_lettered += int(d["archived"])
                if d["archived"]:
                    log.warning(
                        "%d timer(s) dead-lettered after %d attempts",
                        d["archived"],
                        s.sweeper_max_attempts,
                    )
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the lease expires and the row is retried
        if absorbed(rt.database_url, exc):
            return
        log.warning(
            "recording a timer fire failure failed (%s); the lease will expire", _describe(exc)
        )


def dlq_snapshot(t: ClaimedTimer, limit: int) -> object:
    """The dead letter's payload: the message JSON when the bytes are JSON (an encrypted
    payload stays its envelope), else {"_raw_b64": ...}."""
    try:
        data = frame_bytes(t, limit)
    except PayloadError:
        data = t.payload
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return {"_raw_b64": base64.b64encode(data).decode()}


def _describe(exc: BaseException) -> str:
    code = sqlstate_of(exc)
    text = str(exc) or type(exc).__name__
    return f"{code} {text}" if code else f"{type(exc).__name__}: {text}"
