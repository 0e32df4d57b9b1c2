"""queen_timers.testing.chaos.Chaos.more: the loop condition that keeps a chaos workload going
until the
chaos has hit something (the helper every chaos test depends on; the kills themselves are
exercised against real backends by the chaos tests)."""

import asyncio

import pytest

from queen_timers.testing.chaos import Chaos


async def test_more_makes_the_minimum_then_waits_for_the_hits():
    chaos = Chaos(at_least=2, deadline_s=30)
    assert chaos.more(0, 3) and chaos.more(2, 3)
    assert chaos.more(3, 3), "past the minimum, with no hit yet, the workload goes on"
    chaos.killed = 1
    assert chaos.more(10, 3)
    chaos.killed = 2
    assert not chaos.more(10, 3)
    assert chaos.more(1, 3), "the minimum is made whatever the chaos has hit"
    chaos.assert_hit()


async def test_more_stops_at_the_deadline_and_assert_hit_then_fails():
    chaos = Chaos(at_least=3, deadline_s=0.0)
    await asyncio.sleep(0)
    assert not chaos.more(5, 5)
    with pytest.raises(AssertionError, match="hit only 0 statements"):
        chaos.assert_hit()
