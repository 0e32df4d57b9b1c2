"""The transport conformance suite: one behavioural test suite every transport passes.

A transport author supplies a *client adapter*: an object whose async methods mirror the
service (queen_timers.service.Queen) minus the identity argument, carried over their transport, and
that raises `queen_timers.errors.QueenError` (code, reason, detail, status) for every refusal it
receives. See `Adapter` below for the exact methods. Then, in the plugin's tests:

    # test_conformance.py (db_url & co. come from the queen_timers pytest plugin, which
    # installing queen-timers registers; it also has pytest rewrite this module's asserts)
    from queen_timers.testing.conformance import *  # noqa: F401,F403  (tests, fixtures)

    @pytest.fixture
    async def conformance_connect(conformance_queen):
        transport = MyTransport(settings_with_a_free_port)
        await transport.start(conformance_queen)
        async def connect(token):          # token: a JWT, or None for "no credentials"
            return await MyAdapter.open(transport.address, token)
        yield connect
        await transport.stop()

`conformance_queen` is a started service on the test's own database, with JWT auth on
(HS256, secret CONFORMANCE_JWT_SECRET) and no background loops, so the suite can check tenant
isolation and the admin claim. Tokens are minted by `mint_token`.

What the suite covers: schedule, reschedule, cancel (the cancelled/absent verdicts),
the operator's views and actions (queue summaries, overview, due-time histogram, fire now,
cancel by prefix, dead-letter replay and delete),
peek, list with keyset pagination, count, keys holding '/' and ':', push, pop (including an
empty long-poll and a long-poll woken by a push), ack, lease extension, transaction with a
timer rider and with requiredLeases, configure, DLQ listing and its `from_` / `to` window on
failedAt, kill switches with the admin claim, per-tenant limits (the pending cap's 403 and the
write rate's 429 with Retry-After), error codes and statuses, authentication,
tenant isolation, a token's `exp` ending the identity of a connection that outlives it, and
a database that goes away mid-call answering the transient 503 (`queen_timers.testing.chaos`).
Timer *firing* is the core's business (the sweeper) and is not exercised here.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import jwt
import pytest

from ..errors import QueenError
from ..log.frames import txn_hash
from .chaos import Kill, killing
from .fixtures import started_broker

CONFORMANCE_JWT_SECRET = "queen-conformance-secret-0123456789abcdef"
DELIVER_AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Adapter(Protocol):
    """What a transport's client adapter offers. Arguments and results are those of
    queen_timers.service.Queen (JSON-ready dicts shaped like the Queen wire), minus `ident`.

    `dlq`'s `from_` / `to` (keyword-only, default None: no bound) window the instant each dead
    letter failed (`failedAt`), both ends inclusive. The suite passes aware datetimes, which the
    adapter carries in its wire's form for an instant (HTTP: ISO 8601 text; msgpack: a
    timestamp), and one plain string, which the adapter sends unchanged where an instant goes so
    that the suite can check the broker refuses an instant it cannot read. An adapter written
    before these two existed still passes every other test.
    """

    async def configure_queue(
        self,
        queue: str,
        options: dict[str, Any],
        *,
        namespace: str | None = None,
        task: str | None = None,
        mode: str = "merge",
    ) -> dict[str, Any]: ...
    async def push(self, items: list) -> list[dict[str, Any]]: ...
    async def pop(
        self,
        queue: str | None = None,
        *,
        partition: str | None = None,
        group: str | None = None,
        batch: int | None = None,
        wait: bool = False,
        timeout_ms: int = 30000,
        auto_ack: bool = False,
        subscription_mode: str | None = None,
        namespace: str | None = None,
        task: str | None = None,
    ) -> dict[str, Any] | None: ...
    async def ack(
        self, acks: list[dict[str, Any]], *, group: str | None = None
    ) -> list[dict[str, Any]]: ...
    async def extend_lease(self, lease_id: str) -> dict[str, Any]: ...
    async def dlq(
        self,
        *,
        queue: str,
        partition: str | None = None,
        group: str | None = None,
        limit: int = 100,
        offset: int = 0,
        from_: dt.datetime | str | None = None,
        to: dt.datetime | str | None = None,
    ) -> dict[str, Any]: ...
    async def transaction(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def timers_apply(self, body: Any) -> list[dict[str, Any]]: ...
    async def timer_cancel(
        self, queue: str, timer_key: str, txn: str | None = None
    ) -> dict[str, Any]: ...
    async def timer_peek(self, queue: str, timer_key: str) -> dict[str, Any]: ...
    async def timers_list(
        self, queue: str, *, after: str | None = None, limit: int | None = None
    ) -> dict[str, Any]: ...
    async def timers_count(self, queue: str, prefix: str) -> dict[str, Any]: ...
    async def switches_get(self) -> dict[str, Any]: ...
    async def switches_set(self, changes: dict[str, Any]) -> dict[str, Any]: ...
    # The per-tenant limits (docs/guides/tenants.md); an adapter without them skips their test.
    async def tenant_quota_get(self, tenant: str) -> dict[str, Any]: ...
    async def tenant_quota_set(self, tenant: str, changes: dict[str, Any]) -> dict[str, Any]: ...
    async def tenant_quotas_list(self) -> dict[str, Any]: ...
    # The operator's views and actions (the console); an adapter without them skips their
    # tests.
    async def queues_overview(self) -> dict[str, Any]: ...
    async def queue_summary(self, queue: str, prefix: str | None = None) -> dict[str, Any]: ...
    async def overview(self) -> dict[str, Any]: ...
    async def timers_histogram(
        self, queue: str, window: str | None, prefix: str | None = None
    ) -> dict[str, Any]: ...
    async def timer_fire_now(self, queue: str, timer_key: str) -> dict[str, Any]: ...
    async def timers_cancel_prefix(
        self, queue: str, prefix: str, *, limit: int | None = None
    ) -> dict[str, Any]: ...
    async def dlq_replay(
        self, items: list, mode: str, *, delay_ms: int | None = None
    ) -> dict[str, Any]: ...
    async def dlq_delete(self, items: list) -> dict[str, Any]: ...
    async def aclose(self) -> None: ...


Connect = Callable[[str | None], Awaitable[Adapter]]


def mint_token(
    tenant: uuid.UUID | str | None = None,
    sub: str = "conformance",
    admin: bool = False,
    secret: str = CONFORMANCE_JWT_SECRET,
    exp: int | None = None,
) -> str:
    claims: dict[str, Any] = {"sub": sub, "admin": admin}
    if tenant is not None:
        claims["tenant"] = str(tenant)
    if exp is not None:
        claims["exp"] = exp
    return jwt.encode(claims, secret, algorithm="HS256")


def b64json(value: Any) -> str:
    """A timer payload as the client sends it: base64 of the JSON text."""
    return base64.b64encode(json.dumps(value).encode()).decode()


def schedule_op(
    queue: str,
    key: str,
    value: Any = None,
    delay_ms: int = 60_000,
    txn: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "payload": b64json(value),
        "delayMs": delay_ms,
        "txn": txn or str(uuid.uuid4()),
        **extra,
    }


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture
async def conformance_queen(db_url):
    """A started service with JWT auth on and no background loops."""
    async with started_broker(db_url, jwt_secret=CONFORMANCE_JWT_SECRET) as q:
        yield q


@pytest.fixture
async def conformance_clients(conformance_connect):
    """open(tenant=None, sub=..., admin=False, token=...) -> a connected adapter; all closed at
    the end of the test."""
    opened: list[Adapter] = []

    async def open_(
        tenant: uuid.UUID | None = None,
        sub: str = "conformance",
        admin: bool = False,
        token: str | bool | None = False,
    ) -> Adapter:
        tok = mint_token(tenant or uuid.uuid4(), sub, admin) if token is False else token
        c = await conformance_connect(tok)
        opened.append(c)
        return c

    yield open_
    for c in opened:
        await c.aclose()


@pytest.fixture
async def conformance_client(conformance_clients):
    """A client in a fresh tenant of its own."""
    return await conformance_clients()


async def _expect(code: str, status: int, awaitable: Awaitable[Any]) -> QueenError:
    with pytest.raises(QueenError) as ei:
        await awaitable
    assert ei.value.code == code, ei.value.to_dict()
    assert ei.value.status == status, (ei.value.status, ei.value.to_dict())
    return ei.value


# -- timers ----------------------------------------------------------------------------------------
async def test_conformance_schedule_peek_list(conformance_client):
    c = conformance_client
    res = await c.timers_apply({"operations": [schedule_op("orders", "k1", {"a": 1}, txn="t1")]})
    assert len(res) == 1
    r = res[0]
    assert r["ok"] is True and r["status"] == "scheduled"
    assert (r["queue"], r["timerKey"], r["txn"]) == ("orders", "k1", "t1")
    assert uuid.UUID(r["messageId"]) and DELIVER_AT.match(r["deliverAt"]), r
    peek = await c.timer_peek("orders", "k1")
    assert peek["found"] is True and peek["messageId"] == r["messageId"]
    assert peek["deliverAt"] == r["deliverAt"] and peek["txn"] == "t1"
    assert json.loads(base64.b64decode(peek["payload"])) == {"a": 1}
    assert peek["producerSub"] == "conformance" and peek["attempts"] == 0
    page = await c.timers_list("orders")
    assert [row["timerKey"] for row in page["rows"]] == ["k1"]
    assert "payload" not in page["rows"][0] and page["truncated"] is False


async def test_conformance_bare_array_and_input_order(conformance_client):
    c = conformance_client
    ops = [schedule_op("q", k) for k in ("b", "a", "c")]
    res = await c.timers_apply(ops)
    assert [r["timerKey"] for r in res] == ["b", "a", "c"]
    assert await c.timers_apply([]) == []


async def test_conformance_reschedule(conformance_client):
    c = conformance_client
    first = (await c.timers_apply([schedule_op("q", "k", 1, txn="t1")]))[0]
    again = (await c.timers_apply([{**schedule_op("q", "k", 2, txn="t2"), "op": "reschedule"}]))[0]
    assert again["status"] == "rescheduled" and again["txn"] == "t2"
    assert again["messageId"] != first["messageId"]
    peek = await c.timer_peek("q", "k")
    assert peek["txn"] == "t2" and json.loads(base64.b64decode(peek["payload"])) == 2
    # A reschedule of a missing key answers by what existed, not by the op name.
    fresh = (await c.timers_apply([{**schedule_op("q", "new"), "op": "reschedule"}]))[0]
    assert fresh["status"] == "scheduled"


async def test_conformance_cancel_then_absent(conformance_client):
    c = conformance_client
    await c.timers_apply([schedule_op("q", "k", txn="stored")])
    first = await c.timer_cancel("q", "k")
    assert (first["ok"], first["status"], first["txn"]) == (True, "cancelled", "stored")
    assert (first["queue"], first["timerKey"]) == ("q", "k")
    second = await c.timer_cancel("q", "k", "mine")
    assert second["status"] == "absent" and second["ok"] is False and second["txn"] == "mine"
    assert (await c.timer_cancel("q", "k"))["txn"] is None
    assert (await c.timer_peek("q", "k")) == {"found": False, "queue": "q", "timerKey": "k"}
    # Cancel inside a batch has the same verdicts.
    await c.timers_apply([schedule_op("q", "k2", txn="s2")])
    res = await c.timers_apply(
        [
            {"op": "cancel", "queue": "q", "timerKey": "k2"},
            {"op": "cancel", "queue": "q", "timerKey": "nope", "txn": "x"},
        ]
    )
    assert [r["status"] for r in res] == ["cancelled", "absent"]
    assert res[1]["txn"] == "x"


async def test_conformance_keys_with_slash_and_colon(conformance_client):
    c = conformance_client
    key = "order:9f1/expire/again"
    await c.timers_apply([schedule_op("q", key, "v", txn="t")])
    peek = await c.timer_peek("q", key)
    assert peek["found"] is True and peek["timerKey"] == key
    assert (await c.timer_cancel("q", key))["status"] == "cancelled"


async def test_conformance_list_pagination_and_count(conformance_client):
    c = conformance_client
    keys = ["a1", "a2", "a3", "b1", "b2"]
    await c.timers_apply([schedule_op("q", k) for k in reversed(keys)])
    seen, after, pages = [], None, 0
    while True:
        page = await c.timers_list("q", after=after, limit=2)
        pages += 1
        seen += [r["timerKey"] for r in page["rows"]]
        if not page["truncated"]:
            assert len(page["rows"]) <= 2
            break
        assert len(page["rows"]) == 2 and page["nextAfter"] == page["rows"][-1]["timerKey"]
        after = page["nextAfter"]
    assert seen == keys and pages == 3
    assert (await c.timers_count("q", "a"))["count"] == 3
    assert (await c.timers_list("other-queue"))["rows"] == []


async def test_conformance_timer_refusals(conformance_client):
    c = conformance_client
    await _expect(
        "timers_bad_request", 400, c.timers_apply([{**schedule_op("q", "k"), "producerSub": "me"}])
    )
    err = await _expect(
        "timers_bad_request", 400, c.timers_apply([{**schedule_op("q", "k"), "_messageId": "x"}])
    )
    assert err.reason == "timers_server_owned_field"
    await _expect(
        "timer_horizon_exceeded",
        403,
        c.timers_apply([schedule_op("q", "k", delay_ms=91 * 86400 * 1000)]),
    )
    err = await _expect(
        "timers_bad_request", 400, c.timers_apply([{**schedule_op("q", "k"), "payload": "***"}])
    )
    assert err.reason == "timers_payload_not_base64"
    await _expect(
        "timers_bad_request", 400, c.timers_apply([schedule_op("q", "k"), schedule_op("q", "k")])
    )
    # Nothing of a refused batch was scheduled.
    assert (await c.timer_peek("q", "k"))["found"] is False


# -- log: push, pop, ack, lease, dlq, configure ---------------------------------------------------
async def test_conformance_configure(conformance_client):
    res = await conformance_client.configure_queue("cfg", {"leaseTime": 30, "retryLimit": 3})
    assert res.get("configured") is True and res.get("queue") == "cfg"


async def test_conformance_push_pop_ack(conformance_client):
    c = conformance_client
    pushed = await c.push(
        [{"queue": "work", "payload": {"n": i}, "transactionId": f"t{i}"} for i in range(3)]
    )
    assert [p["status"] for p in pushed] == ["queued"] * 3
    dup = await c.push([{"queue": "work", "payload": {"n": 0}, "transactionId": "t0"}])
    assert dup[0]["status"] == "duplicate"
    got = await c.pop("work", batch=10, wait=False)
    assert got is not None
    msgs = got["messages"]
    assert [m["data"] for m in msgs] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [m["transactionId"] for m in msgs] == ["t0", "t1", "t2"]
    assert all(m["leaseId"] and m["partitionId"] for m in msgs)
    assert await c.pop("work", batch=10, wait=False) is None  # all leased
    acks = await c.ack(
        [
            {
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
                "leaseId": m["leaseId"],
                "status": "completed",
                "error": None,
            }
            for m in msgs
        ]
    )
    assert [a["success"] for a in acks] == [True] * 3
    assert not any(a.get("error") for a in acks)


async def test_conformance_pop_partition_and_lease_extend(conformance_client):
    c = conformance_client
    await c.push(
        [
            {"queue": "w", "partition": "p1", "payload": 1},
            {"queue": "w", "partition": "p2", "payload": 2},
        ]
    )
    got = await c.pop("w", partition="p2", batch=5)
    assert got is not None and [m["data"] for m in got["messages"]] == [2]
    lease = got["messages"][0]["leaseId"]
    ext = await c.extend_lease(lease)
    assert ext.get("success") is True or ext.get("newExpiresAt")


async def test_conformance_long_poll(conformance_clients):
    tenant = uuid.uuid4()
    c = await conformance_clients(tenant)
    # The push comes from a second connection: a transport need not pipeline requests.
    producer = await conformance_clients(tenant, sub="producer")
    t0 = time.monotonic()
    assert await c.pop("lp", batch=1, wait=True, timeout_ms=300) is None
    assert time.monotonic() - t0 >= 0.25  # held, not answered at once

    async def later() -> None:
        await asyncio.sleep(0.2)
        await producer.push([{"queue": "lp", "payload": "hi"}])

    pusher = asyncio.create_task(later())
    t0 = time.monotonic()
    got = await c.pop("lp", batch=1, wait=True, timeout_ms=10_000)
    await pusher
    assert got is not None and got["messages"][0]["data"] == "hi"
    assert time.monotonic() - t0 < 5  # woken by the push, not by the timeout


async def test_conformance_dlq_listing(conformance_client):
    res = await conformance_client.dlq(queue="nothing-here")
    assert res["messages"] == [] and res["total"] == 0


async def test_conformance_dlq_window(conformance_client):
    """dlq(from_=, to=) windows failedAt, both ends inclusive (to the microsecond); a window
    that ends before it starts, or an instant the broker cannot read, is a 400 bad_request."""
    c = conformance_client
    await c.push([{"queue": "dead", "payload": {"n": 1}, "transactionId": "poisoned"}])
    got = await c.pop("dead", batch=1)
    assert got is not None
    m = got["messages"][0]
    [res] = await c.ack(
        [
            {
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
                "leaseId": m["leaseId"],
                "status": "dlq",
                "error": "poison",
            }
        ]
    )
    assert res["success"] is True and res["dlq"] is True
    listing = await c.dlq(queue="dead")
    assert listing["total"] == 1 and listing["messages"][0]["transactionId"] == "poisoned"
    failed_at = dt.datetime.fromisoformat(listing["messages"][0]["failedAt"])
    assert failed_at.utcoffset() == dt.timedelta(0)
    us = dt.timedelta(microseconds=1)
    other_zone = failed_at.astimezone(dt.timezone(dt.timedelta(hours=-5)))  # the same instant

    def txns(page: dict[str, Any]) -> list[str]:
        assert page["total"] == len(page["messages"]), page  # one page holds the window
        return [d["transactionId"] for d in page["messages"]]

    window: dict[str, Any]
    for window in (
        {"from_": failed_at},
        {"to": failed_at},
        {"from_": failed_at, "to": failed_at},
        {"from_": failed_at - dt.timedelta(hours=1), "to": other_zone},
    ):
        assert txns(await c.dlq(queue="dead", **window)) == ["poisoned"], window
    for window in (
        {"from_": failed_at + us},
        {"to": failed_at - us},
        {"from_": failed_at - dt.timedelta(hours=2), "to": failed_at - dt.timedelta(hours=1)},
    ):
        assert txns(await c.dlq(queue="dead", **window)) == [], window

    for window, reason in (
        ({"from_": failed_at + us, "to": failed_at}, "dlq_bad_range"),
        ({"from_": "yesterday"}, "dlq_bad_from"),
        ({"to": "yesterday"}, "dlq_bad_to"),
    ):
        err = await _expect("bad_request", 400, c.dlq(queue="dead", **window))
        assert err.reason == reason, (window, err.to_dict())
        assert isinstance(err.detail, str) and err.detail, err.to_dict()
        assert err.retry_after is None


# -- transaction -----------------------------------------------------------------------------------
async def test_conformance_transaction_with_timer_rider(conformance_client):
    c = conformance_client
    body = {
        "operations": [
            {
                "type": "push",
                "items": [{"queue": "next", "payload": {"x": 1}, "transactionId": "tx-push"}],
            }
        ],
        "requiredLeases": [],
        "timers": [
            schedule_op("orders", "k1", {"y": 2}, txn="tt"),
            {"op": "cancel", "queue": "orders", "timerKey": "k2"},
        ],
    }
    res = await c.transaction(body)
    assert res["success"] is True
    r = res["results"]
    assert [e["index"] for e in r] == [0, 1, 2]
    assert r[0]["type"] == "push" and r[0]["success"] is True
    assert r[1]["type"] == "timer" and r[1]["opIndex"] == 0 and r[1]["status"] == "scheduled"
    assert r[2]["type"] == "timer" and r[2]["opIndex"] == 1 and r[2]["status"] == "absent"
    assert (await c.timer_peek("orders", "k1"))["txn"] == "tt"
    got = await c.pop("next", batch=5)
    assert got is not None and got["messages"][0]["transactionId"] == "tx-push"


async def test_conformance_transaction_all_or_nothing(conformance_client):
    c = conformance_client
    body = {
        "operations": [{"type": "push", "items": [{"queue": "n2", "payload": 1}]}],
        "timers": [{**schedule_op("orders", "k1"), "messageId": "forged"}],
    }
    with pytest.raises(QueenError) as ei:
        await c.transaction(body)
    assert 400 <= ei.value.status < 500
    assert (await c.timer_peek("orders", "k1"))["found"] is False
    assert await c.pop("n2", batch=5) is None


async def test_conformance_transaction_required_lease(conformance_client):
    """requiredLeases: the bundle commits only while every named lease is held; a released
    lease fails it whole (200, success false, reason lease_lost) and applies nothing."""
    c = conformance_client
    await c.push([{"queue": "leased", "payload": {"n": 1}}])
    got = await c.pop("leased", batch=1)
    assert got is not None
    lease = got["leaseId"]
    bundle = {
        "operations": [{"type": "push", "items": [{"queue": "fenced", "payload": 1}]}],
        "requiredLeases": [lease],
        "timers": [schedule_op("fenced", "kf", txn="tf")],
    }
    m = got["messages"][0]
    await c.ack(
        [
            {
                "transactionId": m["transactionId"],
                "partitionId": m["partitionId"],
                "leaseId": lease,
                "status": "completed",
            }
        ]
    )  # releases the lease
    res = await c.transaction(bundle)
    assert res["success"] is False and res["reason"] == "lease_lost"
    assert await c.pop("fenced", batch=5) is None
    assert (await c.timer_peek("fenced", "kf"))["found"] is False


async def test_conformance_database_away_is_a_503(conformance_clients, conn):
    """The backend of the connection a push is about to use is terminated (a failover, a
    pooler dropping it; fault point log.push, every 5th push, 6 times): exactly those 6
    calls reach the client as the transient 503 `unavailable` with retry_after 1, which
    clients retry (the transport renders it like any QueenError, never a 500 or a dropped
    connection), and none of them wrote; every other push is in the log once."""
    tenant = uuid.uuid4()
    outcomes: dict[str, str] = {}

    async def pusher(i: int) -> None:
        c = await conformance_clients(tenant, sub=f"pusher{i}")
        for j in range(10):
            txn = f"o{i}-{j}"
            try:
                [r] = await c.push([{"queue": "outage", "payload": {"j": j}, "transactionId": txn}])
                assert r["status"] == "queued", r
                outcomes[txn] = "ok"
            except QueenError as e:
                assert (e.status, e.code, e.retry_after) == (503, "unavailable", 1), e.to_dict()
                outcomes[txn] = "503"

    async with killing(conn, {"log.push": Kill(every=5, times=6)}) as chaos:
        await asyncio.gather(*(pusher(i) for i in range(8)))
    chaos.assert_done()
    assert list(outcomes.values()).count("503") == 6, outcomes
    logged = [
        r["txn_hash"]
        for r in await conn.fetch(
            "SELECT t.txn_hash FROM queen.log_txns t JOIN queen.log_partitions p "
            "ON p.id = t.partition_id JOIN queen.queues q ON q.id = p.queue_id "
            "WHERE q.tenant_id = $1 AND q.name = 'outage'",
            tenant,
        )
    ]
    assert len(logged) == len(set(logged)), "a push is in the log twice"
    assert set(logged) == {txn_hash(t) for t, o in outcomes.items() if o == "ok"}
    c = await conformance_clients(tenant)
    assert (await c.push([{"queue": "outage", "payload": 1}]))[0]["status"] == "queued"


# -- identity, tenants, switches -------------------------------------------------------------------
async def test_conformance_authentication_required(conformance_clients):
    for token in (None, "not-a-jwt", mint_token(uuid.uuid4(), secret="wrong-secret-" * 3)):
        with pytest.raises(QueenError) as ei:
            c = await conformance_clients(token=token)
            await c.timers_list("q")
        assert ei.value.code == "unauthorized" and ei.value.status == 401


async def test_conformance_token_expiry_ends_the_identity(conformance_clients):
    # A transport that verifies the token once per connection (hello) must still refuse a
    # request made after the token's `exp`, with the 401 an expired token gets anywhere; one
    # that verifies every request does so by construction. `exp` is whole seconds, so this
    # waits for the clock to pass it (1-2 s; at least 1 s so a loaded machine still makes the
    # first call in time): the one real wait of the suite.
    tenant = uuid.uuid4()
    exp = math.ceil(time.time() + 1.0)
    c = await conformance_clients(token=mint_token(tenant, exp=exp))
    await c.timers_apply([schedule_op("expiring", "before", txn="t-before")])
    # pyjwt refuses from exp on: wait on the wall clock until a hair past it
    while (left := exp - time.time()) > -0.05:  # noqa: ASYNC110
        await asyncio.sleep(max(left, 0.0) + 0.06)
    err = await _expect("unauthorized", 401, c.timers_apply([schedule_op("expiring", "after")]))
    assert err.reason == "invalid_token"
    # Nothing was written by the refused call; the one before it stands.
    fresh = await conformance_clients(tenant)
    assert (await fresh.timer_peek("expiring", "after"))["found"] is False
    assert (await fresh.timer_peek("expiring", "before"))["found"] is True


async def test_conformance_tenant_isolation(conformance_clients):
    a = await conformance_clients(uuid.uuid4(), sub="alice")
    b = await conformance_clients(uuid.uuid4(), sub="bob")
    await a.timers_apply([schedule_op("shared", "k", "a-secret", txn="ta")])
    await a.push([{"queue": "shared", "payload": "a-msg"}])
    assert (await b.timer_peek("shared", "k"))["found"] is False
    assert (await b.timers_list("shared"))["rows"] == []
    assert (await b.timers_count("shared", "k"))["count"] == 0
    assert (await b.timer_cancel("shared", "k"))["status"] == "absent"
    assert await b.pop("shared", batch=10) is None
    # B writing the same names makes B's own rows and leaves A's untouched.
    await b.timers_apply([schedule_op("shared", "k", "b-value", txn="tb")])
    peek_a = await a.timer_peek("shared", "k")
    assert peek_a["txn"] == "ta" and peek_a["producerSub"] == "alice"
    got = await a.pop("shared", batch=10)
    assert got is not None and [m["data"] for m in got["messages"]] == ["a-msg"]


async def test_conformance_switches_need_admin(conformance_clients):
    tenant = uuid.uuid4()
    user = await conformance_clients(tenant)
    admin = await conformance_clients(tenant, sub="ops", admin=True)
    await _expect("forbidden", 403, user.switches_set({"timersSchedule": False}))
    res = await admin.switches_set({"timersSchedule": False})
    assert res["timersScheduleEnabled"] is False
    try:
        err = await _expect("timers_disabled", 503, user.timers_apply([schedule_op("q", "k")]))
        assert err.retry_after == 1
        # Cancel is never blocked.
        assert (await user.timer_cancel("q", "k"))["status"] == "absent"
        assert (await admin.switches_get())["timersScheduleEnabled"] is False
    finally:
        await admin.switches_set({"timersSchedule": True})
    assert (await user.timers_apply([schedule_op("q", "k")]))[0]["ok"] is True


async def test_conformance_switches_refuse_unknown_keys_and_non_booleans(conformance_clients):
    admin = await conformance_clients(uuid.uuid4(), sub="ops", admin=True)
    for body, reason in (
        ({"timersExplode": True}, "switches_unknown_key"),
        ({"timersFire": False, "timersExplode": True}, "switches_unknown_key"),
        ({"timersFire": "false"}, "switches_not_boolean"),
    ):
        err = await _expect("bad_request", 400, admin.switches_set(body))
        assert err.reason == reason, err.to_dict()
    # Nothing was written: the fire is still on.
    assert (await admin.switches_get())["timersFireEnabled"] is True


async def test_conformance_tenant_limits(conformance_clients):
    tenant = uuid.uuid4()
    user = await conformance_clients(tenant)
    admin = await conformance_clients(uuid.uuid4(), sub="ops", admin=True)
    if not hasattr(admin, "tenant_quota_set"):
        pytest.skip("this adapter predates the per-tenant limits")
    t = str(tenant)
    await _expect("forbidden", 403, user.tenant_quota_set(t, {"maxPending": 2}))
    err = await _expect("bad_request", 400, admin.tenant_quota_set(t, {"maxPending": -5}))
    assert err.reason == "quota_bad_value"
    view = await admin.tenant_quota_set(t, {"maxPending": 2})
    assert view["maxPending"] == 2 and view["overrides"]["maxPending"] == 2
    assert [
        r["ok"] for r in await user.timers_apply([schedule_op("q", "a"), schedule_op("q", "b")])
    ] == [True, True]
    err = await _expect("timers_quota_exceeded", 403, user.timers_apply([schedule_op("q", "c")]))
    assert err.retry_after is None
    mine = await user.tenant_quota_get(t)
    assert mine["pending"] == 2 and mine["overQuota"] is True
    assert (await user.timer_cancel("q", "a"))["status"] == "cancelled"  # never blocked
    assert (await user.timer_peek("q", "b"))["found"] is True
    listed = await admin.tenant_quotas_list()
    assert [v["tenant"] for v in listed["tenants"]] == [t]
    # the rate: one call a token, a bucket of one
    await admin.tenant_quota_set(t, {"maxPending": "unlimited", "writesPerSec": 0.001, "burst": 1})
    assert (await user.timers_apply([schedule_op("q", "c")]))[0]["ok"] is True
    err = await _expect("rate_limited", 429, user.timers_apply([schedule_op("q", "d")]))
    assert err.retry_after is not None and 1 <= err.retry_after <= 1000
    assert (await user.timer_peek("q", "d"))["found"] is False


# -- the operator's views and actions (the console) -------------------------------------------
def _console(c: Any) -> None:
    if not hasattr(c, "queues_overview"):
        pytest.skip("this adapter predates the operator's operations")


async def _dead_letter(c: Any, queue: str, txn: str) -> dict[str, Any]:
    await c.push([{"queue": queue, "payload": {"txn": txn}, "transactionId": txn}])
    got = await c.pop(queue, batch=1)
    assert got is not None
    m = got["messages"][0]
    ack = {k: m[k] for k in ("transactionId", "partitionId", "leaseId")}
    [res] = await c.ack([{**ack, "status": "dlq", "error": "poison"}])
    assert res["dlq"] is True
    return {"transactionId": m["transactionId"], "partitionId": m["partitionId"]}


async def test_conformance_queue_summaries_and_overview(conformance_clients):
    a = await conformance_clients(uuid.uuid4(), sub="alice")
    _console(a)
    b = await conformance_clients(uuid.uuid4(), sub="bob")
    await a.timers_apply(
        [schedule_op("q", "soon", delay_ms=30_000), schedule_op("q", "later", delay_ms=7_200_000)]
    )
    [q] = (await a.queues_overview())["queues"]
    assert q["name"] == "q" and q["deadLetters"] == 0
    t = q["timers"]
    assert (t["pending"], t["dueNextMinute"], t["dueNextHour"], t["dueNextDay"]) == (2, 1, 1, 2)
    assert (await a.queue_summary("q"))["timers"]["pending"] == 2
    ov = await a.overview()
    assert ov["queues"] == 1 and ov["timers"]["pending"] == 2 and ov["brokers"]["alive"] >= 1
    assert ov["brokers"]["list"] == []  # infrastructure: admin tokens only
    # this broker's fire is every tenant's: a tenant's token sees its window, no figures
    assert set(ov["thisBroker"]) == {"windowSeconds"}
    assert (await b.queues_overview())["queues"] == []
    assert (await b.overview())["timers"]["pending"] == 0
    await _expect("queue_not_found", 404, b.queue_summary("q"))
    rows = (await a.timers_list("q"))["rows"]
    assert {r["state"] for r in rows} == {"waiting"}


async def test_conformance_histogram(conformance_client):
    c = conformance_client
    _console(c)
    await c.timers_apply(
        [schedule_op("q", "a", delay_ms=150_000), schedule_op("q", "b", delay_ms=7_200_000)]
    )
    h = await c.timers_histogram("q", "hour")
    assert (h["window"], h["bucketMs"], len(h["buckets"])) == ("hour", 60_000, 60)
    assert sum(x["count"] for x in h["buckets"]) == 1 and (h["overdue"], h["later"]) == (0, 1)
    assert len((await c.timers_histogram("q", "90d"))["buckets"]) == 90
    await _expect("timers_bad_request", 400, c.timers_histogram("q", "fortnight"))


async def test_conformance_a_key_prefix_narrows_the_figures_and_the_histogram(conformance_client):
    c = conformance_client
    _console(c)
    await c.timers_apply(
        [
            schedule_op("q", "job:1", delay_ms=30_000),
            schedule_op("q", "job:2", delay_ms=150_000),
            schedule_op("q", "job_3", delay_ms=150_000),  # `_` is literal, not a wildcard
            schedule_op("q", "other", delay_ms=30_000),
        ]
    )
    t = (await c.queue_summary("q", "job:"))["timers"]
    assert (t["pending"], t["dueNextMinute"], t["dueNextHour"]) == (2, 1, 2)
    assert (await c.queue_summary("q"))["timers"]["pending"] == 4
    h = await c.timers_histogram("q", "hour", "job:")
    assert (h["pending"], sum(x["count"] for x in h["buckets"]), h["prefix"]) == (2, 2, "job:")
    assert (await c.timers_histogram("q", "hour"))["pending"] == 4
    assert (await c.timers_histogram("q", "90d", "job_"))["pending"] == 1


async def test_conformance_fire_now_and_cancel_prefix(conformance_clients):
    a = await conformance_clients(uuid.uuid4(), sub="alice")
    _console(a)
    b = await conformance_clients(uuid.uuid4(), sub="bob")
    [s] = await a.timers_apply([schedule_op("q", "k/1", txn="t1", delay_ms=3_600_000)])
    assert (await b.timer_fire_now("q", "k/1"))["status"] == "absent"
    res = await a.timer_fire_now("q", "k/1")
    assert (res["status"], res["txn"], res["messageId"]) == ("rescheduled", "t1", s["messageId"])
    assert (await a.timer_fire_now("q", "none"))["status"] == "absent"
    await _expect("timers_bad_request", 400, a.timer_fire_now("q", ""))
    await a.timers_apply([schedule_op("q", f"p/{i}") for i in range(5)])
    assert (await b.timers_cancel_prefix("q", "p/"))["cancelled"] == 0
    first = await a.timers_cancel_prefix("q", "p/", limit=3)
    assert (first["cancelled"], first["remaining"]) == (3, True)
    second = await a.timers_cancel_prefix("q", "p/", limit=3)
    assert (second["cancelled"], second["remaining"]) == (2, False)
    await _expect("timers_bad_request", 400, a.timers_cancel_prefix("q", "p/", limit=0))
    await _expect("timers_bad_request", 400, a.timers_cancel_prefix("q", ""))
    assert (await a.timers_count("q", "k/"))["count"] == 1


async def test_conformance_dlq_replay_and_delete(conformance_clients):
    a = await conformance_clients(uuid.uuid4(), sub="alice")
    _console(a)
    b = await conformance_clients(uuid.uuid4(), sub="bob")
    one = await _dead_letter(a, "dead", "poisoned-1")
    two = await _dead_letter(a, "dead", "poisoned-2")
    assert [r["status"] for r in (await b.dlq_replay([one], "push"))["results"]] == ["absent"]
    assert [r["status"] for r in (await b.dlq_delete([two]))["results"]] == ["absent"]
    assert [r["status"] for r in (await a.dlq_replay([one], "push"))["results"]] == ["replayed"]
    got = await a.pop("dead", batch=10)
    assert got is not None and [m["data"] for m in got["messages"]] == [{"txn": "poisoned-1"}]
    assert [r["status"] for r in (await a.dlq_delete([two, one]))["results"]] == [
        "deleted",
        "absent",
    ]
    assert (await a.dlq(queue="dead"))["total"] == 0
    await _expect("bad_request", 400, a.dlq_replay([one], "teleport"))
    await _expect("bad_request", 400, a.dlq_delete([]))
    await _expect("bad_request", 400, a.dlq_delete([{"transactionId": "x"}]))


__all__ = [
    "Adapter",
    "Connect",
    "CONFORMANCE_JWT_SECRET",
    "mint_token",
    "b64json",
    "schedule_op",
    "conformance_queen",
    "conformance_clients",
    "conformance_client",
    *[n for n in list(globals()) if n.startswith("test_conformance_")],
]
