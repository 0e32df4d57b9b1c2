"""The transaction wire (client-wire §8, timers-contract §3): pushes, acks and a top-level
`timers` rider committed in ONE PostgreSQL transaction, all or nothing.

Order inside the transaction is the product's lock order: the timer rider first
(queen.log_timers), then the pushes (provisioning queen.queues, pre-locking partitions in
ascending id), then the acks (queen.log_consumers). A rider applied at the end instead would
take a timer lock after partition locks and could close a cycle with the fire, which goes
timers -> queues -> partitions.

Results are one flat array: [0, N) the operations in order (one slot per push item, one per
ack), then one slot per timer op with `index` (flat), `opIndex` (its place in `timers`) and
`type: "timer"`. A push never changes its index because a rider is present.

`requiredLeases` names leases the bundle depends on: each must still be held when the bundle
commits, else the whole bundle fails (200, success false, reason `lease_lost`, `leaseId`) and
nothing of it is applied. "Held" is what an ack and a renewal accept: the lease still owns its
partitions, even past its expiry while no pop has taken them over. The check runs inside the
transaction, after the pushes and before the acks (the lock order: partitions, then consumer
rows), and locks the lease's consumer rows, so no pop can take the lease over between the check
and the commit. When the list names exactly one lease, an ack without a leaseId of its own is
fenced with it (as the reference broker does), instead of being applied whoever holds its
partition.

Refusals before the database raise QueenError with a 4xx status and the wire's failure body
({transactionId, success: false, reason, error, results: []}) in `extra`; verdicts reached
inside the transaction (a duplicate push, a rejected ack, a stored procedure refusing a timer
op) roll the whole bundle back and are answered at 200 with success false. A paused schedule
is 403 here, not 503: the wire is a hot path and a permanent status avoids retry storms.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import uuid_utils

from .db import Conn, Q, faults
from .db.errors import DB_ERRORS
from .errors import QueenError, refusal
from .identity import Identity
from .log.ack import apply_acks, parse_acks
from .log.push import PushItem, append_segments, encrypt_for_queues, parse_items
from .runtime import Runtime
from .sqlapi import limits
from .timers import locks as timer_locks
from .timers import ops as timer_ops
from .timers import quota as timer_quota
from .timers import store as timer_store
from .tracing import Carrier
from .wire.timers import TimerResult

__all__ = ["transaction"]


def _txid() -> str:
    return str(uuid.UUID(bytes=uuid_utils.uuid7().bytes))


def _refuse(txid: str, reason: str, text: str, status: int) -> QueenError:
    return QueenError(
        reason, reason, text, status, extra={"transactionId": txid, "success": False, "results": []}
    )


def _from(txid: str, e: QueenError) -> QueenError:
    """A shape error of a push, ack or timer op, in the wire's closed reason taxonomy."""
    if e.code in ("timer_horizon_exceeded", "payload_too_large", "timers_disabled"):
        reason = e.code
    else:
        reason = "bad_request"
    return _refuse(txid, reason, f"{e.reason}: {e.detail}", e.status)


class _Rollback(Exception):
    def __init__(self, reason: str, text: str, **extra: Any):
        super().__init__(text)
        self.reason = reason
        self.text = text
        self.extra = extra


# A bundle names the leases of its acks, each once: one consumer holds a handful. Each entry
# costs a scan of the tenant's consumer rows (the renewal has no index on the lease id), so the
# list is bounded; 256 (the wire's op limit) is a choice, not measured.
MAX_REQUIRED_LEASES = 256


def _required_leases(txid: str, raw: Any) -> list[str]:
    """The distinct lease ids of `requiredLeases` (null or absent: none), sorted so that two
    bundles naming the same leases lock their rows in the same order."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _refuse(txid, "bad_request", "requiredLeases must be an array of lease ids", 400)
    if len(raw) > MAX_REQUIRED_LEASES:
        raise _refuse(
            txid,
            "bad_request",
            f"requiredLeases names {len(raw)} leases; at most {MAX_REQUIRED_LEASES}",
            400,
        )
    for i, lease in enumerate(raw):
        if not isinstance(lease, str) or not lease or "\x00" in lease:
            raise _refuse(
                txid,
                "bad_request",
                f"requiredLeases[{i}] must be a leaseId: a non-empty string without NUL",
                400,
            )
    return sorted(set(raw))


async def _check_leases(conn: Conn, ident: Identity, leases: list[str]) -> None:
    # The renewal procedure with 0 seconds extends a lease to at least now(): a live lease
    # keeps its expiry, a lapsed one moves to now() and so stays lapsed, and either way its
    # consumer rows stay locked until the commit. It answers how many partitions the lease
    # holds for this tenant. (A read-only "lock and count" procedure would say it more plainly;
    # this one already exists.)
    for lease in leases:
        held = await conn.fetchval(Q.renew_lease, ident.tenant, lease, 0, None)
        if held["renewed"] == 0:
            raise _Rollback(
                "lease_lost",
                f"required lease {lease!r} is no longer held: it "
                "expired and another consumer took it over, it was released, or "
                "it never existed",
                leaseId=lease,
            )


async def transaction(
    rt: Runtime, ident: Identity, body: Any, trace: Carrier | None = None
) -> dict[str, Any]:
    """`trace`: the W3C context the rider's schedules store (queen_timers/tracing.py)."""
    txid = _txid()
    if not isinstance(body, dict):
        raise _refuse(txid, "bad_request", "the body must be a JSON object", 400)

    # 1. riders: top-level arrays, null = absent
    if body.get("kv") is not None:
        raise _refuse(
            txid, "bad_request", "this broker has no KV store: the kv rider is not supported", 400
        )
    timers = body.get("timers")
    if timers is not None and not isinstance(timers, list):
        raise _refuse(txid, "bad_request", "timers must be an array (a top-level rider)", 400)
    operations = body.get("operations")
    if operations is None:
        if timers is None:
            raise _refuse(txid, "bad_request", "operations is required (or a timers rider)", 400)
        operations = []
    if not isinstance(operations, list):
        raise _refuse(txid, "bad_request", "operations must be an array", 400)
    if not operations and not timers:
        raise _refuse(txid, "bad_request", "the transaction is empty", 400)
    leases = _required_leases(txid, body.get("requiredLeases"))

    # 2. the schedule kill switch gates first (cancel-only riders are never gated)
    if (
        timers
        and not rt.switches.timers_schedule_enabled
        and any(not (isinstance(o, dict) and o.get("op") == "cancel") for o in timers)
    ):
        raise _refuse(
            txid, "timers_disabled", "scheduling timers is paused by an operator (kill switch)", 403
        )

    # 3. shapes, before the database
    try:
        tops = await timer_ops.validate_in_order(rt, timers or [], max_ops=timer_ops.WIRE_MAX_OPS)
    except QueenError as e:
        raise _from(txid, e) from None
    if trace is not None:
        timer_ops.stamp(tops, trace)
    items: list[PushItem] = []
    acks: list[tuple[int, dict[str, Any]]] = []
    flat = 0
    for i, op in enumerate(operations):
        if not isinstance(op, dict):
            raise _refuse(txid, "bad_request", f"operation {i} is not an object", 400)
        kind = op.get("type")
        if kind in ("kv", "timer", "timers"):
            raise _refuse(
                txid,
                "bad_request",
                f"operation {i}: {kind} ops are not operations; "
                "send them in the top-level arrays `kv` / `timers`",
                400,
            )
        if kind == "push":
            try:
                parsed = parse_items(
                    op.get("items"), rt.settings.max_payload_bytes, default_queue=op.get("queue")
                )
            except QueenError as e:
                raise _from(txid, e) from None
            for p in parsed:
                p.index = flat
                flat += 1
            items.extend(parsed)
        elif kind == "ack":
            if len(leases) == 1 and not op.get("leaseId"):
                op = {**op, "leaseId": leases[0]}  # lent: fenced by the bundle's one lease
            acks.append((flat, op))
            flat += 1
        else:
            raise _refuse(txid, "bad_request", f"operation {i}: type must be push or ack", 400)
    if acks:
        try:
            parse_acks([a for _, a in acks], None)
        except QueenError as e:
            raise _from(txid, e) from None

    # 4. the tenant's limits (queen_timers/quotas.py), then ONE transaction
    try:
        charge = await timer_quota.admit(rt, ident, tops)
    except QueenError as e:
        e.extra = {"transactionId": txid, "success": False, "results": []}
        raise
    try:
        answer = await _commit(rt, ident, txid, tops, items, acks, leases, flat)
    except BaseException as exc:
        timer_quota.failed(rt, charge, exc)
        raise
    if answer["success"]:
        timer_quota.settle(rt, charge, [r for r in answer["results"] if r["type"] == "timer"])
    else:
        timer_quota.refused(rt, charge, answer)
    return answer


async def _commit(
    rt: Runtime,
    ident: Identity,
    txid: str,
    tops: Sequence[timer_ops.TimerOp],
    items: list[PushItem],
    acks: list[tuple[int, dict[str, Any]]],
    leases: list[str],
    flat: int,
) -> dict[str, Any]:
    results: list[dict[str, Any] | None] = [None] * flat
    wake: set[str] = set()
    # timer ops can meet a tenant's own locks: within its share of the pool (timers/locks.py)
    share = (
        rt.tenant_share.hold(ident.tenant, timer_locks.share_cap(rt.settings))
        if tops
        else contextlib.nullcontext()
    )
    try:
        async with share, rt.pool.acquire() as conn:
            # reads of queen.queues (encryption flags) stay outside the transaction
            if items:
                await encrypt_for_queues(rt, conn, ident, items)
            try:
                rendered = await timer_ops.prepare(rt, conn, ident, tops) if tops else []
            except QueenError as e:
                raise _from(txid, e) from None
            try:
                async with conn.transaction():
                    timer_results: list[TimerResult] = []
                    if rendered:
                        try:
                            timer_results = await timer_store.apply(
                                conn,
                                rendered,
                                ident.tenant,
                                ident.subject,
                                None,
                                limits(rt.settings),
                                rt.settings.timers_lock_wait_ms,
                            )
                        except asyncpg.PostgresError as exc:
                            # a value rule, as the timers route answers it: nothing was written
                            refused = refusal(exc.sqlstate, exc.message)
                            if refused is not None:
                                raise _from(txid, refused) from None
                            if exc.sqlstate == "22023":
                                raise _Rollback("bad_request", str(exc)) from exc
                            raise
                        if len(timer_results) != len(tops):
                            raise _Rollback(
                                "misaligned",
                                "the timer step answered "
                                f"{len(timer_results)} results for {len(tops)} ops",
                            )
                    if faults.hook is not None:
                        await faults.hook("transaction.timers_applied", conn)
                    if items:
                        for r in await append_segments(rt, conn, ident, items):
                            if r["status"] != "queued":
                                raise _Rollback(
                                    "duplicate",
                                    f"push item {r['index']}: "
                                    f"transactionId {r['transaction_id']!r} is "
                                    "already in the queue",
                                )
                            results[r["index"]] = {
                                "index": r["index"],
                                "type": "push",
                                "success": True,
                                "status": r["status"],
                                "transactionId": r["transaction_id"],
                                "messageId": r["message_id"],
                                "queueName": r["queueName"],
                                "partition": r["partition"],
                                "partitionId": r["partitionId"],
                                "offset": r["offset"],
                            }
                    if leases:
                        await _check_leases(conn, ident, leases)
                    if acks:
                        verdicts = await apply_acks(
                            rt, conn, ident, [a for _, a in acks], None, wake=wake
                        )
                        for (at, _), v in zip(acks, verdicts):
                            if not v["success"]:
                                raise _Rollback(
                                    "ack_rejected", f"ack at index {at}: {v.get('error')}"
                                )
                            results[at] = {**v, "index": at, "type": "ack"}
            except _Rollback as rb:
                return {
                    "transactionId": txid,
                    "success": False,
                    "reason": rb.reason,
                    "error": rb.text,
                    "results": [],
                    **rb.extra,
                }
    except QueenError:
        raise
    except DB_ERRORS as exc:
        mapped = timer_ops.db_error(exc)
        if mapped.status == 503:
            mapped.extra = {"transactionId": txid, "success": False, "results": []}
            raise mapped from exc
        return {
            "transactionId": txid,
            "success": False,
            "reason": "db_error",
            "error": str(exc),
            "results": [],
        }

    if any(r is None for r in results):
        return {
            "transactionId": txid,
            "success": False,
            "reason": "misaligned",
            "error": "a result slot was left unfilled (the bundle committed)",
            "results": [],
        }
    if items:
        wake.update(p.queue for p in items)
    if wake:
        rt.pushed(ident.tenant, wake)
    earliest = timer_ops.earliest_epoch(timer_results)
    if earliest is not None:
        rt.timers_scheduled(earliest)
    out = [r for r in results if r is not None]
    for i, timer in enumerate(timer_results):
        out.append({**timer, "index": flat + i, "opIndex": i, "type": "timer"})
    return {"transactionId": txid, "success": True, "results": out}
