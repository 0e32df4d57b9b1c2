"""Every method of the official client's `client.admin` (queen-mq 2.6.0), and
`client.queue(q).delete()`, against a broker with JWT on: what each answers, who may call it,
and that a tenant sees none of another tenant's queues through them
(docs/guides/official-client.md has the table this test holds the broker to)."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest
from queen import Queen as Client  # the official client
from queen.admin.admin import Admin

from queen_http import HttpTransport
from queen_http.not_here import NOT_HERE
from queen_http.testing import http_settings
from queen_timers.testing.fixtures import started_broker

SECRET = "official-client-admin-secret-long-enough-0123456789"
TENANT_A, TENANT_B = uuid.uuid4(), uuid.uuid4()

# Methods the client refuses itself, before any request (their docstrings say why).
RAISED_BY_THE_CLIENT = {"clear_queue", "move_message_to_dlq"}
# Methods this broker refuses with 410 not_implemented, and the reason it names.
REFUSED = {
    "get_traces_by_name": "traces_not_recorded",
    "get_trace_names": "traces_not_recorded",
    "get_traces_for_message": "traces_not_recorded",
    "get_analytics": "analytics_not_stored",
}


def token(tenant: uuid.UUID, *, admin: bool) -> str:
    claims: dict[str, Any] = {"sub": "ops", "tenant": str(tenant)}
    if admin:
        claims["admin"] = True
    return jwt.encode(claims, SECRET, "HS256")


class Recording:
    """client.admin, recording the name of every method called through it."""

    def __init__(self, admin: Admin):
        self._admin = admin
        self.called: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.called.add(name)
        return getattr(self._admin, name)


def client(url: str, tenant: uuid.UUID, *, admin: bool = True) -> Client:
    return Client(
        url,
        bearer_token=token(tenant, admin=admin),
        timeout_millis=10_000,
        retry_attempts=3,  # a 5xx would be retried: every refusal here must be a 4xx
        retry_delay_millis=5_000,
        binary_push=False,
        push_compression=False,
        framed_pop=False,
    )


@pytest.fixture
async def url(db_url) -> AsyncIterator[str]:
    async with started_broker(db_url, jwt_secret=SECRET) as q:
        t = HttpTransport(http_settings())
        await t.start(q)
        try:
            yield t.url
        finally:
            await t.stop()


async def refused(call: Any) -> httpx.Response:
    with pytest.raises(httpx.HTTPStatusError) as ei:
        await call
    return ei.value.response


async def seed(c: Client) -> dict[str, Any]:
    """Queue `orders` (namespace shop, task billing) with 3 messages in p1 and 1 in p2, one of
    p1 leased, one dead-lettered; a pending timer; queue `plain` with one message."""
    await c.queue("orders").namespace("shop").task("billing").config({"leaseTime": 60}).create()
    await c.queue("orders").partition("p1").push([{"data": {"n": i}} for i in range(3)])
    await c.queue("orders").partition("p2").push([{"data": {"n": 9}, "transactionId": "t-p2"}])
    await c.queue("plain").push([{"data": "x"}])
    await c.timers.schedule("orders", "later", {"t": 1}, delay_ms=3_600_000, txn="t-timer")
    popped = await c.queue("orders").partition("p1").batch(2).pop()
    assert len(popped) == 2
    # The first of the two is dead-lettered, which ends the batch's lease (docs/concepts/log.md,
    # the ack table); the second is popped again and stays leased (processing).
    acked = await c.ack(popped[0], "dlq")
    assert acked.get("success") is True, acked
    again = await c.queue("orders").partition("p1").batch(1).pop()
    assert [m["transactionId"] for m in again] == [popped[1]["transactionId"]]
    return {"dead": popped[0], "leased": again[0]}


async def test_every_admin_method_is_answered(url):
    a = client(url, TENANT_A)
    rec = Recording(a.admin)
    try:
        seeded = await seed(a)
        dead, leased = seeded["dead"], seeded["leased"]
        pid = dead["partitionId"]

        # -- the system
        assert await rec.health() == {"status": "ok"}
        # /metrics is Prometheus text: the client decodes JSON only, so it answers None
        assert await rec.metrics() is None

        # -- resources
        overview = await rec.get_overview()
        assert overview["queues"] == 2 and overview["timers"]["pending"] == 1
        assert await rec.get_namespaces() == {
            "namespaces": [
                {
                    "namespace": "shop",
                    "queues": 1,
                    "partitions": 2,
                    # pending waits for a pop: the leased one is processing
                    "messages": {"total": 4, "pending": 2},
                }
            ]
        }
        tasks = await rec.get_tasks()
        assert [t["task"] for t in tasks["tasks"]] == ["billing"]
        queues = await rec.list_queues()
        assert [q["name"] for q in queues["queues"]] == ["orders", "plain"]
        one = await rec.get_queue("orders")
        assert one["name"] == "orders" and one["messages"]["total"] == 4

        depth = await rec.get_queue_depth("orders")
        assert depth["queue"] == "orders" and depth["group"] is None
        assert depth["partitions"] == [
            {"partition": "p1", "pending": 2},  # the leased one and the untouched one
            {"partition": "p2", "pending": 1},
        ]
        assert depth["pending"] == depth["effectivePending"] == 3
        assert depth["partitionsPending"] == 2 and depth["conflation"] is False
        fresh = await rec.get_queue_depth("orders", group="reports")
        assert fresh["group"] == "reports" and fresh["pending"] == 4

        parts = await rec.get_partitions(queue="orders")
        assert [(p["name"], p["messages"]) for p in parts["partitions"]] == [
            ("p1", {"total": 3, "pending": 1, "processing": 1}),
            ("p2", {"total": 1, "pending": 1, "processing": 0}),
        ]
        assert parts["partitions"][0]["id"] == pid
        every = await rec.get_partitions()
        assert {p["queue"] for p in every["partitions"]} == {"orders", "plain"}

        # -- messages
        listed = await rec.list_messages(queue="orders")
        by_txn = {m["transactionId"]: m for m in listed["messages"]}
        assert len(by_txn) == 4 and by_txn["t-p2"]["partition"] == "p2"
        assert by_txn[dead["transactionId"]]["status"] == "completed"
        assert by_txn[leased["transactionId"]]["status"] == "processing"
        assert by_txn[leased["transactionId"]]["leaseExpiresAt"] is not None
        assert "data" not in by_txn["t-p2"]
        pending = await rec.list_messages(queue="orders", status="pending", limit=1)
        assert len(pending["messages"]) == 1 and pending["messages"][0]["status"] == "pending"
        bad = await refused(rec.list_messages())
        assert (bad.status_code, bad.json()["reason"]) == (400, "messages_queue_required")

        got = await rec.get_message(pid, leased["transactionId"])
        assert got["data"] == leased["data"] and got["status"] == "processing"
        missing = await refused(rec.get_message(pid, "no-such-txn"))
        assert (missing.status_code, missing.json()["error"]) == (404, "message_not_found")

        # a message of the log cannot be deleted or retried: the log is append-only
        for call in (rec.delete_message, rec.retry_message):
            gone = await refused(call(pid, leased["transactionId"]))
            assert gone.status_code == 410
            assert gone.json()["reason"] == "log_is_append_only"
        # its dead letter can: retry pushes it again, then there is nothing left to delete
        retried = await rec.retry_message(pid, dead["transactionId"])
        assert retried["success"] is True and retried["deadLetters"] == 1
        depth = await rec.get_queue_depth("orders")
        assert depth["partitions"][0] == {"partition": "p1", "pending": 3}
        nothing = await refused(rec.delete_message(pid, dead["transactionId"]))
        assert nothing.status_code == 410  # its replayed copy is in the log now
        dlq_only = (await a.queue("orders").partition("p2").pop())[0]
        await a.ack(dlq_only, "dlq")
        deleted = await rec.delete_message(dlq_only["partitionId"], "t-p2")
        assert deleted == {
            "success": True,
            "partitionId": dlq_only["partitionId"],
            "transactionId": "t-p2",
            "message": "dead letter deleted",
            "deadLetters": 1,
        }

        # -- status
        status = await rec.get_status()
        assert status["messages"]["total"] == 6  # 4 + the replayed one + plain's
        assert status["leases"]["active"] == 1 and status["timers"]["pending"] == 1
        assert [q["name"] for q in status["queues"]] == ["orders", "plain"]
        stats = await rec.get_queue_stats(namespace="shop")
        assert [q["name"] for q in stats["queues"]] == ["orders"]
        assert stats["pagination"] == {"limit": 100, "offset": 0, "total": 1}
        detail = await rec.get_queue_detail("orders")
        assert detail["queue"]["namespace"] == "shop"
        assert detail["queue"]["config"]["leaseTime"] == 60
        assert [p["name"] for p in detail["partitions"]] == ["p1", "p2"]
        assert detail["totals"]["messages"]["total"] == 5
        assert detail["timers"]["pending"] == 1

        # -- broker figures (admin)
        system = await rec.get_system_metrics()
        point = system["replicas"][0]["timeSeries"][0]
        assert point["metrics"]["database"]["poolSize"] >= 1
        workers = await rec.get_worker_metrics()
        assert "windowSeconds" in workers["timeSeries"][0]
        assert await rec.refresh_consumer_stats() == {
            "success": True,
            "message": "statistics are computed at each read; nothing to refresh",
        }

        # -- refused with a reason, in one attempt (a 4xx is never retried)
        refusals = {
            "get_traces_by_name": rec.get_traces_by_name("x"),
            "get_trace_names": rec.get_trace_names(),
            "get_traces_for_message": rec.get_traces_for_message(pid, "t"),
            "get_analytics": rec.get_analytics(),
        }
        for name, call in refusals.items():
            r = await refused(call)
            body = r.json()
            assert r.status_code == 410 and body["error"] == "not_implemented", name
            assert body["reason"] == REFUSED[name] and body["detail"], name
        for name in RAISED_BY_THE_CLIENT:
            with pytest.raises(NotImplementedError):
                await getattr(rec, name)("orders", "x")

        # -- consumer groups: group "reports" leases 3 of p1's 4 messages and acks the first
        got = (
            await a.queue("orders")
            .partition("p1")
            .group("reports")
            .subscription_mode("all")
            .batch(3)
            .pop()
        )
        assert len(got) == 3
        assert (await a.ack(got[0], True, {"group": "reports"}))["success"] is True
        [row] = await rec.list_consumer_groups()
        assert row["name"] == "reports" and row["queueName"] == "orders"
        assert row["topics"] == ["orders"] and row["subscriptionMode"] == "all"
        assert row["members"] == 1 and row["state"] == "Stable"
        assert row["totalLag"] == 4 and row["partitionsWithLag"] == 2  # p1: 3 left, p2: 1
        one_group = await rec.get_consumer_group("reports")
        p1, p2 = one_group["orders"]["partitions"]
        assert (p1["partition"], p1["offsetLag"], p1["leaseActive"]) == ("p1", 3, True)
        assert (p2["partition"], p2["offsetLag"], p2["committed"]) == ("p2", 1, -1)
        assert await rec.get_consumer_group("nobody") == {}
        lag = await rec.get_lagging_consumers(min_lag_seconds=-1)
        assert {(r["partition_name"], r["offset_lag"]) for r in lag} == {("p1", 3), ("p2", 1)}
        assert await rec.get_lagging_consumers(min_lag_seconds=3600) == []
        seek = await rec.seek_consumer_group("reports", "orders", {"toEnd": True})
        assert seek["partitionsUpdated"] == 1 and seek["seekToEnd"] is True  # p1's cursor
        moved = (await rec.get_consumer_group("reports"))["orders"]["partitions"][0]
        assert (moved["offsetLag"], moved["leaseActive"]) == (0, False)
        back = await rec.seek_consumer_group(
            "reports", "orders", {"timestamp": "2000-01-01T00:00:00Z"}
        )
        assert back["targetTimestamp"] == "2000-01-01T00:00:00.000Z"
        rewound = (await rec.get_consumer_group("reports"))["orders"]["partitions"][0]
        assert rewound["offsetLag"] == 4  # all of p1 again
        no_target = await refused(rec.seek_consumer_group("reports", "orders", {}))
        assert no_target.json()["reason"] == "seek_target_required"
        reserved = await refused(rec.get_consumer_group("__QUEUE_MODE__"))
        assert reserved.json()["reason"] == "consumer_group_reserved"
        forgot = await rec.delete_consumer_group_for_queue("reports", "orders")
        assert forgot == {
            "success": True,
            "consumerGroup": "reports",
            "queueName": "orders",
            "deletedPartitions": 1,
            "metadataDeleted": True,
        }
        assert await rec.list_consumer_groups() == []

        # -- the queue delete: one transaction takes messages, timers, partitions
        dropped = await a.queue("orders").delete()
        assert dropped == {
            "deleted": True,
            "existed": True,
            "queue": "orders",
            "partitions": 2,
            "messages": 5,
            "timers": 1,
            "deadLetters": 0,
        }
        assert (await refused(rec.get_queue("orders"))).status_code == 404
        assert (await a.timers.peek("orders", "later"))["found"] is False
        assert [p["queue"] for p in (await rec.get_partitions())["partitions"]] == ["plain"]
        again = await a.queue("orders").delete()
        assert again["existed"] is False and again["partitions"] == 0
    finally:
        await a.close()

    public = {n for n, _ in inspect.getmembers(Admin, inspect.iscoroutinefunction)}
    public = {n for n in public if not n.startswith("_")}
    assert len(public) == 30
    assert rec.called >= public, f"not driven: {sorted(public - rec.called)}"


def test_the_refusal_table_is_the_routes():
    """Every refused route of the broker is one the client calls, and the reasons match."""
    assert {e.reason for e in NOT_HERE} == set(REFUSED.values())
    assert len(NOT_HERE) == len(REFUSED)


async def test_a_tenant_sees_none_of_another_tenants_queues(url):
    a, b = client(url, TENANT_A), client(url, TENANT_B)
    try:
        seeded = await seed(a)
        pid, txn = seeded["leased"]["partitionId"], seeded["leased"]["transactionId"]
        assert (await b.admin.list_queues())["queues"] == []
        assert await b.admin.get_namespaces() == {"namespaces": []}
        assert await b.admin.get_tasks() == {"tasks": []}
        assert await b.admin.get_partitions() == {"partitions": []}
        assert (await b.admin.get_status())["queues"] == []
        assert (await b.admin.get_status())["leases"]["active"] == 0
        assert (await b.admin.get_queue_stats())["queues"] == []
        await a.queue("orders").group("g").batch(1).pop()
        assert await b.admin.list_consumer_groups() == []
        assert await b.admin.get_consumer_group("g") == {}
        assert await b.admin.get_lagging_consumers(min_lag_seconds=-1) == []
        seek = await b.admin.seek_consumer_group("g", "orders", {"toEnd": True})
        assert seek["partitionsUpdated"] == 0
        forgot = await b.admin.delete_consumer_group_for_queue("g", "orders")
        assert forgot["deletedPartitions"] == 0 and forgot["metadataDeleted"] is False
        assert [g["name"] for g in await a.admin.list_consumer_groups()] == ["g"]
        for call in (
            b.admin.get_queue("orders"),
            b.admin.get_queue_depth("orders"),
            b.admin.get_queue_detail("orders"),
            b.admin.get_message(pid, txn),
            b.admin.retry_message(pid, seeded["dead"]["transactionId"]),
            b.admin.delete_message(pid, seeded["dead"]["transactionId"]),
        ):
            assert (await refused(call)).status_code == 404
        assert (await b.admin.list_messages(queue="orders"))["messages"] == []
        # B's delete of a queue named like A's drops nothing of A's
        theirs = await b.queue("orders").delete()
        assert theirs["existed"] is False
        assert (await a.admin.get_queue("orders"))["messages"]["total"] == 4
        assert (await a.timers.peek("orders", "later"))["found"] is True
    finally:
        await a.close()
        await b.close()


async def test_admin_rules(url):
    """Deleting a queue and the broker's own figures need an admin token; a tenant's own
    reads do not."""
    a, plain = client(url, TENANT_A), client(url, TENANT_A, admin=False)
    try:
        await seed(a)
        for call in (
            plain.admin.get_system_metrics(),
            plain.admin.get_worker_metrics(),
        ):
            r = await refused(call)
            assert (r.status_code, r.json()["reason"]) == (403, "admin_required")
        with pytest.raises(httpx.HTTPStatusError) as ei:
            await plain.queue("orders").delete()
        assert ei.value.response.status_code == 403
        assert (await plain.admin.get_queue("orders"))["messages"]["total"] == 4
        assert (await plain.admin.get_status())["timers"]["pending"] == 1
        # the reference's Prometheus route serves the same text, under the same rule
        async with httpx.AsyncClient(base_url=url) as h:
            admin_auth = {"Authorization": f"Bearer {token(TENANT_A, admin=True)}"}
            text = await h.get("/metrics/prometheus", headers=admin_auth)
            assert text.status_code == 200 and "# TYPE" in text.text
            plain_auth = {"Authorization": f"Bearer {token(TENANT_A, admin=False)}"}
            assert (await h.get("/metrics/prometheus", headers=plain_auth)).status_code == 403
    finally:
        await a.close()
        await plain.close()


async def test_a_dlq_ack_ends_the_batchs_lease_as_the_log_engine_does(url):
    """The issue's ack bullet, through the official client: acking one message of a popped
    batch with `dlq` dead-letters it and ends the batch's lease (spec/log-engine.md 5.3-5.4,
    `log_dlq_head_v1` clears the lease); a later ack of that batch is refused and its message
    is delivered again. The ack table of docs/concepts/log.md says so."""
    a = client(url, TENANT_A)
    try:
        await a.queue("acks").push([{"data": {"n": i}, "transactionId": f"t{i}"} for i in range(3)])
        _, second, third = await a.queue("acks").batch(3).pop()
        assert (await a.ack(second, "dlq"))["success"] is True
        late = await a.ack(third, True)
        assert late["success"] is False and "lease" in late["error"].lower(), late
        redelivered = await a.queue("acks").batch(3).pop()
        assert [m["transactionId"] for m in redelivered] == ["t2"]
        dead = await a.admin.list_messages(queue="acks")
        status = {m["transactionId"]: m["status"] for m in dead["messages"]}
        assert status == {"t0": "completed", "t1": "completed", "t2": "processing"}
    finally:
        await a.close()


async def test_bad_input_is_refused_with_a_reason_and_changes_nothing(url):
    a = client(url, TENANT_A)
    try:
        seeded = await seed(a)
        await a.queue("orders").group("g").batch(1).pop()
        before = await a.admin.get_consumer_group("g")
        cases = {
            "messages_bad_status": a.admin.list_messages(queue="orders", status="nope"),
            "messages_bad_limit": a.admin.list_messages(queue="orders", limit=0),
            "messages_bad_offset": a.admin.list_messages(queue="orders", offset=10_001),
            "bad_partition_id": a.admin.get_message("not-a-uuid", "t"),
            "bad_parameter": a.admin.get_lagging_consumers(min_lag_seconds="soon"),
            "seek_bad_timestamp": a.admin.seek_consumer_group("g", "orders", {"timestamp": "x"}),
            "seek_target_required": a.admin.seek_consumer_group(
                "g", "orders", {"toEnd": True, "timestamp": "2030-01-01T00:00:00Z"}
            ),
            "seek_bad_to_end": a.admin.seek_consumer_group("g", "orders", {"toEnd": "yes"}),
            "bad_body": a.admin.seek_consumer_group("g", "orders", {"toEnd": True, "to": 1}),
            "consumer_group_reserved": a.admin.get_queue_depth("orders", group="__QUEUE_MODE__"),
        }
        for reason, call in cases.items():
            r = await refused(call)
            assert (r.status_code, r.json()["reason"]) == (400, reason), (reason, r.text)
        assert await a.admin.get_consumer_group("g") == before
        leased = seeded["leased"]
        got = await a.admin.get_message(leased["partitionId"], leased["transactionId"])
        assert got["status"] == "processing"  # still leased: no refusal touched the lease
    finally:
        await a.close()
