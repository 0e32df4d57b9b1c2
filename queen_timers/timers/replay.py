"""Dead letters back to work, or away: replay (push to the queue, or schedule again) and delete.

An item names dead letters by (partitionId, transactionId), as the listing shows them; every
dead letter of the caller's tenant matching the pair is acted on (one message dead-lettered by
two consumer groups is two rows). Another tenant's partition matches nothing: `absent`.

A replay is idempotent without a transaction spanning the two steps: the new message's txn is
`replay:<dead letter id>`, so a replay that pushed (or scheduled) and lost its answer before
the dead letter was deleted is retried into the log's dedup (push) or the fire's txn check
(schedule), never into a second message. The dead letter is deleted after the push or schedule
succeeded. A push makes the message visible to every consumer group of the queue.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ..db import Q
from ..errors import QueenError
from ..identity import Identity
from ..log import dlq as log_dlq
from ..log import push as log_push
from ..runtime import Runtime
from .bulk import pooled

__all__ = ["MAX_ITEMS", "delete", "replay"]

# Dead-letter items per call: one page of the console's listing at its largest
# (QUEEN_DLQ_MAX_LIMIT's default). A bound, not measured.
MAX_ITEMS = 1000
_ITEM_KEYS = {"transactionId", "partitionId"}
_MODES = ("push", "schedule")

Schedule = Callable[[Identity, list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def parse_items(items: Any) -> tuple[list[uuid.UUID], list[str]]:
    if not isinstance(items, list) or not items:
        raise _bad("dlq_items_required", "items must be a non-empty array")
    if len(items) > MAX_ITEMS:
        raise _bad("dlq_too_many_items", f"at most {MAX_ITEMS} items per call")
    pids, txns = [], []
    for i, it in enumerate(items):
        if not isinstance(it, dict) or set(it) != _ITEM_KEYS:
            raise _bad(
                "dlq_bad_item", f"item {i} must be {{transactionId, partitionId}} and nothing else"
            )
        txn, pid = it["transactionId"], it["partitionId"]
        if not isinstance(txn, str) or not txn or "\x00" in txn:
            raise _bad("dlq_bad_item", f"item {i}: transactionId must be a non-empty string")
        try:
            pids.append(uuid.UUID(pid) if isinstance(pid, str) else _no_uuid())
        except ValueError:
            raise _bad("dlq_bad_item", f"item {i}: partitionId must be a UUID") from None
        txns.append(txn)
    return pids, txns


def _no_uuid() -> uuid.UUID:
    raise ValueError("not a string")


def _echo(i: int, pid: uuid.UUID, txn: str) -> dict[str, Any]:
    return {"index": i, "partitionId": str(pid), "transactionId": txn}


async def delete(rt: Runtime, ident: Identity, items: Any) -> dict[str, Any]:
    pids, txns = parse_items(items)
    async with pooled(rt) as conn:
        rows = await conn.fetch(Q.console_dlq_delete, ident.tenant, pids, txns)
    out = []
    for r in rows:
        i = r["ord"] - 1
        n = int(r["deleted"])
        out.append(
            {**_echo(i, pids[i], txns[i]), "status": "deleted" if n else "absent", "count": n}
        )
    return {"results": out}


def _b64_payload(payload: Any) -> str:
    """A timer payload (base64) from a dead letter's JSON: the raw bytes a non-JSON timer
    payload was kept as, else the JSON text."""
    if isinstance(payload, dict) and set(payload) == {"_raw_b64"}:
        return str(payload["_raw_b64"])
    return base64.b64encode(msgspec.json.encode(payload)).decode()


async def replay(
    rt: Runtime,
    ident: Identity,
    items: Any,
    mode: Any,
    delay_ms: Any,
    schedule: Schedule,
) -> dict[str, Any]:
    """`schedule` applies timer ops for the caller (the service's timers_apply), so a replay
    as a timer goes through the same validation, encryption, kill switch and wake-up."""
    if mode not in _MODES:
        raise _bad("dlq_bad_mode", f"mode must be push or schedule; got {mode!r}")
    if mode == "push" and delay_ms is not None:
        raise _bad("dlq_bad_delay", "delayMs goes with mode schedule only")
    if delay_ms is None:
        delay_ms = 0
    if not isinstance(delay_ms, int) or isinstance(delay_ms, bool) or delay_ms < 0:
        raise _bad("dlq_bad_delay", "delayMs must be a non-negative integer (milliseconds)")
    pids, txns = parse_items(items)
    async with pooled(rt) as conn:
        found = await conn.fetch(Q.console_dlq_find, ident.tenant, pids, txns)
    rows = [dict(r) for r in found]
    for r in rows:
        r["payload"] = log_dlq._plain(rt, r["payload"])
    replayed: list[dict[str, Any]] = []
    if rows:
        if mode == "push":
            results = await log_push.push(
                rt,
                ident,
                [
                    {
                        "queue": r["queue"],
                        "partition": r["partition_name"],
                        "payload": r["payload"],
                        "transactionId": f"replay:{r['id']}",
                    }
                    for r in rows
                ],
            )
            ok = [res.get("status") in ("queued", "duplicate") for res in results]
        else:
            results = await schedule(
                ident,
                [
                    {
                        "op": "schedule",
                        "queue": r["queue"],
                        "partition": r["partition_name"],
                        "timerKey": f"replay:{r['id']}",
                        "txn": f"replay:{r['id']}",
                        "delayMs": delay_ms,
                        "payload": _b64_payload(r["payload"]),
                    }
                    for r in rows
                ],
            )
            ok = [res.get("status") in ("scheduled", "rescheduled") for res in results]
        replayed = [r for r, good in zip(rows, ok) if good]
        if replayed:
            async with pooled(rt) as conn:
                await conn.fetchval(Q.console_dlq_delete_ids, [r["id"] for r in replayed])
    by_item: dict[int, int] = {}
    for r in replayed:
        by_item[r["ord"] - 1] = by_item.get(r["ord"] - 1, 0) + 1
    seen = {r["ord"] - 1 for r in rows}
    out = []
    for i, (pid, txn) in enumerate(zip(pids, txns)):
        n = by_item.get(i, 0)
        status = "replayed" if n else ("failed" if i in seen else "absent")
        out.append({**_echo(i, pid, txn), "status": status, "count": n})
    return {"mode": mode, "results": out}
