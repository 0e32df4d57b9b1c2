"""Chaos: nothing is lost, and every message keeps its webhook-id, when the receiver goes away
under load and when a broker is SIGKILLed mid-delivery. Every point is one the code or the
receiver signals (an attempt settled, a request arrived), never a race against a clock.
Duplicates are what at-least-once allows: counted and printed, never hidden."""

from __future__ import annotations

import asyncio
import collections
import signal

import pytest
from aiohttp import web
from webhook_helpers import KEY, WAIT_S, count, schedule, set_target, until_settled, worker_of

from queen_timers.identity import Identity
from queen_timers.testing.broker import BrokerProcess
from queen_timers.testing.fixtures import started_broker

pytestmark = pytest.mark.slow

IDENT = Identity()
MESSAGES = 300


async def test_the_receiver_down_under_load_then_back(broker, http, receiver):
    await set_target(
        http,
        broker,
        name="t",
        queue="q",
        url=receiver.url,
        backoffMs=20,
        maxBackoffMs=200,
        maxAttempts=100,
        concurrency=16,
    )
    w = worker_of(broker, "t")
    await receiver.stop()  # connections refused from the first attempt
    await schedule(http, "q", [f"k{i}" for i in range(MESSAGES)], b'{"n": 1}')
    # down until every message has failed at least twice (retries staged as timers)
    await until_settled(w, lambda: count(broker, w, "retry") >= 2 * MESSAGES)
    await receiver.start()  # the same port, back
    await receiver.until(lambda got: len(set(r.headers["webhook-id"] for r in got)) >= MESSAGES)
    await until_settled(w, lambda: count(broker, w, "delivered") >= MESSAGES)
    ids = collections.Counter(receiver.ids())
    assert len(ids) == MESSAGES
    assert count(broker, w, "dead") == 0
    assert all(int(r.headers["queen-attempt"]) >= 3 for r in receiver.got)
    dupes = sum(n - 1 for n in ids.values())
    print(f"\nreceiver down: {MESSAGES} delivered, {dupes} duplicate deliveries")
    assert (await broker.queen.dlq(IDENT, queue="q"))["messages"] == []


async def test_a_broker_killed_mid_delivery_redelivers_the_same_id(db_url, receiver):
    env = {
        "QUEEN_ENCRYPTION_KEY": KEY,
        "QUEEN_WEBHOOK_ALLOW_NETWORKS": "127.0.0.1/32",
        "QUEEN_WEBHOOKS_REFRESH_MS": "100",
        "QUEEN_POP_LEASE_SECONDS": "2",  # the dead broker's lease ends soon after the kill
    }
    first_arrived = asyncio.Event()
    killed = asyncio.Event()
    hold = True

    async def script(request: web.Request, n: int) -> web.StreamResponse:
        if hold:
            first_arrived.set()
            await killed.wait()  # no answer before the broker is dead
        return web.Response(status=200)

    receiver.script = script
    async with started_broker(db_url, webhook_allow_networks="127.0.0.1/32") as q:
        await q.webhook_target_set(IDENT, {"name": "t", "queue": "q", "url": receiver.url})
        a = await BrokerProcess(db_url, env=env).start()
        try:
            await q.timers_apply(
                IDENT,
                [
                    {
                        "op": "schedule",
                        "queue": "q",
                        "timerKey": f"k{i}",
                        "delayMs": 0,
                        "txn": f"x{i}",
                        "payload": "e30=",
                    }
                    for i in range(20)
                ],
            )
            await asyncio.wait_for(first_arrived.wait(), WAIT_S)
            await a.signal(signal.SIGKILL)
            killed.set()
        finally:
            await a.kill()
        before = collections.Counter(receiver.ids())
        hold = False
        b = await BrokerProcess(db_url, env=env).start()
        try:
            await receiver.until(
                lambda got: (
                    len({r.headers["webhook-id"] for r in got if r.at}) >= 20
                    and all(collections.Counter(receiver.ids())[i] >= 2 for i in before)
                )
            )
        finally:
            await b.terminate()
            await b.kill()
    ids = collections.Counter(receiver.ids())
    assert len(ids) == 20  # every message, each under its one id
    assert all(ids[i] >= 2 for i in before)  # what the dead broker held is sent again
    print(f"\nbroker killed: 20 delivered, {sum(n - 1 for n in ids.values())} duplicates")
