"""What a web page can make a local broker do: Content-Type, Origin, Host and CORS.

Without JWT every caller is admin, and a browser sends "simple" requests (text/plain or form
bodies) cross-origin without a preflight: a page the operator visits could schedule timers or
pause the fire on 127.0.0.1. Every refusal here is the flat envelope, and changes nothing."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.switches import SWITCH_KEYS

OP = {
    "op": "schedule",
    "queue": "q",
    "timerKey": "k",
    "payload": "MQ==",
    "delayMs": 60_000,
    "txn": "t",
}
EVIL = "https://evil.example"
FRIEND = "https://console.example:8443"


def _envelope(doc: dict) -> bool:
    return set(doc) == {"error", "reason", "detail"} and all(
        isinstance(v, str) for v in doc.values()
    )


async def _timers(conn) -> int:
    return await conn.fetchval("SELECT count(*) FROM queen.log_timers")


async def _switch_rows(conn) -> int:
    # The switches' own rows: a broker also keeps other state there (the SQL API's limits).
    return await conn.fetchval(
        "SELECT count(*) FROM queen.system_state WHERE key = ANY($1)", list(SWITCH_KEYS)
    )


@pytest.fixture
async def guarded(queen):
    """A transport that lists one allowed origin and one proxy host name."""
    t = HttpTransport(
        http_settings(http_allowed_origins=FRIEND, http_allowed_hosts="queen.internal")
    )
    await t.start(queen)
    try:
        async with aiohttp.ClientSession(t.url) as s:
            yield t, s
    finally:
        await t.stop()


# -- Content-Type ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/octet-stream",
        "application/json; charset=latin-1",
        "application/jsonx",
    ],
)
async def test_a_schedule_in_another_media_type_is_415(http, conn, content_type):
    raw = b'{"operations": [' + json.dumps(OP).encode() + b"]}"
    async with http.post("/api/v1/timers", data=raw, headers={"Content-Type": content_type}) as r:
        doc = await r.json()
        assert r.status == 415, doc
    assert _envelope(doc) and (doc["error"], doc["reason"]) == (
        "unsupported_media_type",
        "content_type_not_json",
    )
    assert await _timers(conn) == 0


async def test_a_body_without_content_type_is_415(http_transport, conn):
    reader, writer = await asyncio.open_connection(http_transport.host, http_transport.port)
    body = b'{"timersFire": false}'
    writer.write(
        b"POST /api/v1/system/kv-timers HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s"
        % (http_transport.host.encode(), http_transport.port, len(body), body)
    )
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 415"), answer[:200]
    assert await _switch_rows(conn) == 0


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
async def test_a_simple_request_cannot_pause_the_fire(http, conn, queen, content_type):
    async with http.post(
        "/api/v1/system/kv-timers",
        data=b'{"timersFire": false}',
        headers={"Content-Type": content_type},
    ) as r:
        assert r.status == 415 and _envelope(await r.json())
    assert queen.rt.switches.timers_fire_enabled is True
    assert await _switch_rows(conn) == 0


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
async def test_json_with_an_optional_charset_is_accepted(http, conn, content_type):
    raw = b'{"operations": [' + json.dumps(OP).encode() + b"]}"
    async with http.post("/api/v1/timers", data=raw, headers={"Content-Type": content_type}) as r:
        assert r.status == 200, await r.text()
    assert await _timers(conn) == 1


async def test_bodiless_requests_need_no_content_type(http):
    # The client sends no body for an empty dict: Content-Length 0, no Content-Type.
    async with http.post("/api/v1/timers", data=b"") as r:
        assert r.status == 400 and (await r.json())["reason"] == "timers_bad_body"
    async with http.post("/api/v1/lease/nope/extend", data=b"") as r:
        assert r.status != 415


# -- Origin ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/api/v1/timers", {"operations": [OP]}),
        ("POST", "/api/v1/system/kv-timers", {"timersFire": False}),
        ("POST", "/api/v1/push", {"items": [{"queue": "q", "payload": 1}]}),
        ("POST", "/api/v1/configure", {"queue": "q", "options": {}}),
        ("DELETE", "/api/v1/timers/q/k", None),
        ("GET", "/api/v1/pop/queue/q", None),  # a pop claims: it changes state
        ("GET", "/api/v1/pop", None),
    ],
)
async def test_a_foreign_origin_changes_nothing(http, conn, queen, method, path, body):
    async with http.request(method, path, json=body, headers={"Origin": EVIL}) as r:
        doc = await r.json()
        assert r.status == 403, doc
        assert "Access-Control-Allow-Origin" not in r.headers
    assert _envelope(doc) and (doc["error"], doc["reason"]) == ("forbidden", "origin_not_allowed")
    assert await _timers(conn) == 0 and await _switch_rows(conn) == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.queues") == 0
    assert queen.rt.switches.timers_fire_enabled is True


async def test_a_cross_site_pop_without_origin_claims_nothing(http, conn):
    """An <img> or a link sends a cross-site GET with no Origin: Sec-Fetch-Site tells."""
    async with http.post("/api/v1/push", json={"items": [{"queue": "q", "payload": 1}]}) as r:
        assert r.status == 201
    for site in ("cross-site", "same-site"):
        async with http.get(
            "/api/v1/pop/queue/q", params={"autoAck": "true"}, headers={"Sec-Fetch-Site": site}
        ) as r:
            assert r.status == 403 and (await r.json())["reason"] == "origin_not_allowed"
    # The operator's own tab (same-origin) and a typed URL (none) still pop.
    async with http.get(
        "/api/v1/pop/queue/q", params={"autoAck": "true"}, headers={"Sec-Fetch-Site": "none"}
    ) as r:
        assert r.status == 200 and (await r.json())["messages"][0]["data"] == 1


async def test_a_foreign_origin_may_read_but_gets_no_cors_header(http):
    async with http.get("/api/v1/timers/q/k", headers={"Origin": EVIL}) as r:
        assert r.status == 200
        assert "Access-Control-Allow-Origin" not in r.headers


async def test_our_own_pages_pass(http, http_transport, conn):
    own = f"http://{http_transport.host}:{http_transport.port}"
    async with http.post("/api/v1/timers", json={"operations": [OP]}, headers={"Origin": own}) as r:
        assert r.status == 200, await r.text()
    assert await _timers(conn) == 1


async def test_an_allowed_origin_passes_with_cors_headers(guarded, conn):
    _t, s = guarded
    async with s.post("/api/v1/timers", json={"operations": [OP]}, headers={"Origin": FRIEND}) as r:
        assert r.status == 200, await r.text()
        assert r.headers["Access-Control-Allow-Origin"] == FRIEND
        assert "Origin" in r.headers.get("Vary", "")
    assert await _timers(conn) == 1
    # Refusals carry it too, so the allowed page can read the envelope.
    async with s.post("/api/v1/timers", json="x", headers={"Origin": FRIEND}) as r:
        assert r.status == 400 and r.headers["Access-Control-Allow-Origin"] == FRIEND
    async with s.post("/api/v1/timers", json={"operations": [OP]}, headers={"Origin": EVIL}) as r:
        assert r.status == 403 and "Access-Control-Allow-Origin" not in r.headers


# -- CORS preflight ----------------------------------------------------------------------------
async def test_a_preflight_is_answered_only_for_an_allowed_origin(guarded):
    _t, s = guarded
    ask = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, authorization",
    }
    async with s.options("/api/v1/system/kv-timers", headers={"Origin": FRIEND, **ask}) as r:
        assert r.status == 204
        assert r.headers["Access-Control-Allow-Origin"] == FRIEND
        methods = {m.strip() for m in r.headers["Access-Control-Allow-Methods"].split(",")}
        assert methods == {"GET", "POST"}
        allowed = r.headers["Access-Control-Allow-Headers"].lower()
        assert "authorization" in allowed and "content-type" in allowed
        assert "Origin" in r.headers["Vary"]
    async with s.options("/api/v1/system/kv-timers", headers={"Origin": EVIL, **ask}) as r:
        doc = await r.json()
        assert r.status == 403 and _envelope(doc) and doc["reason"] == "origin_not_allowed"
        assert not [h for h in r.headers if h.lower().startswith("access-control-")]
    async with s.options("/api/v1/nope", headers={"Origin": FRIEND, **ask}) as r:
        assert r.status == 404 and _envelope(await r.json())


async def test_no_answer_ever_allows_every_origin(guarded):
    _t, s = guarded
    for origin in (FRIEND, EVIL, "null"):
        for method, path in (("GET", "/health"), ("POST", "/api/v1/push"), ("GET", "/metrics")):
            async with s.request(method, path, json={"items": []}, headers={"Origin": origin}) as r:
                assert r.headers.get("Access-Control-Allow-Origin") != "*"


@pytest.mark.parametrize(
    "value", ["*", "null", "https://a.example/path", "ftp://a.example", "a.example"]
)
def test_an_allowed_origin_must_be_a_real_origin(value):
    with pytest.raises(ValueError):
        HttpTransport(http_settings(http_allowed_origins=value))


def test_allowed_origins_are_normalised():
    t = HttpTransport(
        http_settings(http_allowed_origins=" HTTPS://A.example:443/ , http://b.example:8080")
    )
    assert t.allowed_origins == frozenset({"https://a.example", "http://b.example:8080"})


# -- Host (DNS rebinding) ----------------------------------------------------------------------
async def _status_with_host(t, host: bytes, path: bytes = b"/api/v1/timers/q/k") -> bytes:
    """The raw answer to a GET carrying this Host header, through loopback."""
    reader, writer = await asyncio.open_connection("127.0.0.1", t.port)
    writer.write(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host))
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


@pytest.mark.parametrize(
    "host",
    [
        b"evil.example:{port}",
        b"evil.example",
        b"127.0.0.1:1",
        b"0.0.0.0:{port}",
        b"",
        b"[::2]:{port}",
    ],
)
async def test_a_rebound_name_is_refused_on_loopback(http_transport, host):
    host = host.replace(b"{port}", str(http_transport.port).encode())
    answer = await _status_with_host(http_transport, host)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:300]
    assert b'"reason":"host_not_allowed"' in answer
    assert b"access-control-allow-origin" not in answer.lower()


@pytest.mark.parametrize(
    "host", [b"127.0.0.1:{port}", b"localhost:{port}", b"LOCALHOST:{port}", b"127.5.6.7:{port}"]
)
async def test_loopback_names_with_our_port_pass(http_transport, host):
    host = host.replace(b"{port}", str(http_transport.port).encode())
    answer = await _status_with_host(http_transport, host)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]


async def test_a_listed_proxy_host_passes(guarded):
    t, _s = guarded
    assert (await _status_with_host(t, b"queen.internal")).startswith(b"HTTP/1.1 200")
    assert (await _status_with_host(t, b"Queen.Internal:443")).startswith(b"HTTP/1.1 200")
    assert (await _status_with_host(t, b"other.internal")).startswith(b"HTTP/1.1 403")


async def test_beyond_loopback_the_host_is_not_checked(queen):
    t = HttpTransport(http_settings(http_host="0.0.0.0"))
    await t.start(queen)
    try:
        assert (await _status_with_host(t, b"broker.example:80")).startswith(b"HTTP/1.1 200")
    finally:
        await t.stop()


# -- kill switches -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body, reason",
    [
        ({"timersExplode": True}, "switches_unknown_key"),
        ({"timersFire": False, "timersExplode": True}, "switches_unknown_key"),
        ({"timersFire": "false"}, "switches_not_boolean"),
        ({"timersFire": 0}, "switches_not_boolean"),
    ],
)
async def test_the_kill_switch_route_refuses_unknown_keys_and_non_booleans(
    http, conn, queen, body, reason
):
    async with http.post("/api/v1/system/kv-timers", json=body) as r:
        doc = await r.json()
        assert r.status == 400, doc
    assert _envelope(doc) and doc["reason"] == reason
    assert await _switch_rows(conn) == 0
    assert queen.rt.switches.timers_fire_enabled is True
