"""The recurring schedules' wire: the upsert body, and the answers of the schedule routes.

Shapes as the database renders them (migrations/033_schedules.sql, queen._schedule_json_v1):
camelCase, instants ISO 8601 in UTC; the peek's `next[].local` is the instant in the
schedule's zone, with its offset.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec

from .decoded import Decoded

__all__ = [
    "ScheduleBody",
    "ScheduleDeleted",
    "ScheduleKeyBody",
    "ScheduleOccurrence",
    "ScheduleRow",
    "ScheduleRun",
    "ScheduleRunRow",
    "ScheduleSetJson",
    "ScheduleSetResult",
    "ScheduleView",
    "SchedulesPage",
]

Instant = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]


class ScheduleBody(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """A recurring schedule: exactly one of `cron` (5 fields, or 6 with seconds first) and
    `everyMs`."""

    queue: str
    schedule_key: str
    payload: Annotated[str, msgspec.Meta(description="base64 of the message bytes")]
    cron: str | None = None
    every_ms: Annotated[int, msgspec.Meta(ge=1)] | None = None
    zone: Annotated[str, msgspec.Meta(description="an IANA time zone")] = "UTC"
    start_at: Instant | None = None
    end_at: Instant | None = None
    partition: str | None = None
    payload_zstd: bool = False
    encrypted: bool = False
    jitter_ms: Annotated[int, msgspec.Meta(ge=0, le=86_400_000)] = 0
    catch_up: Literal["skip", "once", "all"] = "skip"
    catch_up_cap: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1
    paused: bool = False


# Decoded by the core (queen_timers/timers/schedules.py), whose refusals carry its reasons.
ScheduleSetJson = Annotated[Any, Decoded(ScheduleBody)]


class ScheduleRow(TypedDict):
    """A schedule as list renders it (peek adds `payload`-less detail: next, runs)."""

    queue: str
    scheduleKey: str
    scheduleId: str
    cron: NotRequired[str]
    everyMs: NotRequired[int]
    zone: str
    startAt: NotRequired[Instant]
    endAt: NotRequired[Instant]
    anchorAt: Instant
    partition: str
    payloadZstd: bool
    encrypted: bool
    jitterMs: int
    catchUp: Literal["skip", "once", "all"]
    catchUpCap: int
    paused: bool
    generation: int
    nextAt: NotRequired[Instant]
    nextDueAt: NotRequired[Instant]
    createdAt: Instant
    updatedAt: Instant


class ScheduleSetResult(TypedDict):
    status: Literal["created", "updated"]
    schedule: ScheduleRow


class ScheduleOccurrence(TypedDict):
    at: Instant
    local: Annotated[str, msgspec.Meta(description="the instant in the schedule's zone")]
    dueAt: Instant


class ScheduleRunRow(TypedDict):
    """One ledger row: an occurrence that left the timer table."""

    occurrenceAt: Instant
    kind: Literal["cadence", "run"]
    outcome: Literal["fired", "duplicate", "skipped"]
    dueAt: Instant
    firedAt: Instant
    messageId: NotRequired[str]
    lateMs: float


class ScheduleView(ScheduleRow):
    """A schedule with its next occurrences and its last runs (peek; pause and resume answer
    the schedule without them)."""

    next: NotRequired[list[ScheduleOccurrence]]
    runs: NotRequired[list[ScheduleRunRow]]


class SchedulesPage(TypedDict):
    schedules: list[ScheduleRow]
    truncated: bool
    nextAfter: str | None


class ScheduleDeleted(TypedDict):
    queue: str
    scheduleKey: str
    deleted: bool


class ScheduleRun(TypedDict):
    queue: str
    scheduleKey: str
    runAt: Instant
    status: Literal["scheduled", "already_pending"]
    txn: NotRequired[str]
    messageId: NotRequired[str]


class ScheduleKeyBody(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """The schedule an action (pause, resume, run) is about; in the body, as a key may hold
    '/'."""

    schedule_key: str
