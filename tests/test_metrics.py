"""BatchHistogram: the fire-lag histogram observed a batch at a time reads exactly as a
prometheus_client Histogram of the same name and buckets fed one value at a time."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from queen_timers.metrics import _LAG_BUCKETS, BatchHistogram, Metrics


def _exposition(registry: CollectorRegistry) -> list[str]:
    return [
        line for line in generate_latest(registry).decode().splitlines() if "_created" not in line
    ]  # the library's own creation stamp: not ours to copy


def test_batch_histogram_reads_as_a_histogram_fed_one_by_one():
    rng = random.Random(7)
    # bounds exactly (le is inclusive), zero, negatives (clock skew: count as 0), +Inf
    values = [
        rng.choice([-3.0, 0.0, 1.0, 2.5, 5.0, 1000.0, 60000.0, 90000.0]) for _ in range(500)
    ] + [rng.uniform(0, 3000) for _ in range(500)]
    ref_registry, ours_registry = CollectorRegistry(), CollectorRegistry()
    ref = Histogram("lag_seconds", "doc", buckets=_LAG_BUCKETS, registry=ref_registry)
    ours = BatchHistogram("lag_seconds", "doc", _LAG_BUCKETS, ours_registry)
    for v in values:
        ref.observe(max(v, 0.0) / 1000.0)
    ours.observe_ms(values[:300])
    ours.observe_ms([])  # an empty batch changes nothing
    ours.observe_ms(values[300:])
    assert _exposition(ours_registry) == _exposition(ref_registry)


def test_fire_lag_sample_names_are_those_of_a_histogram():
    m = Metrics()
    m.fire_lag.observe_ms([0.5, 3.0, 120.0])
    got = {
        s.name: s.value
        for fam in m.registry.collect()
        for s in fam.samples
        if s.name.startswith("queen_timers_fire_lag_seconds")
        and s.labels.get("le") in (None, "0.001", "0.005", "+Inf")
    }
    assert got["queen_timers_fire_lag_seconds_count"] == 3
    assert abs(got["queen_timers_fire_lag_seconds_sum"] - 0.1235) < 1e-9
    assert m.registry.get_sample_value("queen_timers_fire_lag_seconds_bucket", {"le": "0.001"}) == 1
    assert m.registry.get_sample_value("queen_timers_fire_lag_seconds_bucket", {"le": "0.005"}) == 2
    assert m.registry.get_sample_value("queen_timers_fire_lag_seconds_bucket", {"le": "+Inf"}) == 3
