"""The Python helpers on psycopg 3, sync and async, inside the caller's open transaction
(the asyncpg ones are exercised by every other test of this directory)."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from timers.helpers import log_frames, timer_row

import queen_timers
from queen_timers.timers import fire

from .test_schedule_cancel import later


async def test_psycopg_sync_commits_with_the_callers_transaction(queen, conn, roles):
    def work() -> tuple[dict, dict]:
        with roles.connect_psycopg() as pg:
            with pg.transaction():
                pg.execute("CREATE TABLE orders (id int PRIMARY KEY)")
                pg.execute("INSERT INTO orders VALUES (7)")
                res = queen_timers.schedule_sync(pg, "q", "order-7", 0, {"id": 7}, txn="t7")
            with pg.transaction():
                queen_timers.schedule_sync(pg, "q", "kept", 60_000, b"{}")
            try:
                with pg.transaction():
                    queen_timers.schedule_sync(pg, "q", "rolled-back", 0, b"{}")
                    raise RuntimeError("the application fails before its commit")
            except RuntimeError:
                pass
            with pg.transaction():
                gone = queen_timers.cancel_sync(pg, "q", "kept")
            return res, gone

    res, gone = await asyncio.to_thread(work)
    assert res["status"] == "scheduled" and res["txn"] == "t7"
    assert gone["status"] == "cancelled"
    assert await timer_row(conn, "q", "rolled-back") is None
    assert (await fire.drain(queen.rt, now=later(5))).fired == 1
    [f] = await log_frames(conn, queue="q")
    assert str(f["id"]) == res["messageId"] and json.loads(f["payload"]) == {"id": 7}


async def test_psycopg_sync_refusal_is_a_timer_refused(roles):
    def work():
        with roles.connect_psycopg() as pg:
            with pytest.raises(queen_timers.TimerRefused) as ei:
                queen_timers.schedule_sync(pg, "", "k", 0, b"{}")
            pg.rollback()
            return ei.value

    err = await asyncio.to_thread(work)
    assert (err.sqlstate, err.code, err.reason, err.status) == (
        "22023",
        "timers_bad_request",
        "timers_queue_required",
        400,
    )
    assert isinstance(err.__cause__, psycopg.Error)


async def test_psycopg_async_in_a_role_of_its_own(conn, roles):
    r = await roles.create()
    pg = await roles.connect_psycopg_async(r)
    async with pg.transaction():
        res = await queen_timers.schedule(pg, "q", "k", 1000, {"a": 1}, compress=True)
    assert res["status"] == "scheduled"
    row = await timer_row(conn, "q", "k")
    assert row["producer_sub"] == r and row["payload_zstd"] is True
    async with pg.transaction():
        assert (await queen_timers.cancel(pg, "q", "k"))["status"] == "cancelled"
        assert (await queen_timers.cancel(pg, "q", "k", txn="x"))["status"] == "absent"
    with pytest.raises(queen_timers.TimerRefused) as ei:
        async with pg.transaction():
            await queen_timers.schedule(pg, "q", "k", 10**12, b"{}")
    assert (ei.value.sqlstate, ei.value.reason, ei.value.status) == (
        "22008",
        "timers_horizon",
        403,
    )


async def test_other_database_errors_stay_the_drivers_own(db_url, conn):
    import asyncpg

    await queen_timers.schedule(conn, "q", "k", 60_000, b"{}")
    holder = await asyncpg.connect(db_url)
    try:
        async with holder.transaction():
            await queen_timers.schedule(holder, "q", "k", 90_000, b"{}")  # holds the row
            with pytest.raises(asyncpg.LockNotAvailableError):
                async with conn.transaction():
                    await conn.execute("SET LOCAL lock_timeout = '10ms'")
                    await queen_timers.schedule(conn, "q", "k", 1, b"{}")
    finally:
        await holder.close()
