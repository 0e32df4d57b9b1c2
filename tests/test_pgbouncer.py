"""The broker behind PgBouncer in transaction mode: it detects the pooler, keeps no session state
on pooled connections, fires timers through it, and listens on a direct URL only.

The transport conformance suite runs through PgBouncer too (plugins/http/tests).
"""

import asyncio
import base64
import json
import logging
import os
import time

import pytest

from queen_timers.db.queries import Q
from queen_timers.identity import Identity
from queen_timers.log.retention import Maintenance
from queen_timers.notify import Notifier
from queen_timers.service import Queen
from queen_timers.testing.fixtures import started_broker
from queen_timers.testing.pgbouncer import find_pgbouncer

pytestmark = pytest.mark.pgbouncer


def notifier(q: Queen) -> Notifier:
    """The broker's LISTEN/NOTIFY notifier (these tests run with QUEEN_SWEEPER_NOTIFY on)."""
    n = q.rt.notifier
    assert isinstance(n, Notifier)
    return n


def due_now(queue: str, key: str) -> dict:
    payload = base64.b64encode(json.dumps({"k": key}).encode()).decode()
    return {"op": "schedule", "queue": queue, "timerKey": key, "delayMs": 0, "payload": payload,
            "txn": f"txn-{key}"}  # fmt: skip


def acks_for(popped: dict) -> list[dict]:
    return [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
         "leaseId": m["leaseId"], "status": "completed"}
        for m in popped["messages"]
    ]  # fmt: skip


def behind(pgbouncer, url: str, **overrides) -> Queen:
    return Queen(
        database_url=url,
        sweeper=False,
        retention_interval_ms=0,
        pooler_prepared_statements=pgbouncer.keeps_prepared_statements,
        **overrides,
    )


def test_queen_test_pgbouncer_names_the_binary(monkeypatch, tmp_path):
    monkeypatch.setenv("QUEEN_TEST_PGBOUNCER", "/bin/true")
    assert find_pgbouncer() == "/bin/true"
    monkeypatch.setenv("QUEEN_TEST_PGBOUNCER", str(tmp_path / "none"))
    with pytest.raises(RuntimeError, match="QUEEN_TEST_PGBOUNCER="):
        find_pgbouncer()


async def test_boot_detects_the_pooler_and_only_it(pgbouncer, db_url, pooled_db_url):
    async with started_broker(db_url) as direct:
        assert direct.rt.link.pooled is False
    async with started_broker(
        pooled_db_url, pooler_prepared_statements=pgbouncer.keeps_prepared_statements
    ) as q:
        link = q.rt.link
        assert link.pooled is True
        opts = link.pool_options(30000)
        assert opts["statement_timeout_ms"] == 0  # PgBouncer refuses it as a startup parameter
        assert (opts["statement_cache_size"] > 0) is pgbouncer.keeps_prepared_statements


async def test_notify_behind_a_pooler_without_a_listen_url_says_so_once(
    pgbouncer, pooled_db_url, caplog
):
    caplog.set_level(logging.WARNING, "queen_timers")
    q = behind(pgbouncer, pooled_db_url)
    await q.start()
    try:
        assert not notifier(q).listen_enabled
    finally:
        await q.stop()
    lines = [
        r.getMessage() for r in caplog.records if "QUEEN_LISTEN_DATABASE_URL" in r.getMessage()
    ]
    assert len(lines) == 1 and "connection pooler" in lines[0], lines


async def test_poll_only_behind_a_pooler_says_nothing(pgbouncer, pooled_db_url, caplog):
    caplog.set_level(logging.WARNING, "queen_timers")
    q = behind(pgbouncer, pooled_db_url, sweeper_notify=False)
    await q.start()
    await q.stop()
    assert not [r for r in caplog.records if "QUEEN_LISTEN_DATABASE_URL" in r.getMessage()]


async def test_the_listen_url_keeps_cross_broker_wakes_behind_a_pooler(
    pgbouncer, db_url, pooled_db_url, conn
):
    a = behind(pgbouncer, pooled_db_url, listen_database_url=db_url)
    b = behind(pgbouncer, pooled_db_url, listen_database_url=db_url)
    await a.start()
    await b.start()
    try:
        await asyncio.wait_for(notifier(b).connected.wait(), 30)
        # the listener is a backend of its own, not a pooler's server connection
        pid = notifier(b).listener_pid
        assert (
            await conn.fetchval("SELECT application_name FROM pg_stat_activity WHERE pid = $1", pid)
            == f"queen:{os.getpid()}:listen"
        )
        hub = b.rt.hub
        hub.begin_cycle()
        _, _, ev = hub.sleep_plan(time.time() + 30)
        a.rt.timers_scheduled(time.time() + 0.2)  # NOTIFY goes out through PgBouncer
        await asyncio.wait_for(ev.wait(), 30)
        assert hub.timer_hint_reason == "notify"
    finally:
        await a.stop()
        await b.stop()


async def test_timers_fire_through_the_pooler_and_a_long_poll_gets_them(pgbouncer, pooled_db_url):
    # the sweeper's own pool, the claim, the fire, the long-poll and the ack, all through it
    ident = Identity(subject="t")
    q = Queen(
        database_url=pooled_db_url,
        sweeper=True,
        sweeper_notify=False,
        retention_interval_ms=0,
        pooler_prepared_statements=pgbouncer.keeps_prepared_statements,
    )
    await q.start()
    waiting: asyncio.Task | None = None

    def long_poll() -> asyncio.Task:
        return asyncio.create_task(q.pop(ident, "fired", batch=10, wait=True, timeout_ms=60000))

    try:
        waiting = long_poll()  # parked before the timers exist
        res = await q.timers_apply(ident, [due_now("fired", f"k{i}") for i in range(20)])
        assert {r["status"] for r in res} == {"scheduled"}
        got: list[dict] = []
        while len(got) < 20:
            popped = await asyncio.wait_for(waiting, 90)
            assert popped is not None
            got += popped["messages"]
            acked = await q.ack(ident, acks_for(popped))
            assert all(a["success"] for a in acked), acked
            waiting = long_poll()
        assert sorted(m["data"]["k"] for m in got) == sorted(f"k{i}" for i in range(20))
    finally:
        if waiting is not None:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        await q.stop()


async def test_maintenance_takes_turns_through_the_pooler(pgbouncer, pooled_db_url):
    # a session advisory lock taken through a transaction pooler stays on the server
    # connection lent for the call; the lease row is released whichever connection runs it
    async with started_broker(
        pooled_db_url, pooler_prepared_statements=pgbouncer.keeps_prepared_statements
    ) as a:
        async with started_broker(
            pooled_db_url, pooler_prepared_statements=pgbouncer.keeps_prepared_statements
        ) as b:
            for _ in range(3):
                assert await Maintenance(a.rt).run_once() is not None
                assert await Maintenance(b.rt).run_once() is not None


async def test_the_statement_cache_goes_through_a_pooler_that_keeps_it(pgbouncer, pooled_db_url):
    if not pgbouncer.keeps_prepared_statements:
        major, minor = pgbouncer.version
        pytest.skip(
            f"PgBouncer {major}.{minor} keeps no prepared statements (1.21 and newer do); "
            "QUEEN_TEST_PGBOUNCER names a newer binary"
        )
    async with started_broker(pooled_db_url, pooler_prepared_statements=True) as q:
        # a transaction keeps one server connection, so its pg_prepared_statements is the one
        # the three calls ran on
        async with q.rt.pool.acquire() as conn, conn.transaction():
            for _ in range(3):
                assert await conn.fetchval(Q.schema_ready) is True
            rows = await conn.fetch(
                "SELECT name, statement, generic_plans + custom_plans AS runs "
                "FROM pg_prepared_statements"
            )
    # asyncpg named the statement, PgBouncer renamed it, and the server ran it three times
    # from one Parse; with the cache off asyncpg prepares unnamed statements, never listed
    mine = [r for r in rows if r["statement"] == Q.schema_ready]
    assert len(mine) == 1, rows
    assert mine[0]["name"].startswith("PGBOUNCER_") and mine[0]["runs"] >= 3, mine


async def test_a_boot_migrating_under_a_cached_broker_breaks_none_of_its_calls(
    pgbouncer, pooled_db_url
):
    # every boot re-applies the migrations (CREATE OR REPLACE): plans cached on the server for
    # the first broker's statements are invalidated, re-planned, and keep their result types
    ident = Identity(subject="t")
    opts = {"pooler_prepared_statements": pgbouncer.keeps_prepared_statements}
    async with started_broker(pooled_db_url, **opts) as a:
        for round_ in ("before", "after"):
            for i in range(5):
                res = await a.timers_apply(ident, [due_now("mig", f"{round_}{i}")])
                assert res[0]["status"] == "scheduled", res
            if round_ == "before":
                async with started_broker(pooled_db_url, **opts) as b:
                    assert b.migrations_applied
