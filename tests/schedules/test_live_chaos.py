"""Exactly once per occurrence, counted at full scale: 200 schedules at `everyMs: 1000` over
three broker processes for 60 s, one broker SIGKILLed every 10 s while it fires, and a
replacement started. Every occurrence in the window is in the queue exactly once, none before
its instant, none skipped.

The kill lands at a point the code signals, never at a moment a timer picked: the test holds
the queue's partition row locked, so a fire into it waits on the lock with its claims in hand
and its transaction open; the first broker whose backend PostgreSQL shows waiting in
`queen.schedule_fire_v1` is the victim: it gets SIGKILL (its backends are terminated too: the
machine is gone) and the lock is released. Its claimed occurrences come back after the lease
(3 s here) and fire elsewhere.

What is judged is what the design guarantees, nothing about lateness: each schedule has a
window [startAt, endAt] of 60 occurrences and catch-up `all` (cap 1000), so every instant in
it must be delivered whatever the delays, once (the txn `sched:<id>@<instant>` is unique in
the partition's log), never before its instant (the segment's transaction time is PostgreSQL's
clock, as the fire's due check is). Real time matters here, so the test waits on what the
brokers do (the cadence ending) with generous timeouts, never on a fixed sleep for the
outcome."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import signal
from collections import Counter, defaultdict

import pytest

from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.testing.broker import BrokerProcess

from .helpers import frames

pytestmark = pytest.mark.slow

IDENT = Identity(subject="scheduler")
QUEUE = "live"
SCHEDULES = 200
EVERY_MS = 1000
WINDOW_S = 60
KILL_EVERY_S = 10
BROKERS = 3
# A short lease: the killed broker's claims come back within seconds, not the 30 s default.
ENV = {"QUEEN_SWEEPER_LEASE_MS": "3000"}
LEAD_S = 8  # room to create the schedules and start the brokers before the first instant


async def _wait(check, what: str, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await check():
        assert loop.time() < end, f"{what} within {timeout} s"
        await asyncio.sleep(0.05)


async def _kill_mid_fire(conn, admin, brokers: list[BrokerProcess]) -> BrokerProcess:
    """SIGKILL the first of `brokers` whose fire statement waits on the partition lock we hold
    (the first one to fire: while it waits, the occurrences it claimed stage nothing, so a
    broker chosen in advance may find nothing due until their lease runs out). Returns it."""
    by_pid = {str(b.pid): b for b in brokers}
    tr = conn.transaction()
    await tr.start()
    try:
        await conn.execute(
            "SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
            " WHERE q.name = $1 FOR UPDATE OF p",
            QUEUE,
        )
        waiting: list[BrokerProcess] = []

        async def blocked() -> bool:
            names = await admin.fetch(
                "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE"
                " 'queen:%' AND wait_event_type = 'Lock' AND query LIKE '%schedule_fire_v1%'"
            )
            waiting[:] = [by_pid[p] for r in names if (p := r[0].split(":")[1]) in by_pid]
            return bool(waiting)

        await _wait(blocked, "no broker's fire reached the held partition", 60.0)
        victim = waiting[0]
        await victim.signal(signal.SIGKILL)
        await admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name LIKE $1",
            f"queen:{victim.pid}:%",
        )
        return victim
    finally:
        await tr.rollback()


async def test_200_schedules_over_3_brokers_one_killed_every_10_s_each_occurrence_once(
    db_url, conn
):
    setup = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await setup.start()
    admin = setup.rt.pool
    brokers: list[BrokerProcess] = []
    kills = 0
    try:
        now = dt.datetime.now(dt.UTC)
        start = (now + dt.timedelta(seconds=LEAD_S)).replace(microsecond=0)
        end = start + dt.timedelta(seconds=WINDOW_S - 1)
        payload = base64.b64encode(b"tick").decode()
        ids: dict[str, str] = {}
        for i in range(SCHEDULES):
            made = await setup.schedule_set(
                IDENT,
                {
                    "queue": QUEUE,
                    "scheduleKey": f"s{i:03d}",
                    "everyMs": EVERY_MS,
                    "startAt": start.isoformat(),
                    "endAt": end.isoformat(),
                    "payload": payload,
                    "catchUp": "all",
                    "catchUpCap": 1000,
                },
            )
            assert made["schedule"]["nextAt"].startswith(start.strftime("%Y-%m-%dT%H:%M:%S"))
            ids[made["schedule"]["scheduleId"]] = f"s{i:03d}"
        brokers = list(
            await asyncio.gather(*(BrokerProcess(db_url, env=ENV).start() for _ in range(BROKERS)))
        )
        loop = asyncio.get_running_loop()
        t_start = loop.time() + (start - dt.datetime.now(dt.UTC)).total_seconds()
        for k in range(WINDOW_S // KILL_EVERY_S):
            # the middle of each 10 s slice of the window: a kill every 10 s
            await asyncio.sleep(max(0.0, t_start + KILL_EVERY_S * k + 5 - loop.time()))
            victim = await _kill_mid_fire(conn, admin, brokers)
            brokers.remove(victim)
            kills += 1
            brokers.append(await BrokerProcess(db_url, env=ENV).start())

        async def ended() -> bool:
            left = await conn.fetchval(
                "SELECT count(*) FROM queen.schedules WHERE queue = $1 AND next_at IS NOT NULL",
                QUEUE,
            )
            return left == 0

        # the window's end, plus a lease and a generous margin for a loaded machine
        await _wait(ended, "the cadences did not reach their endAt", WINDOW_S + 90.0)
    finally:
        await asyncio.gather(*(b.kill() for b in brokers))
        await setup.stop()
    assert kills == WINDOW_S // KILL_EVERY_S

    want = {
        (start + dt.timedelta(milliseconds=EVERY_MS * n)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        for n in range(WINDOW_S * 1000 // EVERY_MS)
    }
    got: dict[str, Counter[str]] = defaultdict(Counter)
    early = []
    for f in await frames(conn, QUEUE):
        head, instant = f["txn"].removeprefix("sched:").split("@", 1)
        got[ids[head]][instant] += 1
        if f["createdAt"] < dt.datetime.fromisoformat(instant):
            early.append((ids[head], instant, f["createdAt"]))
    assert not early, f"delivered before their instant: {early[:5]}"
    assert set(got) == set(ids.values())
    for key, counts in sorted(got.items()):
        doubled = sorted(i for i, n in counts.items() if n > 1)
        assert not doubled, f"{key}: occurrences delivered twice: {doubled}"
        assert set(counts) == want, (
            f"{key}: skipped {sorted(want - set(counts))[:5]}, "
            f"outside the window {sorted(set(counts) - want)[:5]}"
        )
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE queue = $1", QUEUE) == 0
