"""What only the HTTP transport does: the wire details around the service calls."""

from __future__ import annotations

import asyncio
import logging
import uuid

import aiohttp
import jwt

from queen_http import ROUTES, HttpTransport, openapi
from queen_http.testing import http_settings
from queen_timers.identity import DEFAULT_TENANT
from queen_timers.service import Queen


async def test_health_ready_metrics(http):
    async with http.get("/health") as r:
        assert r.status == 200 and await r.json() == {"status": "ok"}
    async with http.get("/ready") as r:
        assert r.status == 200 and (await r.json())["ready"] is True
    async with http.get("/metrics") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        assert "queen_" in await r.text()


async def test_openapi_describes_every_route(http, http_transport):
    async with http.get("/openapi.json") as r:
        doc = await r.json()
    described = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert ("GET", "/api/v1/timers/{queue}/{timerKey}") in described
    served = set()
    for res in http_transport._runner.app.router.resources():  # type: ignore[union-attr]
        info = res.get_info()
        path = info.get("path") or info.get("formatter")
        for route in res:
            if not path.startswith("/console"):  # static files, not API routes
                served.add((route.method, path))
    assert served == described
    assert len(described) == len(ROUTES)
    assert len(openapi()["paths"]) == len({path for _, path in described})


async def test_unknown_route_and_method_are_json(http):
    async with http.get("/api/v1/nope") as r:
        assert r.status == 404 and (await r.json())["error"] == "not_found"
    async with http.put("/api/v1/timers") as r:
        assert r.status == 405 and (await r.json())["error"] == "method_not_allowed"
        assert r.headers["Allow"] == "POST"  # RFC 9110: a 405 names what the path serves


async def test_body_over_limit_is_413_before_it_is_read(queen):
    t = HttpTransport(http_settings(http_max_body_bytes=1024))
    await t.start(queen)
    try:
        host, port = t.host, t.port
        # Announce a huge body and send none of it: the answer must come from the header.
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(
            b"POST /api/v1/timers HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json"
            b"\r\nContent-Length: 1000000000\r\n\r\n" % (host.encode(), port)
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.read(4096), 5)
        writer.close()
        assert head.startswith(b"HTTP/1.1 413"), head[:200]
        assert b'"error":"payload_too_large"' in head
        # A chunked body (no length) is cut off while streaming.
        async with aiohttp.ClientSession(t.url) as s:

            async def chunks():
                for _ in range(64):
                    yield b" " * 512

            async with s.post(
                "/api/v1/timers", data=chunks(), headers={"Content-Type": "application/json"}
            ) as r:
                assert r.status == 413 and (await r.json())["error"] == "payload_too_large"
    finally:
        await t.stop()


async def test_bad_json_on_timers_is_timers_bad_body(http):
    async with http.post(
        "/api/v1/timers", data=b"{nope", headers={"Content-Type": "application/json"}
    ) as r:
        body = await r.json()
        assert r.status == 400
        assert (body["error"], body["reason"]) == ("timers_bad_request", "timers_bad_body")
    async with http.post("/api/v1/timers", json="a string") as r:
        assert r.status == 400 and (await r.json())["reason"] == "timers_bad_body"


async def test_count_mode_parameter_checks(http):
    async with http.get(
        "/api/v1/timers/q", params={"mode": "count", "prefix": "a", "limit": "2"}
    ) as r:
        assert r.status == 400
        assert (await r.json())["reason"] == "timers_count_page_parameters"
    async with http.get("/api/v1/timers/q", params={"mode": "bogus"}) as r:
        assert r.status == 400 and (await r.json())["reason"] == "timers_read_mode_unknown"


async def test_conflating_pop_is_refused(http):
    async with http.get("/api/v1/pop/queue/q", params={"conflation": "true"}) as r:
        assert r.status == 400 and (await r.json())["reason"] == "conflation_unsupported"


async def test_empty_pop_answers_204(http):
    async with http.get(
        "/api/v1/pop/queue/empty", params={"wait": "false", "timeout": "100", "autopilot": "true"}
    ) as r:
        assert r.status == 204


async def test_push_answers_201_array(http):
    async with http.post("/api/v1/push", json={"items": [{"queue": "q", "payload": 1}]}) as r:
        assert r.status == 201
        body = await r.json()
        assert isinstance(body, list) and body[0]["status"] == "queued"


async def test_lease_extend_takes_an_empty_body(http):
    async with http.post("/api/v1/push", json={"items": [{"queue": "q", "payload": 1}]}):
        pass
    async with http.get("/api/v1/pop/queue/q", params={"batch": "1", "wait": "false"}) as r:
        lease = (await r.json())["messages"][0]["leaseId"]
    # Exactly what the client sends: Content-Length 0 and no Content-Type.
    async with http.post(f"/api/v1/lease/{lease}/extend", data=b"") as r:
        assert r.status == 200 and (await r.json())["success"] is True


async def test_transaction_refusal_keeps_the_failure_body(http):
    body = {
        "operations": [],
        "timers": [
            {
                "op": "schedule",
                "queue": "q",
                "timerKey": "k",
                "payload": "MQ==",
                "delayMs": 10,
                "txn": "t",
                "producerSub": "forged",
            }
        ],
    }
    async with http.post("/api/v1/transaction", json=body) as r:
        doc = await r.json()
        assert 400 <= r.status < 500
        assert doc["success"] is False and doc["results"] == [] and isinstance(doc["error"], str)


async def test_switches_body_must_be_an_object(http):
    async with http.post("/api/v1/system/kv-timers", json=[1]) as r:
        assert r.status == 400 and (await r.json())["error"] == "bad_request"
    async with http.get("/api/v1/system/kv-timers") as r:
        assert r.status == 200 and (await r.json())["timersScheduleEnabled"] is True


async def test_paused_schedule_carries_retry_after(http):
    async with http.post("/api/v1/system/kv-timers", json={"timersSchedule": False}) as r:
        assert r.status == 200
    try:
        op = {
            "op": "schedule",
            "queue": "q",
            "timerKey": "k",
            "payload": "MQ==",
            "delayMs": 10,
            "txn": "t",
        }
        async with http.post("/api/v1/timers", json={"operations": [op]}) as r:
            assert r.status == 503 and r.headers["Retry-After"] == "1"
            assert (await r.json())["error"] == "timers_disabled"
    finally:
        async with http.post("/api/v1/system/kv-timers", json={"timersSchedule": True}):
            pass


async def test_no_auth_beyond_loopback_logs_a_warning(queen, caplog):
    t = HttpTransport(http_settings(http_host="0.0.0.0"))
    with caplog.at_level(logging.WARNING, logger="queen_http"):
        await t.start(queen)
        await t.stop()
    assert any("without authentication" in r.getMessage() for r in caplog.records)
    caplog.clear()
    t = HttpTransport(http_settings())
    with caplog.at_level(logging.WARNING, logger="queen_http"):
        await t.start(queen)
        await t.stop()
    assert not any("without authentication" in r.getMessage() for r in caplog.records)


async def test_rs256_public_key_and_tenant_claim(db_url):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    q = Queen(
        database_url=db_url, sweeper=False, retention_interval_ms=0, jwt_public_key=pem.decode()
    )
    await q.start()
    t = HttpTransport(http_settings())
    await t.start(q)
    try:
        tenant = uuid.uuid4()
        tok = jwt.encode({"sub": "rs", "tenant": str(tenant)}, key, algorithm="RS256")
        async with aiohttp.ClientSession(t.url) as s:
            async with s.post(
                "/api/v1/push",
                json={"items": [{"queue": "q", "payload": 1}]},
                headers={"Authorization": f"Bearer {tok}"},
            ) as r:
                assert r.status == 201
            async with s.post(
                "/api/v1/push",
                json={"items": [{"queue": "q", "payload": 1}]},
                headers={
                    "Authorization": "Bearer "
                    + jwt.encode({"sub": "x"}, "hs-secret-that-is-long-enough-0123456789", "HS256")
                },
            ) as r:
                assert r.status == 401 and (await r.json())["error"] == "unauthorized"
        async with q.rt.pool.acquire() as c:
            tenants = {
                row[0] for row in await c.fetch("SELECT DISTINCT tenant_id FROM queen.queues")
            }
        assert tenants == {tenant} and DEFAULT_TENANT not in tenants
    finally:
        await t.stop()
        await q.stop()


async def test_a_long_poll_whose_client_hangs_up_claims_nothing(http_transport, http):
    _reader, writer = await asyncio.open_connection(http_transport.host, http_transport.port)
    host = b"%s:%d" % (http_transport.host.encode(), http_transport.port)
    writer.write(
        b"GET /api/v1/pop/queue/lp?wait=true&timeout=20000&batch=1 HTTP/1.1\r\nHost: %s\r\n\r\n"
        % host
    )
    await writer.drain()
    await asyncio.sleep(0.2)  # parked
    writer.close()
    await asyncio.sleep(0.5)  # the server notices the hang-up (same event loop: prompt)
    async with http.post("/api/v1/push", json={"items": [{"queue": "lp", "payload": 1}]}):
        pass
    await asyncio.sleep(0.1)
    async with http.get("/api/v1/pop/queue/lp", params={"wait": "false", "batch": "1"}) as r:
        assert r.status == 200, "the hung-up long-poll took the message"
        assert (await r.json())["messages"][0]["data"] == 1


async def test_transaction_required_leases_over_the_wire(http):
    async with http.post("/api/v1/push", json={"items": [{"queue": "in", "payload": 1}]}):
        pass
    async with http.get("/api/v1/pop/queue/in", params={"batch": "1", "wait": "false"}) as r:
        m = (await r.json())["messages"][0]
    ack = {
        "type": "ack",
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "status": "completed",
        "consumerGroup": None,
        "leaseId": m["leaseId"],
    }
    push = {"type": "push", "items": [{"queue": "out", "payload": {"x": 1}}]}
    # The lease is released by a plain ack, so the bundle that requires it fails whole.
    async with http.post("/api/v1/ack", json={k: v for k, v in ack.items() if k != "type"}) as r:
        assert (await r.json())[0]["leaseReleased"] is True
    body = {"operations": [push], "requiredLeases": [m["leaseId"]]}
    async with http.post("/api/v1/transaction", json=body) as r:
        doc = await r.json()
        assert r.status == 200
        assert (doc["success"], doc["reason"], doc["leaseId"]) == (
            False,
            "lease_lost",
            m["leaseId"],
        )
        assert doc["results"] == [] and isinstance(doc["error"], str)
    async with http.get("/api/v1/pop/queue/out", params={"wait": "false"}) as r:
        assert r.status == 204
    async with http.post(
        "/api/v1/transaction", json={"operations": [push], "requiredLeases": "L1"}
    ) as r:
        doc = await r.json()
        assert r.status == 400
        assert (doc["error"], doc["reason"]) == ("bad_request", "bad_request")
        assert "requiredLeases" in doc["detail"] and doc["success"] is False


async def test_a_database_away_answers_503_with_retry_after(http, conn, caplog):
    """Pushes over HTTP while the backend of the connection a push is about to use is
    terminated (fault point log.push, every 5th push, 6 times): exactly those 6 answers are
    the flat envelope 503 unavailable (database_unavailable, or outcome_unknown for a push
    whose link went mid-call) with Retry-After: 1, every
    other is a 2xx, never a 500, and nothing is logged as an unhandled error."""
    from queen_timers.testing.chaos import Kill, killing

    statuses: list[int] = []

    async def pusher(i: int) -> None:
        for j in range(10):
            body = {
                "items": [{"queue": "outage", "payload": {"n": j}, "transactionId": f"h{i}-{j}"}]
            }
            async with http.post("/api/v1/push", json=body) as r:
                statuses.append(r.status)
                if r.status not in (200, 201):
                    assert r.status == 503, await r.text()
                    assert r.headers.get("Retry-After") == "1"
                    err = await r.json()
                    assert set(err) == {"error", "reason", "detail"}, err
                    # in doubt when the link went mid-call (db.errors.in_doubt)
                    assert err["error"] == "unavailable", err
                    assert err["reason"] in ("database_unavailable", "outcome_unknown"), err

    with caplog.at_level(logging.ERROR):
        async with killing(conn, {"log.push": Kill(every=5, times=6)}) as chaos:
            await asyncio.gather(*(pusher(i) for i in range(8)))
    chaos.assert_done()
    assert statuses.count(503) == 6, statuses
    assert not [r for r in caplog.records if "unhandled" in r.getMessage()]
