"""The webhook targets' wire: the target body, and the answers of the target, secret and
attempt routes (docs/guides/webhooks.md).

A target's signing secrets are write-only: a view names each by id and creation instant, and
a value appears once, in the answer that generated it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec

from .decoded import Decoded

__all__ = [
    "AttemptRow",
    "AttemptsPage",
    "SecretAdded",
    "SecretBody",
    "SecretDeleted",
    "SecretMeta",
    "TargetBody",
    "TargetDeleted",
    "TargetSetJson",
    "TargetSetResult",
    "TargetView",
    "TargetsPage",
]

Instant = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
Name = Annotated[
    str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^(?!\.{1,2}$)[A-Za-z0-9._:-]+$")
]


class TargetBody(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """Create or replace a webhook target: where the messages of `queue` are sent."""

    name: Name
    queue: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
    url: Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = {}
    timeout_ms: Annotated[int, msgspec.Meta(ge=100, le=120_000)] = 10_000
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    max_age_ms: Annotated[int, msgspec.Meta(ge=1_000, le=30 * 86_400_000)] = 86_400_000
    backoff_ms: Annotated[int, msgspec.Meta(ge=10, le=3_600_000)] = 1_000
    max_backoff_ms: Annotated[int, msgspec.Meta(ge=10, le=86_400_000)] = 3_600_000
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=256)] = 8
    rate_per_s: Annotated[float, msgspec.Meta(gt=0, le=100_000)] | None = None
    paused: bool = False
    secret: (
        Annotated[
            str,
            msgspec.Meta(description="a signing secret to add (whsec_ + base64 of 24-64 bytes)"),
        ]
        | None
    ) = None


# Decoded by the core (queen_timers/webhooks/targets.py), whose refusals carry its reasons.
TargetSetJson = Annotated[Any, Decoded(TargetBody)]


class SecretBody(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """Add a signing secret: the given one, or (without it) a generated one."""

    secret: str | None = None


class SecretMeta(TypedDict):
    id: str
    createdAt: Instant


class TargetView(TypedDict):
    name: str
    queue: str
    url: str
    method: str
    headers: dict[str, str]
    timeoutMs: int
    maxAttempts: int
    maxAgeMs: int
    backoffMs: int
    maxBackoffMs: int
    concurrency: int
    ratePerS: float | None
    paused: bool
    secrets: list[SecretMeta]
    createdAt: Instant
    updatedAt: Instant


class GeneratedSecret(TypedDict):
    id: str
    value: str


class TargetSetResult(TypedDict):
    status: Literal["created", "updated"]
    target: TargetView
    secret: NotRequired[GeneratedSecret]


class TargetsPage(TypedDict):
    targets: list[TargetView]
    truncated: bool
    nextAfter: str | None


class TargetDeleted(TypedDict):
    name: str
    deleted: bool


class SecretAdded(TypedDict):
    target: str
    id: str
    createdAt: Instant
    value: NotRequired[str]


class SecretDeleted(TypedDict):
    target: str
    id: str
    deleted: bool


class AttemptRow(TypedDict):
    id: int
    webhookId: str
    attempt: int
    at: Instant
    status: int | None
    latencyMs: int
    outcome: Literal["delivered", "retry", "dead"]
    error: str | None


class AttemptsPage(TypedDict):
    target: str
    attempts: list[AttemptRow]
    nextBefore: int | None
