"""The SQL API obeys the pending-timer cap as the brokers measure it (migrations/027): a
tenant flagged over by a measurement is refused (SQLSTATE 54000, the wire's
timers_quota_exceeded) until a measurement is under 90 % of the cap; the census measures a
tenant that schedules only through SQL. The write rate is the brokers' own and does not apply
here (docs/guides/tenants.md)."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

import queen_timers
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker

SCHEDULE = "SELECT queen.timer_schedule_v1($1, $2, $3, $4)"
CANCEL = "SELECT queen.timer_cancel_v1($1, $2)"
SETTINGS = {
    "timers_tenant_max_pending": 5,
    "timers_tenant_quota_refresh_ms": 0,
    "timers_tenant_quota_census_ms": 0,
}


async def test_a_tenant_scheduling_only_through_sql_is_measured_and_refused(db_url, roles):
    tenant = uuid.uuid4()
    app = await roles.connect(await roles.create(tenant))
    async with started_broker(db_url, **SETTINGS) as q:
        for i in range(6):  # no broker has measured it yet: measure-only overshoot
            await app.fetchval(SCHEDULE, "q", f"k{i}", 60_000, b"x")
        await q.quotas.census()
        with pytest.raises(asyncpg.PostgresError) as ei:
            await app.fetchval(SCHEDULE, "q", "k6", 60_000, b"x")
        assert ei.value.sqlstate == "54000"
        assert str(ei.value).startswith("QTIMER timers_quota_exceeded:")
        # the Python helper raises the wire's refusal
        with pytest.raises(queen_timers.TimerRefused) as refused:
            await queen_timers.schedule(app, "q", "k6", 60_000, {"v": 1})
        assert (refused.value.code, refused.value.status) == ("timers_quota_exceeded", 403)
        # cancel is never blocked; 5 pending is not under 90 % of 5, 4 is
        for i in range(2):
            assert json.loads(await app.fetchval(CANCEL, "q", f"k{i}"))["status"] == "cancelled"
        await q.quotas.refresh()  # refresh measures every tenant flagged over
        assert json.loads(await app.fetchval(SCHEDULE, "q", "k6", 60_000, b"x"))["ok"] is True


async def test_the_broker_flag_reaches_sql_and_lifting_the_cap_clears_it(db_url, roles, conn):
    tenant = uuid.uuid4()
    app = await roles.connect(await roles.create(tenant))
    async with started_broker(db_url, **SETTINGS) as q:
        who = Identity(tenant=tenant, subject="tester")
        ops = [
            {
                "op": "schedule",
                "queue": "q",
                "timerKey": f"b{i}",
                "delayMs": 60_000,
                "txn": f"t{i}",
                "payload": "eA==",
            }
            for i in range(5)
        ]
        await q.timers_apply(who, ops)
        await q.quotas.refresh()
        with pytest.raises(asyncpg.PostgresError) as ei:
            await app.fetchval(SCHEDULE, "q", "s", 60_000, b"x")
        assert ei.value.sqlstate == "54000"
        admin = Identity(tenant=uuid.uuid4(), subject="ops", admin=True)
        await q.tenant_quota_set(admin, str(tenant), {"maxPending": "unlimited"})
        assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quota_usage") == 0
        assert json.loads(await app.fetchval(SCHEDULE, "q", "s", 60_000, b"x"))["ok"] is True
