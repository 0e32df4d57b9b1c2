"""The SQL API of schedules inside an application's transaction: commit makes the schedule and
its seed, rollback leaves nothing, a broker's fire turns the seed into the first occurrence."""

from __future__ import annotations

import datetime as dt

import asyncpg
import pytest

from queen_timers.identity import DEFAULT_TENANT
from queen_timers.timers import fire
from queen_timers.timers.recurrence import schedule_id

from .helpers import pending

SET = "SELECT queen.schedule_set_v1(queue => $1, schedule_key => $2, payload => $3, cron => $4)"


def later(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


async def test_a_schedule_made_in_sql_starts_at_the_next_fire(queen, conn, ident):
    async with conn.transaction():
        await conn.execute("CREATE TABLE reports (id int)")
        made = await conn.fetchval(SET, "reports", "hourly", b'{"r":1}', "0 * * * *")
    assert made["status"] == "created"
    assert made["schedule"]["scheduleId"] == str(schedule_id(DEFAULT_TENANT, "reports", "hourly"))
    (seed,) = await pending(conn, "reports")
    assert "@seed:" in seed["txn"]

    report = await fire.drain(queen.rt, now=later(1))
    assert report.fired == 0  # the seed is never delivered
    (row,) = await pending(conn, "reports")
    assert "@seed:" not in row["txn"] and row["deliver_at"].minute == 0
    assert row["deliver_at"] > dt.datetime.now(dt.UTC)
    view = await queen.schedule_peek(ident, "reports", "hourly")
    assert view["nextAt"] and view["runs"] == []

    assert await conn.fetchval("SELECT queen.schedule_drop_v1('reports', 'hourly')") is True
    assert await pending(conn, "reports") == []


async def test_rollback_leaves_nothing_and_refusals_are_the_taxonomy(queen, conn):
    tx = conn.transaction()
    await tx.start()
    await conn.fetchval(SET, "reports", "x", b"x", "* * * * *")
    await tx.rollback()
    assert await conn.fetchval("SELECT count(*) FROM queen.schedules") == 0
    for args, reason in (
        (("reports", "x", b"x", "* * *"), "schedule_bad_cron"),
        (("reports", "x", b"x", None), "schedule_recurrence_required"),
    ):
        with pytest.raises(asyncpg.PostgresError) as e:
            await conn.fetchval(SET, *args)
        assert reason in str(e.value)
    with pytest.raises(asyncpg.PostgresError) as e:
        await conn.fetchval(
            "SELECT queen.schedule_set_v1('reports', 'x', 'x'::bytea, every_ms => 60000,"
            " zone => 'Mars/Olympus')"
        )
    assert "schedule_bad_zone" in str(e.value)
    with pytest.raises(asyncpg.PostgresError) as e:
        await conn.fetchval(
            "SELECT queen.schedule_set_v1('reports', 'x', 'x'::bytea, every_ms => 10)"
        )
    assert "schedule_too_frequent" in str(e.value)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
