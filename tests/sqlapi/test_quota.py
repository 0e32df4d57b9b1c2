"""The SQL API keeps the pending-timer cap exactly (migrations/030): a capped tenant's schedules
count its timers under its gate row, so one connection or many concurrent transactions never
take it past the cap (SQLSTATE 54000, the wire's timers_quota_exceeded), without waiting for
a broker's measurement. The brokers' sticky flag (027) refuses too. Cancels and reschedules of
pending keys are never refused by the count. The write rate is the brokers' own and does not
apply here (docs/guides/tenants.md)."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import pytest

import queen_timers
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker

SCHEDULE = "SELECT queen.timer_schedule_v1($1, $2, $3, $4)"
CANCEL = "SELECT queen.timer_cancel_v1($1, $2)"
NO_LOOP = {"timers_tenant_quota_refresh_ms": 0, "timers_tenant_quota_census_ms": 0}
ADMIN = Identity(tenant=uuid.uuid4(), subject="ops", admin=True)


async def pending(conn, tenant: uuid.UUID) -> int:
    return await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE tenant_id = $1", tenant)


async def try_schedule(app, key: str) -> bool:
    """One schedule in its own transaction: True if admitted, False if refused for the cap."""
    try:
        await app.fetchval(SCHEDULE, "q", key, 60_000, b"x")
    except asyncpg.PostgresError as exc:
        assert exc.sqlstate == "54000", exc
        assert str(exc).startswith("QTIMER timers_quota_exceeded:")
        return False
    return True


async def test_a_cap_of_10_admits_10_through_sql_without_a_measurement(db_url, roles, conn):
    # The attack: schedule as fast as one connection can; no broker measures meanwhile.
    tenant = uuid.uuid4()
    app = await roles.connect(await roles.create(tenant))
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP):
        admitted = [await try_schedule(app, f"k{i}") for i in range(300)]
        assert admitted == [True] * 10 + [False] * 290
        assert await pending(conn, tenant) == 10
        # the Python helper raises the wire's refusal
        with pytest.raises(queen_timers.TimerRefused) as refused:
            await queen_timers.schedule(app, "q", "k300", 60_000, {"v": 1})
        assert (refused.value.code, refused.value.status) == ("timers_quota_exceeded", 403)
        # rescheduling a pending key adds no timer: not refused at the cap
        res = json.loads(await app.fetchval(SCHEDULE, "q", "k3", 90_000, b"y"))
        assert res["status"] == "rescheduled"
        # a cancel frees a slot at once (no measurement), and it is taken at once
        assert json.loads(await app.fetchval(CANCEL, "q", "k0"))["status"] == "cancelled"
        assert await try_schedule(app, "new") is True
        assert await try_schedule(app, "newer") is False
        assert await pending(conn, tenant) == 10


async def test_concurrent_transactions_of_one_tenant_never_pass_the_cap(db_url, roles, conn):
    # The attack: 8 connections, each scheduling 5 in one transaction, all at once, cap 10.
    tenant = uuid.uuid4()
    role = await roles.create(tenant)
    apps = [await roles.connect(role) for _ in range(8)]
    other = uuid.uuid4()
    bystander = await roles.connect(await roles.create(other))

    async def one_transaction(app, n: int) -> int:
        ok = 0
        async with app.transaction():
            for i in range(5):
                try:
                    async with app.transaction():  # a savepoint: go on after a refusal
                        await app.fetchval(SCHEDULE, "q", f"c{n}-{i}", 60_000, b"x")
                    ok += 1
                except asyncpg.PostgresError as exc:
                    assert exc.sqlstate == "54000", exc
        return ok

    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP):
        admitted = await asyncio.gather(*(one_transaction(a, n) for n, a in enumerate(apps)))
        assert sum(admitted) == 10, admitted
        assert await pending(conn, tenant) == 10
        # another tenant's cap is its own, and its calls never waited on this tenant's gate
        assert await try_schedule(bystander, "b") is True


async def test_an_open_transaction_holds_the_gate_and_the_next_one_sees_its_rows(
    db_url, roles, conn
):
    tenant = uuid.uuid4()
    role = await roles.create(tenant)
    first, second = await roles.connect(role), await roles.connect(role)
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP):
        holder = first.transaction()
        await holder.start()
        for i in range(10):  # uncommitted: invisible to every other snapshot
            await first.fetchval(SCHEDULE, "q", f"k{i}", 60_000, b"x")
        waiter = asyncio.create_task(try_schedule(second, "late"))
        pid = second.get_server_pid()
        # wait (on the server's state, not on time) until it queues on the gate's row lock
        deadline = asyncio.get_running_loop().time() + 60
        while not await conn.fetchval(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
        ):
            assert asyncio.get_running_loop().time() < deadline, "it never waited on the gate"
            await asyncio.sleep(0.005)
        assert not waiter.done()
        await holder.commit()
        assert await asyncio.wait_for(waiter, 30) is False  # it counted the 10 committed
        assert await pending(conn, tenant) == 10


async def test_a_refused_sql_schedule_changes_nothing(db_url, roles, conn):
    tenant = uuid.uuid4()
    role = await roles.create(tenant)
    app, other = await roles.connect(role), await roles.connect(role)
    async with started_broker(db_url, timers_tenant_max_pending=1, **NO_LOOP):
        await app.fetchval(SCHEDULE, "q", "a", 60_000, b"x")
        gate = "SELECT entries FROM queen.tenant_quota_gate WHERE tenant_id = $1"
        entries = await conn.fetchval(gate, tenant)
        async with app.transaction():
            with pytest.raises(asyncpg.PostgresError) as ei:
                async with app.transaction():
                    await app.fetchval(SCHEDULE, "q", "b", 60_000, b"x")
            assert ei.value.sqlstate == "54000"
            # the caller's transaction goes on after its savepoint, without the refused timer
            assert json.loads(await app.fetchval(CANCEL, "q", "b"))["status"] == "absent"
            # and without the gate: the tenant's other transactions do not wait for it
            cancel = other.fetchval(CANCEL, "q", "a")
            assert json.loads(await asyncio.wait_for(cancel, 60))["status"] == "cancelled"
            assert await asyncio.wait_for(try_schedule(other, "c"), 60) is True
        assert await conn.fetchval(gate, tenant) == entries + 1  # the other's schedule only
        assert await pending(conn, tenant) == 1  # "c"; "a" cancelled, "b" never written
        assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quota_usage") == 0


async def test_repeatable_read_cannot_count_a_stale_snapshot(db_url, roles, conn):
    # Under REPEATABLE READ a transaction's snapshot may predate another one's commit; its
    # count would miss those rows, so the gate refuses it with 40001 (retry) instead.
    tenant = uuid.uuid4()
    role = await roles.create(tenant)
    stale, fresh = await roles.connect(role), await roles.connect(role)
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP):
        await fresh.fetchval(SCHEDULE, "q", "first", 60_000, b"x")  # the gate row exists
        tx = stale.transaction(isolation="repeatable_read")
        await tx.start()
        await stale.fetchval("SELECT 1")  # the snapshot is taken here
        await fresh.fetchval(SCHEDULE, "q", "second", 60_000, b"x")
        with pytest.raises(asyncpg.PostgresError) as ei:
            await stale.fetchval(SCHEDULE, "q", "third", 60_000, b"x")
        assert ei.value.sqlstate == "40001"
        await tx.rollback()
        assert await try_schedule(stale, "third") is True  # the retry, on a fresh snapshot


async def test_an_override_caps_a_tenant_and_uncapped_tenants_take_no_gate(db_url, roles, conn):
    capped, free = uuid.uuid4(), uuid.uuid4()
    app = await roles.connect(await roles.create(capped))
    free_app = await roles.connect(await roles.create(free))
    async with started_broker(db_url, **NO_LOOP) as q:  # no default cap
        await q.tenant_quota_set(ADMIN, str(capped), {"maxPending": 3})
        assert [await try_schedule(app, f"k{i}") for i in range(5)] == [True] * 3 + [False] * 2
        for i in range(20):
            assert await try_schedule(free_app, f"k{i}") is True
        gates = await conn.fetch("SELECT tenant_id FROM queen.tenant_quota_gate")
        assert [r["tenant_id"] for r in gates] == [capped]
        # "unlimited" lifts it at once, for SQL too
        await q.tenant_quota_set(ADMIN, str(capped), {"maxPending": "unlimited"})
        assert await try_schedule(app, "k5") is True


async def test_the_broker_flag_reaches_sql_and_lifting_the_cap_clears_it(db_url, roles, conn):
    tenant = uuid.uuid4()
    app = await roles.connect(await roles.create(tenant))
    async with started_broker(db_url, timers_tenant_max_pending=5, **NO_LOOP) as q:
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
        # sticky: 4 pending is not under 90 % of 5, so SQL stays refused after a cancel
        assert json.loads(await app.fetchval(CANCEL, "q", "b0"))["status"] == "cancelled"
        with pytest.raises(asyncpg.PostgresError) as ei:
            await app.fetchval(SCHEDULE, "q", "s", 60_000, b"x")
        assert ei.value.sqlstate == "54000"
        await q.tenant_quota_set(ADMIN, str(tenant), {"maxPending": "unlimited"})
        assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quota_usage") == 0
        assert json.loads(await app.fetchval(SCHEDULE, "q", "s", 60_000, b"x"))["ok"] is True


async def test_sql_and_a_broker_together_stay_within_the_documented_bound(db_url, roles, conn):
    # The broker measured the tenant at 0 (headroom 10), then SQL schedules 10: the broker
    # may still admit its headroom before its next measurement, and no more: cap + 1 x 10.
    tenant = uuid.uuid4()
    app = await roles.connect(await roles.create(tenant))
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP) as q:
        who = Identity(tenant=tenant, subject="tester")
        await q.tenant_quota_get(who)  # this broker measures it: 0 pending
        assert [await try_schedule(app, f"s{i}") for i in range(11)] == [True] * 10 + [False]
        op = {"op": "schedule", "queue": "q", "delayMs": 60_000, "payload": "eA=="}
        admitted = 0
        for i in range(15):
            try:
                await q.timers_apply(who, [{**op, "timerKey": f"b{i}", "txn": f"t{i}"}])
                admitted += 1
            except queen_timers.QueenError as exc:
                assert exc.code == "timers_quota_exceeded"
        assert admitted == 10
        assert await pending(conn, tenant) == 20  # cap + (brokers) x headroom, and no more
        await q.quotas.refresh()
        assert await try_schedule(app, "after") is False
