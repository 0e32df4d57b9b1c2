"""The pending-timer cap with three brokers on one database (queen_timers/quotas.py): each
broker sees its own admissions and the others' only through a measurement, so between two
measurements the overshoot is at most (brokers - 1) x headroom, headroom = cap - the count
measured; a measurement taken after the others' commits closes it. Measurements are driven
explicitly (read() measures one tenant, refresh() every capped tenant a broker serves); the
loops are off, so no step waits on time."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker

from .helpers import sched

CAP = 10
SETTINGS = {
    "timers_tenant_max_pending": CAP,
    "timers_tenant_quota_refresh_ms": 0,
    "timers_tenant_quota_census_ms": 0,
}


@contextlib.asynccontextmanager
async def three_brokers(db_url):
    async with (
        started_broker(db_url, **SETTINGS) as a,
        started_broker(db_url, **SETTINGS) as b,
        started_broker(db_url, **SETTINGS) as c,
    ):
        yield [a, b, c]


async def pending(conn, who: Identity) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM queen.log_timers WHERE tenant_id = $1", who.tenant
    )


async def admitted(broker, who: Identity, keys) -> int:
    """Schedule one call per key through `broker`; answers how many were admitted."""
    n = 0
    for key in keys:
        try:
            await broker.timers_apply(who, [sched("q", key, 60_000)])
            n += 1
        except QueenError as e:
            assert e.code == "timers_quota_exceeded", e.to_dict()
    return n


async def test_overshoot_is_at_most_brokers_minus_one_times_headroom(db_url, conn):
    async with three_brokers(db_url) as brokers:
        who = Identity(tenant=uuid.uuid4(), subject="tester")
        await brokers[0].timers_apply(who, [sched("q", f"pre{i}", 60_000) for i in range(4)])
        # every broker measures 4 before any of them admits more: headroom 6 each
        for b in brokers:
            assert (await b.tenant_quota_get(who))["pending"] == 4
        got = [
            await admitted(b, who, [f"b{i}-{k}" for k in range(CAP)]) for i, b in enumerate(brokers)
        ]
        headroom = CAP - 4
        assert got == [headroom] * 3
        total = await pending(conn, who)
        assert total == 4 + 3 * headroom
        assert total - CAP == (len(brokers) - 1) * headroom  # the bound, reached
        # the next measurement stops every broker, until under 90 % of the cap
        for b in brokers:
            await b.quotas.refresh()
        for i, b in enumerate(brokers):
            assert await admitted(b, who, [f"late{i}"]) == 0


async def test_a_measurement_after_the_others_commits_leaves_no_overshoot(db_url, conn):
    async with three_brokers(db_url) as brokers:
        who = Identity(tenant=uuid.uuid4(), subject="tester")
        for i, b in enumerate(brokers):
            await b.tenant_quota_get(who)  # measured before, and again after, each burst
            await admitted(b, who, [f"b{i}-{k}" for k in range(CAP)])
        assert await pending(conn, who) == CAP


async def test_concurrent_schedules_on_three_brokers_stay_within_the_bound(db_url, conn):
    async with three_brokers(db_url) as brokers:
        who = Identity(tenant=uuid.uuid4(), subject="tester")
        for b in brokers:
            await b.tenant_quota_get(who)  # measured 0: headroom CAP on each

        async def one(b, key):
            try:
                await b.timers_apply(who, [sched("q", key, 60_000)])
                return True
            except QueenError as e:
                assert e.code == "timers_quota_exceeded"
                return False

        calls = [one(brokers[i % 3], f"k{i}") for i in range(9 * CAP)]
        outcomes = await asyncio.gather(*calls)
        total = await pending(conn, who)
        assert sum(outcomes) == total
        assert CAP <= total <= CAP + (len(brokers) - 1) * CAP
        # each broker alone never passed the headroom it measured
        per_broker = [sum(outcomes[i::3]) for i in range(3)]
        assert per_broker == [CAP, CAP, CAP]


@pytest.mark.parametrize("release_to", [CAP * 9 // 10 - 1])
async def test_three_brokers_release_together_under_ninety_percent(db_url, conn, release_to):
    async with three_brokers(db_url) as brokers:
        who = Identity(tenant=uuid.uuid4(), subject="tester")
        await admitted(brokers[0], who, [f"k{i}" for i in range(CAP + 1)])
        for b in brokers:
            await b.quotas.refresh()
            await b.tenant_quota_get(who)
        assert [(await b.tenant_quota_get(who))["overQuota"] for b in brokers] == [True] * 3
        for i in range(CAP - release_to):
            await brokers[1].timer_cancel(who, "q", f"k{i}")
        for b in brokers:
            await b.quotas.refresh()
        assert [await admitted(b, who, [f"again{i}"]) for i, b in enumerate(brokers)] == [1, 1, 1]
