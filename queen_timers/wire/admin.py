"""The operators' wire: kill switches, the tenants' limits, the overviews and dead-letter
actions (docs/guides/console.md, docs/guides/tenants.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec

from .decoded import Decoded
from .timers import ReplicaLagMs

__all__ = [
    "BrokerView",
    "Brokers",
    "DeadLetterRef",
    "DeadLetterResult",
    "DlqDeleteBody",
    "DlqDeleted",
    "DlqItemsJson",
    "DlqReplayBody",
    "DlqReplayed",
    "FireWindow",
    "MessageCounts",
    "Overview",
    "QueueSummary",
    "QueueSummaryAt",
    "QueuesOverview",
    "SwitchStates",
    "SwitchesBody",
    "SwitchesJson",
    "TenantLimitsJson",
    "TenantQuota",
    "TenantQuotaBody",
    "TenantQuotaList",
    "TimerCounts",
]

Count = Annotated[int, msgspec.Meta(ge=0)]
Instant = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]


class SwitchesBody(msgspec.Struct, forbid_unknown_fields=True):
    """At least one switch; an unknown key is refused by name."""

    timersSchedule: bool | msgspec.UnsetType = msgspec.UNSET
    timersFire: bool | msgspec.UnsetType = msgspec.UNSET


SwitchesJson = Annotated[Any, Decoded(SwitchesBody)]


class SwitchStates(TypedDict):
    timersScheduleEnabled: bool
    timersFireEnabled: bool
    mirrored: NotRequired[bool]
    message: NotRequired[str]


Unlimited = Literal["unlimited"]


class TenantQuotaBody(msgspec.Struct, forbid_unknown_fields=True):
    """A value, "unlimited", or null for the broker's setting."""

    maxPending: Annotated[int, msgspec.Meta(ge=0)] | Unlimited | None = None
    writesPerSec: Annotated[float, msgspec.Meta(gt=0)] | Unlimited | None = None
    burst: Annotated[int, msgspec.Meta(ge=1)] | None = None


TenantLimitsJson = Annotated[Any, Decoded(TenantQuotaBody)]


class TenantQuota(TypedDict):
    tenant: str
    maxPending: int | None
    writesPerSec: float | None
    burst: int
    overrides: dict[str, Any]
    overQuota: bool
    pending: NotRequired[int | None]
    admittedSinceMeasured: NotRequired[int]


class TenantQuotaList(TypedDict):
    defaults: dict[str, Any]
    tenants: list[TenantQuota]


class TimerCounts(TypedDict):
    pending: Count
    dueNextMinute: Count
    dueNextHour: Count
    dueNextDay: Count
    overdue: Count  # deliverAt before now, in any state
    oldestOverdueMs: int | None
    backingOff: Count
    claimed: Count
    pendingExact: NotRequired[bool]  # false past the broker's cap: pending is a lower bound


class MessageCounts(TypedDict, total=False):
    total: Count
    pending: Count
    processing: Count
    deadLetter: Count


class QueueSummary(TypedDict):
    name: str
    partitions: Count
    messages: MessageCounts
    timers: TimerCounts
    deadLetters: Count
    id: NotRequired[str | None]
    namespace: NotRequired[str | None]
    task: NotRequired[str | None]
    createdAt: NotRequired[str | None]


class QueueSummaryAt(QueueSummary):
    at: Instant
    replicaLagMs: NotRequired[ReplicaLagMs]


class QueuesOverview(TypedDict):
    queues: list[QueueSummary]
    at: Instant
    replicaLagMs: NotRequired[ReplicaLagMs]


class BrokerView(TypedDict):
    applicationName: str
    pid: int | None
    backendStart: Instant
    clientAddr: str | None


class Brokers(TypedDict):
    alive: Count
    list: list[BrokerView]  # admin identities only (empty otherwise)


class FireWindow(TypedDict, total=False):
    """This broker's recent fire."""

    windowSeconds: Count
    firedPerSec: float
    fireLagP50Ms: float | None
    fireLagP99Ms: float | None


class Overview(TypedDict):
    """The tenant at a glance."""

    queues: Count
    partitions: Count
    namespaces: Count
    tasks: Count
    messages: MessageCounts
    timers: TimerCounts
    deadLetters: Count
    brokers: Brokers
    switches: SwitchStates
    thisBroker: FireWindow
    timestamp: Instant
    at: Instant
    replicaLagMs: NotRequired[ReplicaLagMs]


class DeadLetterRef(msgspec.Struct, forbid_unknown_fields=True):
    transactionId: str
    partitionId: Annotated[str, msgspec.Meta(extra_json_schema={"format": "uuid"})]


DlqItems = Annotated[list[DeadLetterRef], msgspec.Meta(min_length=1, max_length=1000)]
DlqItemsJson = Annotated[Any, Decoded(DlqItems)]


class DlqReplayBody(msgspec.Struct, forbid_unknown_fields=True):
    items: DlqItems
    mode: Literal["push", "schedule"]
    delayMs: (
        Annotated[int, msgspec.Meta(ge=0, description="mode schedule only")] | msgspec.UnsetType
    ) = msgspec.UNSET


class DlqDeleteBody(msgspec.Struct, forbid_unknown_fields=True):
    items: DlqItems


class DeadLetterResult(TypedDict):
    index: int
    status: str
    count: int
    partitionId: NotRequired[Any]
    transactionId: NotRequired[Any]


class DlqReplayed(TypedDict):
    mode: str
    results: list[DeadLetterResult]


class DlqDeleted(TypedDict):
    results: list[DeadLetterResult]
