"""Malformed request bodies over HTTP: every one is a 400 with the flat envelope, never a 500,
and nothing is written."""

from __future__ import annotations

import logging

import pytest

JSON = {"Content-Type": "application/json"}
# About 1,000 levels, under 2 KB: past the decoder's recursion limit at any stack depth.
DEEP = b"[" * 1000
DEEP_CLOSED = b"[" * 1200 + b"]" * 1200
DEEP_OBJECT = b'{"a":' * 1200 + b"1" + b"}" * 1200

BODY_ROUTES = [
    "/api/v1/timers",
    "/api/v1/push",
    "/api/v1/ack",
    "/api/v1/ack/batch",
    "/api/v1/transaction",
    "/api/v1/configure",
    "/api/v1/system/kv-timers",
]


async def _row_counts(conn) -> tuple[int, int, int]:
    return (
        await conn.fetchval("SELECT count(*) FROM queen.log_timers"),
        await conn.fetchval("SELECT count(*) FROM queen.queues"),
        await conn.fetchval("SELECT count(*) FROM queen.system_state"),
    )


@pytest.mark.parametrize("path", BODY_ROUTES)
@pytest.mark.parametrize(
    "raw",
    [DEEP, DEEP_CLOSED, DEEP_OBJECT, b"{nope", b"\xff\xfe", b"[1,]", b'{"a": 1} trailing'],
    ids=["deep-open", "deep-closed", "deep-object", "syntax", "not-utf8", "comma", "trailing"],
)
async def test_a_malformed_body_is_a_400_envelope(http, conn, caplog, path, raw):
    before = await _row_counts(conn)
    with caplog.at_level(logging.ERROR, logger="queen_http"):
        async with http.post(path, data=raw, headers=JSON) as r:
            doc = await r.json()
            status = r.status
    assert status == 400, doc
    assert {"error", "reason", "detail"} <= set(doc) and doc["error"] != "internal_error"
    assert all(isinstance(doc[k], str) for k in ("error", "reason", "detail"))
    assert "not valid JSON" in doc["detail"]
    assert not [r for r in caplog.records if "unhandled" in r.getMessage()]
    assert await _row_counts(conn) == before


@pytest.mark.parametrize("path", ["/api/v1/push", "/api/v1/transaction"])
async def test_a_deep_but_decodable_payload_is_never_a_500(http, path):
    """A payload just inside the decoder's depth is stored as JSON and encoded again by the
    service at a deeper stack: it is refused cleanly or accepted, never a 500."""
    for depth in range(900, 1000, 3):
        item = b'{"queue": "deep", "payload": ' + b"[" * depth + b"]" * depth + b"}"
        if path == "/api/v1/push":
            raw = b'{"items": [' + item + b"]}"
        else:
            raw = b'{"operations": [{"type": "push", "items": [' + item + b"]}]}"
        async with http.post(path, data=raw, headers=JSON) as r:
            assert r.status in (200, 201, 400), (depth, await r.text())
            if r.status == 400:
                assert (await r.json())["error"] == "bad_request"
