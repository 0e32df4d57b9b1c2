"""The transport bench's reading of the broker's own histogram (queen_timers_apply_seconds)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench.transport_schedule import apply_buckets, bucket_delta, bucket_quantile, share_over
from queen_timers.metrics import _CALL_BUCKETS

INF = float("inf")


def _exposition(values: list[float]) -> str:
    r = CollectorRegistry()
    h = Histogram("queen_timers_apply_seconds", "doc", buckets=_CALL_BUCKETS, registry=r)
    for v in values:
        h.observe(v)
    return generate_latest(r).decode()


def test_buckets_delta_share_and_quantile():
    before = apply_buckets(_exposition([0.0005] * 10))
    after = apply_buckets(_exposition([0.0005] * 10 + [0.002] * 95 + [0.012] * 3 + [0.3] * 2))
    assert before[INF] == 10 and after[INF] == 110
    d = bucket_delta(before, after)
    assert d[INF] == 100 and d[0.001] == 0 and d[0.0025] == 95
    assert math.isclose(share_over(d, 0.01), 0.05)
    assert bucket_quantile(d, 0.5) == 0.0025
    assert bucket_quantile(d, 0.98) == 0.015
    assert bucket_quantile(d, 0.99) == 0.5


def test_no_calls_reads_as_nan_not_zero():
    empty = apply_buckets(_exposition([]))
    assert math.isnan(share_over(empty, 0.01)) and math.isnan(bucket_quantile(empty, 0.99))
    assert apply_buckets("") == {}


def test_goal_lines_judge_each_transport_and_say_what_the_probe_saw():
    from bench.transport_schedule import goal_lines

    results = {
        "none": {"single_rps": 6000, "paced_p50_ms": 1.6, "paced_p99_ms": 5.0, "batch_tps": 25000},
        "http": {
            "single_rps": 2923,
            "single_p50_ms": 5.2,
            "paced_p50_ms": 2.16,
            "paced_p99_ms": 42.16,
            "paced_p99_clear_ms": 9.27,
            "batch_tps": 19968,
        },
        "tcp": {
            "single_rps": 1999,
            "single_p50_ms": 3.9,
            "paced_p50_ms": 2.04,
            "paced_p99_ms": 8.0,
            "batch_tps": 24576,
        },  # no probe: no "clear of slow windows" figure
    }
    http, tcp, single_p50, p50 = goal_lines(results)
    assert http == (
        "goals  http  single-op 2,923 req/s >= 2,000: met; paced p99 42.2 ms <= 10: "
        "NOT met (clear of slow windows 9.3 ms: met); batched 19,968 timers/s >= "
        "20,000: NOT met"
    )
    assert tcp == (
        "goals  tcp   single-op 1,999 req/s >= 2,000: NOT met; paced p99 8.0 ms <= 10: "
        "met; batched 24,576 timers/s >= 20,000: met"
    )
    assert single_p50 == "goals  TCP's single-op p50 3.90 ms below HTTP's 5.20 ms: met"
    assert p50 == "goals  TCP's paced p50 2.04 ms below HTTP's 2.16 ms: met"
    assert goal_lines({"none": results["none"]}) == []  # the in-process ceiling has no goals


def test_goal_lines_judge_only_the_workloads_measured():
    from bench.transport_schedule import goal_lines

    paced_only = {
        "http": {"paced_p50_ms": 2.2, "paced_p99_ms": 4.1, "paced_p99_clear_ms": 4.1},
        "tcp": {"paced_p50_ms": 2.0, "paced_p99_ms": 12.0},
    }
    assert goal_lines(paced_only) == [
        "goals  http  paced p99 4.1 ms <= 10: met (clear of slow windows 4.1 ms: met)",
        "goals  tcp   paced p99 12.0 ms <= 10: NOT met",
        "goals  TCP's paced p50 2.00 ms below HTTP's 2.20 ms: met",
    ]
    assert goal_lines({"http": {"single_rps": 2500}}) == [
        "goals  http  single-op 2,500 req/s >= 2,000: met"
    ]
