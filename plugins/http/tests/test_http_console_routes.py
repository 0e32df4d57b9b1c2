"""The operator's routes on HTTP (issue 16): /api/v1/resources/*, the histogram mode, fire now
and cancel by prefix beside the catch-all key routes, dead-letter replay and delete; and the
official client's admin methods that read the same routes."""

from __future__ import annotations

import base64
import json

import jsonschema_rs
import pytest
from queen import Queen as OfficialClient

from queen_timers.errors import QueenError
from queen_timers.testing import serving


def _op(key: str, delay_ms: int = 7_200_000) -> dict:
    return {
        "op": "schedule",
        "queue": "q",
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": f"t-{key}",
        "payload": base64.b64encode(json.dumps({"k": key}).encode()).decode(),
    }


async def _json(resp, status: int = 200):
    body = await resp.json()
    assert resp.status == status, body
    return body


async def test_resources_routes(http, queen, ident):
    await queen.timers_apply(ident, [_op("a", 30_000), _op("b")])
    async with http.get("/api/v1/resources/queues") as r:
        doc = await _json(r)
    [q] = doc["queues"]
    assert q["name"] == "q" and q["timers"]["pending"] == 2 and q["timers"]["dueNextMinute"] == 1
    async with http.get("/api/v1/resources/queues/q") as r:
        assert (await _json(r))["timers"]["dueNextHour"] == 1  # b is 2 h away
    async with http.get("/api/v1/resources/queues/nope") as r:
        assert (await _json(r, 404))["error"] == "queue_not_found"
    async with http.get("/api/v1/resources/overview") as r:
        ov = await _json(r)
    assert ov["queues"] == 1 and ov["timers"]["pending"] == 2 and "thisBroker" in ov


async def test_histogram_mode(http, queen, ident):
    await queen.timers_apply(ident, [_op("a", 90_000)])
    params = {"mode": "histogram", "window": "hour"}
    async with http.get("/api/v1/timers/q", params=params) as r:
        h = await _json(r)
    assert h["bucketMs"] == 60_000 and sum(b["count"] for b in h["buckets"]) == 1
    for bad in ({"mode": "histogram", "window": "week"}, {"mode": "histogram", "limit": "5"}):
        async with http.get("/api/v1/timers/q", params=bad) as r:
            assert set(await _json(r, 400)) >= {"error", "reason", "detail"}
    async with http.get("/api/v1/timers/q", params={"window": "hour"}) as r:
        await _json(r, 400)


async def test_fire_and_cancel_prefix_beside_keys_holding_slashes(http, queen, ident):
    await queen.timers_apply(ident, [_op("fire"), _op("x/fire"), _op("p/1"), _op("p/2")])
    # GET and DELETE of a key named like the action still address the key
    async with http.get("/api/v1/timers/q/fire") as r:
        assert (await _json(r))["found"] is True
    async with http.post("/api/v1/timers/q/fire", json={"timerKey": "x/fire"}) as r:
        res = await _json(r)
    assert res["status"] == "rescheduled" and res["txn"] == "t-x/fire"
    async with http.post("/api/v1/timers/q/fire", json={"timerKey": "gone"}) as r:
        assert (await _json(r))["status"] == "absent"
    async with http.post("/api/v1/timers/q/fire", json={"key": "x"}) as r:
        assert (await _json(r, 400))["reason"] == "bad_body"
    body = {"prefix": "p/", "limit": 1}
    async with http.post("/api/v1/timers/q/cancel-prefix", json=body) as r:
        assert await _json(r) == {
            "queue": "q",
            "prefix": "p/",
            "cancelled": 1,
            "absent": 0,
            "tooLate": 0,
            "remaining": True,
        }
    async with http.post("/api/v1/timers/q/cancel-prefix", json={"prefix": "p/"}) as r:
        assert (await _json(r))["remaining"] is False
    async with http.post("/api/v1/timers/q/cancel-prefix", json={"prefix": "p/", "limit": 0}) as r:
        assert (await _json(r, 400))["reason"] == "timers_cancel_limit"
    async with http.delete("/api/v1/timers/q/fire") as r:
        assert (await _json(r))["status"] == "cancelled"


async def test_dlq_replay_and_delete(http, queen, ident):
    for n in (1, 2):
        await queen.push(ident, [{"queue": "dq", "payload": {"n": n}, "transactionId": f"t{n}"}])
        got = await queen.pop(ident, "dq", batch=1)
        m = got["messages"][0]
        await queen.ack(
            ident,
            [
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "leaseId": m["leaseId"],
                    "status": "dlq",
                }
            ],
        )
    items = [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"]}
        for m in (await queen.dlq(ident, queue="dq"))["messages"]
    ]
    body = {"items": items[:1], "mode": "push"}
    async with http.post("/api/v1/dlq/replay", json=body) as r:
        assert [x["status"] for x in (await _json(r))["results"]] == ["replayed"]
    async with http.post("/api/v1/dlq/delete", json={"items": items}) as r:
        assert [x["status"] for x in (await _json(r))["results"]] == ["absent", "deleted"]
    async with http.post("/api/v1/dlq/replay", json={"items": items, "mode": "x"}) as r:
        assert (await _json(r, 400))["reason"] == "dlq_bad_mode"
    async with http.post("/api/v1/dlq/delete", json={"items": []}) as r:
        assert (await _json(r, 400))["reason"] == "dlq_items_required"


async def test_openapi_names_the_new_routes(http):
    async with http.get("/openapi.json") as r:
        paths = (await _json(r))["paths"]
    assert {"post"} <= set(paths["/api/v1/timers/{queue}/fire"])
    assert {"post"} <= set(paths["/api/v1/timers/{queue}/cancel-prefix"])
    for p in (
        "/api/v1/resources/overview",
        "/api/v1/resources/queues",
        "/api/v1/resources/queues/{queue}",
        "/api/v1/dlq/replay",
        "/api/v1/dlq/delete",
    ):
        assert p in paths


async def test_a_backing_off_timer_says_when_it_is_retried_as_the_document_says(
    http, queen, ident, conn
):
    await queen.timers_apply(ident, [_op("b"), _op("w")])
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute', attempts = 2,"
        " last_error = 'permanent: boom', claimed_until = now() + interval '10 minutes'"
        " WHERE timer_key = 'b'"
    )
    async with http.get("/openapi.json") as r:
        described = await _json(r)
    paths = described["paths"]

    def validate(doc: dict, path: str) -> None:
        schema = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        # the answers' schemas refer to the document's components (generated from the wire)
        rooted = {**schema, "components": described["components"]}
        jsonschema_rs.Draft202012Validator(rooted, validate_formats=True).validate(doc)

    async with http.get("/api/v1/timers/q/b") as r:
        peek = await _json(r)
    validate(peek, "/api/v1/timers/{queue}/{timerKey}")
    assert peek["state"] == "backing_off" and peek["deliverAt"] < peek["retryAt"]
    async with http.get("/api/v1/timers/q") as r:
        page = await _json(r)
    validate(page, "/api/v1/timers/{queue}")
    assert [(t["timerKey"], t["retryAt"]) for t in page["rows"]] == [
        ("b", peek["retryAt"]),
        ("w", None),
    ]


@pytest.fixture(autouse=False)
def _client_wire(monkeypatch):
    monkeypatch.setenv("QUEEN_SDK_POP_AUTOPILOT", "on")


async def test_official_client_admin_methods(db_url, _client_wire):
    async with serving(database_url=db_url) as broker:
        client = OfficialClient(broker.url.rstrip("/"), timeout_millis=10_000, retry_attempts=1)
        try:
            await client.queue("orders").config({"lease_time": 30}).create()
            await client.timers.schedule("orders", "k/1", {"x": 1}, delay_ms=120_000, txn="t1")
            ov = await client.admin.get_overview()
            assert ov["queues"] == 1 and ov["timers"]["pending"] == 1
            listed = await client.admin.list_queues()
            assert [q["name"] for q in listed["queues"]] == ["orders"]
            assert listed["queues"][0]["timers"]["dueNextMinute"] == 0
            assert listed["queues"][0]["timers"]["dueNextHour"] == 1
            one = await client.admin.get_queue("orders")
            assert one["name"] == "orders" and one["partitions"] == 0
            assert one["timers"]["pending"] == 1
        finally:
            await client.close()


@pytest.mark.parametrize(
    ("path", "body", "call"),
    [
        ("fire", {"timerKey": 5}, lambda q, i: q.timer_fire_now(i, "q", 5)),
        ("fire", {"timerKey": ""}, lambda q, i: q.timer_fire_now(i, "q", "")),
        ("cancel-prefix", {"prefix": 7}, lambda q, i: q.timers_cancel_prefix(i, "q", 7)),
        (
            "cancel-prefix",
            {"prefix": "p", "limit": "9"},
            lambda q, i: q.timers_cancel_prefix(i, "q", "p", limit="9"),
        ),
        (
            "cancel-prefix",
            {"prefix": "p", "limit": 10_001},
            lambda q, i: q.timers_cancel_prefix(i, "q", "p", limit=10_001),
        ),
    ],
)
async def test_a_body_that_is_not_its_struct_is_refused_as_the_service_refuses_it(
    http, queen, ident, path, body, call
):
    """A body that fails its struct's decode takes the plain-JSON path: the refusal is the
    service's own, with its code, as a direct call gets it."""
    with pytest.raises(QueenError) as direct:
        await call(queen, ident)
    async with http.post(f"/api/v1/timers/q/{path}", json=body) as r:
        got = await _json(r, direct.value.status)
    assert (got["error"], got["reason"]) == (direct.value.code, direct.value.reason)
