"""The sweeper claims only the shards a probe saw due: which shards each claim walks, and that
a timer in a shard no probe named yet is still fired, and every timer exactly once."""

import asyncio
import random
import time

import pytest
from sweeper_helpers import (
    assert_exactly_once,
    lateness_ms,
    schedule_many,
    schedule_op,
    wait_delivered,
)

from queen_timers.identity import DEFAULT_TENANT, Identity
from queen_timers.service import Queen
from queen_timers.testing.broker import BrokerProcess
from queen_timers.timers import fire, store
from queen_timers.timers.fire import Probe
from queen_timers.timers.sweeper import Sweeper

IDENT = Identity(subject="scheduler")


def probe(soon: dict[int, float]) -> Probe:
    due = [s for s, ms in soon.items() if ms <= 0]
    return Probe(
        next_in_ms=min(soon.values()),
        due=len(due),
        due_capped=False,
        late_ms=0.0,
        due_shards=due,
        soon_shards=list(soon),
        soon_in_ms=list(soon.values()),
    )


async def test_a_deadline_wake_claims_the_shards_the_probe_saw_due_by_then(queen):
    sw = Sweeper(queen.rt)
    # shard 7 overdue, 9 due 3 ms after the probe, 11 a minute away (not due by the wake)
    sw._last_probe = (probe({7: -5.0, 9: 3.0, 11: 60_000.0}), time.monotonic())
    queen.rt.hub.begin_cycle()
    await sw._sleep(0.010, "deadline")
    assert sw._expect_due and sw._expect_shards is not None
    assert sorted(sw._expect_shards) == [7, 9]


async def test_a_deadline_wake_with_nothing_due_by_then_probes_instead_of_claiming(queen):
    sw = Sweeper(queen.rt)
    sw._last_probe = (probe({5: 60_000.0}), time.monotonic())
    queen.rt.hub.begin_cycle()
    await sw._sleep(0.010, "deadline")
    assert not sw._expect_due


async def test_a_hint_wake_claims_every_shard(queen):
    """A hint's timer was scheduled after the probe: its shard is not known here."""
    sw = Sweeper(queen.rt)
    sw._last_probe = (probe({5: 60_000.0}), time.monotonic())
    hub = queen.rt.hub
    hub.begin_cycle()
    hub.timer_due(time.time() + 0.010, "local")
    await sw._sleep(30.0, "deadline")
    assert sw._expect_due and sw._expect_shards is None


async def _shard(conn, key: str) -> int:
    return await conn.fetchval("SELECT (hashtextextended($1, 0) & 63)::int", key)


async def test_a_timer_in_a_shard_the_last_probe_did_not_name_fires_in_the_next_cycle(queen, conn):
    """The probe saw only timer a's shard due; b falls due in another shard after it. The
    claim at the deadline walks a's shard only, and the probe that ends the drain names b's:
    both fire in that one cycle."""
    rt = queen.rt
    a_shard = await _shard(conn, "a")
    b = ""
    for i in range(1000):
        b = f"b{i}"
        if await _shard(conn, b) != a_shard:
            break
    b_shard = await _shard(conn, b)
    await store.apply(conn, [schedule_op("q", "a", -1000)], DEFAULT_TENANT, "alice", None)
    p = await fire.probe(rt)
    assert p.due_shards == [a_shard]
    await store.apply(conn, [schedule_op("q", b, -1000)], DEFAULT_TENANT, "alice", None)

    sw = Sweeper(rt)
    walked: list = []
    drain = sw._drain

    async def recording_drain(budget, shards=None):
        walked.append(None if shards is None else sorted(shards))
        return await drain(budget, shards)

    sw._drain = recording_drain  # type: ignore[method-assign]  # records, then drains
    # the sleep ended at the deadline this probe named
    sw._last_probe = (p, time.monotonic())
    sw._expect_due, sw._expect_shards = True, p.shards_due_within(5.0)
    await sw._cycle()
    assert walked == [[a_shard], [b_shard]]
    await asyncio.sleep(0)  # the fire's accounting runs at the loop's next turn (call_soon)
    assert sw.fired == 2
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


@pytest.mark.slow
@pytest.mark.parametrize("brokers", [1, 2])
async def test_timers_spread_over_every_shard_fire_exactly_once_never_early(db_url, conn, brokers):
    """1,500 timers due over 1.5 s: each cycle finds a few shards due and claims only those;
    with a second broker (a process), each probes all 64 shards and both share the work."""
    q = Queen(database_url=db_url, retention_interval_ms=0)  # sweeper on
    await q.start()
    others = [BrokerProcess(db_url) for _ in range(brokers - 1)]
    try:
        await asyncio.gather(*(b.start() for b in others))
        rnd = random.Random(11)
        ops = [schedule_op(f"q{i % 3}", f"k{i}", rnd.uniform(300, 1800)) for i in range(1500)]
        results = await schedule_many(q, IDENT, ops)
        log = await wait_delivered(conn, 1500, timeout=90)
    finally:
        await asyncio.gather(*(b.kill() for b in others))
        await q.stop()
    assert_exactly_once(results, log)
    assert min(lateness_ms(results, log)) >= 0, "a timer was delivered before its deliver_at"
    shards = await conn.fetchval(
        "SELECT count(DISTINCT hashtextextended(k, 0) & 63) FROM unnest($1::text[]) k",
        [op["timerKey"] for op in ops],
    )
    assert shards == 64
