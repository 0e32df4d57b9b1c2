"""The sweeper's sleep policy and the in-process wake hub (no database)."""

import asyncio
import math
import time

from queen_timers.timers.sweeper import SHARDS, claim_ring, plan_sleep, shard_ring
from queen_timers.wake import WakeHub


def test_sleep_is_clamped_between_floor_and_poll():
    assert plan_sleep(None, 0, floor_ms=5, max_ms=1000) == 1000  # empty table: the poll
    assert plan_sleep(300, 0, floor_ms=5, max_ms=1000) == 300  # until the earliest visible_at
    assert plan_sleep(0.5, 0, floor_ms=5, max_ms=1000) == 5  # never below the floor
    assert plan_sleep(-50, 0, floor_ms=5, max_ms=1000) == 5  # overdue: the floor
    assert plan_sleep(86_400_000, 0, floor_ms=5, max_ms=1000) == 1000  # never above the poll
    assert plan_sleep(10, 0, floor_ms=50, max_ms=20) == 50  # inverted knobs: the floor wins
    assert plan_sleep(10, 0, floor_ms=0, max_ms=0) >= 1  # zero knobs: still >= 1 ms


def test_a_claim_walks_as_many_shards_as_its_rows_need():
    # v_per = max(ceil(rows / 64), 8): the next claim starts where this one's walk ended
    def walked(rows: int) -> int:
        ring, nxt = claim_ring(None, 10, rows)
        assert ring == shard_ring(10)
        return (nxt - 10) % SHARDS or SHARDS

    assert walked(200) == 25
    assert walked(8) == 1
    assert walked(1) == 1
    assert walked(512) == 64
    assert walked(1000) == 63


def test_a_claim_over_a_subset_walks_it_from_the_ring_start():
    # the due shards in ring order from the start, wrapping; v_per grows as fewer are given
    ring, nxt = claim_ring([3, 40, 12, 60, 12], 30, 200)
    assert ring == [40, 60, 3, 12]  # v_per = 50: all four reachable
    assert nxt == 13
    ring, nxt = claim_ring(list(range(0, 64, 2)), 0, 16)  # v_per = 8: two shards reachable
    assert ring[:3] == [0, 2, 4] and nxt == 3
    ring, nxt = claim_ring(list(range(0, 64, 2)), nxt, 16)  # the next claim goes on from there
    assert ring[:3] == [4, 6, 8] and ring[-1] == 2 and nxt == 7
    assert claim_ring([], 5, 200) == ([], 5)


def test_shard_ring_covers_every_shard_from_the_start():
    for start in (0, 17, 63, 64 + 5):
        ring = shard_ring(start)
        assert sorted(ring) == list(range(SHARDS))
        assert ring[0] == start % SHARDS


async def test_a_later_hint_does_not_move_the_deadline_an_earlier_one_does():
    hub = WakeHub()
    hub.begin_cycle()
    _deadline, reason, ev = hub.sleep_plan(time.time() + 10)
    assert reason is None
    assert not hub.timer_due(time.time() + 20)  # later: no wake
    assert not ev.is_set()
    assert hub.timer_due(time.time() + 1, "notify")  # earlier: wakes
    assert ev.is_set() and hub.timer_hint_reason == "notify"


async def test_a_hint_during_the_cycle_shortens_the_next_sleep():
    """A schedule that commits while the sweeper probes or fires is not lost."""
    hub = WakeHub()
    hub.begin_cycle()
    soon = time.time() + 0.05
    hub.timer_due(soon, "local")  # lands mid-cycle, before sleep_plan
    deadline, reason, _ev = hub.sleep_plan(time.time() + 1.0)
    assert deadline == soon and reason == "local"


async def test_queue_waiters_wake_and_unregister():
    hub = WakeHub()
    import uuid

    t = uuid.uuid4()
    with hub.queue_waiter(t, "q") as ev:
        hub.queue_pushed(t, "other")
        assert not ev.is_set()
        hub.queue_pushed(t, "q")
        await asyncio.wait_for(ev.wait(), 1)
    assert not hub.has_queue_waiters()
    assert math.isinf(WakeHub().timer_deadline)


async def test_pooled_connections_keep_the_statement_timeout(db_url):
    from queen_timers.db.pool import connect_pool

    pool = await connect_pool(db_url, min_size=1, max_size=1, statement_timeout_ms=1234)
    try:
        for _ in range(2):  # survives a release back to the pool
            assert await pool.fetchval("SHOW statement_timeout") == "1234ms"
            assert (await pool.fetchval("SHOW application_name")).startswith("queen:")
    finally:
        await pool.close()


async def test_a_failing_background_start_leaves_nothing_running(db_url, monkeypatch):
    """If a background service cannot start, start() stops what it had started and raises."""
    from queen_timers.service import Queen
    from queen_timers.switches import SwitchBoard

    async def broken(self):
        raise RuntimeError("switchboard down")

    monkeypatch.setattr(SwitchBoard, "start", broken)
    q = Queen(database_url=db_url, retention_interval_ms=0)
    try:
        await q.start()
    except RuntimeError:
        pass
    else:
        raise AssertionError("start() should have failed")
    assert q.rt.pool._closed  # type: ignore[attr-defined]  # asyncpg has no public flag


async def test_a_probe_taken_during_the_fire_never_turns_into_an_empty_claim_sleep(queen):
    """The probe that ran beside the last fire said "nothing due yet, next in 1 ms", and the
    fire took longer than that: the cycle asks the database again instead of claiming on its
    own reckoning (an empty claim there reads as "another broker holds the work" and sleeps
    up to 200 ms)."""
    from queen_timers.timers.fire import Probe
    from queen_timers.timers.sweeper import Sweeper

    sw = Sweeper(queen.rt)
    probes = [
        Probe(next_in_ms=-2.0, due=3, due_capped=False, late_ms=2.0),
        Probe(next_in_ms=40.0, due=0, due_capped=False, late_ms=0.0),
    ]
    calls = []

    async def probe():
        calls.append("probe")
        return probes.pop(0), time.monotonic()

    async def drain(budget, shards=None):
        calls.append("drain")
        stale = time.monotonic() - 0.010  # taken 10 ms ago, during the fire
        return 3, False, (Probe(next_in_ms=1.0, due=0, due_capped=False, late_ms=0.0), stale)

    sw._probe, sw._drain = probe, drain  # type: ignore[method-assign]  # scripted cycle
    sleep_s, reason = await sw._cycle()
    assert calls == ["probe", "drain", "probe"]
    assert reason == "deadline" and 0.030 < sleep_s <= 0.040


async def test_rows_falling_due_during_the_fire_are_claimed_without_a_second_probe(queen):
    """The probe beside the last fire saw shard 4's earliest row due 1 ms after it ran, and the
    fire took longer: the cycle claims shard 4 straight away (no probe round trip first), and
    an empty claim there still leads to a fresh probe, never to the empty-claim sleep."""
    from queen_timers.timers.fire import Probe
    from queen_timers.timers.sweeper import Sweeper

    sw = Sweeper(queen.rt)
    calls: list[object] = []
    probes = [
        Probe(next_in_ms=-2.0, due=3, due_capped=False, late_ms=2.0),
        Probe(next_in_ms=40.0, due=0, due_capped=False, late_ms=0.0),
    ]

    async def probe():
        calls.append("probe")
        return probes.pop(0), time.monotonic()

    drains = [
        # the first drain's fire ran 10 ms past a probe that saw shard 4 due 1 ms later and
        # shard 9 a minute later
        lambda: (
            3,
            False,
            (
                Probe(
                    next_in_ms=1.0,
                    due=0,
                    due_capped=False,
                    late_ms=0.0,
                    soon_shards=[4, 9],
                    soon_in_ms=[1.0, 60_000.0],
                ),
                time.monotonic() - 0.010,
            ),
        ),
        lambda: (0, True, None),  # shard 4's row was cancelled meanwhile: an empty claim
    ]

    async def drain(budget, shards=None):
        calls.append(("drain", shards))
        return drains.pop(0)()

    sw._probe, sw._drain = probe, drain  # type: ignore[method-assign]  # scripted cycle
    sleep_s, reason = await sw._cycle()
    assert calls == ["probe", ("drain", None), ("drain", [4]), "probe"]
    assert reason == "deadline" and 0.030 < sleep_s <= 0.040
