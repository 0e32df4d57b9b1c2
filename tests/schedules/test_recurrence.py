"""Occurrences without a database: cron and intervals, the DST policy, jitter."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from queen_timers.timers.recurrence import (
    Recurrence,
    RecurrenceError,
    iso,
    jitter_offset_ms,
    min_gap_ms,
    schedule_id,
)

from .helpers import utc


def upcoming(cron: str, zone: str, after: dt.datetime, n: int) -> list[str]:
    return [iso(x) for x in Recurrence(cron, None, zone).upcoming(after, n)]


def test_paris_spring_forward_fires_at_the_first_instant_after_the_gap():
    # 2027-03-28: 02:00 CET -> 03:00 CEST; 02:30 does not exist that day
    assert upcoming("30 2 * * *", "Europe/Paris", utc(2027, 3, 27), 3) == [
        "2027-03-27T01:30:00.000Z",  # 02:30 CET
        "2027-03-28T01:00:00.000Z",  # 03:00 CEST, the first instant after the gap
        "2027-03-29T00:30:00.000Z",  # 02:30 CEST
    ]
    # an hourly cadence: the gap's one slot fires once at 03:00, then on with 03:30
    assert upcoming("30 * * * *", "Europe/Paris", utc(2027, 3, 27, 23), 4) == [
        "2027-03-27T23:30:00.000Z",
        "2027-03-28T00:30:00.000Z",
        "2027-03-28T01:00:00.000Z",
        "2027-03-28T01:30:00.000Z",
    ]
    # a seconds cadence crossing the gap: every slot inside it maps to 03:00:00, once
    assert upcoming("*/20 * * * * *", "Europe/Paris", utc(2027, 3, 28, 0, 59), 4) == [
        "2027-03-28T00:59:20.000Z",
        "2027-03-28T00:59:40.000Z",
        "2027-03-28T01:00:00.000Z",
        "2027-03-28T01:00:20.000Z",
    ]


def test_paris_fall_back_fires_once_at_the_first():
    # 2027-10-31: 03:00 CEST -> 02:00 CET; 02:30 exists twice
    assert upcoming("30 2 * * *", "Europe/Paris", utc(2027, 10, 30), 3) == [
        "2027-10-30T00:30:00.000Z",
        "2027-10-31T00:30:00.000Z",  # 02:30 CEST, the first; not 01:30Z (02:30 CET)
        "2027-11-01T01:30:00.000Z",
    ]
    assert upcoming("30 * * * *", "Europe/Paris", utc(2027, 10, 30, 22), 4) == [
        "2027-10-30T22:30:00.000Z",
        "2027-10-30T23:30:00.000Z",
        "2027-10-31T00:30:00.000Z",
        "2027-10-31T02:30:00.000Z",  # 03:30 CET: the repeated 02:30 CET never fires
    ]


def test_new_york_both_transitions_2027():
    # 2027-03-14 02:00 EST -> 03:00 EDT; 2027-11-07 02:00 EDT -> 01:00 EST
    assert upcoming("30 2 * * *", "America/New_York", utc(2027, 3, 13), 3) == [
        "2027-03-13T07:30:00.000Z",
        "2027-03-14T07:00:00.000Z",  # 03:00 EDT
        "2027-03-15T06:30:00.000Z",
    ]
    assert upcoming("30 1 * * *", "America/New_York", utc(2027, 11, 6), 3) == [
        "2027-11-06T05:30:00.000Z",
        "2027-11-07T05:30:00.000Z",  # 01:30 EDT, once
        "2027-11-08T06:30:00.000Z",
    ]


def test_six_fields_put_seconds_first():
    assert upcoming("5 * * * * *", "UTC", utc(2030, 1, 1), 2) == [
        "2030-01-01T00:00:05.000Z",
        "2030-01-01T00:01:05.000Z",
    ]


def test_intervals_count_from_their_anchor_and_respect_start_and_end():
    r = Recurrence(None, 1500, anchor=utc(2030, 1, 1), end_at=utc(2030, 1, 1, 0, 0, 6))
    assert [iso(x) for x in r.upcoming(utc(2030, 1, 1, 0, 0, 1), 9)] == [
        "2030-01-01T00:00:01.500Z",
        "2030-01-01T00:00:03.000Z",
        "2030-01-01T00:00:04.500Z",
        "2030-01-01T00:00:06.000Z",
    ]
    s = Recurrence("0 * * * *", None, start_at=utc(2030, 1, 1, 5))
    assert s.next_after(utc(2030, 1, 1)) == utc(2030, 1, 1, 5)
    assert [iso(x) for x in s.recent(utc(2030, 1, 1, 9), utc(2030, 1, 1), 2)] == [
        "2030-01-01T07:00:00.000Z",
        "2030-01-01T08:00:00.000Z",
    ]


def test_jitter_is_deterministic_inside_its_window_and_spreads():
    sid = schedule_id(uuid.UUID(int=1), "q", "k")
    at = utc(2030, 1, 1, 9)
    assert jitter_offset_ms(sid, at, 0) == 0
    first = jitter_offset_ms(sid, at, 60_000)
    assert first == jitter_offset_ms(sid, at, 60_000)  # same on every broker, every retry
    offsets = [
        jitter_offset_ms(schedule_id(uuid.UUID(int=1), "q", f"k{i}"), at, 60_000)
        for i in range(1000)
    ]
    assert all(0 <= o < 60_000 for o in offsets)
    # 1,000 schedules at one instant land on many distinct instants, not one
    assert len(set(offsets)) > 900
    assert max(offsets) - min(offsets) > 50_000


def test_schedule_ids_are_stable_and_distinct():
    t = uuid.UUID(int=7)
    assert schedule_id(t, "q", "k") == schedule_id(t, "q", "k")
    assert schedule_id(t, "q", "k") != schedule_id(uuid.UUID(int=8), "q", "k")
    assert schedule_id(t, "q", "k2") != schedule_id(t, "q2", "k")


def test_min_gap_samples_a_cron():
    assert min_gap_ms(Recurrence("0,1 * * * *", None), utc(2030, 1, 1)) == 60_000
    assert min_gap_ms(Recurrence("* * * * * *", None), utc(2030, 1, 1)) == 1000
    assert min_gap_ms(Recurrence(None, 250), utc(2030, 1, 1)) == 250


@pytest.mark.parametrize(
    ("cron", "every", "zone"),
    [
        ("61 * * * *", None, "UTC"),
        ("* * *", None, "UTC"),
        ("* * * * *", None, "Mars/Olympus"),
        (None, None, "UTC"),
        ("* * * * *", 1000, "UTC"),
        (None, 0, "UTC"),
    ],
)
def test_bad_recurrences_are_refused(cron, every, zone):
    with pytest.raises(RecurrenceError):
        Recurrence(cron, every, zone)
