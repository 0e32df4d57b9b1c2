"""The tail trace's arithmetic on a synthetic timeline: overlaps, each timer's steps, bands."""

from __future__ import annotations

import pytest

from bench.tail_trace import STEPS, Trace, attribute, overlap, shares


def test_overlap_counts_the_union_of_the_spans_inside_the_window():
    assert overlap(0.0, 10.0, [(2.0, 4.0), (3.0, 5.0), (9.0, 12.0)]) == pytest.approx(4.0)
    assert overlap(0.0, 10.0, []) == 0.0
    assert overlap(5.0, 5.0, [(0.0, 10.0)]) == 0.0  # an empty window


def _timer(tr: Trace, key: bytes, **at: float) -> None:
    tr.timers[key] = dict(at)


def test_a_timer_that_fell_due_during_a_sleep_and_a_fire_is_cut_into_its_steps():
    tr = Trace()
    # the sweeper slept until 1.002, then another batch fired until 1.004; this timer (due at
    # 1.000) was claimed 1.004-1.005, packed by 1.0055, sent 1.006, stamped 1.007
    tr.spans["sleep"] = [(0.990, 1.002)]
    tr.spans["fire"] = [(1.002, 1.004), (1.006, 1.009)]
    tr.spans["claim"] = [(1.004, 1.005)]
    tr.spans["pack"] = [(1.005, 1.0055)]
    tr.stalls = [(1.0065, 1.0075)]
    _timer(tr, b"a", due=1.000, claim0=1.004, claim1=1.005, pack1=1.0055, fire0=1.006,
           fire1=1.009, created=1.007)  # fmt: skip
    (row,) = attribute(tr)
    assert row["late"] == pytest.approx(7.0)
    assert row["sleep"] == pytest.approx(2.0)
    assert row["fire_other"] == pytest.approx(2.0)
    assert row["claim"] == pytest.approx(1.0)
    assert row["pack"] == pytest.approx(0.5)
    assert row["queue"] == pytest.approx(0.5)
    assert row["fire"] == pytest.approx(1.0)
    assert row["other"] == pytest.approx(0.0)
    assert sum(row[k] for k in STEPS) == pytest.approx(row["late"])
    assert row["stall"] == pytest.approx(0.5)  # within due..created only


def test_a_timer_without_its_fire_is_left_out():
    tr = Trace()
    _timer(tr, b"b", due=1.0, claim0=1.001, claim1=1.002)
    assert attribute(tr) == []


def test_bands_average_the_steps_of_their_timers():
    rows = [
        {**dict.fromkeys((*STEPS, "stall", "gc"), 0.0), "late": float(i)} for i in range(1, 101)
    ]
    for r in rows:
        r["claim"] = r["late"]
    top = shares(rows, 99, 100)
    assert top["timers"] == 1 and top["late_ms"] == pytest.approx(100.0)  # p99 is 99.01
    assert top["claim"]["pct"] == pytest.approx(100.0)
    assert shares([], 45, 55) == {}
