"""The timers' wire: the ops of a batch, the bodies of the timer routes, and their answers.

Shapes as the Queen wire spells them (docs/design/timers-contract.md): camelCase, the instants
ISO 8601 in UTC. Answers are `TypedDict`s because the database renders them
(queen._log_timer_json_v1 and friends) and the broker passes them on untouched.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec

from .decoded import Decoded

__all__ = [
    "CancelOp",
    "CancelPrefixBody",
    "CancelPrefixResult",
    "FireNowBody",
    "Histogram",
    "HistogramBucket",
    "ReplicaLagMs",
    "RescheduleOp",
    "ScheduleOp",
    "TimerCount",
    "TimerOp",
    "TimerOperations",
    "TimerOpsBody",
    "TimerOpsJson",
    "TimerPeek",
    "TimerResult",
    "TimerResults",
    "TimerRow",
    "TimersPage",
    "TimersRead",
]

Instant = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
# On an answer read on a replica (QUEEN_READ_DATABASE_URL; queen_timers.db.reads).
ReplicaLagMs = Annotated[
    int, msgspec.Meta(ge=0, description="read on a replica: how stale the answer may be (ms)")
]


class _Op(msgspec.Struct, rename="camel", tag_field="op", forbid_unknown_fields=True):
    queue: str
    timer_key: str
    partition: str | None = None


class _Schedules(_Op):
    delay_ms: int = 0
    txn: str = ""
    payload: Annotated[str, msgspec.Meta(description="base64 of the message bytes")] = ""
    payload_zstd: bool = False
    encrypted: bool = False


class ScheduleOp(_Schedules, tag="schedule"):
    """Schedule a timer: a message delivered to `queue` after `delayMs`."""


class RescheduleOp(_Schedules, tag="reschedule"):
    """Schedule again, replacing the pending timer of the same key."""


class CancelOp(_Op, tag="cancel"):
    """Cancel the pending timer of a key (`txn` is echoed back on absent)."""

    txn: str | None = None


TimerOp = ScheduleOp | RescheduleOp | CancelOp


class TimerOperations(msgspec.Struct, forbid_unknown_fields=True):
    operations: list[TimerOp]


TimerOpsBody = list[TimerOp] | TimerOperations
# A batch of ops as sent: its refusals are ordered across two stages (queen_timers.timers.ops).
TimerOpsJson = Annotated[Any, Decoded(TimerOpsBody)]


class TimerResult(TypedDict):
    """One op's result, index-aligned with the batch."""

    ok: bool
    status: str  # scheduled | rescheduled | cancelled | absent | too_late
    queue: str
    timerKey: str
    txn: NotRequired[str | None]
    messageId: NotRequired[str]
    deliverAt: NotRequired[Instant]


class TimerResults(TypedDict):
    """The HTTP answer of a batch: its results under one key."""

    results: list[TimerResult]


class TimerRow(TypedDict):
    """A pending timer as peek and list render it (queen._log_timer_json_v1): the reference's
    fields, with `state` and `retryAt` beside them."""

    queue: str
    timerKey: str
    partition: str
    deliverAt: Instant
    txn: str | None
    messageId: str
    payloadZstd: bool
    encrypted: bool
    producerSub: str | None
    attempts: Annotated[int, msgspec.Meta(ge=0)]
    lastError: str | None
    claimed: bool
    createdAt: Instant
    updatedAt: Instant
    state: NotRequired[Literal["waiting", "claimed", "backing_off"]]
    retryAt: NotRequired[Instant | None]


class TimerPeek(TypedDict):
    """{found: true, ...the timer, payload (base64 as stored)} or {found: false, queue,
    timerKey}: no such pending timer (fired, cancelled or never scheduled)."""

    found: bool
    queue: str
    timerKey: str
    partition: NotRequired[str]
    deliverAt: NotRequired[Instant]
    txn: NotRequired[str | None]
    messageId: NotRequired[str]
    payloadZstd: NotRequired[bool]
    encrypted: NotRequired[bool]
    producerSub: NotRequired[str | None]
    attempts: NotRequired[int]
    lastError: NotRequired[str | None]
    claimed: NotRequired[bool]
    createdAt: NotRequired[Instant]
    updatedAt: NotRequired[Instant]
    state: NotRequired[Literal["waiting", "claimed", "backing_off"]]
    retryAt: NotRequired[Instant | None]
    payload: NotRequired[str]
    replicaLagMs: NotRequired[ReplicaLagMs]


class TimersPage(TypedDict):
    """One keyset page of a queue's timers by key."""

    rows: list[TimerRow]
    truncated: bool
    nextAfter: str | None
    replicaLagMs: NotRequired[ReplicaLagMs]


class TimerCount(TypedDict):
    count: Annotated[int, msgspec.Meta(ge=0)]
    replicaLagMs: NotRequired[ReplicaLagMs]


class HistogramBucket(TypedDict):
    start: Instant
    count: int


# Functional form: one key is `from`, a Python keyword.
Histogram = TypedDict(
    "Histogram",
    {
        "queue": str,
        "window": str,
        "bucketMs": int,
        "from": Instant,
        "to": Instant,
        "buckets": list[HistogramBucket],
        "overdue": int,
        "later": int,
        "pending": int,
        "exact": NotRequired[bool],
        "samplePercent": NotRequired[float],
        "replicaLagMs": NotRequired[ReplicaLagMs],
    },
)
"""Pending timers of one queue by due time (`overdue`: due before `from`, i.e. now)."""


class TimersRead(TypedDict, total=False):
    """GET /api/v1/timers/:queue: a page (mode list), {count} (mode count) or a histogram."""

    rows: list[TimerRow]
    truncated: bool
    nextAfter: str | None
    count: int
    queue: str
    window: str
    bucketMs: int
    buckets: list[HistogramBucket]
    overdue: int
    later: int
    pending: int
    replicaLagMs: ReplicaLagMs


class FireNowBody(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    timer_key: str


class CancelPrefixBody(msgspec.Struct, forbid_unknown_fields=True):
    prefix: Annotated[
        str, msgspec.Meta(description="literal (% and _ mean themselves), 1..128 bytes")
    ]
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 1000


class CancelPrefixResult(TypedDict):
    queue: str
    prefix: str
    cancelled: int
    absent: int
    tooLate: int
    remaining: bool
