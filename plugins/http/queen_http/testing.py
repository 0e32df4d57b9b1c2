"""A client adapter speaking the Queen wire with aiohttp's client, for the transport
conformance suite (queen_timers.testing.conformance) and for tests. Requests are shaped as the
official `queen-mq` client sends them; error answers become QueenError again."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from typing import Any

import aiohttp

from queen_timers.errors import QueenError
from queen_timers.settings import Settings

from . import HttpSettings

__all__ = ["HttpAdapter", "http_settings"]


def http_settings(**overrides: Any) -> Settings:
    """Settings for an HTTP transport on a free loopback port, ignoring the environment."""
    return Settings({"http_port": 0, **overrides}, environ={}, extra=(HttpSettings,))


def _iso(t: Any) -> Any:
    """An instant as the route reads it: ISO 8601 text, in UTC with a `Z` for an aware
    datetime (a naive one has no offset, which the route reads as UTC). None is left out and a
    string is sent unchanged."""
    if isinstance(t, dt.datetime) and t.utcoffset() is not None:
        return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return t.isoformat() if isinstance(t, dt.datetime) else t


class HttpAdapter:
    """The conformance adapter: service operations as the official client sends them."""

    def __init__(self, base: str, token: str | None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base = base
        self.session = aiohttp.ClientSession(base, headers=headers)

    async def aclose(self) -> None:
        await self.session.close()

    async def _call(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> Any:
        params = {k: v for k, v in (params or {}).items() if v is not None}
        async with self.session.request(method, path, params=params or None, json=body) as resp:
            if resp.status == 204:
                return None
            data = await resp.json(content_type=None)
            if resp.status >= 300:
                ra = resp.headers.get("Retry-After")
                raise QueenError(
                    data.get("error"),
                    data.get("reason"),
                    data.get("detail"),
                    resp.status,
                    int(ra) if ra else None,
                )
            return data

    @staticmethod
    def _key(key: str) -> str:
        return urllib.parse.quote(key, safe="/")  # as the client does: '/' stays literal

    @staticmethod
    def _q(queue: str) -> str:
        return urllib.parse.quote(queue, safe="")

    async def configure_queue(self, queue, options, *, namespace=None, task=None, mode="merge"):
        return await self._call(
            "POST",
            "/api/v1/configure",
            body={
                "queue": queue,
                "namespace": namespace,
                "task": task,
                "options": options,
                "mode": mode,
            },
        )

    async def push(self, items):
        return await self._call("POST", "/api/v1/push", body={"items": items})

    async def pop(
        self,
        queue=None,
        *,
        partition=None,
        group=None,
        batch=None,
        wait=False,
        timeout_ms=30000,
        auto_ack=False,
        subscription_mode=None,
        namespace=None,
        task=None,
    ):
        if queue is None:
            path = "/api/v1/pop"
        elif partition is None:
            path = f"/api/v1/pop/queue/{self._q(queue)}"
        else:
            path = f"/api/v1/pop/queue/{self._q(queue)}/partition/{self._q(partition)}"
        return await self._call(
            "GET",
            path,
            params={
                "batch": batch,
                "wait": "true" if wait else "false",
                "timeout": timeout_ms,
                "consumerGroup": group,
                "autoAck": "true" if auto_ack else None,
                "subscriptionMode": subscription_mode,
                "namespace": namespace,
                "task": task,
            },
        )

    async def ack(self, acks, *, group=None):
        return await self._call(
            "POST", "/api/v1/ack/batch", body={"acknowledgments": acks, "consumerGroup": group}
        )

    async def extend_lease(self, lease_id):
        # An empty body, like the client (it never sends an empty dict).
        return await self._call("POST", f"/api/v1/lease/{self._q(lease_id)}/extend")

    async def dlq(
        self, *, queue, partition=None, group=None, limit=100, offset=0, from_=None, to=None
    ):
        return await self._call(
            "GET",
            "/api/v1/dlq",
            params={
                "queue": queue,
                "partition": partition,
                "consumerGroup": group,
                "limit": limit,
                "offset": offset,
                "from": _iso(from_),
                "to": _iso(to),
            },
        )

    async def transaction(self, body):
        return await self._call("POST", "/api/v1/transaction", body=body)

    async def timers_apply(self, body):
        return (await self._call("POST", "/api/v1/timers", body=body))["results"]

    async def timer_cancel(self, queue, timer_key, txn=None):
        return await self._call(
            "DELETE", f"/api/v1/timers/{self._q(queue)}/{self._key(timer_key)}", params={"txn": txn}
        )

    async def timer_peek(self, queue, timer_key):
        return await self._call("GET", f"/api/v1/timers/{self._q(queue)}/{self._key(timer_key)}")

    async def timers_list(self, queue, *, after=None, limit=None):
        return await self._call(
            "GET", f"/api/v1/timers/{self._q(queue)}", params={"after": after, "limit": limit}
        )

    async def timers_count(self, queue, prefix):
        return await self._call(
            "GET", f"/api/v1/timers/{self._q(queue)}", params={"mode": "count", "prefix": prefix}
        )

    async def switches_get(self):
        return await self._call("GET", "/api/v1/system/kv-timers")

    async def switches_set(self, changes):
        return await self._call("POST", "/api/v1/system/kv-timers", body=changes)

    async def tenant_quota_get(self, tenant):
        return await self._call(
            "GET", f"/api/v1/system/tenants/{urllib.parse.quote(str(tenant), safe='')}/quota"
        )

    async def tenant_quota_set(self, tenant, changes):
        path = f"/api/v1/system/tenants/{urllib.parse.quote(str(tenant), safe='')}/quota"
        return await self._call("PUT", path, body=changes)

    async def tenant_quotas_list(self):
        return await self._call("GET", "/api/v1/system/tenants")

    async def queues_overview(self):
        return await self._call("GET", "/api/v1/resources/queues")

    async def queue_summary(self, queue, prefix=None):
        path = f"/api/v1/resources/queues/{self._q(queue)}"
        return await self._call("GET", path, params={"prefix": prefix})

    async def overview(self):
        return await self._call("GET", "/api/v1/resources/overview")

    async def timers_histogram(self, queue, window, prefix=None):
        params = {"mode": "histogram", "window": window, "prefix": prefix}
        return await self._call("GET", f"/api/v1/timers/{self._q(queue)}", params=params)

    async def timer_fire_now(self, queue, timer_key):
        body = {"timerKey": timer_key}
        return await self._call("POST", f"/api/v1/timers/{self._q(queue)}/fire", body=body)

    async def timers_cancel_prefix(self, queue, prefix, *, limit=None):
        body = {"prefix": prefix} if limit is None else {"prefix": prefix, "limit": limit}
        return await self._call("POST", f"/api/v1/timers/{self._q(queue)}/cancel-prefix", body=body)

    async def dlq_replay(self, items, mode, *, delay_ms=None):
        body = {"items": items, "mode": mode}
        if delay_ms is not None:
            body["delayMs"] = delay_ms
        return await self._call("POST", "/api/v1/dlq/replay", body=body)

    async def dlq_delete(self, items):
        return await self._call("POST", "/api/v1/dlq/delete", body={"items": items})
