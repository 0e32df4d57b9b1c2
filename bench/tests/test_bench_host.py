"""bench/machine.py and the harness's HostCpu: the host's CPU shares and the paced floors, on
the real server."""

from __future__ import annotations

import pytest

from bench import harness, machine


def test_host_cpu_shares_cover_the_window_and_stay_in_range():
    with harness.HostCpu() as h:
        sum(i * i for i in range(200_000))  # a little work inside the window
    if h.shares is None:
        pytest.skip("no /proc/stat on this system: the shares print as n/a")
    assert set(h.shares) == {"busy_pct", "iowait_pct", "steal_pct"}
    assert all(0.0 <= v <= 100.0 for v in h.shares.values())
    assert sum(h.shares.values()) <= 100.0 + 1e-9
    assert h.describe().startswith("steal ")


def test_host_cpu_without_proc_stat_says_n_a(monkeypatch):
    monkeypatch.setattr(harness, "_cpu_ticks", lambda: None)
    with harness.HostCpu() as h:
        pass
    assert h.shares is None and h.describe() == "steal n/a"


def test_sleep_jitter_reports_lateness_not_sleep_time():
    late = machine.sleep_jitter(0.05)
    assert late and all(x >= 0.0 for x in late)


def test_fsync_floor_times_every_flush():
    lat = machine.fsync_floor(0.05)
    assert lat and all(x > 0.0 for x in lat)


async def test_paced_floor_commits_every_slot(db_url, conn):
    await conn.execute(machine.FLOOR_TABLE)
    spans = await machine.paced_floor(
        db_url, machine.FLOOR_INSERT, (b"x",), rate=200, seconds=0.25, clients=2
    )
    assert len(spans) == 50 and all(due <= end for due, end in spans)
    # the warm-up (4 per client) plus one commit per slot on the grid
    assert await conn.fetchval("SELECT count(*) FROM bench_commit_floor") == 2 * 4 + 50


def test_stall_starts_groups_slow_requests_less_than_a_gap_apart():
    assert harness.stall_starts([]) == []
    assert harness.stall_starts([3.02, 1.5, 1.52, 1.55, 3.0, 4.5]) == [1.5, 3.0, 4.5]
    # a slow stretch longer than the gap stays one stall as long as no gap opens inside it
    assert harness.stall_starts([0.0, 0.09, 0.18, 0.27]) == [0.0]
    assert harness.stall_starts([0.0, 0.2]) == [0.0, 0.2]
