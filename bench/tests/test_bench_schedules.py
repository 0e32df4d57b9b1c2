"""`queen bench schedules --herd`: its options, its A B B A order and its per-unit arithmetic
(no database: the figures are plain functions of what a phase measured)."""

from __future__ import annotations

import datetime as dt
import os
from importlib.metadata import entry_points

import pytest

from bench.schedules_herd import herd_figures, parent_pid, per_unit_costs, phase_order
from queen_timers import commands
from queen_timers.cli import build_parser


def test_a_phase_reads_as_per_unit_costs():
    f = per_unit_costs(1000, 0.5, 2_000_000, 0.25, 0.1)
    assert f["count"] == 1000
    assert f["rate_per_s"] == 2000
    assert f["wal_bytes_per"] == 2000
    assert f["server_cpu_us_per"] == pytest.approx(250)
    assert f["broker_cpu_us_per"] == pytest.approx(100)


def test_an_empty_phase_divides_by_nothing():
    f = per_unit_costs(0, 0.0, 0, None, 0.0)
    assert f["rate_per_s"] is None and f["wal_bytes_per"] is None
    assert f["server_cpu_us_per"] is None and f["broker_cpu_us_per"] is None


def test_the_herd_and_the_burst_alternate():
    assert phase_order() == ["A", "B", "B", "A"]


def test_herd_figures_are_medians_per_kind_and_their_ratio():
    a1 = per_unit_costs(100, 1.0, 300_000, 0.03, 0.02)  # 100/s, 3000 B, 300 µs, 200 µs
    a2 = per_unit_costs(100, 0.5, 100_000, 0.01, 0.02)  # 200/s, 1000 B, 100 µs, 200 µs
    b = per_unit_costs(100, 0.25, 50_000, None, 0.01)  # 400/s, 500 B, no server CPU
    got = herd_figures([("A", a1), ("B", b), ("B", b), ("A", a2)])
    assert got["A"]["rate_per_s"] == pytest.approx(150)
    assert got["A"]["wal_bytes_per"] == pytest.approx(2000)
    assert got["B"]["rate_per_s"] == pytest.approx(400)
    assert got["ratio"]["rate_per_s"] == pytest.approx(150 / 400)
    assert got["ratio"]["wal_bytes_per"] == pytest.approx(4)
    assert got["ratio"]["broker_cpu_us_per"] == pytest.approx(2)
    assert got["B"]["server_cpu_us_per"] is None and got["ratio"]["server_cpu_us_per"] is None


def test_the_parent_of_this_process_is_read_from_proc():
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc here")
    assert parent_pid(os.getpid()) == os.getppid()
    assert parent_pid(2**22 + 12345) is None


@pytest.mark.skipif(
    "bench" not in {ep.name for ep in entry_points(group=commands.ENTRY_POINT_GROUP)},
    reason="the bench distribution is not installed: pip install -e bench (CI does)",
)
def test_the_herd_options():
    parser, _ = build_parser()
    ns = parser.parse_args(["bench", "schedules"])
    assert ns.herd == 0 and ns.drains == 1
    ns = parser.parse_args(["bench", "schedules", "--herd", "100000", "--drains", "2"])
    assert ns.herd == 100000 and ns.drains == 2


def test_each_one_shot_twin_gets_its_schedules_jitter_offset():
    import uuid

    from bench.schedules import QUEUE_SCHEDULES, jitter_offsets, key_of
    from queen_timers.timers.recurrence import jitter_offset_ms, schedule_id

    tenant = uuid.UUID(int=1)
    boundaries = [1_800_000_000, 1_800_000_060]
    assert set(jitter_offsets(tenant, 3, boundaries, 0).values()) == {0.0}
    got = jitter_offsets(tenant, 50, boundaries, 30_000)
    assert len(got) == 100 and all(0 <= v < 30_000 for v in got.values())
    assert len(set(got.values())) > 50  # spread, not one instant
    sid = schedule_id(tenant, QUEUE_SCHEDULES, key_of(7))
    at = dt.datetime.fromtimestamp(boundaries[1], dt.UTC)
    assert got[7, boundaries[1]] == jitter_offset_ms(sid, at, 30_000)
