"""The official client's admin routes that have no meaning in this broker.

Each answers 410 `{"error": "not_implemented", "reason", "detail"}` naming why, never a 5xx:
the client retries a 5xx three times before giving up, and nothing here will change on a
retry. docs/guides/official-client.md lists every `client.admin` method and its answer.
"""

from __future__ import annotations

import dataclasses

__all__ = ["NOT_HERE", "NotHere"]


@dataclasses.dataclass(frozen=True)
class NotHere:
    method: str
    path: str
    reason: str
    detail: str


_TRACES = (
    "this broker records no message traces (the reference's POST /api/v1/traces store does "
    "not exist here); follow a message by its transactionId in the log and its dead letters"
)
_ANALYTICS = (
    "this broker stores no time series of throughput or lag; /metrics (Prometheus) is the "
    "history, and GET /api/v1/status answers the figures measured now"
)
NOT_HERE: tuple[NotHere, ...] = (
    NotHere("GET", "/api/v1/traces/names", "traces_not_recorded", _TRACES),
    NotHere("GET", "/api/v1/traces/by-name/{traceName}", "traces_not_recorded", _TRACES),
    NotHere("GET", "/api/v1/traces/{partitionId}/{transactionId}", "traces_not_recorded", _TRACES),
    NotHere("GET", "/api/v1/status/analytics", "analytics_not_stored", _ANALYTICS),
)
