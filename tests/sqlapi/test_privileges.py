"""The privilege boundary: an application role granted queen_producer schedules and cancels
through the two functions and can do nothing else; its tenant is the one an administrator
bound to it, and its producer subject is the role it logged in as."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest
from timers.helpers import log_frames, timer_row

import queen_timers
from queen_timers.identity import DEFAULT_TENANT
from queen_timers.service import Queen
from queen_timers.timers import fire

from .helpers import with_user
from .test_schedule_cancel import later


async def test_two_roles_of_two_tenants_stay_in_their_own(queen, conn, roles):
    ta, tb = uuid.uuid4(), uuid.uuid4()
    ra, rb = await roles.create(ta), await roles.create(tb)
    a, b = await roles.connect(ra), await roles.connect(rb)

    async with a.transaction():
        res = await queen_timers.schedule(a, "orders", "k", 0, {"from": "a"})
    assert res["status"] == "scheduled"
    async with b.transaction():
        res = await queen_timers.schedule(b, "orders", "k", 0, {"from": "b"}, tenant=tb)
    assert res["status"] == "scheduled"  # same names, another tenant: another timer

    row_a = await timer_row(conn, "orders", "k", ta)
    row_b = await timer_row(conn, "orders", "k", tb)
    assert row_a["producer_sub"] == ra and row_b["producer_sub"] == rb
    assert await timer_row(conn, "orders", "k", DEFAULT_TENANT) is None

    # naming the other tenant is refused, for schedule and cancel
    for call in (
        queen_timers.schedule(a, "orders", "k", 0, {}, tenant=tb),
        queen_timers.cancel(a, "orders", "k", tenant=tb),
    ):
        with pytest.raises(queen_timers.TimerRefused) as ei:
            await call
        assert ei.value.sqlstate == "42501" and ei.value.reason == "timers_tenant_forbidden"
        assert ei.value.status == 403

    # a cancel only reaches its own tenant's timer
    assert (await queen_timers.cancel(a, "orders", "k"))["status"] == "cancelled"
    assert await timer_row(conn, "orders", "k", ta) is None
    assert await timer_row(conn, "orders", "k", tb) is not None

    # the fire delivers b's timer in b's tenant, stamped with b's role
    assert (await fire.drain(queen.rt, now=later(5))).fired == 1
    [f] = await log_frames(conn, queue="orders")
    assert f["tenant"] == tb and f["producerSub"] == rb
    assert json.loads(f["payload"]) == {"from": "b"}


async def test_an_unbound_role_gets_the_default_tenant_only(conn, roles):
    r = await roles.create()
    c = await roles.connect(r)
    res = await queen_timers.schedule(c, "q", "k", 1000, b"{}", tenant=DEFAULT_TENANT)
    assert res["status"] == "scheduled"
    assert (await timer_row(conn, "q", "k", DEFAULT_TENANT))["producer_sub"] == r
    with pytest.raises(queen_timers.TimerRefused) as ei:
        await queen_timers.schedule(c, "q", "k", 1000, b"{}", tenant=uuid.uuid4())
    assert ei.value.reason == "timers_tenant_forbidden"


async def test_a_producer_can_call_the_api_and_nothing_else(conn, roles):
    r = await roles.create(uuid.uuid4())
    c = await roles.connect(r)
    await queen_timers.schedule(c, "q", "k", 60_000, b"{}")
    denied = [
        "SELECT count(*) FROM queen.log_timers",
        "SELECT count(*) FROM queen.log_segments",
        "SELECT count(*) FROM queen.timer_producer_roles",
        "INSERT INTO queen.timer_producer_roles VALUES ('x', gen_random_uuid())",
        "UPDATE queen.timer_producer_roles SET tenant_id = gen_random_uuid()",
        "INSERT INTO queen.system_state (key, value) VALUES ('timers_schedule_enabled', 'true')",
        # the service's procedures run with the caller's rights: no table privilege, no write
        'SELECT queen.log_timers_apply_v1(\'[{"op":"cancel","queue":"q","timerKey":"k"}]\','
        " '00000000-0000-0000-0000-000000000001', NULL, NULL)",
        "SELECT queen.log_push_v1('00000000-0000-0000-0000-000000000001', ARRAY['q'],"
        " ARRAY['Default'], ARRAY[1], ARRAY[gen_random_uuid()], ARRAY['\\x00'::bytea])",
        "SELECT queen.log_timers_peek_v1(gen_random_uuid(), 'q', 'k', NULL)",
        # the internals behind the public functions are not callable
        "SELECT queen._timer_sql_schedule_v1(gen_random_uuid(), 'me', 'q', 'k', 0, '\\x00',"
        " NULL, NULL, false, false, false, now())",
        "SELECT queen._timer_sql_cancel_v1(gen_random_uuid(), 'q', 'k', NULL, now())",
        "SELECT queen._timer_sql_tenant_v1(NULL)",
    ]
    for sql in denied:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with c.transaction():
                await c.execute(sql)
    assert await timer_row(conn, "q", "k", None) is None  # not in the default tenant either


async def test_a_role_not_granted_queen_producer_cannot_call_it(roles):
    r = await roles.create(producer=False)
    c = await roles.connect(r)
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await queen_timers.schedule(c, "q", "k", 0, b"{}")


async def test_search_path_of_the_caller_cannot_redirect_the_functions(conn, roles):
    """A producer that shadows a function the API calls (gen_random_uuid mints the txn) in a
    schema it puts before pg_catalog changes nothing: the functions run with
    search_path = pg_catalog, pg_temp."""
    r = await roles.create()
    c = await roles.connect(r)
    await conn.execute(f'CREATE SCHEMA "{r}" AUTHORIZATION "{r}"')
    fixed = "00000000-0000-0000-0000-0000000000aa"
    try:
        await c.execute(
            f'CREATE FUNCTION "{r}".gen_random_uuid() RETURNS uuid LANGUAGE sql'
            f" AS $$SELECT '{fixed}'::uuid$$"
        )
        await c.execute(f'SET search_path = "{r}", pg_catalog')
        assert str(await c.fetchval("SELECT gen_random_uuid()")) == fixed  # shadowed here
        res = await queen_timers.schedule(c, "q", "k", 0, b"{}")
        assert res["status"] == "scheduled" and res["txn"] != fixed
    finally:
        await c.close()
        await conn.execute(f'DROP SCHEMA "{r}" CASCADE')


async def test_a_broker_that_is_not_a_superuser_boots_and_serves_the_api(
    pg_server_url, conn, roles
):
    """Production runs the broker as a plain role owning its database: the boot applies 026
    (no CREATEROLE needed once queen_producer exists), and the SECURITY DEFINER functions run
    with that role's rights, enough to schedule and fire."""
    import asyncpg

    from queen_timers.testing.db import with_database

    owner = await roles.create(producer=False)
    db = f"qt_owned_{uuid.uuid4().hex[:8]}"
    await conn.execute(f'CREATE DATABASE "{db}" OWNER "{owner}"')
    url = with_database(pg_server_url, db)
    try:
        broker = Queen(
            database_url=with_user(url, owner),
            sweeper=False,
            retention_interval_ms=0,
        )
        async with broker:
            assert not await broker.rt.pool.fetchval(
                "SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user"
            )
            app = await roles.create()
            c = await asyncpg.connect(url, user=app)
            try:
                res = await queen_timers.schedule(c, "q", "k", 0, {"a": 1})
                assert res["status"] == "scheduled"
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await c.fetch("SELECT * FROM queen.log_timers")
            finally:
                await c.close()
            assert (await fire.drain(broker.rt, now=later(5))).fired == 1
    finally:
        await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
