"""Timer ops: validation before the database, then encryption and message ids.

The shape of an op is the Queen wire's (timers-contract §2.3, client-wire §10):
{op, queue, timerKey, partition?, delayMs, txn, payload (base64), payloadZstd?, encrypted?}.
Everything is checked here, in input order, first failure wins, before anything touches the
database; the stored procedure re-checks the same rules (one taxonomy, two guards), so a bad op
changes nothing on either path.

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
from collections.abc import AsyncIterator, Sequence
from typing import Any

import uuid_utils
from asyncpg.pgproto.pgproto import UUID as PgUUID

from ..db import faults
from ..db.pool import DB_ERRORS
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..settings import Settings
from ..validate import MAX_NAME_CHARS
from . import quota, store
from .batcher import ScheduleBatcher
from .classify import FailureClass, classify_exception
from .pack import PayloadError, decompress

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_TXN_BYTES",
    "SERVER_OWNED",
    "WIRE_MAX_OPS",
    "TimerOp",
    "db_error",
    "parse_body",
    "prepare",
    "validate",
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

MAX_TXN_BYTES = 65535  # the frame stores the txn length as a u16
# The primary key entry (tenant, queue, key) must fit a btree page third (2704 bytes); with a
# queue name of at most 255 characters (1020 bytes) a 1024-byte key always fits. Derived, not
# measured; the reference has no cap (an oversize key fails there as a database error).
MAX_KEY_BYTES = 1024
# Floor of a negative delayMs: 100 years back, far inside PostgreSQL's timestamp range (4713 BC).
MIN_DELAY_MS = -100 * 365.25 * 86400 * 1000.0
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
    delay_ms: float | None = None
    txn: str | None = None
    payload: bytes | None = None
    payload_zstd: bool = False
    encrypted: bool = False
    message_id: uuid.UUID | None = None

    @property
    def schedules(self) -> bool:
        return self.op != "cancel"


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("timers_bad_request", reason, detail, 400)


def parse_body(body: Any) -> list:
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


def _name(value: Any, what: str, required: str, bad: str) -> str:
    """Queue and partition names follow the log's rules (queen_timers.validate.check_name): a
    name the fire could never provision is refused now rather than poisoning the timer later."""
    if not isinstance(value, str) or not value:
        raise _bad(required, f"{what} is required (a non-empty string)")
    if len(value) > MAX_NAME_CHARS:
        raise _bad(bad, f"{what} is longer than {MAX_NAME_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _bad(bad, f"{what} contains a control character")
    if not _storable(value):
        raise _bad(bad, f"{what} is not Unicode text (a lone surrogate)")
    return value


def validate(
    ops: Any, settings: Settings, *, max_ops: int | None = None, horizon_s: int | None = None
) -> list[TimerOp]:
    """Pure shape checks, in input order; raises QueenError on the first failure."""
    if not isinstance(ops, list):
        raise _bad("timers_bad_body", "ops must be an array")
    limit = settings.timers_max_ops_per_call if max_ops is None else max_ops
    if len(ops) > limit:
        raise _bad("timers_too_many_ops", f"{len(ops)} ops in one call; the limit is {limit}")
    horizon_ms = 1000.0 * (settings.timers_max_horizon_s if horizon_s is None else horizon_s)
    max_payload = settings.timers_max_payload_bytes
    out: list[TimerOp] = []
    for i, raw in enumerate(ops):
        if not isinstance(raw, dict):
            raise _bad("timers_bad_op", f"op {i} is not an object")
        for k in raw:
            if isinstance(k, str) and k.startswith("_"):
                raise _bad("timers_server_owned_field", f"op {i}: field {k} is server-owned")
        for k in raw:
            if k in SERVER_OWNED:
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
        queue = _name(
            raw.get("queue"), f"op {i}: queue", "timers_queue_required", "timers_bad_queue"
        )
        key = raw.get("timerKey")
        if not isinstance(key, str) or not key:
            raise _bad("timers_timer_key_required", f"op {i}: timerKey is required")
        if not _storable(key) or len(key.encode()) > MAX_KEY_BYTES:
            raise _bad(
                "timers_bad_timer_key",
                f"op {i}: timerKey must be Unicode text of at most {MAX_KEY_BYTES} bytes "
                "(UTF-8), without NUL",
            )
        t = TimerOp(index=i, op=kind, queue=queue, timer_key=key)
        if "partition" in raw:
            t.partition = _name(
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
            out.append(t)
            continue

        delay = raw.get("delayMs")
        # An int of any size compares with the horizon exactly; converting it to a float first
        # overflows past 1e308, and a JSON body can spell such an int. Only a float can be NaN
        # or infinite.
        if (
            isinstance(delay, bool)
            or not isinstance(delay, (int, float))
            or (isinstance(delay, float) and not math.isfinite(delay))
        ):
            raise _bad(
                "timers_delay_required",
                f"op {i}: delayMs is required (a number of milliseconds from now)",
            )
        if delay > horizon_ms:
            raise QueenError(
                "timer_horizon_exceeded",
                "timers_horizon",
                f"op {i}: delayMs {delay} is beyond the horizon of {int(horizon_ms)} ms",
                403,
            )
        # <= 0 is legal and due at once; a delay further back than MIN_DELAY_MS would overflow
        # PostgreSQL's interval/timestamp, so it is moved up to that floor (still due at once).
        t.delay_ms = float(max(delay, MIN_DELAY_MS))
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
        if len(data) > max_payload:
            raise QueenError(
                "payload_too_large",
                "timers_payload_too_large",
                f"op {i}: payload is {len(data)} bytes; the limit is {max_payload}",
                413,
            )
        txn = raw.get("txn")
        if not isinstance(txn, str) or not txn:
            raise _bad("timers_txn_required", f"op {i}: txn is required (a non-empty string)")
        if not _storable(txn):
            raise _bad("timers_bad_txn", f"op {i}: txn must be Unicode text without NUL")
        if len(txn.encode()) > MAX_TXN_BYTES:
            raise _bad("timers_bad_txn", f"op {i}: txn is over {MAX_TXN_BYTES} bytes")
        for flag in ("payloadZstd", "encrypted"):
            if flag in raw and not isinstance(raw[flag], bool):
                raise _bad("timers_bad_flag", f"op {i}: {flag} must be a boolean")
        t.payload_zstd = bool(raw.get("payloadZstd", False))
        t.encrypted = bool(raw.get("encrypted", False))
        if t.payload_zstd and t.encrypted:
            raise _bad(
                "timers_zstd_encrypted_conflict",
                f"op {i}: a payload encrypted by the client is opaque to the broker, "
                "which must decompress payloadZstd at the fire; compress before "
                "encrypting and send it without payloadZstd",
            )
        if t.payload_zstd:
            try:
                decompress(data, max_payload)
            except PayloadError as exc:
                if "over" in str(exc):
                    raise QueenError(
                        "payload_too_large", "timers_payload_too_large", f"op {i}: {exc}", 413
                    ) from None
                raise _bad("timers_payload_not_zstd", f"op {i}: {exc}") from None
        t.payload = data
        t.txn = txn
        out.append(t)

    seen: set[tuple[str, str]] = set()
    for t in out:
        k = (t.queue, t.timer_key)
        if k in seen:
            raise _bad(
                "timers_duplicate_key",
                f"op {t.index}: (queue, timerKey) ({t.queue!r}, {t.timer_key!r}) appears "
                "more than once in one call",
            )
        seen.add(k)
    return out


async def prepare(
    rt: Runtime, conn, ident: Identity, ops: Sequence[TimerOp], encrypting: set[str] | None = None
) -> list[dict]:
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
    out = []
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
        if t.queue in encrypting:
            if t.encrypted:
                raise _bad(
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
        out.append(o)
    return out


def db_error(exc: BaseException) -> QueenError:
    """A database failure of a timer call, in the route taxonomy (timers-contract §2.6)."""
    code = getattr(exc, "sqlstate", None)
    msg = str(exc) or type(exc).__name__
    if code == "22023":
        return QueenError("timers_bad_request", msg, getattr(exc, "hint", None) or msg, 400)
    if code == "22001":
        return QueenError("payload_too_large", "payload_too_large", msg, 413)
    if code == "57014":
        return QueenError("timers_unavailable", "timers_timeout", msg, 503, retry_after=1)
    cls = classify_exception(exc)
    if cls is FailureClass.TRANSIENT:
        return QueenError(
            "timers_unavailable", msg if code else "connection", msg, 503, retry_after=1
        )
    if cls is FailureClass.CONFIG:
        return QueenError("timers_misconfigured", code, msg, 500)
    return QueenError("timers_error", code, msg, 500)


@contextlib.asynccontextmanager
async def _pooled(rt: Runtime) -> AsyncIterator[Any]:
    """A pooled connection whose database errors reach the caller as the timers' QueenError
    (db_error): the one mapping every pooled timers call goes through."""
    try:
        async with rt.pool.acquire() as conn:
            yield conn
    except DB_ERRORS as exc:
        raise db_error(exc) from exc


# -- the service calls (queen_timers.service.Queen delegates here) ---------------------------------


def earliest_epoch(results: Sequence[dict]) -> float | None:
    due = [
        dt.datetime.fromisoformat(r["deliverAt"]).timestamp()
        for r in results
        if r.get("status") in ("scheduled", "rescheduled")
    ]
    return min(due) if due else None


async def apply_ops(rt: Runtime, conn, ident: Identity, ops: Sequence[TimerOp]) -> list[dict]:
    """Encrypt, mint and apply on `conn` (inside the caller's transaction when it has one).
    Database errors are mapped to the timer taxonomy."""
    rendered = await prepare(rt, conn, ident, ops)
    try:
        results = await store.apply(conn, rendered, ident.tenant, ident.subject, None)
    except DB_ERRORS as exc:
        raise db_error(exc) from exc
    return _one_per_op(results, ops)


def _one_per_op(results: Any, ops: Sequence[TimerOp]) -> list[dict]:
    if not isinstance(results, list) or len(results) != len(ops):
        raise QueenError(
            "timers_error",
            "timers_result_unreadable",
            "the timer procedure answered something other than one result per op",
            500,
        )
    return results


def schedule_batcher(rt: Runtime) -> ScheduleBatcher:
    """The broker's schedule batcher (queen_timers/timers/batcher.py): the service builds one
    at start, and every schedule outside a caller's transaction goes through it."""

    async def run(ident: Identity, ops: Sequence[TimerOp]) -> list[dict]:
        async with _pooled(rt) as conn:
            if faults.hook is not None:
                await faults.hook("timers.schedule", conn)
            return await _apply_checked(rt, conn, ident, ops)

    s = rt.settings
    return ScheduleBatcher(
        run, inflight=s.timers_schedule_inflight, max_ops=s.timers_schedule_batch_ops
    )


async def _apply_checked(rt: Runtime, conn, ident: Identity, ops: Sequence[TimerOp]) -> list[dict]:
    """Autocommit apply in one round trip: render assuming no destination queue encrypts, and
    let the procedure check that in the statement that writes. If some queue does, nothing was
    written: render again encrypting for those queues, and apply (a second round trip only
    for schedules to encrypting queues)."""
    encrypting: set[str] = set()
    while True:
        rendered = await prepare(rt, conn, ident, ops, encrypting)
        plain = sorted({t.queue for t in ops if t.schedules} - encrypting)
        results = await store.apply_checked(
            conn, rendered, ident.tenant, ident.subject, None, plain
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
}


def rejected_reason(e: QueenError) -> str:
    """The `reason` label of queen_timers_schedule_rejected_total for a refusal."""
    return _REJECTED.get(
        e.code, "shape" if e.status == 400 else "unavailable" if e.status == 503 else "error"
    )


async def apply(rt: Runtime, batcher: ScheduleBatcher, ident: Identity, body: Any) -> list[dict]:
    """The batch call. Every refusal counts once in queen_timers_schedule_rejected_total."""
    try:
        return await _apply(rt, batcher, ident, body)
    except QueenError as e:
        if rt.metrics is not None:
            rt.metrics.schedule_rejected.labels(rejected_reason(e)).inc()
        raise


async def _apply(rt: Runtime, batcher: ScheduleBatcher, ident: Identity, body: Any) -> list[dict]:
    ops = validate(parse_body(body), rt.settings)
    if not ops:
        return []
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


async def cancel(rt: Runtime, ident: Identity, queue: Any, timer_key: Any, txn: Any = None) -> dict:
    op: dict[str, Any] = {"op": "cancel", "queue": queue, "timerKey": timer_key}
    if txn is not None:
        op["txn"] = txn
    ops = validate([op], rt.settings)
    async with _pooled(rt) as conn:
        return (await apply_ops(rt, conn, ident, ops))[0]


def _read_names(queue: Any, key: Any = None) -> None:
    if not isinstance(queue, str) or not queue:
        raise _bad("timers_queue_required", "queue is required (a non-empty string)")
    if key is not None and (not isinstance(key, str) or not key or not _storable(key)):
        raise _bad("timers_timer_key_required", "timerKey is required (a non-empty string)")


async def peek(rt: Runtime, ident: Identity, queue: Any, timer_key: Any) -> dict:
    _read_names(queue, timer_key)
    if not _storable(queue):  # no queue can be named so: a miss
        return {"found": False, "queue": queue, "timerKey": timer_key}
    async with _pooled(rt) as conn:
        return await store.peek(conn, ident.tenant, queue, timer_key)


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
) -> dict:
    _read_names(queue)
    if after is not None and (not isinstance(after, str) or not _storable(after)):
        raise _bad("timers_bad_after", "after must be a string")
    if not _storable(queue):
        return {"rows": [], "truncated": False, "nextAfter": None}
    async with _pooled(rt) as conn:
        return await store.list_page(conn, ident.tenant, queue, after or None, _limit(limit))


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


async def count(rt: Runtime, ident: Identity, queue: Any, prefix: Any) -> dict:
    _read_names(queue)
    p = check_prefix(prefix)
    if not _storable(queue):  # no queue can be named so (like peek and list: a miss)
        return {"count": 0}
    async with _pooled(rt) as conn:
        return {"count": int(await store.count(conn, ident.tenant, queue, p))}


async def read(
    rt: Runtime,
    ident: Identity,
    queue: Any,
    *,
    mode: Any = None,
    prefix: Any = None,
    after: Any = None,
    limit: Any = None,
) -> dict:
    """GET /api/v1/timers/:queue: list (mode absent, empty or "list") or count."""
    if mode in (None, "", "list"):
        return await list_timers(rt, ident, queue, after=after, limit=limit)
    if mode == "count":
        if after is not None or limit is not None:
            raise _bad("timers_count_page_parameters", "mode=count takes no after or limit")
        return await count(rt, ident, queue, prefix)
    raise _bad("timers_read_mode_unknown", f"unknown mode {mode!r} (list or count)")
