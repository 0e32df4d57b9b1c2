"""The bench's own arithmetic, on synthetic samples (no database)."""

from __future__ import annotations

import pytest

from bench import harness, stats
from bench.sampler import aggregate, av_table_of, classify_pg_process, window


def test_percentile_linear_interpolation():
    xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert harness.percentile(xs, 0) == 1
    assert harness.percentile(xs, 100) == 10
    assert harness.percentile(xs, 50) == pytest.approx(5.5)
    assert harness.percentile(xs, 90) == pytest.approx(9.1)
    assert harness.percentile(list(reversed(xs)), 90) == pytest.approx(9.1)  # order-free
    assert harness.percentile([7], 99) == 7
    assert harness.percentile([], 50) is None
    with pytest.raises(ValueError):
        harness.percentile(xs, 101)


def test_percentile_matches_linear_interpolation_of_the_standard_library():
    import random
    import statistics

    rnd = random.Random(4)
    xs = [rnd.expovariate(0.1) for _ in range(1001)]
    # statistics.quantiles(method="inclusive") interpolates linearly between closest ranks
    # (numpy's default); cut point k of n=1000 is the (k/10)-th percentile.
    cuts = statistics.quantiles(xs, n=1000, method="inclusive")
    for q in (1, 25, 50, 90, 99, 99.9):
        assert harness.percentile(xs, q) == pytest.approx(cuts[round(q * 10) - 1])


def test_summarize():
    s = harness.summarize([3.0, 1.0, 2.0, 100.0])
    assert s["count"] == 4 and s["min"] == 1.0 and s["max"] == 100.0
    assert s["mean"] == pytest.approx(26.5)
    assert s["p50"] == pytest.approx(2.5)
    assert harness.summarize([])["p99"] is None


def test_lsn_and_wal_delta():
    assert stats.parse_lsn("0/0") == 0
    assert stats.parse_lsn("0/10") == 16
    assert stats.parse_lsn("1/0") == 1 << 32
    assert stats.parse_lsn("16/B374D848") == (0x16 << 32) + 0xB374D848
    # a delta across the 4 GiB boundary of the low half
    assert stats.wal_delta("0/FFFFFFF0", "1/10") == 0x20
    assert stats.wal_delta(100, 250) == 150
    with pytest.raises(ValueError):
        stats.wal_delta("0/20", "0/10")
    with pytest.raises(ValueError):
        stats.parse_lsn("garbage")


def test_per_unit_and_rate():
    assert harness.per_unit(1000, 4) == 250
    assert harness.per_unit(1000, 0) is None
    assert harness.rate(500, 2.0) == 250
    assert harness.rate(5, 0) is None
    assert stats.cpu_cores(0.5, 1.0) == 0.5


def test_counter_delta_and_hot_ratio():
    assert stats.counter_delta({"n": 10}, {"n": 25}, "n") == 15
    assert stats.counter_delta({"n": 10}, {"n": 3}, "n") == 3  # reset: count from zero
    assert stats.counter_delta({}, {"n": 3}, "n") == 3
    assert stats.hot_ratio(200, 50) == 0.25
    assert stats.hot_ratio(0, 0) is None
    with pytest.raises(ValueError):
        stats.hot_ratio(1, 2)


def _s(av, t=0.0):
    return {"av": av, "t": t}


def test_autovacuum_shares():
    T = "queen.log_timers"
    samples = [
        _s([]),
        _s([{"table": T}]),
        _s([{"table": T}, {"table": "queen.log_txns"}]),
        _s([{"table": "queen.log_txns"}]),
    ] + [_s([]) for _ in range(16)]
    assert stats.av_table_share(samples, T) == pytest.approx(2 / 20)
    assert stats.av_mean_workers(samples, T) == pytest.approx(2 / 20)
    assert stats.av_mean_workers(samples) == pytest.approx(4 / 20)
    # two workers on the table in one sample count twice in the mean, once in the share
    two = [_s([{"table": T}, {"table": T}]), _s([])]
    assert stats.av_table_share(two, T) == 0.5
    assert stats.av_mean_workers(two, T) == 1.0
    assert stats.av_table_share([], T) is None


def test_profile_entry_definition():
    rates = [250, 500, 1000, 2000]
    # neither criterion until 1000 (sample share 6% > 5%)
    assert stats.profile_entry(rates, [0.0, 0.05, 0.06, 0.2], [0.0, 0.01, 0.01, 0.3]) == 1000
    # exactly 5% is not "more than 5%"
    assert stats.profile_entry(rates, [0.05] * 4, [0.05] * 4) is None
    # the CPU criterion alone is enough
    assert stats.profile_entry(rates, [0, 0, 0, 0], [0, 0.051, 0, 0]) == 500
    assert stats.profile_entry(rates, [None] * 4, [None] * 4) is None


def test_first_doubling():
    rates = [250, 500, 1000, 2000]
    assert stats.first_doubling(rates, [10, 15, 19.9, 25]) == 2000
    assert stats.first_doubling(rates, [10, 20, 30, 40]) == 500  # >= twice
    assert stats.first_doubling(rates, [10, 12, 14, 16]) is None
    # a 1 ms baseline is floored at 5 ms: 4 ms is not a doubling, 10 ms is
    assert stats.first_doubling(rates, [1, 4, 9, 10]) == 2000
    assert stats.first_doubling(rates, [None, 4, 9, 10]) is None


def test_step_verdict():
    v = stats.step_verdict(1000, 990, 60000, 59900, 40.0)
    assert v.kept_up
    assert not stats.step_verdict(1000, 900, 60000, 60000, 40.0).kept_up  # generator short
    assert not stats.step_verdict(1000, 1000, 60000, 59000, 40.0).kept_up  # backlog
    assert not stats.step_verdict(1000, 1000, 60000, 60000, 1500.0).kept_up  # too late
    assert not stats.step_verdict(1000, 1000, 0, 0, None).kept_up


def test_attribute_cpu_live_born_and_exited():
    prev = {10: (5.0, "backend"), 11: (1.0, "autovacuum"), 12: (2.0, "background")}
    cur = {
        10: (5.5, "backend"),
        12: (2.1, "background"),
        13: (0.3, "autovacuum"),  # born after the previous sample: all of it counts
        14: (9.0, "backend"),
    }  # existed before but first seen now: nothing yet
    # pid 11 exited: its lifetime total 1.4 s is in the reaped counter, 1.0 was seen;
    # plus 0.2 s of a worker too short to be seen at all
    a = stats.attribute_cpu(
        prev,
        cur,
        reaped_before=3.0,
        reaped_after=4.6,
        prev_time=100.0,
        born_after={13: 100.05, 14: 50.0},
    )
    assert a.backends == pytest.approx(0.5)
    assert a.background == pytest.approx(0.1)
    assert a.autovacuum == pytest.approx(0.3)
    assert a.exited == pytest.approx(0.6)
    assert a.total == pytest.approx(1.5)


def test_attribute_cpu_reap_not_yet_accounted():
    # pid gone but the postmaster has not reaped it yet: never negative
    a = stats.attribute_cpu({1: (2.0, "autovacuum")}, {}, 1.0, 1.0, 0.0)
    assert a.exited == 0.0 and a.total == 0.0


def test_classify_pg_process_and_av_table_of():
    assert classify_pg_process("postgres: autovacuum worker queen_bench") == "autovacuum"
    assert classify_pg_process("postgres: autovacuum launcher") == "background"
    assert classify_pg_process("postgres: walwriter") == "background"
    assert classify_pg_process("postgres: io worker 1") == "background"
    assert classify_pg_process("postgres: postgres db [local] idle") == "backend"
    assert av_table_of({"table": "queen.log_timers"}) == "queen.log_timers"
    assert av_table_of({"query": "autovacuum: VACUUM queen.log_timers"}) == "queen.log_timers"
    assert av_table_of({"query": "autovacuum: VACUUM ANALYZE queen.log_txns"}) == "queen.log_txns"
    assert av_table_of({"query": "autovacuum: ANALYZE queen.log_timers"}) == "queen.log_timers"
    assert (
        av_table_of({"query": "autovacuum: VACUUM pg_toast.pg_toast_1 (to prevent wraparound)"})
        == "pg_toast.pg_toast_1"
    )
    assert av_table_of({"query": ""}) is None


def _sample(t, lsn, upd, hot, av=(), cpu=None, dead=0, heap=8192, idx=16384):
    return {
        "t": t,
        "ts": 1000.0 + t,
        "dt": 0.1,
        "lsn": lsn,
        "label": "x",
        "tab": {
            "n_tup_ins": 0,
            "n_tup_upd": upd,
            "n_tup_hot_upd": hot,
            "n_tup_del": 0,
            "autovacuum_count": 0,
            "autoanalyze_count": 0,
            "n_dead_tup": dead,
        },
        "heap_bytes": heap,
        "index_bytes": idx,
        "av": list(av),
        "cpu": cpu
        or {
            "broker": 0.05,
            "bench": 0.01,
            "pg_backends": 0.04,
            "pg_autovacuum": 0.0,
            "pg_background": 0.01,
        },
    }


def test_aggregate_window():
    T = "queen.log_timers"
    ss = [_sample(i * 0.1, 1000 + i * 500, i * 10, i * 2, dead=i) for i in range(11)]
    ss[5]["av"] = [{"table": T}]
    ss[5]["cpu"]["pg_autovacuum"] = 0.05
    a = aggregate(ss, T)
    assert a["wal_bytes"] == 5000
    assert a["wal_bytes_per_s"] == pytest.approx(5000 / 1.0)
    assert a["table_delta"]["n_tup_upd"] == 100
    assert a["hot_ratio"] == pytest.approx(0.2)
    assert a["av_sample_share"] == pytest.approx(1 / 11)
    assert a["n_dead_tup_max"] == 10
    # CPU: 11 samples of 0.1 s wall; PostgreSQL 0.05 per sample + 0.05 autovacuum once
    assert a["cpu_cores"]["broker"] == pytest.approx(0.5)
    pg = 11 * 0.05 + 0.05
    assert a["cpu_cores_pg_total"] == pytest.approx(pg / 1.1)
    assert a["av_cpu_share_of_pg"] == pytest.approx(0.05 / pg)
    assert window(ss, t_from=0.45, t_to=0.75) == ss[5:8]
    assert aggregate([], T) == {}


def test_aggregate_exact_autovacuum_time_share():
    T = "queen.log_timers"
    ss = [_sample(i * 0.1, 0, 0, 0) for i in range(11)]
    for i, s in enumerate(ss):  # one autovacuum of 50 ms ends in the window of 1 s
        s["tab"]["total_autovacuum_time"] = 100.0 if i < 6 else 150.0
        s["tab"]["autovacuum_count"] = 3 if i < 6 else 4
    a = aggregate(ss, T)
    assert a["av_time_share_exact"] == pytest.approx(0.05)
    assert a["av_ms_per_run"] == pytest.approx(50.0)
    assert a["av_time_share"] == pytest.approx(0.05)  # exact wins over the samples
    for s in ss:
        del s["tab"]["total_autovacuum_time"]
    ss[3]["av"] = [{"table": T}]
    b = aggregate(ss, T)
    assert b["av_time_share_exact"] is None
    assert b["av_time_share"] == pytest.approx(1 / 11)  # falls back to the sampled share


def test_pids_cpu():
    prev = {1: (1.0, "autovacuum"), 2: (3.0, "autovacuum")}
    cur = {1: (1.5, "autovacuum"), 2: (3.2, "autovacuum"), 3: (0.1, "autovacuum")}
    assert stats.pids_cpu(prev, cur, 10.0, {3: 10.5}, [1, 3]) == pytest.approx(0.6)
    assert stats.pids_cpu(prev, cur, 10.0, {3: 9.0}, [3, 4]) == 0.0  # old, first seen


def test_same_page_ratio():
    assert stats.same_page_ratio(100, 25) == 0.75
    assert stats.same_page_ratio(100, None) is None  # PostgreSQL < 16 does not count it
    assert stats.same_page_ratio(0, 0) is None
