"""Helpers of the webhook delivery's tests: a real aiohttp receiver on loopback, a broker with the
delivery, and waits on the points the delivery signals. A module of its own name (not
conftest): `from conftest import` would find whichever conftest another directory loaded first."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from queen_timers.identity import Identity
from queen_timers.testing.inprocess import RunningBroker, serving

KEY = "11" * 32
WAIT_S = 60.0  # generous: the machine may be loaded; a healthy run takes well under a second


@dataclasses.dataclass
class Received:
    at: float  # time.monotonic() at arrival
    path: str
    headers: dict[str, str]
    body: bytes


Script = Callable[[web.Request, int], Awaitable[web.StreamResponse]]


async def _ok(request: web.Request, n: int) -> web.StreamResponse:
    return web.Response(status=204)


class Receiver:
    """An HTTP endpoint that records every request and answers by `script` (200 by default).
    `stop()` closes its port (connections are refused) and `start()` opens the same port again:
    a receiver that is down, then back."""

    def __init__(self) -> None:
        self.got: list[Received] = []
        self.script: Script = _ok
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            async with self._changed:
                self.got.append(
                    Received(time.monotonic(), request.path, dict(request.headers), body)
                )
                n = len(self.got)
                self._changed.notify_all()
            return await self.script(request, n)
        finally:
            self.in_flight -= 1

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)  # every path: a redirect would show
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def until(self, check: Callable[[list[Received]], bool], timeout: float = WAIT_S) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: check(self.got)), timeout)

    def ids(self) -> list[str]:
        return [r.headers["webhook-id"] for r in self.got]


def delivering(db_url: str, **settings: Any) -> Any:
    """A broker with the HTTP transport, the sweeper and the webhook delivery; `settings`
    replace or add to the tests' defaults (the allow-list names the loopback receiver)."""
    return serving(
        database_url=db_url,
        transports=("http",),
        deliveries=("webhooks",),
        **{
            "sweeper": True,
            "encryption_key": KEY,
            "webhook_allow_networks": "127.0.0.1/32",
            "webhooks_refresh_ms": 200,
            **settings,
        },
    )


async def schedule_one(queen: Any, queue: str, key: str = "k") -> None:
    """One timer due now, through the service, with an empty JSON object as its payload."""
    op = {"op": "schedule", "queue": queue, "timerKey": key, "delayMs": 0, "txn": f"x-{key}"}
    await queen.timers_apply(Identity(), [{**op, "payload": "e30="}])


async def set_target(
    http: aiohttp.ClientSession, broker: RunningBroker, **fields: Any
) -> dict[str, Any]:
    """Create a target over HTTP and make the delivery read it now (not at its next refresh)."""
    async with http.post("/api/v1/webhooks/targets", json=fields) as r:
        answer: dict[str, Any] = await r.json()
        assert r.status == 200, answer
    await broker.deliveries["webhooks"].refresh()  # type: ignore[attr-defined]
    return answer


async def schedule(
    http: aiohttp.ClientSession, queue: str, keys: list[str], payload: bytes, delay_ms: int = 0
) -> None:

    ops = [
        {
            "op": "schedule",
            "queue": queue,
            "timerKey": k,
            "delayMs": delay_ms,
            "txn": f"txn-{k}",
            "payload": base64.b64encode(payload).decode(),
        }
        for k in keys
    ]
    for at in range(0, len(ops), 200):  # a call takes at most 256 ops
        async with http.post("/api/v1/timers", json=ops[at : at + 200]) as r:
            assert r.status == 200, await r.text()


def worker_of(broker: RunningBroker, name: str) -> Any:
    """The delivery loop of the target `name` in this broker."""
    delivery: Any = broker.deliveries["webhooks"]
    return next(w for (_, n), w in delivery.workers.items() if n == name)


async def until_settled(worker: Any, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
    """Until `check()` holds, re-checked each time the worker settles a batch; then the
    attempts handed to the record so far are written (it writes off the delivery's path)."""
    async with worker.progress:
        await asyncio.wait_for(worker.progress.wait_for(check), timeout)
    await worker.recorder.flush()


def count(broker: RunningBroker, worker: Any, outcome: str) -> float:
    value = broker.queen.metrics_registry.get_sample_value(
        "queen_webhook_deliveries_total", {"target": worker.label, "outcome": outcome}
    )
    return value or 0.0
