"""The example's client, which is also its conformance adapter: every service operation is
one line out, one line back."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from queen_timers.errors import QueenError


class LineJsonClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader, self._writer = reader, writer
        self._lock = asyncio.Lock()  # one request at a time on a connection

    @classmethod
    async def connect(cls, host: str, port: int, token: str | None) -> LineJsonClient:
        c = cls(*await asyncio.open_connection(host, port))
        c._writer.write(json.dumps({"token": token}).encode() + b"\n")
        answer = json.loads(await c._reader.readline() or b"{}")
        if not answer.get("ok"):
            await c.aclose()
            raise _error(answer)
        return c

    async def aclose(self) -> None:
        self._writer.close()

    async def call(self, op: str, **args: Any) -> Any:
        async with self._lock:
            self._writer.write(json.dumps({"op": op, "args": args}, default=_text).encode() + b"\n")
            answer = json.loads(await self._reader.readline() or b"{}")
        if not answer.get("ok"):
            raise _error(answer)
        return answer["result"]

    # The service's operations, minus the identity (queen_timers.testing.conformance.Adapter).
    def __getattr__(self, op: str) -> Callable[..., Coroutine[Any, Any, Any]]:
        async def operation(*args: Any, **kw: Any) -> Any:
            return await self.call(op, **_POSITIONAL[op](*args), **kw)

        if op not in _POSITIONAL:
            raise AttributeError(op)
        return operation


# How each operation's positional arguments are named on the wire.
_POSITIONAL: dict[str, Callable[..., dict[str, Any]]] = {
    "configure_queue": lambda queue, options: {"queue": queue, "options": options},
    "push": lambda items: {"items": items},
    "pop": lambda queue=None: {"queue": queue},
    "ack": lambda acks: {"acks": acks},
    "extend_lease": lambda lease_id: {"lease_id": lease_id},
    "dlq": lambda: {},
    "transaction": lambda body: {"body": body},
    "timers_apply": lambda body: {"body": body},
    "timer_cancel": lambda queue, timer_key, txn=None: {
        "queue": queue,
        "timer_key": timer_key,
        "txn": txn,
    },
    "timer_peek": lambda queue, timer_key: {"queue": queue, "timer_key": timer_key},
    "timers_list": lambda queue: {"queue": queue},
    "timers_count": lambda queue, prefix: {"queue": queue, "prefix": prefix},
    "switches_get": lambda: {},
    "switches_set": lambda changes: {"changes": changes},
    "tenant_quota_get": lambda tenant=None: {"tenant": tenant},
    "tenant_quota_set": lambda tenant, changes: {"tenant": tenant, "changes": changes},
    "tenant_quotas_list": lambda: {},
    "queues_overview": lambda: {},
    "queue_summary": lambda queue, prefix=None: {"queue": queue, "prefix": prefix},
    "overview": lambda: {},
    "timers_histogram": lambda queue, window, prefix=None: {
        "queue": queue,
        "window": window,
        "prefix": prefix,
    },
    "timer_fire_now": lambda queue, timer_key: {"queue": queue, "timer_key": timer_key},
    "timers_cancel_prefix": lambda queue, prefix: {"queue": queue, "prefix": prefix},
    "dlq_replay": lambda items, mode: {"items": items, "mode": mode},
    "dlq_delete": lambda items: {"items": items},
}


def _text(value: Any) -> str:
    """JSON has no timestamp: a datetime goes as ISO 8601 text, with its offset."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _error(answer: Mapping[str, Any]) -> QueenError:
    e = answer.get("error") or {}
    return QueenError(
        e.get("error", "connection_closed"),
        e.get("reason"),
        e.get("detail"),
        answer.get("status", 500),
        answer.get("retryAfter"),
    )
