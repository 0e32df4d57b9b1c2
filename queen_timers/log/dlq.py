"""Dead-letter listing (client-wire §9).

A dead letter is a snapshot taken when the message is dead-lettered (queen_timers/log/ack.py),
so it outlives retention. A payload stored encrypted (an encryption envelope) is decrypted here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from ..db import Q
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..validate import check_name

__all__ = ["dlq"]

_ENVELOPE_KEYS = {"encrypted", "iv", "authTag"}


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise _bad("dlq_bad_" + what, f"{what} must be an integer from {lo} to {hi}")
    return value


def _instant(value: Any, what: str) -> dt.datetime | None:
    # Transports turn their wire's form into a datetime (HTTP: ISO 8601; msgpack has a native
    # timestamp); one without an offset would be read in the server's zone, so it is refused.
    if value is None:
        return None
    if not isinstance(value, dt.datetime) or value.utcoffset() is None:
        raise _bad("dlq_bad_" + what, f"{what} must be a timestamp with a UTC offset")
    return value


def _plain(rt: Runtime, payload: Any) -> Any:
    if (
        rt.cipher is not None
        and isinstance(payload, dict)
        and set(payload) == _ENVELOPE_KEYS
        and all(isinstance(v, str) for v in payload.values())
    ):
        try:
            return msgspec.json.decode(rt.cipher.decrypt(msgspec.json.encode(payload)))
        except Exception:  # noqa: BLE001 - not ours / wrong key: shown as stored
            return payload
    return payload


async def dlq(
    rt: Runtime,
    ident: Identity,
    *,
    queue: Any,
    partition: Any = None,
    group: Any = None,
    limit: Any = 100,
    offset: Any = 0,
    from_: Any = None,
    to: Any = None,
) -> dict[str, Any]:
    """One page of a queue's dead letters, newest first. `from_` / `to` window failedAt (the
    instant it was dead-lettered), both ends inclusive; `total` counts the whole window."""
    queue = check_name(queue, "queue", "dlq_bad_queue")
    if partition is not None:
        partition = check_name(partition, "partition", "dlq_bad_partition")
    if group is not None:
        group = check_name(group, "consumerGroup", "dlq_bad_group")
    # Above the maximum the page is clamped, not refused (as the timer list does): the official
    # client sends any limit and reads a refusal as an empty listing.
    if isinstance(limit, int) and not isinstance(limit, bool):
        limit = min(limit, rt.settings.dlq_max_limit)
    limit = _int(limit, "limit", 1, rt.settings.dlq_max_limit)
    offset = _int(offset, "offset", 0, 2**31 - 1)
    since, until = _instant(from_, "from"), _instant(to, "to")
    if since is not None and until is not None and since > until:
        raise _bad("dlq_bad_range", f"from ({since.isoformat()}) is after to ({until.isoformat()})")
    async with rt.pool.acquire() as conn:
        out = await conn.fetchval(
            Q.dlq_list, ident.tenant, queue, partition, group, since, until, limit, offset
        )
    messages = out["messages"]
    for m in messages:
        m["payload"] = m["data"] = _plain(rt, m["payload"])
    return {
        "messages": messages,
        "total": out["total"],
        "pagination": {"limit": limit, "offset": offset},
    }
