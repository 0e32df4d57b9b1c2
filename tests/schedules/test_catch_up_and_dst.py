"""Time travel across an outage under each catch-up policy, and across both 2027 DST changes
in two zones, through the real fire."""

from __future__ import annotations

import datetime as dt

import pytest

from queen_timers.timers import fire

from .helpers import body, occurrence_counts, pending, utc

T0 = utc(2030, 1, 1)


def h(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def stamp(hour: int) -> str:
    return f"2030-01-01T{hour:02d}:00:00.000Z"


@pytest.mark.parametrize(
    ("policy", "cap", "delivered", "skipped"),
    [
        ("skip", 1, [1, 5], 1),  # the outage's occurrences are dropped
        ("once", 1, [1, 2, 5], 0),  # one message for the missed run
        ("all", 10, [1, 2, 3, 4, 5], 0),  # each missed occurrence, oldest first
        ("all", 2, [1, 3, 4, 5], 1),  # the 2 most recent missed only
    ],
)
async def test_a_three_hour_outage_under_each_policy(
    queen, conn, ident, policy, cap, delivered, skipped
):
    await queen.schedule_set(
        ident,
        body("jobs", "hourly", cron="0 * * * *", catchUp=policy, catchUpCap=cap),
        now=h(0.01),
    )
    assert (await fire.drain(queen.rt, now=h(1) + dt.timedelta(seconds=1))).fired == 1
    # no broker fires from 01:00:01 to 04:30: 02:00, 03:00 and 04:00 are missed
    report = await fire.drain(queen.rt, now=h(4.5))
    assert report.skipped == skipped
    (row,) = await pending(conn, "jobs")
    assert row["deliver_at"] == h(5)  # the cadence resumes at the first occurrence to come
    assert (await fire.drain(queen.rt, now=h(5) + dt.timedelta(seconds=1))).fired == 1
    counts = await occurrence_counts(conn, "jobs")
    assert sorted(counts) == [stamp(x) for x in delivered]
    assert set(counts.values()) == {1}  # none twice
    view = await queen.schedule_peek(ident, "jobs", "hourly", runs=20)
    outcomes = {r["occurrenceAt"][:19]: r["outcome"] for r in view["runs"]}
    assert sum(1 for o in outcomes.values() if o == "skipped") == skipped


@pytest.mark.parametrize(
    ("zone", "cron", "created", "expected"),
    [
        (
            "Europe/Paris",
            "30 2 * * *",
            utc(2027, 3, 26, 12),
            # 02:30 CET, then 03:00 CEST (02:30 does not exist), then 02:30 CEST
            ["2027-03-27T01:30:00.000Z", "2027-03-28T01:00:00.000Z", "2027-03-29T00:30:00.000Z"],
        ),
        (
            "Europe/Paris",
            "30 2 * * *",
            utc(2027, 10, 29, 12),
            # 02:30 CEST; on the 31st 02:30 exists twice and fires once, at the first
            ["2027-10-30T00:30:00.000Z", "2027-10-31T00:30:00.000Z", "2027-11-01T01:30:00.000Z"],
        ),
        (
            "America/New_York",
            "30 2 * * *",
            utc(2027, 3, 12, 12),
            ["2027-03-13T07:30:00.000Z", "2027-03-14T07:00:00.000Z", "2027-03-15T06:30:00.000Z"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            utc(2027, 11, 5, 12),
            ["2027-11-06T05:30:00.000Z", "2027-11-07T05:30:00.000Z", "2027-11-08T06:30:00.000Z"],
        ),
    ],
)
async def test_a_daily_schedule_walks_across_a_dst_change(
    queen, conn, ident, zone, cron, created, expected
):
    await queen.schedule_set(ident, body("jobs", "daily", cron=cron, zone=zone), now=created)
    # a broker firing every 10 minutes across three days fires exactly these, once each
    t = created
    fired = 0
    while t < created + dt.timedelta(days=3):
        t += dt.timedelta(minutes=10)
        fired += (await fire.drain(queen.rt, now=t)).fired
    counts = await occurrence_counts(conn, "jobs")
    assert sorted(counts) == expected and set(counts.values()) == {1} and fired == 3
    view = await queen.schedule_peek(ident, "jobs", "daily", count=1, runs=3)
    assert all(0 <= r["lateMs"] < 600_000 for r in view["runs"])
    hour = cron.split()[1]
    assert view["next"][0]["local"][11:16] == f"{int(hour):02d}:30"  # the wall time, in zone
