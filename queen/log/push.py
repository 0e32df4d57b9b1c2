"""Push: validate, encrypt, pack one segment per partition, append in one transaction.

Dedup has two layers. Inside one request a repeated (queue, partition, txn) follows the first
occurrence and produces no frame. Against the log, queen.log_push_one_v1 probes the partition's
dedup window under the partition lock; a segment with duplicates writes nothing and reports
them, and is repacked here without them and appended again in the same transaction (the
partition is still locked by us, so the second attempt cannot meet a new duplicate).
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from typing import Any, Sequence

import msgspec
import uuid_utils

from ..db import Q
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name, payload_too_large
from .frames import Frame, pack_segment, txn_hashes, unpack_segment

__all__ = ["push", "PushItem", "append_segments"]

_ITEM_KEYS = {"queue", "partition", "payload", "data", "transactionId", "traceId"}
MAX_TXN_BYTES = 65535


@dataclasses.dataclass
class PushItem:
    index: int
    queue: str
    partition: str
    txn: str
    payload: bytes
    message_id: uuid.UUID = dataclasses.field(default_factory=lambda: uuid.UUID(bytes=uuid_utils.uuid7().bytes))
    encrypted: bool = False


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def parse_items(items: Any, max_payload: int, default_queue: str | None = None) -> list[PushItem]:
    if not isinstance(items, list):
        raise _bad("push_bad_body", "items must be an array")
    out = []
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise _bad("push_bad_item", f"item {i} is not an object")
        unknown = set(it) - _ITEM_KEYS
        if unknown:
            raise _bad("push_unknown_field",
                       f"item {i} has fields the broker does not accept: {sorted(unknown)}")
        queue = check_name(it.get("queue", default_queue), f"item {i}: queue", "push_bad_queue")
        part = it.get("partition")
        part = "Default" if part is None else check_name(part, f"item {i}: partition",
                                                          "push_bad_partition")
        txn = it.get("transactionId")
        if txn is not None and (not isinstance(txn, str) or not txn):
            raise _bad("push_bad_txn", f"item {i}: transactionId must be a non-empty string")
        if txn is not None and len(txn.encode()) > MAX_TXN_BYTES:
            raise _bad("push_bad_txn", f"item {i}: transactionId is over {MAX_TXN_BYTES} bytes")
        value = it["data"] if "data" in it else it.get("payload")
        payload = msgspec.json.encode(value)
        if len(payload) > max_payload:
            raise payload_too_large(len(payload), max_payload)
        pi = PushItem(index=i, queue=queue, partition=part, txn="", payload=payload)
        pi.txn = txn if txn is not None else str(pi.message_id)
        out.append(pi)
    return out


async def push(rt: Runtime, ident: Identity, items: Any) -> list[dict]:
    """Push a batch. Results are aligned with the input."""
    parsed = parse_items(items, rt.settings.max_payload_bytes)
    if not parsed:
        return []
    async with rt.pool.acquire() as conn:
        await encrypt_for_queues(rt, conn, ident, parsed)
        async with conn.transaction():
            results = await append_segments(rt, conn, ident, parsed)
    rt.pushed(ident.tenant, {p.queue for p in parsed if results[p.index]["status"] == "queued"})
    return results


async def encrypt_for_queues(rt: Runtime, conn, ident: Identity, items: Sequence[PushItem]) -> None:
    names = sorted({p.queue for p in items})
    rows = await conn.fetch(Q.queue_encryption, ident.tenant, names)
    encrypting = {r["name"] for r in rows if r["encryption_enabled"]}
    if not encrypting:
        return
    if rt.cipher is None:
        raise QueenError("encryption_misconfigured", "encryption_key_missing",
                         "queue has encryption enabled but QUEEN_ENCRYPTION_KEY is not set", 500)
    for p in items:
        if p.queue in encrypting:
            p.payload = rt.cipher.encrypt(p.payload)
            p.encrypted = True


async def append_segments(rt: Runtime, conn, ident: Identity,
                          items: Sequence[PushItem]) -> list[dict]:
    """Append `items` inside the caller's transaction; returns input-aligned results."""
    n = max(p.index for p in items) + 1
    results: list[dict | None] = [None] * n
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
    for _attempt in range(2):
        if not pending:
            break
        verdicts = await conn.fetchval(
            Q.push_segments, ident.tenant,
            [q for (q, _), _ in pending], [pt for (_, pt), _ in pending],
            [len(g) for _, g in pending],
            [h for _, g in pending for h in txn_hashes(p.txn for p in g)],
            [pack_segment([_frame(p, ident) for p in g], level) for _, g in pending])
        retry = []
        for (key, group), v in zip(pending, verdicts):
            if v["status"] == "queued":
                base = v["baseOffset"]
                for k, p in enumerate(group):
                    results[p.index] = _result(p, "queued", p.message_id, base + k,
                                               v["partitionId"])
                continue
            dup_at = {d["i"]: d["off"] for d in v["dups"]}
            keep = []
            for k, p in enumerate(group):
                if k in dup_at:
                    original = await _message_id_at(conn, v["partitionId"], dup_at[k])
                    results[p.index] = _result(p, "duplicate", original, dup_at[k],
                                               v["partitionId"])
                else:
                    keep.append(p)
            if keep:
                retry.append((key, keep))
        pending = retry
    if pending:  # cannot happen while we hold the partition locks; refuse rather than lose
        raise QueenError("push_error", "dedup_unstable", "duplicates kept appearing", 500)
    for p, lead in followers:
        r = results[lead.index]
        assert r is not None
        results[p.index] = {**r, "index": p.index, "status": "duplicate"}
    return [r for r in results if r is not None]


def _frame(p: PushItem, ident: Identity) -> Frame:
    return Frame(message_id=p.message_id.bytes, txn=p.txn, producer_sub=ident.subject,
                 encrypted=p.encrypted, payload=p.payload)


def _result(p: PushItem, status: str, message_id: uuid.UUID | None, offset: int,
            partition_id: str) -> dict:
    return {"index": p.index, "message_id": str(message_id) if message_id else None,
            "transaction_id": p.txn, "queueName": p.queue, "partition": p.partition,
            "partitionId": str(partition_id), "offset": offset, "status": status}


async def _message_id_at(conn, partition_id: str, offset: int) -> uuid.UUID:
    row = await conn.fetchrow(Q.segment_at, uuid.UUID(str(partition_id)), offset)
    if row is None:  # retained away since: the reference answers the zero uuid
        return uuid.UUID(int=0)
    return unpack_segment(row["blob"])[offset - row["base_offset"]].id


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
