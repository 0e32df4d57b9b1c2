"""Exactly once per occurrence, counted, across brokers that die at the fire: a connection
killed as the fire statement is next (the fault point `timers.fire`), and a broker that claimed
and never fired (its lease runs out and another broker fires)."""

from __future__ import annotations

import asyncio
import datetime as dt

from queen_timers.testing.chaos import Kill, killing
from queen_timers.testing.fixtures import started_broker
from queen_timers.timers import fire

from .helpers import body, occurrence_counts, utc

T0 = utc(2030, 1, 1)


def s(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


async def test_killed_fires_deliver_every_occurrence_once(queen, conn, ident, db_url):
    keys = [f"k{i}" for i in range(20)]
    for k in keys:
        await queen.schedule_set(
            ident, body("jobs", k, everyMs=5000, catchUp="all", catchUpCap=100), now=T0
        )
    async with started_broker(db_url) as other:
        brokers = [queen, other]
        # one in three fire statements of either broker loses its connection first
        async with killing(conn, {"timers.fire": Kill(every=3, times=40)}) as chaos:
            for step in range(1, 61):  # one pass a second for a minute, brokers alternating
                await fire.drain(brokers[step % 2].rt, now=s(step + 0.25), max_rows=7)
        assert chaos.killed["timers.fire"] > 5
        # the backoffs of the last kills run out; no kill now
        for extra in range(61, 200):
            await fire.drain(brokers[extra % 2].rt, now=s(extra))
    counts = await occurrence_counts(conn, "jobs")
    # every occurrence due by the last pass (199 s): 5 s, 10 s, ... 195 s
    want = {
        (T0 + dt.timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z") for n in range(5, 200, 5)
    }
    per_schedule: dict[str, int] = {}
    rows = await conn.fetch(
        "SELECT schedule_key, occurrence_at, outcome, fired_at FROM queen.schedule_runs"
    )
    for r in rows:
        assert r["outcome"] == "fired"
        assert r["fired_at"] >= r["occurrence_at"]  # none early
        per_schedule[r["schedule_key"]] = per_schedule.get(r["schedule_key"], 0) + 1
    # every occurrence of every schedule up to the last pass, each exactly once
    assert set(counts) == want
    assert set(counts.values()) == {len(keys)}
    assert per_schedule == {k: len(want) for k in keys}


async def test_a_broker_that_claimed_and_died_is_covered_by_another(queen, conn, ident, db_url):
    await queen.schedule_set(ident, body("jobs", "x", everyMs=10_000), now=T0)
    claimed = await fire.claim(queen.rt, now=s(10.1))  # then this broker "dies"
    assert len(claimed) == 1
    lease = queen.rt.settings.sweeper_lease_ms / 1000
    async with started_broker(db_url) as other:
        assert (await fire.drain(other.rt, now=s(10.2))).fired == 0  # leased: not yet
        report = await fire.drain(other.rt, now=s(10.1 + lease + 0.1))
        assert report.fired >= 1
    # the dead broker's late fire finds its lease gone: nothing more
    late = await fire.fire_claimed(queen.rt, claimed, now=s(10.1 + lease + 0.2))
    assert late.fired == 0
    counts = await occurrence_counts(conn, "jobs")
    assert set(counts.values()) == {1}
    assert "2030-01-01T00:00:10.000Z" in counts


async def test_brokers_racing_at_each_occurrence_deliver_it_once(queen, conn, ident, db_url):
    """Three brokers drain at the same instant, for 50 occurrences of 10 schedules, and one of
    them hands its claim back (a graceful stop) every third time: no double, no skip."""
    keys = [f"r{i}" for i in range(10)]
    for k in keys:
        await queen.schedule_set(ident, body("race", k, everyMs=1000), now=T0)
    async with started_broker(db_url) as b, started_broker(db_url) as c:
        rts = [queen.rt, b.rt, c.rt]
        for n in range(1, 51):
            at = s(n + 0.01)
            if n % 3 == 0:  # one broker claims and stops before it fires: hands back
                claimed = await fire.claim(rts[n % 3], now=at)
                await fire.release(rts[n % 3], claimed, now=at)
            reports = await asyncio.gather(*(fire.drain(rt, now=at) for rt in rts))
            assert sum(r.fired for r in reports) == len(keys)
    counts = await occurrence_counts(conn, "race")
    want = {(T0 + dt.timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z") for n in range(1, 51)}
    assert set(counts) == want and set(counts.values()) == {len(keys)}
