"""The official client's admin surface (`client.admin` of queen-mq, docs/guides/official-client.md):
the answers of the reference broker's resource, status, message and analytics routes, with the
fields this broker has."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

import msgspec

__all__ = [
    "ConsumerGroupDeleted",
    "ConsumerGroupDetail",
    "ConsumerGroupSeek",
    "ConsumerGroupSummary",
    "DepthPartition",
    "GroupPartition",
    "GroupQueue",
    "GroupedQueues",
    "LaggingPartition",
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


class ConsumerGroupSummary(TypedDict):
    """One (group, queue) of GET /api/v1/consumer-groups."""

    name: str
    topics: list[str]
    queueName: str
    members: Count
    partitionsWithLag: Count
    totalLag: Count
    maxTimeLag: Count
    state: str  # Stable | Lagging | Dead
    subscriptionMode: str | None
    subscriptionTimestamp: Instant | None
    subscriptionCreatedAt: Instant | None


class LaggingPartition(TypedDict):
    """One row of GET /api/v1/consumer-groups/lagging (the reference's snake_case)."""

    consumer_group: str
    queue_name: str
    partition_name: str
    partition_id: str
    worker_id: str | None
    offset_lag: Count
    time_lag_seconds: Count
    lag_hours: float
    oldest_unconsumed_at: Instant | None
    last_consumed_at: None


class GroupPartition(TypedDict):
    partition: str
    partitionId: str
    workerId: str | None
    lastConsumedAt: None  # not stored here
    committed: int
    totalConsumed: Count
    offsetLag: Count
    timeLagSeconds: Count
    leaseActive: bool


class GroupQueue(TypedDict):
    partitions: list[GroupPartition]


# GET /api/v1/consumer-groups/{group}: {queue name: its partitions}, {} for no such group.
ConsumerGroupDetail = dict[str, GroupQueue]


class ConsumerGroupDeleted(TypedDict):
    success: bool
    consumerGroup: str
    queueName: str
    deletedPartitions: Count
    metadataDeleted: bool


class ConsumerGroupSeek(TypedDict):
    success: bool
    consumerGroup: str
    queueName: str
    seekToEnd: bool
    targetTimestamp: Instant | None
    partitionsUpdated: Count
