"""bench/cpuprobe.py: windows where the machine itself ran slow, and which requests met one."""

from __future__ import annotations

import math
import threading

import pytest

from bench import cpuprobe
from bench.cpuprobe import CpuProbe, Window


def units(
    *slow: tuple[float, float, float],
    n: int = 50,
    start: float = 0.0,
    every: float = 0.003,
    wall: float = 0.0002,
) -> list[tuple[float, float, float]]:
    """`n` ordinary units (all on the machine's account) plus the given slow ones."""
    ordinary = [(start + i * every, wall, wall) for i in range(n)]
    return sorted(ordinary + list(slow))


def test_a_slow_unit_on_the_machines_account_makes_a_window():
    # 10x the median, 95% of it not spent behind a guest task: the machine was slow
    w = cpuprobe.slow_windows({0: units((1.0, 0.002, 0.0019))})
    assert len(w) == 1
    assert (w[0].start, w[0].end, w[0].cores) == (1.0, 1.002, frozenset({0}))
    assert w[0].slowdown == pytest.approx(10.0)


def test_a_unit_that_waited_behind_a_guest_task_is_the_loads_not_the_machines():
    # as slow, but 90% of it waiting in the run queue: another task had the core
    assert cpuprobe.slow_windows({0: units((1.0, 0.002, 0.0002))}) == []


def test_a_unit_under_the_factor_is_not_slow():
    assert cpuprobe.slow_windows({0: units((1.0, 0.0005, 0.0005))}) == []  # 2.5x


def test_slow_units_close_together_on_both_cores_are_one_window_on_every_core():
    w = cpuprobe.slow_windows(
        {
            0: units((1.000, 0.002, 0.002), (1.010, 0.004, 0.004)),
            1: units((1.005, 0.003, 0.003)),
        }
    )
    assert len(w) == 1
    assert (w[0].start, w[0].end, w[0].cores) == (1.0, 1.014, frozenset({0, 1}))
    assert w[0].slowdown == pytest.approx(20.0)  # the slowest unit, 4 ms against 0.2
    # further apart than the merge gap: two windows
    w = cpuprobe.slow_windows({0: units((1.0, 0.002, 0.002), (1.05, 0.002, 0.002))})
    assert [x.start for x in w] == [1.0, 1.05]


def test_overlapping_marks_the_intervals_that_meet_a_window():
    windows = [Window(1.0, 1.02, frozenset({0}), 10.0), Window(2.0, 2.01, frozenset({0, 1}), 12.0)]
    intervals = [
        (0.5, 0.99),  # ends before the first
        (0.99, 1.001),  # reaches into it
        (1.005, 1.01),  # inside it
        (1.019, 1.5),  # starts inside it
        (1.5, 1.99),  # between them
        (1.9, 2.5),  # spans the second
        (2.5, 3.0),
    ]  # after both
    assert cpuprobe.overlapping(intervals, windows) == [False, True, True, True, False, True, False]
    # wall-clock intervals: the windows are shifted by the offset first
    assert cpuprobe.overlapping([(101.005, 101.006)], windows, offset=100.0) == [True]
    assert cpuprobe.overlapping([(1.005, 1.006)], windows, offset=100.0) == [False]
    assert cpuprobe.overlapping([(1.0, 2.0)], []) == [False]


def test_overlapping_can_count_the_aftermath_of_a_window():
    windows = [Window(1.0, 1.02, frozenset({0}), 10.0), Window(1.1, 1.11, frozenset({0}), 9.0)]
    intervals = [
        (1.05, 1.06),  # in the first window's aftermath
        (1.2, 1.205),  # in the second's (the extended windows merge)
        (1.25, 1.3),  # clear of both
        (0.9, 0.95),
    ]  # before: an aftermath only reaches forward
    assert cpuprobe.overlapping(intervals, windows, after_s=0.1) == [True, True, False, False]
    assert cpuprobe.overlapping(intervals, windows) == [False, False, False, False]


def test_summary_counts_windows_bursts_and_the_share_of_time():
    windows = [
        Window(1.0, 1.02, frozenset({0, 1}), 10.0),
        Window(1.1, 1.11, frozenset({0}), 14.0),  # same burst as the first
        Window(2.5, 2.52, frozenset({0, 1}), 12.0),
        Window(4.0, 4.01, frozenset({1}), 20.0),
    ]
    s = cpuprobe.summary(windows, cores=2, seconds=10.0)
    assert s["windows"] == 4 and s["on_every_core"] == 2 and s["episodes"] == 3
    assert s["slow_share_pct"] == pytest.approx(0.6)  # 60 ms of 10 s
    assert s["slowdown_x"] == pytest.approx(13.0)
    assert s["every_s"] == pytest.approx(1.5)  # bursts at 1.0, 2.5, 4.0
    empty = cpuprobe.summary([], cores=2, seconds=10.0)
    assert empty["windows"] == 0 and math.isnan(empty["every_s"])


def test_slow_seconds_is_the_part_of_a_span_the_windows_cover():
    p = CpuProbe(enabled=False)
    p.windows = [Window(1.0, 1.02, frozenset({0}), 10.0), Window(2.0, 2.01, frozenset({0}), 9.0)]
    assert p.slow_seconds(0.0, 3.0) == pytest.approx(0.03)
    assert p.slow_seconds(1.01, 2.005) == pytest.approx(0.015)
    assert p.slow_seconds(1.5, 1.9) == 0.0
    p.wall_offset = 100.0
    assert p.slow_seconds(101.0, 101.01, wall=True) == pytest.approx(0.01)


def test_run_probe_times_units_until_stopped():
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    out = cpuprobe.run_probe(None, 0.001, stop)
    assert len(out) >= 10
    assert all(w > 0 and 0.0 <= m <= w for _, w, m in out)
    assert [t for t, _, _ in out] == sorted(t for t, _, _ in out)


def test_the_probe_runs_a_process_on_every_core_for_the_block():
    # min_units: each child times 5 units whatever the block's length, so a loaded machine
    # that starts a child late cannot leave it with too few samples to judge.
    with CpuProbe(pause_ms=1.0, min_units=5) as p:
        sum(i * i for i in range(300_000))
    assert p.ran and set(p.samples) == set(p.cores)
    assert all(len(u) >= 5 for u in p.samples.values())
    assert p.describe().startswith("cpu probe: unit median ")
    # whatever the machine did, every window lies within the block
    assert all(p.t0 <= w.end and w.start <= p.t1 for w in p.windows)


def test_split_and_clear_figures_leave_out_the_requests_in_a_window():
    p = CpuProbe(enabled=False)
    with p:
        pass
    assert not p.ran and p.describe() == "cpu probe off"
    assert p.clear_figures([(0.0, 1.0)], [5.0]) == {}  # nothing measured, nothing said
    p.samples = {0: units()}
    p.windows = [Window(1.0, 1.02, frozenset({0}), 10.0)]
    share, rest = p.split(
        [(0.5, 0.6), (0.99, 1.03), (1.5, 1.6), (1.01, 1.5), (1.08, 1.09)],
        [1.0, 40.0, 2.0, 30.0, 12.0],
    )
    # the last one starts after the window, in the 100 ms its backlog takes to drain
    assert share == pytest.approx(0.6) and rest == [1.0, 2.0]
    assert p.describe().startswith("cpu probe: unit median 200 us; 1 slow windows")
    assert p.clear_figures([(0.5, 0.6), (0.99, 1.03)], [1.0, 40.0]) == {
        "in slow windows %": 50.0,
        "p50 clear ms": 1.0,
        "p99 clear ms": 1.0,
    }
