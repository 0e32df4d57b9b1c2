"""bench/host.py: the host's CPU shares and the paced commit floor, on the real server."""

from __future__ import annotations

import pytest

from bench import host


def test_host_cpu_shares_cover_the_window_and_stay_in_range():
    with host.HostCpu() as h:
        sum(i * i for i in range(200_000))  # a little work inside the window
    if h.shares is None:
        pytest.skip("no /proc/stat on this system: the shares print as n/a")
    assert set(h.shares) == {"busy_pct", "iowait_pct", "steal_pct"}
    assert all(0.0 <= v <= 100.0 for v in h.shares.values())
    assert sum(h.shares.values()) <= 100.0 + 1e-9
    assert h.describe().startswith("steal ")


def test_host_cpu_without_proc_stat_says_n_a(monkeypatch):
    monkeypatch.setattr(host, "_cpu_ticks", lambda: None)
    with host.HostCpu() as h:
        pass
    assert h.shares is None and h.describe() == "steal n/a"


def test_sleep_jitter_reports_lateness_not_sleep_time():
    j = host.sleep_jitter(0.05)
    assert 0.0 <= j["p50"] <= j["p99"] <= j["max"]


async def test_paced_floor_commits_every_slot(db_url, conn):
    await conn.execute(host.FLOOR_TABLE)
    r = await host.paced_floor(
        db_url, host.FLOOR_INSERT, (b"x",), rate=200, seconds=0.25, clients=2
    )
    assert 0.0 <= r["p50"] <= r["p99"] <= r["max"]
    # the warm-up (4 per client) plus one commit per slot on the grid
    assert await conn.fetchval("SELECT count(*) FROM bench_commit_floor") == 2 * 4 + 50


def test_stall_starts_groups_slow_requests_less_than_a_gap_apart():
    assert host.stall_starts([]) == []
    assert host.stall_starts([3.02, 1.5, 1.52, 1.55, 3.0, 4.5]) == [1.5, 3.0, 4.5]
    # a slow stretch longer than the gap stays one stall as long as no gap opens inside it
    assert host.stall_starts([0.0, 0.09, 0.18, 0.27]) == [0.0]
    assert host.stall_starts([0.0, 0.2]) == [0.0, 0.2]
