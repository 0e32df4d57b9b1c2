"""What a tenant's token shows of the broker's other tenants on a JWT broker: /metrics answers
an admin token only and names no tenant id; /resources/overview keeps the broker-wide fire rate
and lag for an admin."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aiohttp
import jwt
import pytest

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.testing.fixtures import started_broker

SECRET = "visibility-test-secret-that-is-long-enough-0123456789"


def bearer(tenant: uuid.UUID | None = None, *, admin: bool = False) -> dict[str, str]:
    claims: dict = {"sub": "someone"}
    if tenant is not None:
        claims["tenant"] = str(tenant)
    if admin:
        claims["admin"] = True
    return {"Authorization": f"Bearer {jwt.encode(claims, SECRET, 'HS256')}"}


@pytest.fixture
async def served(db_url) -> AsyncIterator[tuple[Queen, aiohttp.ClientSession]]:
    async with started_broker(db_url, jwt_secret=SECRET, timers_tenant_max_pending=0) as q:
        t = HttpTransport(http_settings())
        await t.start(q)
        try:
            async with aiohttp.ClientSession(t.url) as s:
                yield q, s
        finally:
            await t.stop()


async def test_metrics_need_an_admin_token_and_name_no_tenant(served):
    q, s = served
    tenant = uuid.uuid4()
    # a refusal by the tenant's cap (0) puts the tenant into a labelled metric
    op = {
        "op": "schedule",
        "queue": "q",
        "timerKey": "k",
        "delayMs": 60_000,
        "payload": "e30=",
        "txn": "t1",
    }
    with pytest.raises(QueenError, match="cap of 0"):
        await q.timers_apply(Identity(tenant=tenant, subject="app"), [op])
    async with s.get("/metrics") as r:
        assert r.status == 401 and (await r.json())["reason"] == "missing_token"
    async with s.get("/metrics", headers=bearer(tenant)) as r:
        assert r.status == 403 and (await r.json())["reason"] == "admin_required"
    async with s.get("/metrics", headers=bearer(admin=True)) as r:
        assert r.status == 200
        text = await r.text()
    label = await q.rt.pool.fetchval("SELECT queen.tenant_metrics_label_v1($1)", tenant)
    assert f'tenant="{label}"' in text
    assert str(tenant) not in text and tenant.hex not in text


async def test_the_overview_keeps_the_brokers_fire_for_an_admin(served):
    q, s = served
    q.rt.fire_window.record(50, [2000.0] * 50)  # the broker fired other tenants' timers
    async with s.get("/api/v1/resources/overview", headers=bearer(uuid.uuid4())) as r:
        assert r.status == 200
        mine = (await r.json())["thisBroker"]
    assert mine == {"windowSeconds": q.rt.fire_window.seconds}
    async with s.get("/api/v1/resources/overview", headers=bearer(admin=True)) as r:
        broker = (await r.json())["thisBroker"]
    assert broker["firedPerSec"] > 0 and broker["fireLagP99Ms"] > 1000
