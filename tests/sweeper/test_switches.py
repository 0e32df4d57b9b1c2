"""Kill switches: stored in queen.system_state, seen by every broker within a second."""

import asyncio

import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.switches import SWITCH_KEYS


async def test_missing_rows_mean_on(queen, ident):
    assert await queen.switches_get(ident) == {
        "timersScheduleEnabled": True,
        "timersFireEnabled": True,
    }


async def test_flip_is_seen_by_another_broker_within_a_second(db_url):
    a = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    b = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await a.start()
    await b.start()
    try:
        admin = Identity(admin=True)
        out = await a.switches_set(admin, {"timersFire": False})
        assert out["timersFireEnabled"] is False and out["mirrored"] is True
        assert "PAUSED" in out["message"]
        assert a.rt.switches.timers_fire_enabled is False  # the flipping broker: at once
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        # the peer's refresh timer is what is measured, so this polls it
        while b.rt.switches.timers_fire_enabled and loop.time() - t0 < 5:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        assert b.rt.switches.timers_fire_enabled is False
        assert loop.time() - t0 < 1.0
        await b.switches_set(admin, {"timersFire": True, "timersSchedule": False})
        assert (await a.switches_get(admin)) == {
            "timersScheduleEnabled": False,
            "timersFireEnabled": True,
        }
    finally:
        await a.stop()
        await b.stop()


@pytest.mark.parametrize(
    "body, reason",
    [
        ({}, "switches_nothing_to_set"),
        ({"timersFire": "no"}, "switches_not_boolean"),
        ({"timersFire": 0}, "switches_not_boolean"),
        ({"timersFire": None}, "switches_not_boolean"),
        ([], "switches_bad_body"),
        ({"timersExplode": True}, "switches_unknown_key"),
        ({"timersFire": False, "timersExplode": True}, "switches_unknown_key"),
        ({"timers_fire_enabled": False}, "switches_unknown_key"),
    ],
)
async def test_bad_switch_bodies_change_nothing(queen, conn, body, reason):
    with pytest.raises(QueenError) as e:
        await queen.switches_set(Identity(admin=True), body)
    assert e.value.reason == reason and e.value.status == 400
    assert queen.rt.switches.timers_fire_enabled is True
    switch_rows = "SELECT count(*) FROM queen.system_state WHERE key = ANY($1)"
    assert await conn.fetchval(switch_rows, list(SWITCH_KEYS)) == 0


async def test_only_an_admin_may_flip(queen):
    with pytest.raises(QueenError) as e:
        await queen.switches_set(Identity(subject="bob"), {"timersFire": False})
    assert e.value.status == 403
