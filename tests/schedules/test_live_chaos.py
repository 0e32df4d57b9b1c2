"""Schedules in real time across broker processes, one SIGKILLed while it fires: every
occurrence delivered once, none early, none skipped. Real time matters here, so the test waits
on what the brokers do (ledger rows appearing) with generous timeouts, never on a fixed sleep
for the outcome."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import signal
from collections import Counter

import pytest

from queen_timers.identity import Identity
from queen_timers.log.frames import unpack_segment
from queen_timers.service import Queen
from queen_timers.testing.broker import BrokerProcess

pytestmark = pytest.mark.slow

IDENT = Identity(subject="scheduler")
SCHEDULES = 20
# A short lease: the killed broker's claims come back within the misfire grace (60 s).
ENV = {"QUEEN_SWEEPER_LEASE_MS": "3000"}


async def _wait_runs(conn, n: int, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while await conn.fetchval("SELECT count(*) FROM queen.schedule_runs") < n:
        assert loop.time() < end, f"fewer than {n} occurrences fired within {timeout} s"
        await asyncio.sleep(0.1)


async def test_a_broker_killed_while_schedules_run_loses_and_doubles_nothing(db_url, conn):
    setup = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await setup.start()
    a = b = c = None
    try:
        payload = base64.b64encode(b"tick").decode()
        for i in range(SCHEDULES):
            await setup.schedule_set(
                IDENT,
                {
                    "queue": "live",
                    "scheduleKey": f"s{i}",
                    "everyMs": 1000,
                    "payload": payload,
                    "catchUp": "all",
                    "catchUpCap": 1000,
                },
            )
        a = await BrokerProcess(db_url, env=ENV).start()
        b = await BrokerProcess(db_url, env=ENV).start()
        await _wait_runs(conn, 3 * SCHEDULES)
        await a.signal(signal.SIGKILL)
        # the machine is gone: its backends go too
        await setup.rt.pool.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1",
            f"queen:{a.pid}:%",
        )
        c = await BrokerProcess(db_url, env=ENV).start()
        before = await conn.fetchval("SELECT count(*) FROM queen.schedule_runs")
        await _wait_runs(conn, before + 6 * SCHEDULES)
        # stop the cadence: a pause withdraws the pending occurrence (waiting for a fire in
        # flight), so what the ledger holds afterwards is final
        for i in range(SCHEDULES):
            await setup.schedule_pause(IDENT, "live", f"s{i}")
    finally:
        for broker in (b, c):
            if broker is not None:
                await broker.terminate()
        await setup.stop()

    rows = await conn.fetch(
        "SELECT schedule_key, occurrence_at, outcome, fired_at FROM queen.schedule_runs"
        " ORDER BY schedule_key, occurrence_at"
    )
    by_key: dict[str, list[dt.datetime]] = {}
    for r in rows:
        assert r["outcome"] == "fired", r
        assert r["fired_at"] >= r["occurrence_at"], "an occurrence fired early"
        by_key.setdefault(r["schedule_key"], []).append(r["occurrence_at"])
    assert len(by_key) == SCHEDULES
    for key, ats in by_key.items():
        gaps = {(b2 - b1).total_seconds() for b1, b2 in zip(ats, ats[1:])}
        assert gaps == {1.0}, f"{key}: an occurrence skipped or doubled ({sorted(gaps)})"
    # and the log holds each occurrence exactly once
    segs = await conn.fetch(
        "SELECT s.blob FROM queen.log_segments s JOIN queen.log_partitions p"
        " ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'live'"
    )
    txns = Counter(f.txn for sg in segs for f in unpack_segment(sg["blob"]))
    assert set(txns.values()) == {1}
    assert len(txns) == len(rows)
