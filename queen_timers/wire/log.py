"""The log's wire (docs/design/client-wire.md): queues, push, pop, ack, lease, dead letters and
the transaction wire. Bodies are structs that document the shapes; their items are decoded by
the core (each refused with its own code, per item where the wire answers per item)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec

from .decoded import Decoded
from .timers import TimerOp

__all__ = [
    "Ack",
    "AckBatchBody",
    "AckBody",
    "AckResult",
    "Acks",
    "AcksJson",
    "ConfigureBody",
    "DlqPage",
    "Error",
    "OptionsJson",
    "Popped",
    "PushBody",
    "PushItem",
    "PushItemsJson",
    "PushResult",
    "TransactionBody",
    "TransactionFailure",
    "TransactionJson",
    "TransactionResult",
]


class Error(msgspec.Struct):
    """The flat error envelope of every refusal."""

    error: str
    reason: str
    detail: str


class ConfigureBody(msgspec.Struct):
    """Options nested under `options` (the client) or at the top level (the reference)."""

    queue: str
    namespace: str | None = None
    task: str | None = None
    options: dict[str, Any] | None = None
    mode: Literal["merge", "replace"] | None = None


OptionsJson = Annotated[Any, Decoded(dict[str, Any] | None)]


class PushItem(msgspec.Struct):
    queue: str
    partition: str | None = None
    payload: Any = None
    data: Any = None
    transactionId: str | None = None


class PushBody(msgspec.Struct):
    items: list[PushItem]


PushItemsJson = Annotated[Any, Decoded(list[PushItem])]


class PushResult(TypedDict):
    """One item's result, aligned with the input."""

    status: str
    index: NotRequired[int]
    message_id: NotRequired[str | None]
    transaction_id: NotRequired[str | None]
    queueName: NotRequired[str]
    partition: NotRequired[str]
    partitionId: NotRequired[str]
    offset: NotRequired[int]


class Popped(TypedDict):
    """A delivery: its messages and, without autoAck, the lease that covers them."""

    messages: list[dict[str, Any]]


class DlqPage(TypedDict):
    """A page of dead letters, newest first."""

    messages: list[dict[str, Any]]
    total: NotRequired[int]


class Ack(msgspec.Struct):
    transactionId: str
    partitionId: str
    status: str | None = None
    error: str | None = None
    leaseId: str | None = None


class AckBody(Ack):
    consumerGroup: str | None = None


class AckBatchBody(msgspec.Struct):
    acknowledgments: list[Ack]
    consumerGroup: str | None = None


AcksJson = Annotated[Any, Decoded(list[Ack])]
AckResult = dict[str, Any]
Acks = list[AckResult]


class TransactionOp(msgspec.Struct):
    type: Literal["push", "ack"]


class TransactionBody(msgspec.Struct):
    """Pushes and acks, and a `timers` rider, in ONE PostgreSQL transaction."""

    operations: list[TransactionOp]
    requiredLeases: list[str] | None = None
    timers: list[TimerOp] | None = None


TransactionJson = Annotated[Any, Decoded(TransactionBody)]


class TransactionResult(TypedDict):
    success: bool
    results: list[Any]
    transactionId: NotRequired[str]


class TransactionFailure(msgspec.Struct):
    """The envelope, with the bundle's verdict beside it."""

    error: str
    reason: str
    detail: str
    success: Literal[False]
    results: Annotated[list[Any], msgspec.Meta(max_length=0)]
