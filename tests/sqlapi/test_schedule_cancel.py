"""The SQL API inside an application's transaction: commit makes the timer, rollback leaves
nothing, the fire delivers it once, and the answers are the wire's taxonomy."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import asyncpg
from timers.helpers import log_frames, timer_row

import queen_timers
from queen_timers.identity import DEFAULT_TENANT
from queen_timers.timers import fire, store

SCHEDULE = "SELECT queen.timer_schedule_v1($1, $2, $3, $4)"


def later(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


async def test_commit_makes_the_timer_and_the_fire_delivers_it_once(queen, conn):
    async with conn.transaction():
        await conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        await conn.execute("INSERT INTO orders VALUES (1)")
        res = await conn.fetchval(SCHEDULE, "expiry", "order-1", 60_000, b'{"order":1}')
    assert res["ok"] is True and res["status"] == "scheduled"
    assert set(res) == {"ok", "status", "queue", "timerKey", "txn", "messageId", "deliverAt"}
    assert uuid.UUID(res["messageId"]).version == 7
    row = await timer_row(conn, "expiry", "order-1")
    assert row["producer_sub"] == await conn.fetchval("SELECT session_user")
    assert row["txn"] == res["txn"] and row["payload"] == b'{"order":1}'
    # deliver_at from the database clock, the delay counted from the call
    db_now = await conn.fetchval("SELECT clock_timestamp()")
    assert dt.timedelta(seconds=58) < row["deliver_at"] - db_now <= dt.timedelta(seconds=60)

    assert (await fire.drain(queen.rt, now=later(30))).fired == 0
    assert (await fire.drain(queen.rt, now=later(120))).fired == 1
    assert (await fire.drain(queen.rt, now=later(240))).fired == 0
    frames = await log_frames(conn, queue="expiry")
    assert len(frames) == 1
    assert str(frames[0]["id"]) == res["messageId"] and frames[0]["txn"] == res["txn"]
    assert json.loads(frames[0]["payload"]) == {"order": 1}


async def test_rollback_leaves_no_row(conn):
    await conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
    tr = conn.transaction()
    await tr.start()
    await conn.execute("INSERT INTO orders VALUES (1)")
    res = await conn.fetchval(SCHEDULE, "expiry", "order-1", 0, b"{}")
    assert res["status"] == "scheduled"
    await tr.rollback()
    assert await timer_row(conn, "expiry", "order-1") is None
    assert await conn.fetchval("SELECT count(*) FROM orders") == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_reschedule_cancel_absent_and_the_optional_parameters(conn):
    first = await conn.fetchval(
        "SELECT queen.timer_schedule_v1('q', 'k', 1000, '\\x7b7d'::bytea, txn => 't1',"
        " partition => 'p1')"
    )
    assert first["status"] == "scheduled" and first["txn"] == "t1"
    again = await conn.fetchval(SCHEDULE, "q", "k", 5000, b"{}")
    assert again["status"] == "rescheduled"
    assert again["messageId"] != first["messageId"]  # a rescheduled timer is a new message
    row = await timer_row(conn, "q", "k")
    assert row["partition"] == "Default" and row["txn"] == again["txn"]  # minted when omitted

    gone = await conn.fetchval("SELECT queen.timer_cancel_v1('q', 'k')")
    assert gone == {
        "ok": True,
        "status": "cancelled",
        "queue": "q",
        "timerKey": "k",
        "txn": again["txn"],
    }
    absent = await conn.fetchval("SELECT queen.timer_cancel_v1('q', 'k', txn => 'mine')")
    assert absent == {"ok": False, "status": "absent", "queue": "q", "timerKey": "k", "txn": "mine"}


async def test_a_claimed_timer_is_too_late_for_both(conn):
    await conn.fetchval(SCHEDULE, "q", "k", 0, b"{}")
    claimed = await store.claim(conn, None, later(1), 30_000, 10, 10)
    assert [c.timer_key for c in claimed] == ["k"]
    res = await conn.fetchval(SCHEDULE, "q", "k", 0, b"{}")
    assert res == {"ok": False, "status": "too_late", "queue": "q", "timerKey": "k"}
    res = await conn.fetchval("SELECT queen.timer_cancel_v1('q', 'k')")
    assert res == {"ok": False, "status": "too_late", "queue": "q", "timerKey": "k"}


async def test_the_zstd_flag_travels_and_the_fire_decompresses(queen, conn):
    res = await queen_timers.schedule(conn, "q", "z", 0, {"big": "x" * 1000}, compress=True)
    row = await timer_row(conn, "q", "z")
    assert row["payload_zstd"] is True and len(row["payload"]) < 200
    assert (await fire.drain(queen.rt, now=later(5))).fired == 1
    [f] = await log_frames(conn, queue="q")
    assert str(f["id"]) == res["messageId"] and json.loads(f["payload"]) == {"big": "x" * 1000}


async def test_functions_are_reapplied_at_boot_and_v1_keeps_its_signature(conn):
    from queen_timers.db.migrate import apply_migrations

    await apply_migrations(conn)
    await apply_migrations(conn)
    args = await conn.fetch(
        "SELECT p.proname, pg_get_function_arguments(p.oid) AS args, p.prosecdef,"
        "       p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = 'queen' AND p.proname IN ('timer_schedule_v1', 'timer_cancel_v1')"
        " ORDER BY 1"
    )
    assert [(r["proname"], r["args"]) for r in args] == [
        (
            "timer_cancel_v1",
            "queue text, timer_key text, txn text DEFAULT NULL::text, "
            "tenant uuid DEFAULT NULL::uuid",
        ),
        (
            "timer_schedule_v1",
            "queue text, timer_key text, delay_ms bigint, payload bytea, "
            "txn text DEFAULT NULL::text, partition text DEFAULT NULL::text, "
            "tenant uuid DEFAULT NULL::uuid, payload_zstd boolean DEFAULT false, "
            "encrypted boolean DEFAULT false, wake boolean DEFAULT true",
        ),
    ]
    for r in args:
        assert r["prosecdef"] is True
        assert r["proconfig"] == ["search_path=pg_catalog, pg_temp"]
    # positional callers of the four required arguments keep working
    res = await conn.fetchval(SCHEDULE, "q", "k", 10, b"{}")
    assert res["status"] == "scheduled"


async def test_a_callers_prepared_statement_survives_a_boot(db_url, conn):
    """Brokers re-apply the schema at every boot (CREATE OR REPLACE): an application's
    connection, with its statement prepared before, keeps calling _v1 across it."""
    app = await asyncpg.connect(db_url)
    try:
        stmt = await app.prepare("SELECT queen.timer_schedule_v1($1, $2, $3, $4)::text")
        assert json.loads(await stmt.fetchval("q", "a", 0, b"{}"))["status"] == "scheduled"
        from queen_timers.db.migrate import apply_migrations

        await apply_migrations(conn)
        assert json.loads(await stmt.fetchval("q", "b", 0, b"{}"))["status"] == "scheduled"
        assert json.loads(await stmt.fetchval("q", "a", 0, b"{}"))["status"] == "rescheduled"
    finally:
        await app.close()


async def test_schedule_and_cancel_of_one_key_in_concurrent_transactions(db_url, conn):
    """A cancel waits on an uncommitted reschedule of the same key, then cancels what it
    committed; a schedule waits on an uncommitted cancel, then schedules anew."""
    await conn.fetchval(SCHEDULE, "q", "k", 60_000, b"{}")
    a = await asyncpg.connect(db_url)
    b = await asyncpg.connect(db_url)
    try:
        ta = a.transaction()
        await ta.start()
        moved = json.loads(
            await a.fetchval(
                "SELECT queen.timer_schedule_v1('q', 'k', 90000, '\\x7b7d', 't2')::text"
            )
        )
        assert moved["status"] == "rescheduled"
        cancel = _bg(b.fetchval("SELECT queen.timer_cancel_v1('q', 'k')::text"))
        await _wait_blocked(conn, b.get_server_pid())
        await ta.commit()
        res = json.loads(await cancel)
        assert res["status"] == "cancelled" and res["txn"] == "t2"
        assert await timer_row(conn, "q", "k") is None

        await conn.fetchval(SCHEDULE, "q", "k", 60_000, b"{}")
        ta = a.transaction()
        await ta.start()
        res = json.loads(await a.fetchval("SELECT queen.timer_cancel_v1('q', 'k')::text"))
        assert res["status"] == "cancelled"
        again = _bg(
            b.fetchval("SELECT queen.timer_schedule_v1('q', 'k', 1, '\\x7b7d', 't3')::text")
        )
        await _wait_blocked(conn, b.get_server_pid())
        await ta.commit()
        res = json.loads(await again)
        assert res["status"] == "scheduled" and res["txn"] == "t3"
        assert (await timer_row(conn, "q", "k"))["txn"] == "t3"
    finally:
        await a.close()
        await b.close()


def _bg(coro):
    import asyncio

    return asyncio.ensure_future(coro)


async def _wait_blocked(conn, pid: int, timeout: float = 30.0) -> None:
    """Until backend `pid` waits on a lock (the server's own signal, polled)."""
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if await conn.fetchval(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited on a lock")


async def test_the_default_tenant_is_where_an_unbound_caller_lands(conn):
    await conn.fetchval(SCHEDULE, "q", "k", 0, b"{}")
    assert (await timer_row(conn, "q", "k", DEFAULT_TENANT)) is not None
