"""The transport bench's reading of the broker's own histogram (queen_timers_apply_seconds)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench.transport_schedule import apply_buckets, bucket_delta, bucket_quantile, share_over
from queen.metrics import _CALL_BUCKETS

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
