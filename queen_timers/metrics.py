"""Prometheus metrics of one broker, in a registry of its own.

Each `Queen` service owns a CollectorRegistry (not the process-global one), so several
brokers in one process (tests, embedding programs) never collide. Transports expose it; the
HTTP one at GET /metrics. Names follow the reference broker (timers-contract §5) where it has
one; the tenant label is deliberately absent from per-operation counters (cardinality), except
queen_timers_tenant_rejected_total, whose label names at most QUEEN_METRICS_TENANT_LABELS
tenants per broker and counts the rest as "other" (quotas.TenantLabels). A label is a keyed
digest of the tenant, never its id (brokersecret.tenant_label).

Every runtime has one, so no caller asks whether metrics are on: a program that never exposes
them (a `queen` command, Queen.client) records into a registry nobody reads, which costs a few
counter increments and spares every recording site an `is None` branch.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# prometheus_client leaves this helper unannotated; a bucket bound is a float, its label a str.
_go_float: Callable[[float], str] = floatToGoString

__all__ = ["BatchHistogram", "Metrics"]

# Fire lag buckets (seconds): the interesting range is 1 ms (healthy, same broker) to the
# one-second fallback poll and beyond (a lost wake-up or a backlog).
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0, 60.0)
# Service call buckets (seconds): a schedule commits in 1-3 ms on a healthy machine; the p99
# goal of the transports is 10 ms.
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
_CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0)


class BatchHistogram(Collector):
    """A label-less histogram observed a batch at a time: `observe_ms(values)`.

    The fire reports one lag per timer, up to 20,000 a second in a drain; prometheus_client's
    Histogram.observe takes a lock and walks the buckets in Python for each one. Here a batch
    costs one lock and a C bisect per value (0.19 against 1.95 us a timer, 2026-11-30;
    bench/RESULTS.md, "Measurements the code cites"). Exposed exactly as a Histogram of the
    same name and buckets (cumulative `_bucket{le}` series, `_count`, `_sum`, `_created`-free).
    """

    def __init__(
        self, name: str, documentation: str, buckets: Iterable[float], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = sorted(float(b) for b in buckets)
        self._counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe_ms(self, values_ms: Iterable[float]) -> None:
        """Observe values given in milliseconds (negative ones count as 0), in seconds."""
        seconds = [v / 1000.0 if v > 0 else 0.0 for v in values_ms]
        if not seconds:
            return
        slot = bisect.bisect_left  # le is inclusive: a value equal to a bound falls into it
        bounds = self.bounds
        with self._lock:
            counts, total = self._counts, self._sum
            for v in seconds:
                counts[slot(bounds, v)] += 1
                total += v  # in order, as one observe() at a time would add them
            self._sum = total

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation)]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        running, buckets = 0, []
        for bound, n in zip([*self.bounds, float("inf")], counts):
            running += n
            buckets.append((_go_float(bound), running))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.timers_due = Gauge(
            "queen_timers_due", "Due timers at the last probe (capped).", registry=r
        )
        self.timers_due_capped = Gauge(
            "queen_timers_due_capped", "1 when the last probe's due count hit the cap.", registry=r
        )
        self.timers_oldest_late = Gauge(
            "queen_timers_oldest_late_seconds",
            "Lateness of the oldest due timer at the last probe (from deliver_at, never before "
            "it was scheduled).",
            registry=r,
        )
        self.timers_fired = Counter(
            "queen_timers_fired_total",
            "Timers handled by the fire, by result.",
            ["result"],
            registry=r,
        )
        self.fire_lag = BatchHistogram(
            "queen_timers_fire_lag_seconds",
            "From when the timer could first fire (deliver_at, never before it was scheduled) "
            "to the fire's commit, per fired timer.",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.timers_apply = Histogram(
            "queen_timers_apply_seconds",
            "Time inside the service for one schedule/reschedule/cancel call, from validation "
            "to the commit's answer (refusals included); a transport's own time is not in it.",
            buckets=_CALL_BUCKETS,
            registry=r,
        )
        self.fire_failures = Counter(
            "queen_timers_fire_failures_total",
            "Failed fire attempts by class.",
            ["class"],
            registry=r,
        )
        self.timers_dlq = Counter(
            "queen_timers_dlq_total", "Timers archived to the dead-letter queue.", registry=r
        )
        self.schedule_rejected = Counter(
            "queen_timers_schedule_rejected_total",
            "Refused timer calls, by reason.",
            ["reason"],
            registry=r,
        )
        self.tenant_rejected = Counter(
            "queen_timers_tenant_rejected_total",
            "Timer calls refused by a tenant's limits, by reason (quota, rate_limited) and "
            "tenant label (t-<digest>, not the id: SELECT queen.tenant_metrics_label_v1(id) "
            'names it); tenants past QUEEN_METRICS_TENANT_LABELS are counted as tenant="other".',
            ["reason", "tenant"],
            registry=r,
        )
        self.tenants_over_quota = Gauge(
            "queen_timers_tenants_over_quota",
            "Tenants this broker refuses for their pending-timer cap (sticky until the "
            "measured count is under 90 % of it).",
            registry=r,
        )
        self.quota_measure = Histogram(
            "queen_timers_quota_measure_seconds",
            "One measurement of capped tenants' pending timers (a round trip).",
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.wakeups = Counter(
            "queen_sweeper_wakeups_total",
            "Sweeper wake-ups by reason (local, notify, poll, deadline).",
            ["reason"],
            registry=r,
        )
        self.cycle = Histogram(
            "queen_sweeper_cycle_seconds",
            "Duration of one sweeper cycle (probe and drain).",
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.notify_failures = Counter(
            "queen_sweeper_notify_failures_total",
            "NOTIFY calls that failed (never fail a schedule).",
            registry=r,
        )
        self.notify_dropped = Counter(
            "queen_sweeper_notify_dropped_total",
            "Notifications dropped unread by reason (forged: no valid signature, replayed, stale).",
            ["reason"],
            registry=r,
        )
        self.listener_reconnects = Counter(
            "queen_sweeper_listener_reconnects_total",
            "Reconnections of the LISTEN connection.",
            registry=r,
        )
        self.listener_connected = Gauge(
            "queen_sweeper_listener_connected", "1 while the LISTEN connection is up.", registry=r
        )
        self.released = Counter(
            "queen_sweeper_released_total",
            "Claims handed back at shutdown instead of waiting for the lease.",
            registry=r,
        )
