"""Timer ops: the wire decoded, then encryption and message ids.

The shape of an op is the Queen wire's (timers-contract §2.3, client-wire §10):
{op, queue, timerKey, partition?, delayMs, txn, payload (base64), payloadZstd?, encrypted?}.

Two stages, each first failure wins in input order, both before anything is written:
1. here, the wire's SPELLING: the body's shape and size, JSON types, field names, text a
   PostgreSQL text value can hold, base64 and zstd frames. What a typed SQL parameter cannot
   get wrong, so only the wire needs it;
2. in the database, the VALUE rules (name lengths and characters, key and txn bytes, the
   horizon, the payload's size, flag conflicts, a key twice in one call):
   queen._log_timers_refusal_v1 in migrations/025, the one implementation the SQL API (026)
   shares, with the broker's own limits passed to each call. Its refusals come back as
   `errors.TimerRefused` through `db_error`.

Server-owned values are refused, never ignored: any key starting with `_`, and the names a
client could spell for the tenant, the producer, the message id, an absolute delivery instant,
the attempts and the lease. Tenant and producer subject come from the caller's identity; the
message id is minted here at schedule, so the answer can say "this is the id you will see".
Unknown keys are refused too (a misspelt `partiton` must not silently deliver to `Default`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import datetime as dt
import math
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import uuid_utils
from asyncpg.pgproto.pgproto import UUID as PgUUID

from ..db import Conn, faults
from ..db.errors import (
    DB_ERRORS,
    FailureClass,
    classify_exception,
    in_doubt,
    unavailable,
    write_in_doubt,
)
from ..db.reads import Reading, with_lag
from ..errors import QueenError, refusal
from ..identity import Identity
from ..runtime import Runtime
from ..settings import Settings
from ..sqlapi import limits
from ..tracing import Carrier
from ..wire.timers import TimerCount, TimerPeek, TimerResult, TimersPage
from . import locks, quota, store
from .batcher import ScheduleBatcher
from .pack import PayloadError, decompress

__all__ = [
    "MAX_KEY_BYTES",
    "SERVER_OWNED",
    "WIRE_MAX_OPS",
    "Batcher",
    "TimerOp",
    "db_error",
    "first_rule",
    "parse_body",
    "prepare",
    "stamp",
    "validate",
    "validate_in_order",
]

SERVER_OWNED = frozenset(
    {
        "producerSub",
        "producer_sub",
        "messageId",
        "message_id",
        "tenant",
        "tenantId",
        "_tenant",
        "tenant_id",
        "deliverAt",
        "deliver_at",
        "delaySeconds",
        "delay_seconds",
        "attempts",
        "claimToken",
        "claim_token",
        "claimedUntil",
        "claimed_until",
        "shard",
        "visibleAt",
        "visible_at",
        "lastError",
        "last_error",
        "createdAt",
        "created_at",
        "updatedAt",
        "updated_at",
    }
)
_KNOWN = frozenset(
    {
        "op",
        "queue",
        "timerKey",
        "partition",
        "delayMs",
        "txn",
        "payload",
        "payloadZstd",
        "encrypted",
    }
)
_KINDS = ("schedule", "reschedule", "cancel")

# A key's limit in bytes, as the value rules apply it (025, _log_timers_refusal_v1: why 1024),
# for the calls that take a key without writing one (fire now).
MAX_KEY_BYTES = 1024

# Ops in one transaction-wire `timers` rider: a constant on the wire in the reference, not a
# setting (timers-contract §2.10).
WIRE_MAX_OPS = 256


@dataclasses.dataclass
class TimerOp:
    index: int
    op: str
    queue: str
    timer_key: str
    partition: str | None = None
    delay_ms: float | int | None = None
    txn: str | None = None
    payload: bytes | None = None
    payload_zstd: bool = False
    encrypted: bool = False
    message_id: uuid.UUID | None = None
    # The schedule's W3C trace context, stored with the timer (queen_timers/tracing.py)
    trace: Carrier | None = None

    @property
    def schedules(self) -> bool:
        return self.op != "cancel"


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("timers_bad_request", reason, detail, 400)


def parse_body(body: Any) -> list[Any]:
    """A bare array of ops, or {"operations": [...]}."""
    if isinstance(body, list):
        return body
    if (
        isinstance(body, dict)
        and set(body) == {"operations"}
        and isinstance(body["operations"], list)
    ):
        return body["operations"]
    raise _bad("timers_bad_body", 'the body is an array of ops or {"operations": [...]}')


def _storable(value: str) -> bool:
    """Text a PostgreSQL text column can hold: no NUL, and UTF-8 encodable. A Python string may
    hold a lone surrogate, which no JSON or msgpack body can spell but a direct service call
    can pass; the driver cannot encode it."""
    if "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _text(value: Any, what: str, required: str, bad: str) -> str:
    """A string field as the wire spells it: its value rules are the database's."""
    if not isinstance(value, str):
        raise _bad(required, f"{what} is required (a non-empty string)")
    if not _storable(value):
        raise _bad(bad, f"{what} is not Unicode text without NUL")
    return value


# The fields in the order both stages check them (the reference's per-op order), the field each
# stage-1 reason is about, and the value rule that finds a field missing.
_FIELD_ORDER = ("queue", "timerKey", "partition", "delayMs", "payload", "txn", "payloadZstd")
_FIELD_OF = {
    "timers_queue_required": "queue",
    "timers_bad_queue": "queue",
    "timers_timer_key_required": "timerKey",
    "timers_bad_timer_key": "timerKey",
    "timers_bad_partition": "partition",
    "timers_delay_required": "delayMs",
    "timers_payload_required": "payload",
    "timers_payload_not_base64": "payload",
    "timers_payload_not_zstd": "payload",
    "timers_payload_too_large": "payload",
    "timers_txn_required": "txn",
    "timers_bad_txn": "txn",
    "timers_bad_flag": "payloadZstd",
}
_MISSING = {
    "timers_queue_required": "queue",
    "timers_timer_key_required": "timerKey",
    "timers_delay_required": "delayMs",
    "timers_payload_required": "payload",
    "timers_txn_required": "txn",
}


class SpellingRefusal(QueenError):
    """A stage-1 refusal of op `index` of `ops`. The first failure in input order wins, and
    the value rules of the ops before it, and of this op's fields before the misspelt one,
    are the database's: `validate_in_order` asks it before this refusal stands."""

    def __init__(self, e: QueenError, ops: list[Any], index: int):
        super().__init__(e.code, e.reason, e.detail, e.status)
        self.ops = ops
        self.index = index

    def checked_first(self) -> tuple[list[Any], frozenset[str]]:
        """What the database checks: the earlier ops as sent (they decoded), and this op's
        fields before the misspelt one; with the fields left out of it."""
        field = _FIELD_OF.get(self.reason)
        if field is None:  # the op itself is misspelt: its fields come after
            return list(self.ops[: self.index]), frozenset()
        raw = self.ops[self.index]
        kept = [k for k in _FIELD_ORDER[: _FIELD_ORDER.index(field)] if k in raw]
        if not kept and not self.index:
            return [], frozenset()  # nothing comes before it
        partial = {k: raw[k] for k in ("op", *kept) if k in raw}
        return [*self.ops[: self.index], partial], frozenset(_FIELD_ORDER) - set(kept)


def validate(ops: Any, settings: Settings, *, max_ops: int | None = None) -> list[TimerOp]:
    """Decode the wire's ops (stage 1 of the module docstring); raises QueenError on the first
    failure (a SpellingRefusal for one op's). The value rules run in the statement that
    writes."""
    if not isinstance(ops, list):
        raise _bad("timers_bad_body", "ops must be an array")
    limit = settings.timers_max_ops_per_call if max_ops is None else max_ops
    if len(ops) > limit:
        raise _bad("timers_too_many_ops", f"{len(ops)} ops in one call; the limit is {limit}")
    out: list[TimerOp] = []
    for i, raw in enumerate(ops):
        try:
            out.append(_decode(i, raw, settings.timers_max_payload_bytes))
        except QueenError as e:
            raise SpellingRefusal(e, ops, i) from None
    return out


async def validate_in_order(rt: Runtime, ops: Any, *, max_ops: int | None = None) -> list[TimerOp]:
    """`validate`, with the reference's order kept across the two stages (first failure wins,
    per op in input order): before a misspelt op's refusal stands, one read-only statement
    checks the value rules of what comes before it. On the error path only."""
    try:
        return validate(ops, rt.settings, max_ops=max_ops)
    except SpellingRefusal as e:
        checked, left_out = e.checked_first()
        if not checked:
            raise
        async with _pooled(rt) as conn:
            first = await store.first_refusal(conn, checked, limits(rt.settings))
        # the misspelt op's own field and those after it were left out, not sent empty
        if first is None or (first["i"] == e.index and _MISSING.get(first["reason"]) in left_out):
            raise
        raise _first_rule(first) or e from None


def first_rule(first: Mapping[str, Any] | None) -> QueenError | None:
    """The refusal of a value rule the database found (store.first_refusal), or None."""
    return _first_rule(first)


def _first_rule(first: Mapping[str, Any] | None) -> QueenError | None:
    """The refusal of a value rule that comes first, from store.first_refusal; a repeated key
    counts only after every op's own rules, so it never does."""
    if first is None or first["reason"] == "timers_duplicate_key":
        return None
    return refusal(first["state"], f"QTIMER {first['reason']}: {first['detail']}")


def _decode(i: int, raw: Any, max_payload: int) -> TimerOp:
    if not isinstance(raw, dict):
        raise _bad("timers_bad_op", f"op {i} is not an object")
    for k in raw:
        if (isinstance(k, str) and k.startswith("_")) or k in SERVER_OWNED:
            raise _bad(
                "timers_server_owned_field",
                f"op {i}: field {k} is server-owned (tenant and producer come from "
                "authentication, the message id is minted by the broker, and only "
                "a relative delayMs is expressible)",
            )
    unknown = sorted((k for k in raw if k not in _KNOWN), key=str)  # keys may not be str
    if unknown:
        raise _bad("timers_unknown_field", f"op {i}: unknown fields {unknown}")
    kind = raw.get("op")
    if kind not in _KINDS:
        raise _bad(
            "timers_unknown_op",
            f"op {i}: unknown operation {kind!r} (schedule, reschedule or cancel)",
        )
    queue = _text(raw.get("queue"), f"op {i}: queue", "timers_queue_required", "timers_bad_queue")
    key = _text(
        raw.get("timerKey"),
        f"op {i}: timerKey",
        "timers_timer_key_required",
        "timers_bad_timer_key",
    )
    t = TimerOp(index=i, op=kind, queue=queue, timer_key=key)
    if "partition" in raw:
        t.partition = _text(
            raw["partition"],
            f"op {i}: partition",
            "timers_bad_partition",
            "timers_bad_partition",
        )
    if kind == "cancel":
        txn = raw.get("txn")
        if txn is not None and (not isinstance(txn, str) or not _storable(txn)):
            raise _bad("timers_bad_txn", f"op {i}: txn must be Unicode text without NUL")
        t.txn = txn
        return t

    delay = raw.get("delayMs")
    # Passed on as the number it is: the database compares it with the horizon exactly (an
    # int of any size; a float first would overflow past 1e308) and moves a delay further
    # back than a century up to that floor. Only a float can be NaN or infinite.
    if (
        isinstance(delay, bool)
        or not isinstance(delay, (int, float))
        or (isinstance(delay, float) and not math.isfinite(delay))
    ):
        raise _bad(
            "timers_delay_required",
            f"op {i}: delayMs is required (a number of milliseconds from now)",
        )
    t.delay_ms = delay
    payload = raw.get("payload")
    if not isinstance(payload, str):
        raise _bad("timers_payload_required", f"op {i}: payload is required (base64)")
    try:
        # Python's strict mode still takes padding past a whole quantum ("AAAA=="), which
        # padded base64 has not and PostgreSQL's decode() refuses.
        if len(payload) % 4 or payload.endswith("==="):
            raise ValueError("padding")
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(
            "timers_payload_not_base64",
            f"op {i}: payload is not base64 (standard alphabet, padded)",
        ) from None
    t.txn = _text(raw.get("txn"), f"op {i}: txn", "timers_txn_required", "timers_bad_txn")
    for flag in ("payloadZstd", "encrypted"):
        if flag in raw and not isinstance(raw[flag], bool):
            raise _bad("timers_bad_flag", f"op {i}: {flag} must be a boolean")
    t.payload_zstd = bool(raw.get("payloadZstd", False))
    t.encrypted = bool(raw.get("encrypted", False))
    # A zstd frame is read only here (SQL has no zstd): its content must fit the limit.
    # With `encrypted` too the database refuses the pair, whatever the bytes are.
    if t.payload_zstd and not t.encrypted and len(data) <= max_payload:
        try:
            decompress(data, max_payload)
        except PayloadError as exc:
            if "over" in str(exc):
                raise QueenError(
                    "payload_too_large", "timers_payload_too_large", f"op {i}: {exc}", 413
                ) from None
            raise _bad("timers_payload_not_zstd", f"op {i}: {exc}") from None
    t.payload = data
    return t


async def prepare(
    rt: Runtime,
    conn: Conn,
    ident: Identity,
    ops: Sequence[TimerOp],
    encrypting: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Encrypt for destination queues that encrypt at rest, mint message ids, and render the
    ops for log_timers_apply_v1. `encrypting` None: read the flags from queen.queues (a READ;
    the schedule never writes it); a set: the caller knows them (see _apply_checked)."""
    sched = [t for t in ops if t.schedules]
    if encrypting is None:
        encrypting = (
            await store.encrypting_queues(conn, ident.tenant, sorted({t.queue for t in sched}))
            if sched
            else set()
        )
    out: list[dict[str, Any]] = []
    for t in ops:
        o: dict[str, Any] = {"op": t.op, "queue": t.queue, "timerKey": t.timer_key}
        if t.partition is not None:
            o["partition"] = t.partition
        if not t.schedules:
            if t.txn is not None:
                o["txn"] = t.txn
            out.append(o)
            continue
        assert t.payload is not None
        data, zstd, encrypted = t.payload, t.payload_zstd, t.encrypted
        # an oversize payload is refused by the statement (its size rule) before any write
        oversize = len(data) > rt.settings.timers_max_payload_bytes
        if t.queue in encrypting and not oversize:
            if t.encrypted:
                # checked after the value rules of this op and those before it (input order)
                sent = {**o, "delayMs": t.delay_ms, "txn": t.txn, "payload": ""}
                sent.update(_payloadBytes=len(t.payload), payloadZstd=zstd, encrypted=True)
                first = await store.first_refusal(conn, [*out, sent], limits(rt.settings))
                raise _first_rule(first) or _bad(
                    "timers_encrypted_conflict",
                    f"op {t.index}: queue {t.queue!r} encrypts at rest; send the payload "
                    "in clear (the broker encrypts it)",
                )
            if rt.cipher is None:
                raise QueenError(
                    "encryption_misconfigured",
                    "encryption_key_missing",
                    f"queue {t.queue!r} has encryption enabled but QUEEN_ENCRYPTION_KEY is not set",
                    500,
                )
            if zstd:  # encryption is outermost and the fire must not need the key: see pack.py
                data = decompress(data, rt.settings.timers_max_payload_bytes)
                zstd = False
            o["_payloadBytes"] = len(t.payload)  # the limit is on what the client sent
            data, encrypted = rt.cipher.encrypt(data), True
        t.message_id = PgUUID(uuid_utils.uuid7().bytes)  # a uuid.UUID, built in C
        o.update(
            {
                "delayMs": t.delay_ms,
                "txn": t.txn,
                "payload": base64.b64encode(data).decode(),
                "payloadZstd": zstd,
                "encrypted": encrypted,
                "_messageId": str(t.message_id),
            }
        )
        if t.trace is not None:
            o["_traceparent"], state = t.trace
            if state is not None:
                o["_tracestate"] = state
        out.append(o)
    return out


def db_error(exc: BaseException) -> QueenError:
    """A database failure of a timer call, in the route taxonomy (timers-contract §2.6)."""
    code = getattr(exc, "sqlstate", None)
    msg = str(exc) or type(exc).__name__
    refused = refusal(code, msg)
    if refused is not None:  # a value rule of the database (module docstring, stage 2)
        return refused
    if code == "22023":
        return QueenError("timers_bad_request", msg, getattr(exc, "hint", None) or msg, 400)
    if code == "22001":
        return QueenError("payload_too_large", "payload_too_large", msg, 413)
    if code == "57014":
        return unavailable(
            exc, "timers_unavailable", "timers_timeout", "the timer statement was cancelled"
        )
    if code == locks.LOCK_NOT_AVAILABLE:  # another transaction holds a row (migrations/029)
        return locks.busy(msg)
    cls = classify_exception(exc)
    if cls is FailureClass.TRANSIENT:
        # the reason is the database's message (timers-contract §2.6), `connection` without one
        return unavailable(
            exc,
            "timers_unavailable",
            msg if code else "connection",
            "the database is unavailable for a moment",
        )
    if cls is FailureClass.CONFIG:
        return QueenError("timers_misconfigured", code, msg, 500)
    return QueenError("timers_error", code, msg, 500)


@contextlib.asynccontextmanager
async def _pooled(rt: Runtime, *, writes: bool = False) -> AsyncIterator[Any]:
    """A pooled connection whose database errors reach the caller as the timers' QueenError
    (db_error): the one mapping every pooled timers call goes through. A write that loses its
    link once it holds the connection is in doubt (db.errors.in_doubt); one that never got a
    connection wrote nothing."""
    held = False
    try:
        async with rt.pool.acquire() as conn:
            held = True
            yield conn
    except DB_ERRORS as exc:
        if writes and held and write_in_doubt(exc):
            lost = "the timer write lost its connection"
            raise in_doubt(exc, "timers_unavailable", lost) from exc
        raise db_error(exc) from exc


@contextlib.asynccontextmanager
async def _reading(rt: Runtime) -> AsyncIterator[Reading]:
    """_pooled for the operator's reads: on the replica when there is one (db.reads)."""
    try:
        async with rt.reads.acquire() as read:
            yield read
    except DB_ERRORS as exc:
        raise db_error(exc) from exc


@contextlib.asynccontextmanager
async def _pooled_write(rt: Runtime, ident: Identity) -> AsyncIterator[Any]:
    """_pooled for a timer write: within the tenant's share of the pool (timers/locks.py)."""
    async with rt.tenant_share.hold(ident.tenant, locks.share_cap(rt.settings)):
        async with _pooled(rt, writes=True) as conn:
            yield conn


# -- the service calls (queen_timers.service.Queen delegates here) ---------------------------------


def earliest_epoch(results: Sequence[Mapping[str, Any]]) -> float | None:
    due = [
        dt.datetime.fromisoformat(r["deliverAt"]).timestamp()
        for r in results
        if r.get("status") in ("scheduled", "rescheduled")
    ]
    return min(due) if due else None


async def apply_ops(
    rt: Runtime, conn: Conn, ident: Identity, ops: Sequence[TimerOp]
) -> list[TimerResult]:
    """Encrypt, mint and apply on `conn` (inside the caller's transaction when it has one).
    Database errors are mapped to the timer taxonomy."""
    rendered = await prepare(rt, conn, ident, ops)
    try:
        results = await store.apply(
            conn,
            rendered,
            ident.tenant,
            ident.subject,
            None,
            limits(rt.settings),
            rt.settings.timers_lock_wait_ms,
        )
    except DB_ERRORS as exc:
        raise db_error(exc) from exc
    return _one_per_op(results, ops)


def _one_per_op(results: object, ops: Sequence[TimerOp]) -> list[TimerResult]:
    if not isinstance(results, list) or len(results) != len(ops):
        raise QueenError(
            "timers_error",
            "timers_result_unreadable",
            "the timer procedure answered something other than one result per op",
            500,
        )
    return results


# The schedule batcher of timer ops, answering one TimerResult per op.
Batcher = ScheduleBatcher[TimerOp, TimerResult]


def schedule_batcher(rt: Runtime) -> Batcher:
    """The broker's schedule batcher (queen_timers/timers/batcher.py): the service builds one
    at start, and every schedule outside a caller's transaction goes through it."""

    async def run(ident: Identity, ops: Sequence[TimerOp]) -> list[TimerResult]:
        async with _pooled_write(rt, ident) as conn:
            if faults.hook is not None:
                await faults.hook("timers.schedule", conn)
            return await _apply_checked(rt, conn, ident, ops)

    s = rt.settings
    return ScheduleBatcher(
        run, inflight=s.timers_schedule_inflight, max_ops=s.timers_schedule_batch_ops
    )


async def _apply_checked(
    rt: Runtime, conn: Conn, ident: Identity, ops: Sequence[TimerOp]
) -> list[TimerResult]:
    """Autocommit apply in one round trip: render assuming no destination queue encrypts, and
    let the procedure check that in the statement that writes. If some queue does, nothing was
    written: render again encrypting for those queues, and apply (a second round trip only
    for schedules to encrypting queues)."""
    encrypting: set[str] = set()
    while True:
        rendered = await prepare(rt, conn, ident, ops, encrypting)
        plain = sorted({t.queue for t in ops if t.schedules} - encrypting)
        results = await store.apply_checked(
            conn,
            rendered,
            ident.tenant,
            ident.subject,
            None,
            plain,
            limits(rt.settings),
            rt.settings.timers_lock_wait_ms,
        )
        if isinstance(results, dict) and "encrypt" in results:
            learned = set(results["encrypt"]) - encrypting
            if not learned:  # cannot happen (those queues were not sent as plain); never loop
                raise QueenError(
                    "timers_error",
                    "timers_result_unreadable",
                    "the timer procedure asked to encrypt twice",
                    500,
                )
            encrypting |= learned
            continue
        break
    return _one_per_op(results, ops)


def schedule_gate(
    rt: Runtime, ops: Sequence[TimerOp], *, status: int = 503, retry_after: int | None = 1
) -> None:
    """The kill switch: schedules and reschedules refused while paused; cancels never."""
    if any(t.schedules for t in ops) and not rt.switches.timers_schedule_enabled:
        raise QueenError(
            "timers_disabled",
            "timers_disabled",
            "scheduling timers is paused by an operator (kill switch); cancel, "
            "peek and list still work, and scheduled timers still fire",
            status,
            retry_after=retry_after,
        )


_REJECTED = {
    "timer_horizon_exceeded": "horizon",
    "payload_too_large": "payload_too_large",
    "timers_disabled": "disabled",
    "timers_unavailable": "unavailable",
    "timers_quota_exceeded": "quota",
    "rate_limited": "rate_limited",
    locks.BUSY_CODE: "busy",
}


def rejected_reason(e: QueenError) -> str:
    """The `reason` label of queen_timers_schedule_rejected_total for a refusal."""
    return _REJECTED.get(
        e.code, "shape" if e.status == 400 else "unavailable" if e.status == 503 else "error"
    )


async def apply(
    rt: Runtime, batcher: Batcher, ident: Identity, body: Any, trace: Carrier | None = None
) -> list[TimerResult]:
    """The batch call. Every refusal counts once in queen_timers_schedule_rejected_total.
    `trace`: the W3C context its schedules store (queen_timers/tracing.py)."""
    try:
        return await _apply(rt, batcher, ident, body, trace)
    except QueenError as e:
        rt.metrics.schedule_rejected.labels(rejected_reason(e)).inc()
        raise


async def _apply(
    rt: Runtime, batcher: Batcher, ident: Identity, body: Any, trace: Carrier | None
) -> list[TimerResult]:
    ops = await validate_in_order(rt, parse_body(body))
    if not ops:
        return []
    if trace is not None:
        stamp(ops, trace)
    schedule_gate(rt, ops)
    charge = await quota.admit(rt, ident, ops)
    try:
        results = await batcher.submit(ident, ops)
    except BaseException as exc:
        quota.failed(rt, charge, exc)
        raise
    quota.settle(rt, charge, results)
    earliest = earliest_epoch(results)
    if earliest is not None:
        rt.timers_scheduled(earliest)
    return results


def stamp(ops: Sequence[TimerOp], trace: Carrier) -> None:
    """Give each schedule of `ops` the trace context to store with its timer."""
    for t in ops:
        if t.schedules:
            t.trace = trace


async def cancel(
    rt: Runtime, ident: Identity, queue: Any, timer_key: Any, txn: Any = None
) -> TimerResult:
    op: dict[str, Any] = {"op": "cancel", "queue": queue, "timerKey": timer_key}
    if txn is not None:
        op["txn"] = txn
    ops = validate([op], rt.settings)
    async with _pooled_write(rt, ident) as conn:
        return (await apply_ops(rt, conn, ident, ops))[0]


def _read_names(queue: Any, key: Any = None) -> None:
    if not isinstance(queue, str) or not queue:
        raise _bad("timers_queue_required", "queue is required (a non-empty string)")
    if key is not None and (not isinstance(key, str) or not key or not _storable(key)):
        raise _bad("timers_timer_key_required", "timerKey is required (a non-empty string)")


async def peek(rt: Runtime, ident: Identity, queue: Any, timer_key: Any) -> TimerPeek:
    _read_names(queue, timer_key)
    if not _storable(queue):  # no queue can be named so: a miss
        return {"found": False, "queue": queue, "timerKey": timer_key}
    async with _reading(rt) as read:
        return with_lag(await store.peek(read.conn, ident.tenant, queue, timer_key), read.lag_ms)


def _limit(value: Any) -> int | None:
    """Clamped in the procedure, never rejected; unparseable means the default."""
    if value is None or isinstance(value, bool):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return max(-(2**31), min(n, 2**31 - 1))  # the procedure's int parameter; it clamps the rest


async def list_timers(
    rt: Runtime, ident: Identity, queue: Any, *, after: Any = None, limit: Any = None
) -> TimersPage:
    _read_names(queue)
    if after is not None and (not isinstance(after, str) or not _storable(after)):
        raise _bad("timers_bad_after", "after must be a string")
    if not _storable(queue):
        return {"rows": [], "truncated": False, "nextAfter": None}
    async with _reading(rt) as read:
        page = await store.list_page(read.conn, ident.tenant, queue, after or None, _limit(limit))
    return with_lag(page, read.lag_ms)


MAX_PREFIX_BYTES = 128  # the reference's count-mode cap (timers-contract §2.9)


def check_prefix(prefix: Any) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise _bad("timers_count_prefix_required", "mode=count needs a non-empty prefix")
    if not _storable(prefix):
        raise _bad("timers_count_prefix_invalid", "prefix contains NUL or is not Unicode text")
    if len(prefix.encode()) > MAX_PREFIX_BYTES:
        raise _bad(
            "timers_count_prefix_too_long", f"prefix is over {MAX_PREFIX_BYTES} bytes (UTF-8)"
        )
    return prefix


async def count(rt: Runtime, ident: Identity, queue: Any, prefix: Any) -> TimerCount:
    _read_names(queue)
    p = check_prefix(prefix)
    if not _storable(queue):  # no queue can be named so (like peek and list: a miss)
        return {"count": 0}
    async with _reading(rt) as read:
        found = int(await store.count(read.conn, ident.tenant, queue, p))
    return with_lag(TimerCount(count=found), read.lag_ms)


async def read(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    *,
    mode: Any = None,
    prefix: Any = None,
    after: Any = None,
    limit: Any = None,
) -> TimersPage | TimerCount:
    """GET /api/v1/timers/:queue: list (mode absent, empty or "list") or count."""
    if mode in (None, "", "list"):
        return await list_timers(rt, ident, queue, after=after, limit=limit)
    if mode == "count":
        if after is not None or limit is not None:
            raise _bad("timers_count_page_parameters", "mode=count takes no after or limit")
        return await count(rt, ident, queue, prefix)
    raise _bad("timers_read_mode_unknown", f"unknown mode {mode!r} (list or count)")
