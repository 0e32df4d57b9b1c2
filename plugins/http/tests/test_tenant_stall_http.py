"""Over HTTP, a timer held by the tenant's own open SQL API transaction answers busy (issue
24): 503 with the flat envelope {error: timers_busy, reason: timer_locked, detail} and
Retry-After, for a schedule and for a cancel, and nothing changes; after the commit the same
request succeeds. The refusal comes while the transaction is still open, so it did not wait
for it."""

from __future__ import annotations

import base64
import json
import uuid

import aiohttp
import asyncpg
import pytest

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.testing.conformance import mint_token
from queen_timers.testing.fixtures import started_broker

SECRET = "tenant-stall-test-secret-that-is-long-enough-0123"


def _with_user(url: str, user: str) -> str:
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))


@pytest.fixture
async def tenant_role(db_url, conn):
    """A LOGIN role of the SQL API bound to a fresh tenant: (tenant, role name)."""
    tenant, name = uuid.uuid4(), f"qt_app_{uuid.uuid4().hex[:12]}"
    await conn.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE queen_producer')
    await conn.execute(
        "INSERT INTO queen.timer_producer_roles (role_name, tenant_id) VALUES ($1, $2)",
        name,
        tenant,
    )
    try:
        yield tenant, name
    finally:
        await conn.execute(f'DROP ROLE IF EXISTS "{name}"')


async def test_a_held_timer_answers_busy_over_http(db_url, conn, tenant_role):
    tenant, role = tenant_role
    op = {
        "op": "schedule",
        "queue": "q",
        "timerKey": "held",
        "delayMs": 60_000,
        "txn": "t1",
        "payload": base64.b64encode(b'{"from":"http"}').decode(),
    }
    async with started_broker(db_url, jwt_secret=SECRET, timers_lock_wait_ms=50) as q:
        t = HttpTransport(http_settings())
        await t.start(q)
        app = await asyncpg.connect(_with_user(db_url, role))
        try:
            headers = {"Authorization": f"Bearer {mint_token(tenant, 'app', secret=SECRET)}"}
            async with aiohttp.ClientSession(t.url, headers=headers) as s:
                async with s.post("/api/v1/timers", json=[op]) as r:
                    assert r.status == 200, await r.text()
                async with app.transaction():
                    held = await app.fetchval("SELECT queen.timer_cancel_v1('q', 'held')")
                    assert json.loads(held)["status"] == "cancelled"
                    for method, path, body in (
                        ("POST", "/api/v1/timers", [op]),
                        ("DELETE", "/api/v1/timers/q/held", None),
                    ):
                        async with s.request(method, path, json=body) as r:
                            assert r.status == 503, await r.text()
                            assert r.headers["Retry-After"] == "1"
                            err = await r.json()
                        assert set(err) == {"error", "reason", "detail"}
                        assert (err["error"], err["reason"]) == ("timers_busy", "timer_locked")
                    assert app.is_in_transaction()
                    # nothing changed: the committed row is still there
                    assert (
                        await conn.fetchval(
                            "SELECT count(*) FROM queen.log_timers WHERE tenant_id = $1", tenant
                        )
                        == 1
                    )
                # A committed its cancel: the same schedule now succeeds
                async with s.post("/api/v1/timers", json=[op]) as r:
                    assert r.status == 200
                    assert (await r.json())["results"][0]["status"] == "scheduled"
        finally:
            await app.close()
            await t.stop()
