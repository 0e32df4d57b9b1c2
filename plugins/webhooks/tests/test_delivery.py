"""A fired timer reaches a real HTTP receiver: signed (verified with the Standard Webhooks
reference library, not our code), retried by the rules, dead-lettered when it cannot be
delivered, within the target's rate and concurrency, never to a refused address."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web
from standardwebhooks import Webhook
from webhook_helpers import (
    count,
    delivering,
    schedule,
    schedule_one,
    set_target,
    until_settled,
    worker_of,
)

from queen_timers.identity import Identity
from queen_timers.testing.inprocess import serving

IDENT = Identity()


async def test_a_fired_timer_is_delivered_signed_once(broker, http, receiver):
    t = await set_target(http, broker, name="billing", queue="invoices", url=receiver.url)
    secret = t["secret"]["value"]
    await schedule(http, "invoices", ["k1"], b'{"amount": 3}')
    await receiver.until(lambda got: len(got) >= 1)
    r = receiver.got[0]
    assert json.loads(Webhook(secret).verify(r.body, r.headers) and r.body) == {"amount": 3}
    assert r.headers["webhook-id"].startswith("msg_") and r.headers["queen-attempt"] == "1"
    assert r.headers["Content-Type"] == "application/json"
    w = worker_of(broker, "billing")
    await until_settled(w, lambda: count(broker, w, "delivered") >= 1)
    page = await broker.queen.webhook_attempts(IDENT, "billing")
    assert [(a["outcome"], a["status"]) for a in page["attempts"]] == [("delivered", 204)]
    assert page["attempts"][0]["webhookId"] == r.headers["webhook-id"]
    # acked: nothing left to pop, nothing dead
    assert await broker.queen.pop(IDENT, "invoices") is None
    assert (await broker.queen.dlq(IDENT, queue="invoices"))["messages"] == []


async def test_raw_bytes_are_sent_as_they_are(broker, http, receiver):
    await set_target(http, broker, name="raw", queue="bytes", url=receiver.url)
    await schedule(http, "bytes", ["b"], b"\x00\xffnot json")
    await receiver.until(lambda got: len(got) >= 1)
    assert receiver.got[0].body == b"\x00\xffnot json"
    assert receiver.got[0].headers["Content-Type"] == "application/octet-stream"


async def test_retry_after_is_honoured_and_the_id_is_stable(broker, http, receiver):
    async def script(request: web.Request, n: int) -> web.StreamResponse:
        if n == 1:
            return web.Response(status=429, headers={"Retry-After": "2"}, text="slow down")
        return web.Response(status=200)

    receiver.script = script
    await set_target(http, broker, name="t", queue="q", url=receiver.url, backoffMs=10)
    await schedule(http, "q", ["k"], b"{}")
    await receiver.until(lambda got: len(got) >= 2)
    first, second = receiver.got[:2]
    assert second.at - first.at >= 2.0  # a retry is a timer: never before its due time
    assert second.headers["webhook-id"] == first.headers["webhook-id"]
    assert (first.headers["queen-attempt"], second.headers["queen-attempt"]) == ("1", "2")
    w = worker_of(broker, "t")
    await until_settled(w, lambda: count(broker, w, "delivered") >= 1)
    page = await broker.queen.webhook_attempts(IDENT, "t")
    assert [(a["attempt"], a["status"], a["outcome"]) for a in page["attempts"]] == [
        (2, 200, "delivered"),
        (1, 429, "retry"),
    ]


async def test_a_permanent_refusal_goes_to_the_dead_letter_queue(broker, http, receiver):
    async def gone(request: web.Request, n: int) -> web.StreamResponse:
        return web.Response(status=410, text="no such account <b>x</b>")

    receiver.script = gone
    await set_target(http, broker, name="t", queue="q", url=receiver.url)
    await schedule(http, "q", ["k"], b'{"a": 1}')
    w = worker_of(broker, "t")
    await until_settled(w, lambda: count(broker, w, "dead") >= 1)
    assert len(receiver.got) == 1  # 410 is permanent: no retry
    dead = (await broker.queen.dlq(IDENT, queue="q"))["messages"]
    assert len(dead) == 1
    err = dead[0]["errorMessage"]
    assert "attempt 1 (permanent failure): HTTP 410: no such account <b>x</b>" in err, err
    assert receiver.got[0].headers["webhook-id"] in err


async def test_attempts_run_out_into_the_dead_letter_queue(broker, http, receiver):
    async def broken(request: web.Request, n: int) -> web.StreamResponse:
        return web.Response(status=503)

    receiver.script = broken
    await set_target(
        http, broker, name="t", queue="q", url=receiver.url, maxAttempts=3, backoffMs=10
    )
    await schedule(http, "q", ["k"], b"{}")
    w = worker_of(broker, "t")
    await until_settled(w, lambda: count(broker, w, "dead") >= 1)
    assert [r.headers["queen-attempt"] for r in receiver.got] == ["1", "2", "3"]
    assert len({r.headers["webhook-id"] for r in receiver.got}) == 1
    dead = (await broker.queen.dlq(IDENT, queue="q"))["messages"]
    assert "attempt 3 (attempts exhausted): HTTP 503" in dead[0]["errorMessage"]


async def test_concurrency_and_rate_are_bounded(broker, http, receiver):
    release = asyncio.Event()

    async def held(request: web.Request, n: int) -> web.StreamResponse:
        if n <= 2:
            await release.wait()
        return web.Response(status=200)

    receiver.script = held
    await set_target(http, broker, name="t", queue="q", url=receiver.url, concurrency=2)
    await schedule(http, "q", [f"k{i}" for i in range(6)], b"{}")
    await receiver.until(lambda got: len(got) >= 2)
    await asyncio.sleep(0.2)  # room for a third attempt, which the bound must hold back
    assert receiver.max_in_flight == 2 and len(receiver.got) == 2
    release.set()
    await receiver.until(lambda got: len(got) >= 6)
    assert receiver.max_in_flight == 2

    # 10 per second, a bucket of one second: 15 attempts span at least half a second
    await set_target(http, broker, name="r", queue="rq", url=receiver.url, ratePerS=10)
    await schedule(http, "rq", [f"k{i}" for i in range(15)], b"{}")
    await receiver.until(lambda got: len(got) >= 21)
    rated = receiver.got[6:21]
    assert rated[-1].at - rated[0].at >= 0.45


async def test_a_paused_target_holds_its_messages(broker, http, receiver):
    await set_target(http, broker, name="t", queue="q", url=receiver.url, paused=True)
    await schedule(http, "q", ["k"], b"{}")
    # the message waits in the queue (a paused target never pops): prove it by reading it
    w = worker_of(broker, "t")
    assert w.target.paused
    async with http.post("/api/v1/webhooks/targets/t/resume") as r:
        assert r.status == 200 and (await r.json())["paused"] is False
    await broker.deliveries["webhooks"].refresh()
    await receiver.until(lambda got: len(got) >= 1)


async def test_an_address_refused_at_delivery_is_dead_lettered(db_url, receiver):
    # One broker may store the target (its allow-list names loopback); the delivering broker's
    # does not, so the address is refused at the connection: a name that re-resolves to a
    # private address later is caught the same way.
    async with serving(
        database_url=db_url,
        transports=(),
        encryption_key="11" * 32,
        webhook_allow_networks="127.0.0.1/32",
    ) as setter:
        await setter.queen.webhook_target_set(
            IDENT, {"name": "t", "queue": "q", "url": receiver.url}
        )
    async with delivering(db_url, webhook_allow_networks="") as b:
        await schedule_one(b.queen, "q")
        w = worker_of(b, "t")
        await until_settled(w, lambda: count(b, w, "dead") >= 1)
        dead = (await b.queen.dlq(IDENT, queue="q"))["messages"]
        assert "(address refused): refused: 127.0.0.1 is a loopback" in dead[0]["errorMessage"]
    assert receiver.got == []


async def test_metrics_name_the_target_by_label(broker, http, receiver):
    await set_target(http, broker, name="billing", queue="invoices", url=receiver.url)
    await schedule(http, "invoices", ["k"], b"{}")
    w = worker_of(broker, "billing")
    await until_settled(w, lambda: count(broker, w, "delivered") >= 1)
    async with http.get("/metrics") as r:
        text = await r.text()
    assert f'queen_webhook_deliveries_total{{outcome="delivered",target="{w.label}"}} 1.0' in text
    assert 'queen_webhook_attempts_total{result="2xx"' in text
    assert w.label.endswith("/billing") and "00000000-" not in w.label


async def test_redirects_are_not_followed_and_answers_are_read_to_a_bound(broker, http, receiver):
    async def moved(request: web.Request, n: int) -> web.StreamResponse:
        if request.path == "/hook":
            return web.Response(status=302, headers={"Location": "/elsewhere"}, text="x" * 5000)
        return web.Response(status=200)

    receiver.script = moved
    await set_target(http, broker, name="t", queue="q", url=receiver.url)
    await schedule(http, "q", ["k"], b"{}")
    w = worker_of(broker, "t")
    await until_settled(w, lambda: count(broker, w, "dead") >= 1)
    assert [r.path for r in receiver.got] == ["/hook"]  # /elsewhere never asked
    err = (await broker.queen.dlq(IDENT, queue="q"))["messages"][0]["errorMessage"]
    assert "HTTP 302: " + "x" * 1024 in err and "x" * 1025 not in err  # the default bound


async def test_a_replayed_dead_letter_is_delivered_again(broker, http, receiver):
    fail = True

    async def script(request: web.Request, n: int) -> web.StreamResponse:
        return web.Response(status=400 if fail else 200)

    receiver.script = script
    await set_target(http, broker, name="t", queue="q", url=receiver.url)
    await schedule(http, "q", ["k"], b'{"v": 1}')
    w = worker_of(broker, "t")
    await until_settled(w, lambda: count(broker, w, "dead") >= 1)
    (dead,) = (await broker.queen.dlq(IDENT, queue="q"))["messages"]
    fail = False  # the receiver is fixed; the operator replays
    items = [{"transactionId": dead["transactionId"], "partitionId": dead["partitionId"]}]
    await broker.queen.dlq_replay(IDENT, items, "push")
    await until_settled(w, lambda: count(broker, w, "delivered") >= 1)
    assert [json.loads(r.body) for r in receiver.got] == [{"v": 1}, {"v": 1}]
    # a replay is a new message: a new webhook-id
    assert receiver.got[0].headers["webhook-id"] != receiver.got[1].headers["webhook-id"]


async def test_a_slow_receiver_does_not_let_the_lease_lapse(db_url, receiver, monkeypatch):
    # A lapsed lease is taken over by the next pop (another broker's): the batch would be sent
    # twice. The worker renews it while its attempts last; here a second consumer pops after
    # the pop's 1 s lease has passed and must find nothing.
    from queen_webhooks import worker

    monkeypatch.setattr(worker, "RENEW_LEASE_S", 0.2)
    arrived, release = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request, n: int) -> web.StreamResponse:
        arrived.set()
        await release.wait()
        return web.Response(status=200)

    receiver.script = slow
    async with delivering(db_url, pop_lease_seconds=1) as b:
        await b.queen.webhook_target_set(IDENT, {"name": "t", "queue": "q", "url": receiver.url})
        await b.deliveries["webhooks"].refresh()
        await schedule_one(b.queen, "q")
        w = worker_of(b, "t")
        await asyncio.wait_for(arrived.wait(), 60)
        await until_settled(w, lambda: w.renewals >= 1)
        await asyncio.sleep(1.5)  # the pop's own lease (1 s) has passed
        assert await b.queen.pop(IDENT, "q") is None  # renewed: nobody takes the batch over
        release.set()
        await until_settled(w, lambda: count(b, w, "delivered") >= 1)
        assert len(receiver.got) == 1
