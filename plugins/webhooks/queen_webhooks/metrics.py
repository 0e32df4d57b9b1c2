"""The delivery's Prometheus metrics, in the broker's registry (/metrics). A target is labelled
`<tenant label>/<name>`: the tenant's keyed digest, never its id."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["WebhookMetrics", "result_class"]


def result_class(status: int | None, blocked: bool) -> str:
    if blocked:
        return "refused"
    if status is None:
        return "error"
    return f"{status // 100}xx"


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.deliveries = Counter(
            "queen_webhook_deliveries_total",
            "Messages a webhook target finished with, by outcome: delivered, retry (a retry was "
            "staged) or dead (sent to the dead-letter queue).",
            ["target", "outcome"],
            registry=registry,
        )
        self.attempts = Counter(
            "queen_webhook_attempts_total",
            "HTTP attempts by result: 2xx, 3xx, 4xx, 5xx, error (no answer: timeout, refused "
            "connection) or refused (the address is not allowed).",
            ["target", "result"],
            registry=registry,
        )
        self.latency = Histogram(
            "queen_webhook_attempt_seconds",
            "Duration of one HTTP attempt, connection included.",
            ["target"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.failing = Gauge(
            "queen_webhook_consecutive_failures",
            "Attempts that failed in a row at a target (0 after a delivery): the alert's input.",
            ["target"],
            registry=registry,
        )
        self.lag = Gauge(
            "queen_webhook_last_lag_seconds",
            "From a message's entry into the queue to its last attempt at a target.",
            ["target"],
            registry=registry,
        )
