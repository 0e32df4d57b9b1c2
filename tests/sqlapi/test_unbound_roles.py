"""A producer role no administrator bound to a tenant (migrations/030): where tenancy is on (a
role is bound, or the brokers authenticate tokens) it is refused with 42501
timers_role_unbound, on schedule and cancel alike, so it cannot overwrite or cancel the default
tenant's timers; QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES=true restores the default tenant; a
single-tenant database keeps it. The boot warns about such roles."""

from __future__ import annotations

import json
import logging
import uuid

import asyncpg
import pytest

import queen_timers
from queen_timers.identity import DEFAULT_TENANT, Identity
from queen_timers.testing.fixtures import started_broker

SCHEDULE = "SELECT queen.timer_schedule_v1($1, $2, $3, $4)"
CANCEL = "SELECT queen.timer_cancel_v1($1, $2)"
OWNER = Identity(tenant=DEFAULT_TENANT, subject="default-tenant-app")
VICTIM = {
    "op": "schedule",
    "queue": "q",
    "timerKey": "victim",
    "delayMs": 3_600_000,
    "txn": "t-victim",
    "payload": "eA==",
}
ROW = "SELECT message_id, payload FROM queen.log_timers WHERE tenant_id = $1 AND timer_key = $2"


async def refused_unbound(app, role: str, sql: str, *args) -> asyncpg.PostgresError:
    with pytest.raises(asyncpg.PostgresError) as ei:
        await app.fetchval(sql, *args)
    err = ei.value
    assert err.sqlstate == "42501"
    assert str(err).startswith(f"QTIMER timers_role_unbound: role {role} has no tenant binding")
    assert err.hint is not None and "queen.timer_producer_roles" in err.hint
    assert "QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES" in err.hint
    return err


async def test_an_unbound_role_cannot_touch_the_default_tenant_once_a_role_is_bound(
    db_url, roles, conn
):
    bound = await roles.connect(await roles.create(uuid.uuid4()))
    unbound_role = await roles.create()
    attacker = await roles.connect(unbound_role)
    async with started_broker(db_url) as q:
        await q.timers_apply(OWNER, [VICTIM])
        before = await conn.fetchrow(ROW, DEFAULT_TENANT, "victim")
        await refused_unbound(attacker, unbound_role, SCHEDULE, "q", "victim", 0, b"evil")
        await refused_unbound(attacker, unbound_role, CANCEL, "q", "victim")
        await refused_unbound(attacker, unbound_role, SCHEDULE, "q", "new", 0, b"evil")
        # naming the default tenant outright changes nothing
        with pytest.raises(queen_timers.TimerRefused) as ei:
            await queen_timers.cancel(attacker, "q", "victim", tenant=DEFAULT_TENANT)
        assert (ei.value.code, ei.value.reason, ei.value.status) == (
            "timers_forbidden",
            "timers_role_unbound",
            403,
        )
        assert await conn.fetchrow(ROW, DEFAULT_TENANT, "victim") == before
        assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 1
        # the bound role works as before
        assert json.loads(await bound.fetchval(SCHEDULE, "q", "mine", 60_000, b"x"))["ok"]


async def test_the_setting_restores_the_default_tenant_for_unbound_roles(db_url, roles, conn):
    await roles.create(uuid.uuid4())  # tenancy is on
    app = await roles.connect(await roles.create())
    async with started_broker(db_url, timers_sql_allow_unbound_roles=True) as q:
        await q.timers_apply(OWNER, [VICTIM])
        res = json.loads(await app.fetchval(CANCEL, "q", "victim"))
        assert res["status"] == "cancelled"
        res = json.loads(await app.fetchval(SCHEDULE, "q", "k", 60_000, b"x"))
        assert res["ok"] and await conn.fetchval(ROW, DEFAULT_TENANT, "k") is not None


async def test_a_single_tenant_database_keeps_the_default_tenant(db_url, roles, conn):
    app = await roles.connect(await roles.create())
    async with started_broker(db_url):  # no role bound, no token authentication
        res = json.loads(await app.fetchval(SCHEDULE, "q", "k", 60_000, b"x"))
        assert res["status"] == "scheduled"
        assert await conn.fetchval(ROW, DEFAULT_TENANT, "k") is not None


async def test_brokers_that_authenticate_tokens_turn_tenancy_on(db_url, roles):
    role = await roles.create()
    app = await roles.connect(role)
    async with started_broker(db_url, jwt_secret="s" * 32):  # no role bound yet
        await refused_unbound(app, role, SCHEDULE, "q", "k", 60_000, b"x")


async def test_the_boot_warns_about_unbound_producer_roles(db_url, roles, conn, caplog):
    bound = await roles.create(uuid.uuid4())
    direct = await roles.create()
    # a login role that holds queen_producer through a group role is listed too
    group = f"qt_group_{uuid.uuid4().hex[:10]}"
    await conn.execute(f'CREATE ROLE "{group}" NOLOGIN')
    roles.names.append(group)
    await conn.execute(f'GRANT queen_producer TO "{group}"')
    indirect = await roles.create(producer=False)
    await conn.execute(f'GRANT "{group}" TO "{indirect}"')
    not_producer = await roles.create(producer=False)
    with caplog.at_level(logging.WARNING, logger="queen_timers.sqlapi"):
        async with started_broker(db_url):
            pass
    [warning] = [r.getMessage() for r in caplog.records if r.name == "queen_timers.sqlapi"]
    assert "are refused (42501 timers_role_unbound)" in warning
    listed = warning.split(": ", 1)[1].split("; ")[0].split(", ")
    assert direct in listed and indirect in listed
    assert bound not in listed and group not in listed and not_producer not in listed
    # once every producer is bound, the boot says nothing
    for role in (direct, indirect):
        await conn.execute(
            "INSERT INTO queen.timer_producer_roles (role_name, tenant_id) VALUES ($1, $2)",
            role,
            uuid.uuid4(),
        )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="queen_timers.sqlapi"):
        async with started_broker(db_url):
            pass
    assert [r for r in caplog.records if r.name == "queen_timers.sqlapi"] == []


async def test_the_boot_warning_names_what_the_setting_allows_and_only_with_tenancy(
    db_url, roles, conn, caplog
):
    unbound = await roles.create()
    with caplog.at_level(logging.WARNING, logger="queen_timers.sqlapi"):
        async with started_broker(db_url):  # tenancy off: unbound roles are the norm
            pass
        assert [r for r in caplog.records if r.name == "queen_timers.sqlapi"] == []
        await roles.create(uuid.uuid4())  # tenancy on
        async with started_broker(db_url, timers_sql_allow_unbound_roles=True):
            pass
    [warning] = [r.getMessage() for r in caplog.records if r.name == "queen_timers.sqlapi"]
    assert "act as the default tenant (QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES=true)" in warning
    assert unbound in warning
