"""Ack by transaction id, dead-lettering and lease renewal (client-wire §6, §7).

An ack names (transactionId, partitionId, leaseId?, status); the txn is hashed here (SQL never
hashes) and resolved through queen.log_txns inside the leased span by queen.log_ack_v2
(migrations/005), which moves the cursor, charges retries and reports which poison messages to
dead-letter. A dead letter is a snapshot: the frame is read back from its segment here and
handed to queen.log_dlq_head_v2, a unit's dead letters in one transaction (a savepoint inside
the caller's); its last one moves the cursor over what the call settled and ends the lease.

`apply_acks` runs on the caller's connection, typically inside its transaction, so a transaction
bundle can apply acks with its pushes and roll everything back when an item fails
(`success: false` in its result).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import uuid
from typing import Any

import msgspec

from ..db import Q
from ..db.conn import Conn
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name
from .frames import txn_hashes, unpack_segment
from .pop import QUEUE_MODE

__all__ = ["ack", "apply_acks", "extend_lease", "normalize_status"]

_STATUS = {
    "completed": "ok",
    "success": "ok",
    "acked": "ok",
    "ok": "ok",
    "": "ok",
    "failed": "failed",
    "retry": "retry",
    "dlq": "dlq",
}
_ITEM_KEYS = {
    "transactionId",
    "partitionId",
    "status",
    "leaseId",
    "error",
    "consumerGroup",
    "type",
}  # "type": the transaction wire's op tag, tolerated


_UNSET = object()


@dataclasses.dataclass(slots=True)
class _Ack:
    index: int
    txn: str
    pid: uuid.UUID | None
    group: str
    lease: str
    status: str
    error: str | None


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def normalize_status(value: Any, i: int) -> str:
    if value is None or value is True:
        return "ok"
    if value is False:
        return "failed"
    if isinstance(value, str) and value.lower() in _STATUS:
        return _STATUS[value.lower()]
    raise _bad(
        "ack_bad_status", f"ack {i}: status must be completed, failed, retry or dlq (got {value!r})"
    )


def parse_acks(acks: Any, group: Any) -> list[_Ack]:
    if not isinstance(acks, list):
        raise _bad("ack_bad_body", "acknowledgments must be an array")
    default_group = (
        QUEUE_MODE if group is None else check_name(group, "consumerGroup", "ack_bad_group")
    )
    out = []
    pids: dict[str, Any] = {}  # a batch names few partitions: parse each id once
    for i, a in enumerate(acks):
        if not isinstance(a, dict):
            raise _bad("ack_bad_item", f"ack {i} is not an object")
        if not a.keys() <= _ITEM_KEYS:
            unknown = set(a) - _ITEM_KEYS
            raise _bad(
                "ack_unknown_field", f"ack {i} has unknown fields {sorted(unknown, key=str)}"
            )
        txn = a.get("transactionId")
        if not isinstance(txn, str) or not txn:
            raise _bad("ack_bad_txn", f"ack {i}: transactionId must be a non-empty string")
        raw_pid = a.get("partitionId")
        if not isinstance(raw_pid, str) or not raw_pid:
            raise _bad("ack_bad_partition", f"ack {i}: partitionId must be a non-empty string")
        pid = pids.get(raw_pid, _UNSET)
        if pid is _UNSET:
            try:
                pid = pids[raw_pid] = uuid.UUID(raw_pid)
            except ValueError:
                pid = pids[raw_pid] = None  # answered per item: no partition has that id
        lease = a.get("leaseId")
        if lease is not None and (not isinstance(lease, str) or "\x00" in lease):
            raise _bad("ack_bad_lease", f"ack {i}: leaseId must be a string without NUL")
        err = a.get("error")
        if err is not None and (not isinstance(err, str) or "\x00" in err):
            raise _bad("ack_bad_error", f"ack {i}: error must be a string (no NUL) or null")
        g = a.get("consumerGroup")
        g = (
            default_group
            if g is None
            else check_name(g, f"ack {i}: consumerGroup", "ack_bad_group")
        )
        out.append(_Ack(i, txn, pid, g, lease or "", normalize_status(a.get("status"), i), err))
    return out


def _result(
    a: _Ack,
    ok: bool,
    error: str | None,
    released: bool = False,
    dlq: bool = False,
    noop: bool = False,
) -> dict[str, Any]:
    return {
        "index": a.index,
        "transactionId": a.txn,
        "success": ok,
        "error": None if ok else error,
        "leaseReleased": released,
        "dlq": dlq,
        "noop": noop,
    }


async def apply_acks(
    rt: Runtime,
    conn: Conn,
    ident: Identity,
    acks: Any,
    group: Any = None,
    *,
    now: dt.datetime | None = None,
    wake: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Apply acks on `conn` inside the caller's transaction. Results are input-aligned
    (client-wire §6); an item with success false changed nothing. Queues where messages became
    available again are added to `wake`: call rt.pushed(ident.tenant, wake) after COMMIT."""
    items = parse_acks(acks, group)
    results: list[dict[str, Any] | None] = [None] * len(items)
    valid = []
    for a in items:
        if a.pid is None:
            results[a.index] = _result(a, False, "partition not found")
        else:
            valid.append(a)
    if valid:
        out = await conn.fetchval(
            Q.ack_apply,
            ident.tenant,
            [a.pid for a in valid],
            [a.group for a in valid],
            [a.lease for a in valid],
            txn_hashes([a.txn for a in valid]),
            [a.status for a in valid],
            [a.error for a in valid],
            now,
        )
        for unit in out["units"]:
            released = unit["released"]
            for k in unit["i"]:
                a = valid[k]
                results[a.index] = {
                    "index": a.index,
                    "transactionId": a.txn,
                    "success": True,
                    "error": None,
                    "leaseReleased": released,
                    "dlq": False,
                    "noop": False,
                }
        for v in out["exceptions"]:
            a = valid[v["i"]]
            r = results[a.index]
            if v["ok"] and r is None:  # a noop under a lease that is not the acker's
                results[a.index] = _result(
                    a, True, None, False, bool(v.get("dlq")), bool(v.get("noop"))
                )
            elif v["ok"]:
                r["noop"] = bool(v.get("noop"))
                r["dlq"] = bool(v.get("dlq"))
            else:
                results[a.index] = _result(a, False, v.get("error"))
        if out["dlq"]:
            await _dead_letters(conn, out["dlq"], valid, results, now)
        if wake is not None:
            wake.update(out["wake"])
    return results  # type: ignore[return-value]


def _snapshot(payload: bytes) -> str:
    """The JSON text the dead letter stores: the payload itself when it is JSON (an encryption
    envelope is), else {"_raw_b64": ...} as the timers' dead letters do (a timer payload may be
    any bytes)."""
    try:
        msgspec.json.decode(payload)
        return payload.decode()
    except (msgspec.DecodeError, UnicodeDecodeError):
        return msgspec.json.encode({"_raw_b64": base64.b64encode(payload).decode()}).decode()


async def _dead_letters(
    conn: Conn,
    dlq: list[dict[str, Any]],
    valid: list[_Ack],
    results: list[dict[str, Any] | None],
    now: dt.datetime | None,
) -> None:
    """File the dead letters of an ack, unit by unit, in order (a unit's last one settles and
    releases its lease). A unit's dead letters go in all or none: a lease lost under them
    leaves none filed, and its messages are delivered again."""
    units: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in dlq:
        units.setdefault((d["pid"], d["group"]), []).append(d)
    for entries in units.values():
        try:
            async with conn.transaction():
                for d in entries:
                    if not await _dead_letter(conn, d, now):
                        raise _LeaseLost
        except _LeaseLost:
            for d in entries:
                a = valid[d["i"]]
                results[a.index] = _result(a, False, "dead-lettering failed: lease lost")


class _LeaseLost(Exception):
    """Rolls a unit's dead letters back when its lease ran out under them."""


async def _dead_letter(conn: Conn, d: dict[str, Any], now: dt.datetime | None) -> bool:
    pid = uuid.UUID(d["pid"])
    off = d["off"]
    row = await conn.fetchrow(Q.ack_segment_at, pid, off)
    if row is None:  # retained away under a live lease: nothing to snapshot
        msg_id, txn, payload, created = None, None, None, None
    else:
        f = unpack_segment(row["blob"])[off - row["base_offset"]]
        # The snapshot keeps an encrypted payload encrypted (at rest stays at rest); the DLQ
        # listing decrypts it.
        msg_id, txn, created = f.id, f.txn, row["created_at"]
        payload = _snapshot(f.payload) if f.payload else None
    dlq_id = await conn.fetchval(
        Q.dlq_head,
        pid,
        d["group"],
        d["worker"],
        off,
        d["settle"],
        d["release"],
        msg_id,
        txn,
        payload,
        d["error"],
        created,
        now,
    )
    return dlq_id is not None


async def ack(
    rt: Runtime, ident: Identity, acks: Any, *, group: Any = None, now: dt.datetime | None = None
) -> list[dict[str, Any]]:
    wake: set[str] = set()
    async with rt.pool.acquire() as conn:
        # Autocommit: the ack itself is one statement. Dead letters are a second transaction;
        # the ack kept the lease for them, so in between nobody else can take those messages,
        # and if the lease ran out meanwhile queen.log_dlq_head_v2 writes nothing and the items
        # fail (the messages redeliver with their retry count intact).
        results = await apply_acks(rt, conn, ident, acks, group, now=now, wake=wake)
    if wake:
        rt.pushed(ident.tenant, wake)
    return results


async def extend_lease(
    rt: Runtime, ident: Identity, lease_id: Any, *, now: dt.datetime | None = None
) -> dict[str, Any]:
    if not isinstance(lease_id, str) or not lease_id or "\x00" in lease_id:
        raise _bad("lease_bad_id", "leaseId must be a non-empty string without NUL")
    async with rt.pool.acquire() as conn:
        r = await conn.fetchval(
            Q.renew_lease, ident.tenant, lease_id, rt.settings.pop_lease_seconds, now
        )
    ok = r["renewed"] > 0
    return {
        "leaseId": lease_id,
        "success": ok,
        "renewed": r["renewed"],
        "newExpiresAt": r["expiresAt"],
        "expiresAt": r["expiresAt"],
        "lease_expires_at": r["expiresAt"],
        "error": None if ok else "no live lease with this id",
    }
