"""Prometheus metrics of one broker, in a registry of its own.

Each `Queen` service owns a CollectorRegistry (not the process-global one), so several
brokers in one process (tests, embedding programs) never collide. Transports expose it; the
HTTP one at GET /metrics. Names follow the reference broker (timers-contract §5) where it has
one; the tenant label is deliberately absent from per-operation counters (cardinality).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

# Fire lag buckets (seconds): the interesting range is 1 ms (healthy, same broker) to the
# one-second fallback poll and beyond (a lost wake-up or a backlog).
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0,
                60.0)
_CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
                  15.0)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.timers_due = Gauge("queen_timers_due", "Due timers at the last probe (capped).",
                                registry=r)
        self.timers_due_capped = Gauge("queen_timers_due_capped",
                                       "1 when the last probe's due count hit the cap.",
                                       registry=r)
        self.timers_oldest_late = Gauge("queen_timers_oldest_late_seconds",
                                        "Lateness of the oldest due timer at the last probe.",
                                        registry=r)
        self.timers_fired = Counter("queen_timers_fired_total",
                                    "Timers handled by the fire, by result.", ["result"],
                                    registry=r)
        self.fire_lag = Histogram("queen_timers_fire_lag_seconds",
                                  "deliver_at to the fire's commit, per fired timer.",
                                  buckets=_LAG_BUCKETS, registry=r)
        self.fire_failures = Counter("queen_timers_fire_failures_total",
                                     "Failed fire attempts by class.", ["class"], registry=r)
        self.timers_dlq = Counter("queen_timers_dlq_total",
                                  "Timers archived to the dead-letter queue.", registry=r)
        self.schedule_rejected = Counter("queen_timers_schedule_rejected_total",
                                         "Refused timer calls, by reason.", ["reason"],
                                         registry=r)
        self.wakeups = Counter("queen_sweeper_wakeups_total",
                               "Sweeper wake-ups by reason (local, notify, poll, deadline).",
                               ["reason"], registry=r)
        self.cycle = Histogram("queen_sweeper_cycle_seconds",
                               "Duration of one sweeper cycle (probe and drain).",
                               buckets=_CYCLE_BUCKETS, registry=r)
        self.notify_failures = Counter("queen_sweeper_notify_failures_total",
                                       "NOTIFY calls that failed (never fail a schedule).",
                                       registry=r)
        self.listener_reconnects = Counter("queen_sweeper_listener_reconnects_total",
                                           "Reconnections of the LISTEN connection.",
                                           registry=r)
        self.listener_connected = Gauge("queen_sweeper_listener_connected",
                                        "1 while the LISTEN connection is up.", registry=r)
        self.released = Counter("queen_sweeper_released_total",
                                "Claims handed back at shutdown instead of waiting for the "
                                "lease.", registry=r)
