"""Push: validate, encrypt, pack one segment per partition, append in one transaction.

Dedup has two layers. Inside one request a repeated (queue, partition, txn) follows the first
occurrence and produces no frame. Against the log, queen.log_push_one_v1 probes the partition's
dedup window under the partition lock; a segment with duplicates writes nothing and reports
them, and is repacked here without them and appended again.

An ordinary push runs in autocommit: one statement (queen.log_push_checked_v1) checks the
queues' encryption flags and appends every segment atomically, a single round trip. A segment
that came back with duplicates is repacked and appended by a further statement, so a request is
atomic per round, not across rounds: if that later round fails, the client sees an error for a
request part of which is committed, exactly as after a lost answer, and its retry relies on its
transactionIds (the official client always sends them).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec
import uuid_utils
from asyncpg.pgproto.pgproto import UUID as PgUUID

from ..db import Q, faults
from ..db.conn import Conn
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name, payload_too_large
from .frames import Frame, pack_segment, txn_hashes, unpack_segment

__all__ = ["PushItem", "append_segments", "push"]

_ITEM_KEYS = {"queue", "partition", "payload", "data", "transactionId", "traceId"}
MAX_TXN_BYTES = 65535


def _new_message_id() -> uuid.UUID:
    # asyncpg's UUID, built in C: see frames.txn_hash.
    return PgUUID(uuid_utils.uuid7().bytes)


@dataclasses.dataclass(slots=True)
class PushItem:
    index: int
    queue: str
    partition: str
    txn: str
    payload: bytes
    message_id: uuid.UUID = dataclasses.field(default_factory=_new_message_id)
    encrypted: bool = False


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def parse_items(items: Any, max_payload: int, default_queue: str | None = None) -> list[PushItem]:
    if not isinstance(items, list):
        raise _bad("push_bad_body", "items must be an array")
    out = []
    # A batch names few distinct queues/partitions: validate each name once per call.
    queues_ok: set[str] = set()
    parts_ok: set[str] = {"Default"}
    encode = msgspec.json.encode
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise _bad("push_bad_item", f"item {i} is not an object")
        if not it.keys() <= _ITEM_KEYS:
            unknown = set(it) - _ITEM_KEYS
            raise _bad(
                "push_unknown_field",
                f"item {i} has fields the broker does not accept: {sorted(unknown, key=str)}",
            )
        queue = it.get("queue", default_queue)
        if queue.__class__ is not str or queue not in queues_ok:  # a list is unhashable
            queue = check_name(queue, f"item {i}: queue", "push_bad_queue")
            queues_ok.add(queue)
        part = it.get("partition")
        if part is None:
            part = "Default"
        elif part.__class__ is not str or part not in parts_ok:
            part = check_name(part, f"item {i}: partition", "push_bad_partition")
            parts_ok.add(part)
        txn = it.get("transactionId")
        if txn is not None and (not isinstance(txn, str) or not txn):
            raise _bad("push_bad_txn", f"item {i}: transactionId must be a non-empty string")
        if txn is not None and len(txn) * 4 > MAX_TXN_BYTES and len(txn.encode()) > MAX_TXN_BYTES:
            raise _bad("push_bad_txn", f"item {i}: transactionId is over {MAX_TXN_BYTES} bytes")
        payload = encode(it["data"] if "data" in it else it.get("payload"))
        if len(payload) > max_payload:
            raise payload_too_large(len(payload), max_payload)
        mid = _new_message_id()
        out.append(PushItem(i, queue, part, txn if txn is not None else str(mid), payload, mid))
    return out


async def push(rt: Runtime, ident: Identity, items: Any) -> list[dict[str, Any]]:
    """Push a batch. Results are aligned with the input."""
    parsed = parse_items(items, rt.settings.max_payload_bytes)
    if not parsed:
        return []
    async with rt.pool.acquire() as conn:
        if faults.hook is not None:
            await faults.hook("log.push", conn)
        # Autocommit: each append is one statement (one transaction) that also checks the
        # queues' encryption flags, so the common push is a single round trip.
        results = await append_segments(rt, conn, ident, parsed, check_encryption=True)
    rt.pushed(ident.tenant, {p.queue for p in parsed if results[p.index]["status"] == "queued"})
    return results


def _encrypt(rt: Runtime, items: Sequence[PushItem], encrypting: set[str]) -> None:
    if rt.cipher is None:
        raise QueenError(
            "encryption_misconfigured",
            "encryption_key_missing",
            "queue has encryption enabled but QUEEN_ENCRYPTION_KEY is not set",
            500,
        )
    for p in items:
        if p.queue in encrypting and not p.encrypted:
            p.payload = rt.cipher.encrypt(p.payload)
            p.encrypted = True


async def encrypt_for_queues(
    rt: Runtime, conn: Conn, ident: Identity, items: Sequence[PushItem]
) -> None:
    names = sorted({p.queue for p in items})
    rows = await conn.fetch(Q.queue_encryption, ident.tenant, names)
    encrypting = {r["name"] for r in rows if r["encryption_enabled"]}
    if encrypting:
        _encrypt(rt, items, encrypting)


async def append_segments(
    rt: Runtime,
    conn: Conn,
    ident: Identity,
    items: Sequence[PushItem],
    *,
    check_encryption: bool = False,
) -> list[dict[str, Any]]:
    """Append `items` (inside the caller's transaction, or in autocommit); returns
    input-aligned results. With check_encryption, plaintext items of queues that have
    encryption on are encrypted on the database's word (otherwise the caller ran
    encrypt_for_queues)."""
    n = max(p.index for p in items) + 1
    results: list[dict[str, Any] | None] = [None] * n
    leaders: dict[tuple[str, str, str], PushItem] = {}
    groups: dict[tuple[str, str], list[PushItem]] = {}
    followers: list[tuple[PushItem, PushItem]] = []
    for p in items:
        key = (p.queue, p.partition, p.txn)
        lead = leaders.get(key)
        if lead is not None:
            followers.append((p, lead))
            continue
        leaders[key] = p
        groups.setdefault((p.queue, p.partition), []).append(p)

    pending = list(groups.items())
    level = rt.settings.zstd_level
    plain = check_encryption
    subject = ident.subject
    # Every round either appends a segment or removes at least one duplicate frame from it,
    # so the loop ends. Under a caller's transaction the partitions stay locked between rounds
    # and a second round cannot meet a new duplicate; in autocommit a concurrent push of the
    # same txn can, and is then reported as the duplicate it is.
    while pending:
        args = (
            ident.tenant,
            [q for (q, _), _ in pending],
            [pt for (_, pt), _ in pending],
            [len(g) for _, g in pending],
            [h for _, g in pending for h in txn_hashes([p.txn for p in g])],
            [
                pack_segment(
                    [Frame(p.message_id.bytes, p.txn, subject, p.encrypted, p.payload) for p in g],
                    level,
                )
                for _, g in pending
            ],
        )
        if check_encryption:
            verdicts = await conn.fetchval(Q.push_segments_checked, *args, plain)
            if isinstance(verdicts, dict):  # {"encrypt": [...]}: nothing was written
                _encrypt(rt, items, set(verdicts["encrypt"]))
                plain = False
                continue
        else:
            verdicts = await conn.fetchval(Q.push_segments, *args)
        retry = []
        for (partition_key, group), v in zip(pending, verdicts):
            pid = str(v["partitionId"])
            if v["status"] == "queued":
                off = v["baseOffset"]
                for p in group:
                    results[p.index] = {
                        "index": p.index,
                        "message_id": str(p.message_id),
                        "transaction_id": p.txn,
                        "queueName": p.queue,
                        "partition": p.partition,
                        "partitionId": pid,
                        "offset": off,
                        "status": "queued",
                    }
                    off += 1
                continue
            dup_at = {d["i"]: d["off"] for d in v["dups"]}
            keep = []
            for k, p in enumerate(group):
                if k in dup_at:
                    original = await _message_id_at(conn, pid, dup_at[k])
                    results[p.index] = _result(p, "duplicate", original, dup_at[k], pid)
                else:
                    keep.append(p)
            if keep:
                retry.append((partition_key, keep))
        pending = retry
    for p, lead in followers:
        r = results[lead.index]
        assert r is not None
        results[p.index] = {**r, "index": p.index, "status": "duplicate"}
    return [r for r in results if r is not None]


def _frame(p: PushItem, ident: Identity) -> Frame:
    return Frame(
        message_id=p.message_id.bytes,
        txn=p.txn,
        producer_sub=ident.subject,
        encrypted=p.encrypted,
        payload=p.payload,
    )


def _result(
    p: PushItem, status: str, message_id: uuid.UUID | None, offset: int, partition_id: str
) -> dict[str, Any]:
    return {
        "index": p.index,
        "message_id": str(message_id) if message_id else None,
        "transaction_id": p.txn,
        "queueName": p.queue,
        "partition": p.partition,
        "partitionId": str(partition_id),
        "offset": offset,
        "status": status,
    }


async def _message_id_at(conn: Conn, partition_id: str, offset: int) -> uuid.UUID:
    row = await conn.fetchrow(Q.segment_at, uuid.UUID(str(partition_id)), offset)
    if row is None:  # retained away: the reference answers the zero uuid
        return uuid.UUID(int=0)
    base: int = row["base_offset"]
    return unpack_segment(row["blob"])[offset - base].id
