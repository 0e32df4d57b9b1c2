"""Bad input gets a machine-readable refusal and changes nothing; schedules count against the
tenant's limits."""

from __future__ import annotations

import uuid

import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker

from .helpers import body, pending, utc

T0 = utc(2030, 1, 1)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"cron": "61 * * * *"}, "schedule_bad_cron"),
        ({"cron": "* * *"}, "schedule_bad_cron"),
        ({}, "schedule_recurrence_required"),
        ({"cron": "* * * * *", "everyMs": 60000}, "schedule_recurrence_required"),
        ({"everyMs": 0}, "schedule_bad_every"),
        ({"everyMs": 10}, "schedule_too_frequent"),
        ({"cron": "* * * * * *", "zone": "UTC"}, "schedule_ok_at_1s"),
        ({"cron": "*/1 * * * * *", "zone": "Mars/Olympus"}, "schedule_bad_zone"),
        ({"everyMs": 60000, "startAt": "tomorrow"}, "schedule_bad_instant"),
        ({"everyMs": 60000, "startAt": "2030-01-02T00:00:00"}, "schedule_bad_instant"),
        (
            {"everyMs": 60000, "startAt": "2030-01-02T00:00:00Z", "endAt": "2030-01-01T00:00Z"},
            "schedule_bad_window",
        ),
        ({"everyMs": 60000, "catchUp": "sometimes"}, "schedule_bad_catch_up"),
        ({"everyMs": 60000, "catchUp": "all", "catchUpCap": 0}, "schedule_bad_cap"),
        ({"everyMs": 60000, "jitterMs": -1}, "schedule_bad_jitter"),
        ({"everyMs": 60000, "payload": "not base64!"}, "timers_payload_not_base64"),
        ({"everyMs": 60000, "tenant": "x"}, "schedule_unknown_field"),
        ({"everyMs": 60000, "scheduleKey": ""}, "schedule_key_required"),
        ({"everyMs": 60000, "paused": "no"}, "schedule_bad_flag"),
    ],
)
async def test_bad_schedules_are_refused_and_change_nothing(queen, conn, ident, fields, reason):
    b = body("jobs", "bad", **fields)
    if reason == "schedule_ok_at_1s":  # the floor itself is allowed
        await queen.schedule_set(ident, b, now=T0)
        return
    with pytest.raises(QueenError) as e:
        await queen.schedule_set(ident, b, now=T0)
    assert e.value.reason == reason and e.value.status == 400
    assert e.value.to_dict()["error"] and e.value.detail
    assert await conn.fetchval("SELECT count(*) FROM queen.schedules") == 0
    assert await pending(conn, "jobs") == []


async def test_unknown_schedules_answer_404(queen, ident):
    for call in (
        queen.schedule_peek(ident, "jobs", "nope"),
        queen.schedule_pause(ident, "jobs", "nope"),
        queen.schedule_resume(ident, "jobs", "nope"),
        queen.schedule_run_now(ident, "jobs", "nope"),
    ):
        with pytest.raises(QueenError) as e:
            await call
        assert e.value.status == 404 and e.value.code == "schedule_not_found"


async def test_the_floor_is_a_setting(db_url, ident):
    async with started_broker(db_url, schedules_min_interval_ms=60_000) as q:
        with pytest.raises(QueenError) as e:
            await q.schedule_set(ident, body("jobs", "fast", cron="*/30 * * * * *"), now=T0)
        assert e.value.reason == "schedule_too_frequent"
        assert "QUEEN_SCHEDULES_MIN_INTERVAL_MS" in e.value.detail
        await q.schedule_set(ident, body("jobs", "ok", cron="* * * * *"), now=T0)


async def test_schedules_count_against_the_pending_cap(db_url):
    who = Identity(tenant=uuid.uuid4(), subject="t", admin=False)
    async with started_broker(
        db_url,
        timers_tenant_max_pending=1,
        timers_tenant_quota_refresh_ms=0,
        timers_tenant_quota_census_ms=0,
    ) as q:
        await q.schedule_set(who, body("jobs", "a", everyMs=60_000), now=T0)
        with pytest.raises(QueenError) as e:
            await q.schedule_set(who, body("jobs", "b", everyMs=60_000), now=T0)
        assert e.value.code == "timers_quota_exceeded"
        # replacing the existing schedule adds no pending timer: allowed
        again = await q.schedule_set(who, body("jobs", "a", everyMs=120_000), now=T0)
        assert again["status"] == "updated"


async def test_tenants_do_not_see_each_others_schedules(queen, ident):
    other = Identity(tenant=uuid.uuid4(), subject="o", admin=False)
    await queen.schedule_set(ident, body("jobs", "mine", everyMs=60_000), now=T0)
    with pytest.raises(QueenError):
        await queen.schedule_peek(other, "jobs", "mine")
    assert (await queen.schedules_list(other, "jobs"))["schedules"] == []
    page = await queen.schedules_list(ident, "jobs", prefix="mi")
    assert [r["scheduleKey"] for r in page["schedules"]] == ["mine"]
    assert "payload" not in page["schedules"][0]
