"""The official client's admin surface (`client.admin` of queen-mq, docs/guides/official-client.md):
the answers of the reference broker's resource, status, message and analytics routes, with the
fields this broker has."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

import msgspec

__all__ = [
    "DepthPartition",
    "GroupedQueues",
    "LogMessage",
    "MessageAction",
    "MessagesPage",
    "PartitionRow",
    "PartitionsList",
    "QueueDeleted",
    "QueueDepth",
    "QueueDetail",
    "StatusQueues",
    "SystemMetrics",
    "SystemStatus",
    "WorkerMetrics",
]

Count = Annotated[int, msgspec.Meta(ge=0)]
Instant = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]


class LogCounts(TypedDict):
    total: Count
    pending: Count
    processing: Count


class GroupedQueues(TypedDict):
    """/resources/namespaces ({namespaces: [...]}) or /resources/tasks ({tasks: [...]}): one
    row per namespace (or task) with its queues, partitions and messages."""

    namespaces: NotRequired[list[dict[str, Any]]]
    tasks: NotRequired[list[dict[str, Any]]]


class PartitionRow(TypedDict):
    id: str
    name: str
    queue: str
    namespace: str | None
    task: str | None
    createdAt: Instant
    lastActivity: Instant
    messages: LogCounts
    offsets: dict[str, int]
    consumerGroups: Count
    deadLetters: Count


class PartitionsList(TypedDict):
    partitions: list[PartitionRow]


class DepthPartition(TypedDict):
    partition: str
    pending: Count


class QueueDepth(TypedDict):
    queue: str
    group: str | None
    pending: Count
    partitionsPending: Count
    conflation: bool
    effectivePending: Count
    partitions: list[DepthPartition]


class StatusQueues(TypedDict):
    queues: list[dict[str, Any]]
    pagination: dict[str, int]


class QueueDetail(TypedDict):
    queue: dict[str, Any]
    partitions: list[dict[str, Any]]
    totals: dict[str, Any]
    timers: dict[str, Any]


class SystemStatus(TypedDict):
    timeRange: dict[str, Any]
    throughput: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    messages: dict[str, int]
    leases: dict[str, int]
    deadLetterQueue: dict[str, int]
    timers: dict[str, Any]
    workers: list[dict[str, Any]]
    statsAge: int


class LogMessage(TypedDict):
    id: str
    transactionId: str
    partitionId: str
    queuePath: str
    queue: str
    partition: str
    namespace: str | None
    task: str | None
    status: str
    offset: int
    traceId: None
    producerSub: str | None
    createdAt: Instant
    leaseExpiresAt: Instant | None
    data: NotRequired[Any]


class MessagesPage(TypedDict):
    messages: list[LogMessage]
    pagination: dict[str, int]


class MessageAction(TypedDict):
    success: bool
    partitionId: str
    transactionId: str
    message: str
    deadLetters: Count


class QueueDeleted(TypedDict):
    deleted: bool
    existed: bool
    queue: str
    partitions: Count
    messages: Count
    timers: Count
    deadLetters: Count


class SystemMetrics(TypedDict):
    """This broker's process now, as one point of the reference's time series."""

    timeRange: dict[str, Any]
    replicas: list[dict[str, Any]]
    replicaCount: Count
    bucketMinutes: int
    pointCount: Count


class WorkerMetrics(TypedDict):
    timeRange: dict[str, Any]
    timeSeries: list[dict[str, Any]]
    workers: list[dict[str, Any]]
