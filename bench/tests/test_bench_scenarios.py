"""Arithmetic of the scenarios (rate definitions, WAL per phase, ratios) on synthetic data."""

from __future__ import annotations

import pytest

from bench.amplification import backoff_figures, phase_figures, trade_verdict
from bench.load import parse_deliver_at
from bench.peers import conn_parts, conninfo, with_ratios, workload_figures
from bench.soak import analyse


def test_parse_deliver_at():
    assert parse_deliver_at("1970-01-01T00:00:01.500000Z") == pytest.approx(1.5)
    assert parse_deliver_at("2026-11-29T21:00:00Z") == pytest.approx(1795986000.0)


def test_phase_figures_wal_per_timer_and_claim_hot_ratio():
    lsn = ["0/1000000", "0/1100000", "0/1180000", "0/11C0000", "0/11C8000"]
    st = [
        {"n_tup_upd": 10, "n_tup_hot_upd": 0, "n_tup_del": 0},
        {"n_tup_upd": 1010, "n_tup_hot_upd": 250, "n_tup_del": 0},
        {"n_tup_upd": 1010, "n_tup_hot_upd": 250, "n_tup_del": 1000},
    ]
    f = phase_figures(n=1000, claimed=1000, fired=1000, lsn=lsn, st=st, seconds={}, sizes={})
    assert f["wal_bytes"] == {
        "schedule": 0x100000,
        "claim": 0x80000,
        "fire": 0x40000,
        "vacuum": 0x8000,
    }
    per = f["wal_bytes_per_timer"]
    assert per["schedule"] == pytest.approx(1048.576)
    assert per["total_without_vacuum"] == pytest.approx((0x100000 + 0x80000 + 0x40000) / 1000)
    assert per["total_with_vacuum"] == pytest.approx(0x1C8000 / 1000)
    assert f["claim_updates"] == 1000 and f["claim_hot_ratio"] == pytest.approx(0.25)
    assert f["fire_deletes"] == 1000


def test_backoff_figures_and_trade_verdict():
    probes = [{"ms": 1.0, "buffers": 100}, {"ms": 3.0, "buffers": 100}, {"ms": 2.0, "buffers": 120}]
    claims = [{"ms": 10.0, "buffers": 1000, "rows": 200}] * 3
    b0 = backoff_figures(0, probes, claims, [12.0, 13.0, 14.0])
    assert b0["probe_ms"] == 2.0 and b0["probe_buffers"] == 100
    assert b0["pass_ms"] == 12.0 and b0["pass_buffers"] == 1100 and b0["pass_wall_ms"] == 13.0
    b1 = dict(b0, k=100000, pass_buffers=11000, pass_ms=48.0)
    v = trade_verdict({"C": {"backoff": [b0, b1]}, "A": {"backoff": [b0]}})
    assert set(v) == {"C"}  # one K is no trend
    assert v["C"]["buffers_ratio"] == pytest.approx(10.0)
    assert v["C"]["ms_ratio"] == pytest.approx(4.0)


def test_workload_figures_burst_and_steady():
    due = 100.0
    pairs = [(due, due + 0.010 * (i + 1)) for i in range(100)]  # 10 ms apart
    f = workload_figures(pairs, 100, "burst", due)
    assert f["throughput"] == pytest.approx(100 / 1.0)  # last delivery 1 s after the due
    assert f["lateness_ms"]["max"] == pytest.approx(1000.0)
    assert not f["censored"]
    s = workload_figures([(0.0, 1.0), (1.0, 2.0), (2.0, 3.5)], 4, "steady", None)
    assert s["throughput"] == pytest.approx(3 / 2.5)  # over first..last delivery
    assert s["censored"]
    assert workload_figures([], 10, "burst", 1.0)["throughput"] is None


def test_ratios_to_floor():
    rows = {
        "floor": {"throughput": 1000.0, "lateness_ms": {"p50": 2.0, "p99": 10.0}},
        "queen": {"throughput": 500.0, "lateness_ms": {"p50": 4.0, "p99": 50.0}},
        "skipped": {"skipped": "no node"},
    }
    r = with_ratios(rows)
    assert r["floor"]["throughput_vs_floor"] == 1.0
    assert r["queen"]["throughput_vs_floor"] == 0.5
    assert r["queen"]["p50_vs_floor"] == 2.0 and r["queen"]["p99_vs_floor"] == 5.0
    assert "throughput_vs_floor" not in r["skipped"]


def test_conn_parts_socket_and_tcp():
    c = conn_parts("postgresql://postgres:@/queen_bench_x?host=/tmp/qb-1/pg")
    assert c == {
        "host": "/tmp/qb-1/pg",
        "port": 5432,
        "user": "postgres",
        "password": "",
        "database": "queen_bench_x",
    }
    t = conn_parts("postgresql://u:p%40ss@db.local:5433/b")
    assert t["host"] == "db.local" and t["port"] == 5433 and t["password"] == "p@ss"
    assert conninfo("postgresql://u:pw@h:5433/b") == "host=h port=5433 user=u dbname=b password=pw"


def test_soak_analyse_attributes_lateness_to_the_step_a_timer_was_due_in():
    steps = [
        {
            "label": "100/s",
            "offered_rate": 100,
            "scheduled": 1000,
            "scheduled_rate": 100.0,
            "start_epoch": 0.0,
            "end_epoch": 10.0,
        },
        {
            "label": "200/s",
            "offered_rate": 200,
            "scheduled": 2000,
            "scheduled_rate": 200.0,
            "start_epoch": 10.0,
            "end_epoch": 20.0,
        },
    ]
    fired = {}
    for i in range(1000):  # due in step 1, 10 ms late
        fired[b"a%d" % i] = (i * 0.009, i * 0.009 + 0.010)
    for i in range(2000):  # due in step 2, 40 ms late
        fired[b"b%d" % i] = (10.0 + i * 0.0045, 10.0 + i * 0.0045 + 0.040)
    a = analyse(steps, [], fired, 2.0)
    s1, s2 = a["steps"]
    assert s1["due_in_step"] == 1000 and s2["due_in_step"] == 2000
    assert s1["lateness_ms"]["p99"] == pytest.approx(10.0)
    assert s2["lateness_ms"]["p99"] == pytest.approx(40.0)
    assert s1["kept_up"] and s2["kept_up"]
    h = a["headline"]
    assert h["lateness_p99_doubles_at_rate"] == 200  # 40 >= 2 * max(10, 5)
    assert h["max_rate_kept_up"] == 200
    assert h["autovacuum_enters_profile_at_rate"] is None  # no samples, no autovacuum


def test_soak_analyse_leaves_the_machines_slow_windows_out_of_the_clear_lateness():
    from bench.cpuprobe import CpuProbe, Window

    steps = [
        {
            "label": "100/s",
            "offered_rate": 100,
            "scheduled": 1000,
            "scheduled_rate": 100.0,
            "start_epoch": 0.0,
            "end_epoch": 10.0,
        }
    ]
    fired = {b"a%d" % i: (i * 0.009, i * 0.009 + 0.010) for i in range(1000)}  # 10 ms late
    fired.update(
        {
            b"s%d" % i: (5.0 + i * 0.001, 5.0 + i * 0.001 + 0.060)  # due in the window
            for i in range(20)
        }
    )
    probe = CpuProbe(enabled=False)
    probe.samples = {0: [(0.0, 0.0002, 0.0002)]}  # as if it ran
    probe.wall_offset = 1000.0
    probe.windows = [Window(-995.0, -994.975, frozenset({0, 1}), 12.0)]  # 5.0-5.025 s, wall
    (s,) = analyse(steps, [], fired, 2.0, probe=probe)["steps"]
    assert s["lateness_ms"]["max"] == pytest.approx(60.0)
    assert s["lateness_clear_ms"]["max"] == pytest.approx(10.0)
    # the 20 due in the window, and the grid's timers whose 10 ms wait met the window or the
    # 100 ms after it (5.000-5.125 s; no grid point sits on a bound)
    met = 20 + sum(1 for i in range(1000) if i * 0.009 <= 5.125 and i * 0.009 + 0.010 >= 5.0)
    assert met == 35
    assert s["timers_in_slow_windows_pct"] == pytest.approx(100.0 * met / 1020)
    assert s["cpu_slow_pct"] == pytest.approx(0.25)  # 25 ms of 10 s
    without = analyse(steps, [], fired, 2.0)["steps"][0]
    assert "lateness_clear_ms" not in without and "cpu_slow_pct" not in without


def test_peers_machine_figures_split_each_systems_timers_by_the_slow_windows():
    from bench.cpuprobe import CpuProbe, Window
    from bench.peers import machine_figures

    probe = CpuProbe(enabled=False)
    assert machine_figures(probe, [(1.0, 1.01)]) == {}  # the probe did not run
    probe.samples = {0: [(0.0, 0.0002, 0.0002)]}
    probe.t0, probe.t1 = 0.0, 10.0
    probe.wall_offset = 100.0
    probe.windows = [Window(5.0, 5.02, frozenset({0, 1}), 12.0)]  # 105.0-105.02 by the wall
    pairs = [(100.0 + i * 0.1, 100.0 + i * 0.1 + 0.004) for i in range(100)]  # 4 ms late
    pairs.append((105.005, 105.045))  # waited through the window: 40 ms late
    f = machine_figures(probe, pairs)
    assert f["lateness_clear_ms"]["max"] == pytest.approx(4.0)
    # the one in the window, and the grid's timers in it or the 100 ms after (105.0, 105.1)
    assert f["in_slow_windows_pct"] == pytest.approx(100.0 * 3 / 101)
    assert f["machine_slow_pct"] == pytest.approx(0.2)  # 20 ms of 10 s


def test_late_clusters_group_late_timers_by_deliver_at():
    from bench.sweeper import late_clusters

    # deliver_at (s), lateness (ms): two stalls 1.5 s apart, and on-time timers around them
    pairs = [(t / 100, 3.0) for t in range(400)]
    pairs += [(1.00, 25.0), (1.02, 30.0), (1.05, 21.0), (2.50, 40.0), (2.51, 22.0)]
    got = late_clusters(sorted(pairs))
    assert got["clusters"] == 2
    assert got["cluster_every_s"] == pytest.approx(1.5)
    assert got["late_pct"] == pytest.approx(100 * 5 / 405)
    none = late_clusters([(0.0, 1.0), (0.1, 2.0)])
    assert none["clusters"] == 0 and none["late_pct"] == 0


def test_goal_lines_judge_the_runs_made_at_the_issues_sizes():
    from bench.sweeper import goal_lines

    steady = {
        "scenario": "steady",
        "rate": 500,
        "seconds": 30,
        "delay_s": 2.0,
        "cross_broker": False,
        "notify": True,
        "firing_brokers": 1,
        "lateness_ms": {"p50": 4.18, "p99": 35.3},
        "outside_slow_windows": {"timers_pct": 95.0, "p50": 4.1, "p99": 11.47},
    }
    cross = {**steady, "cross_broker": True, "lateness_ms": {"p50": 3.7, "p99": 27.9}}
    cross.pop("outside_slow_windows")  # run with --no-cpu-probe
    no_notify = {**cross, "notify": False}  # reported, not judged
    small = {**steady, "rate": 50}  # a smoke-sized run: not judged
    burst = {"scenario": "burst", "timers": 20000, "brokers": 1, "timers_per_s": 15688.4}
    burst3 = {**burst, "brokers": 3}
    idle = {"scenario": "idle", "total_millicores": 3.66}
    assert goal_lines([steady, cross, no_notify, small, burst, burst3, idle]) == [
        "goals  steady, one broker: p50 4.2 ms <= 5: met; p99 35.3 ms <= 20: NOT met "
        "(clear of slow windows: p99 11.5 ms: met)",
        "goals  steady, NOTIFY from a second broker: p99 27.9 ms <= 50: met",
        "goals  burst, one broker: 15,688 timers/s >= 20,000: NOT met",
        "goals  idle broker plus its server: 3.7 millicores <= 20: met",
    ]
