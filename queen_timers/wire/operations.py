"""The operations of the broker, defined once: for each, the struct of its arguments and the
type of its answer.

`queen_timers.service.Queen` has one method per operation, of the same name, taking the
caller's `Identity` and then these arguments (tests/wire/test_one_wire.py proves the
signatures are these structs). Transports that dispatch by an operation's name (TCP, the
line-JSON example) decode a request's arguments into the struct and call the method;
the HTTP plugin's route table names the same types, and /openapi.json is generated from them.
A new operation is one struct here and one method on Queen.

Argument names are the methods' keyword names (snake_case, as the TCP wire has always sent
them); the camelCase bodies are the `Decoded` shapes and the body structs the HTTP routes
name. The service's clock override (`now`) is never an argument: it exists for tests.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

import msgspec

from .admin import (
    DlqDeleted,
    DlqItemsJson,
    DlqReplayed,
    Overview,
    QueuesOverview,
    QueueSummaryAt,
    SwitchesJson,
    SwitchStates,
    TenantLimitsJson,
    TenantQuota,
    TenantQuotaList,
)
from .log import (
    Acks,
    AcksJson,
    DlqPage,
    OptionsJson,
    Popped,
    PushItemsJson,
    PushResult,
    TransactionJson,
    TransactionResult,
)
from .resources import (
    ConsumerGroupDeleted,
    ConsumerGroupDetail,
    ConsumerGroupSeek,
    ConsumerGroupSummary,
    GroupedQueues,
    LaggingPartition,
    LogMessage,
    MessageAction,
    MessagesPage,
    PartitionsList,
    QueueDeleted,
    QueueDepth,
    QueueDetail,
    StatusQueues,
    SystemMetrics,
    SystemStatus,
    WorkerMetrics,
)
from .schedules import (
    ScheduleDeleted,
    ScheduleRun,
    ScheduleSetJson,
    ScheduleSetResult,
    SchedulesPage,
    ScheduleView,
)
from .timers import (
    CancelPrefixResult,
    Histogram,
    TimerCount,
    TimerOpsJson,
    TimerPeek,
    TimerResult,
    TimersPage,
    TimersRead,
)
from .webhooks import (
    AttemptsPage,
    SecretAdded,
    SecretDeleted,
    TargetDeleted,
    TargetSetJson,
    TargetSetResult,
    TargetsPage,
    TargetView,
)

__all__ = ["OPERATIONS", "Arguments", "Operation"]


class Arguments(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The arguments of one operation, minus the caller's identity."""


# -- queues and messages -------------------------------------------------------------------------
class ConfigureQueue(Arguments):
    queue: str
    options: OptionsJson
    namespace: str | None = None
    task: str | None = None
    mode: str = "merge"


class Push(Arguments):
    items: PushItemsJson


class Pop(Arguments):
    queue: str | None = None
    partition: str | None = None
    group: str | None = None
    batch: int | None = None
    wait: bool = False
    timeout_ms: int = 30000
    auto_ack: bool = False
    subscription_mode: str | None = None
    namespace: str | None = None
    task: str | None = None
    partitions: int = 1


class AckArgs(Arguments):
    acks: AcksJson
    group: str | None = None


class ExtendLease(Arguments):
    lease_id: str


class Dlq(Arguments):
    queue: str
    partition: str | None = None
    group: str | None = None
    limit: int = 100
    offset: int = 0
    from_: dt.datetime | None = None
    to: dt.datetime | None = None


class Transaction(Arguments):
    body: TransactionJson
    # the caller's W3C trace context (docs/guides/tracing.md); HTTP sends it as headers
    traceparent: str | None = None
    tracestate: str | None = None


# -- timers --------------------------------------------------------------------------------------
class TimersApply(Arguments):
    body: TimerOpsJson
    # the caller's W3C trace context (docs/guides/tracing.md); HTTP sends it as headers
    traceparent: str | None = None
    tracestate: str | None = None


class TimerCancel(Arguments):
    queue: str
    timer_key: str
    txn: str | None = None


class TimerPeekArgs(Arguments):
    queue: str
    timer_key: str


class TimersList(Arguments):
    queue: str
    after: str | None = None
    limit: int | str | None = None


class TimersCount(Arguments):
    queue: str
    prefix: str


class TimersReadArgs(Arguments):
    queue: str
    mode: str | None = None
    prefix: str | None = None
    after: str | None = None
    limit: int | str | None = None
    window: str | None = None


class TimersHistogram(Arguments):
    queue: str
    window: str | None
    prefix: str | None = None


class TimerFireNow(Arguments):
    queue: str
    timer_key: str


class TimersCancelPrefix(Arguments):
    queue: str
    prefix: str
    limit: int | None = None


# -- recurring schedules -------------------------------------------------------------------------
class ScheduleSet(Arguments):
    body: ScheduleSetJson


class SchedulesList(Arguments):
    queue: str
    prefix: str | None = None
    after: str | None = None
    limit: int | None = None


class SchedulePeek(Arguments):
    queue: str
    schedule_key: str
    count: int | None = None
    runs: int | None = None


class ScheduleNamed(Arguments):
    queue: str
    schedule_key: str


# -- webhook targets -----------------------------------------------------------------------------
class WebhookTargetSet(Arguments):
    body: TargetSetJson


class WebhookTargetsList(Arguments):
    after: str | None = None
    limit: int | None = None


class WebhookTargetNamed(Arguments):
    name: str


class WebhookSecretAdd(Arguments):
    name: str
    secret: str | None = None


class WebhookSecretDelete(Arguments):
    name: str
    secret_id: str


class WebhookAttempts(Arguments):
    name: str
    webhook_id: str | None = None
    before: int | None = None
    limit: int | None = None


# -- operators -----------------------------------------------------------------------------------
class NoArguments(Arguments):
    pass


class SwitchesSet(Arguments):
    changes: SwitchesJson


class TenantQuotaGet(Arguments):
    tenant: str | None = None


class TenantQuotaSet(Arguments):
    tenant: str
    changes: TenantLimitsJson


class QueueSummaryArgs(Arguments):
    queue: str
    prefix: str | None = None


class DlqReplay(Arguments):
    items: DlqItemsJson
    mode: str
    delay_ms: int | None = None


class DlqDelete(Arguments):
    items: DlqItemsJson


# -- the official client's admin surface ----------------------------------------------------------
class QueueArgs(Arguments):
    queue: str


class PartitionsArgs(Arguments):
    queue: str | None = None


class QueueDepthArgs(Arguments):
    queue: str
    group: str | None = None


class StatusQueuesArgs(Arguments):
    limit: int = 100
    offset: int = 0
    namespace: str | None = None
    task: str | None = None


class MessagesListArgs(Arguments):
    queue: str
    partition: str | None = None
    status: str | None = None
    limit: int | None = None
    offset: int | None = None


class MessageRef(Arguments):
    partition_id: str
    transaction_id: str


class ConsumerGroupArgs(Arguments):
    group: str


class LaggingArgs(Arguments):
    min_lag_seconds: int = 60


class ConsumerGroupDeleteArgs(Arguments):
    group: str
    queue: str
    delete_metadata: bool = True


class ConsumerGroupSeekArgs(Arguments):
    group: str
    queue: str
    to_end: bool = False
    timestamp: str | None = None


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation: `Queen.<name>(ident, **arguments) -> answer`."""

    name: str
    arguments: type[Arguments]
    answer: Any

    def fields(self) -> tuple[str, ...]:
        return self.arguments.__struct_fields__

    def required(self) -> tuple[str, ...]:
        fields = self.arguments.__struct_fields__
        return fields[: len(fields) - len(self.arguments.__struct_defaults__)]


def _table(*ops: Operation) -> Mapping[str, Operation]:
    return {op.name: op for op in ops}


OPERATIONS: Mapping[str, Operation] = _table(
    Operation("configure_queue", ConfigureQueue, dict[str, Any]),
    Operation("push", Push, list[PushResult]),
    Operation("pop", Pop, Popped | None),
    Operation("ack", AckArgs, Acks),
    Operation("extend_lease", ExtendLease, dict[str, Any]),
    Operation("dlq", Dlq, DlqPage),
    Operation("transaction", Transaction, TransactionResult),
    Operation("timers_apply", TimersApply, list[TimerResult]),
    Operation("timer_cancel", TimerCancel, TimerResult),
    Operation("timer_peek", TimerPeekArgs, TimerPeek),
    Operation("timers_list", TimersList, TimersPage),
    Operation("timers_count", TimersCount, TimerCount),
    Operation("timers_read", TimersReadArgs, TimersRead),
    Operation("switches_get", NoArguments, SwitchStates),
    Operation("switches_set", SwitchesSet, SwitchStates),
    Operation("tenant_quota_get", TenantQuotaGet, TenantQuota),
    Operation("tenant_quota_set", TenantQuotaSet, TenantQuota),
    Operation("tenant_quotas_list", NoArguments, TenantQuotaList),
    Operation("queues_overview", NoArguments, QueuesOverview),
    Operation("queue_summary", QueueSummaryArgs, QueueSummaryAt),
    Operation("overview", NoArguments, Overview),
    Operation("timers_histogram", TimersHistogram, Histogram),
    Operation("timer_fire_now", TimerFireNow, TimerResult),
    Operation("timers_cancel_prefix", TimersCancelPrefix, CancelPrefixResult),
    Operation("dlq_replay", DlqReplay, DlqReplayed),
    Operation("dlq_delete", DlqDelete, DlqDeleted),
    Operation("resources_namespaces", NoArguments, GroupedQueues),
    Operation("resources_tasks", NoArguments, GroupedQueues),
    Operation("resources_partitions", PartitionsArgs, PartitionsList),
    Operation("queue_depth", QueueDepthArgs, QueueDepth),
    Operation("queue_delete", QueueArgs, QueueDeleted),
    Operation("status", NoArguments, SystemStatus),
    Operation("status_queues", StatusQueuesArgs, StatusQueues),
    Operation("queue_detail", QueueArgs, QueueDetail),
    Operation("messages_list", MessagesListArgs, MessagesPage),
    Operation("message_get", MessageRef, LogMessage),
    Operation("message_delete", MessageRef, MessageAction),
    Operation("message_retry", MessageRef, MessageAction),
    Operation("system_metrics", NoArguments, SystemMetrics),
    Operation("worker_metrics", NoArguments, WorkerMetrics),
    Operation("consumer_groups_list", NoArguments, list[ConsumerGroupSummary]),
    Operation("consumer_group_get", ConsumerGroupArgs, ConsumerGroupDetail),
    Operation("consumer_groups_lagging", LaggingArgs, list[LaggingPartition]),
    Operation("consumer_group_delete", ConsumerGroupDeleteArgs, ConsumerGroupDeleted),
    Operation("consumer_group_seek", ConsumerGroupSeekArgs, ConsumerGroupSeek),
    Operation("schedule_set", ScheduleSet, ScheduleSetResult),
    Operation("schedules_list", SchedulesList, SchedulesPage),
    Operation("schedule_peek", SchedulePeek, ScheduleView),
    Operation("schedule_pause", ScheduleNamed, ScheduleView),
    Operation("schedule_resume", ScheduleNamed, ScheduleView),
    Operation("schedule_delete", ScheduleNamed, ScheduleDeleted),
    Operation("schedule_run_now", ScheduleNamed, ScheduleRun),
    Operation("webhook_target_set", WebhookTargetSet, TargetSetResult),
    Operation("webhook_targets_list", WebhookTargetsList, TargetsPage),
    Operation("webhook_target_get", WebhookTargetNamed, TargetView),
    Operation("webhook_target_delete", WebhookTargetNamed, TargetDeleted),
    Operation("webhook_target_pause", WebhookTargetNamed, TargetView),
    Operation("webhook_target_resume", WebhookTargetNamed, TargetView),
    Operation("webhook_secret_add", WebhookSecretAdd, SecretAdded),
    Operation("webhook_secret_delete", WebhookSecretDelete, SecretDeleted),
    Operation("webhook_attempts", WebhookAttempts, AttemptsPage),
)
