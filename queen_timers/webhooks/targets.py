"""Webhook targets as service calls: set, list, get, delete; add and remove signing secrets;
the attempts record. And the two calls of a delivery plugin: every target with its secrets
unsealed, and the writing of attempts.

Refusals: 400 `webhooks_bad_request` (reason `webhook_*`), 400 `encryption_unavailable` when
the broker has no QUEEN_ENCRYPTION_KEY to seal a secret with, 404 `webhook_target_not_found`,
409 `webhook_queue_taken` (one target per queue).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from ..db import Q
from ..errors import QueenError
from ..identity import Identity
from ..runtime import Runtime
from ..timers.recurrence import iso
from ..validate import check_name
from ..wire.webhooks import TargetBody
from . import secrets as secret_text
from .netguard import Blocked, Networks, check_url, parse_networks

__all__ = [
    "Attempt",
    "Target",
    "all_targets",
    "attempts",
    "delete",
    "get",
    "list_targets",
    "networks",
    "pause",
    "record_attempts",
    "secret_add",
    "secret_delete",
    "trim_attempts",
    "upsert",
]

MAX_LIST = 1000
MAX_ATTEMPTS_PAGE = 1000
MAX_HEADERS = 32
MAX_SECRETS = 8
ERROR_CHARS = 1000
# Headers the delivery writes itself: a target may not set or forge them.
_RESERVED = frozenset(
    {
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "content-length",
        "host",
        "transfer-encoding",
        "connection",
    }
)
_NAME = re.compile(r"(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
# Header values a view shows as "***": credentials people put in headers are not shown back.
_SENSITIVE = re.compile(r"auth|cookie|token|secret|key|password|signature", re.I)


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("webhooks_bad_request", reason, detail, 400)


def _not_found(name: str) -> QueenError:
    return QueenError(
        "webhook_target_not_found",
        "webhook_target_not_found",
        f"no webhook target {name!r} in this tenant",
        404,
    )


@dataclasses.dataclass(frozen=True)
class Target:
    """A target as the delivery plugin sends with it: its secrets unsealed."""

    tenant: uuid.UUID
    name: str
    queue: str
    url: str
    method: str
    headers: dict[str, str]
    timeout_ms: int
    max_attempts: int
    max_age_ms: int
    backoff_ms: int
    max_backoff_ms: int
    concurrency: int
    rate_per_s: float | None
    paused: bool
    secrets: tuple[str, ...]
    updated_at: dt.datetime


@dataclasses.dataclass(frozen=True)
class Attempt:
    tenant: uuid.UUID
    target: str
    webhook_id: str
    attempt: int
    at: dt.datetime
    status: int | None
    latency_ms: int
    outcome: str  # delivered | retry | dead
    error: str | None


def networks(rt: Runtime) -> Networks:
    return Networks(parse_networks(rt.settings.webhook_allow_networks))


def _target_name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise _bad(
            "webhook_bad_name",
            "a target name is 1 to 128 letters, digits, '.', '_', ':' or '-', "
            "and not '.' or '..' (a URL path segment drops them)",
        )
    return value


def _decode(body: Any) -> TargetBody:
    if not isinstance(body, dict):
        raise _bad("webhook_bad_body", "the body is an object")
    try:
        return msgspec.convert(body, TargetBody)
    except msgspec.ValidationError as exc:
        raise _bad("webhook_bad_field", str(exc)) from None


def _check_headers(headers: dict[str, str]) -> None:
    if len(headers) > MAX_HEADERS:
        raise _bad("webhook_bad_header", f"at most {MAX_HEADERS} headers")
    for name, value in headers.items():
        if not _TOKEN.match(name):
            raise _bad("webhook_bad_header", f"{name!r} is not a header name")
        if name.lower() in _RESERVED:
            raise _bad("webhook_reserved_header", f"{name} is written by the delivery itself")
        if any(c in value for c in "\r\n\x00") or len(value) > 8192:
            raise _bad(
                "webhook_bad_header",
                f"the value of {name} has a line break or NUL, or is over 8192 characters",
            )


def _sealer(rt: Runtime) -> Any:
    if rt.cipher is None:
        raise QueenError(
            "encryption_unavailable",
            "encryption_key_missing",
            "webhook signing secrets are stored sealed with QUEEN_ENCRYPTION_KEY; this broker "
            "has none configured",
            400,
        )
    return rt.cipher


def _view(row: Any) -> dict[str, Any]:
    headers: dict[str, str] = row["headers"]
    return {
        "name": row["name_text"],
        "queue": row["queue_text"],
        "url": row["url"],
        "method": row["method"],
        "headers": {k: ("***" if _SENSITIVE.search(k) else v) for k, v in headers.items()},
        "timeoutMs": row["timeout_ms"],
        "maxAttempts": row["max_attempts"],
        "maxAgeMs": row["max_age_ms"],
        "backoffMs": row["backoff_ms"],
        "maxBackoffMs": row["max_backoff_ms"],
        "concurrency": row["concurrency"],
        "ratePerS": row["rate_per_s"],
        "paused": row["paused"],
        "secrets": row["secrets"],
        "createdAt": iso(row["created_at"]),
        "updatedAt": iso(row["updated_at"]),
    }


async def _one(conn: Any, tenant: uuid.UUID, name: str) -> dict[str, Any]:
    row = await conn.fetchrow(Q.webhook_targets_list, tenant, name, None, 1)
    if row is None:
        raise _not_found(name)
    return _view(row)


async def upsert(rt: Runtime, ident: Identity, body: Any) -> dict[str, Any]:
    """Create or replace a target (every field but `secret` is replaced). A new target without
    a `secret` gets a generated one, shown in this answer only."""
    t = _decode(body)
    check_name(t.queue, "queue", "webhook_bad_queue")
    try:
        check_url(t.url, networks(rt))
    except Blocked as exc:
        raise _bad("webhook_url_refused", str(exc)) from None
    _check_headers(t.headers)
    if t.max_backoff_ms < t.backoff_ms:
        raise _bad("webhook_bad_backoff", "maxBackoffMs must be at least backoffMs")
    given = None
    if t.secret is not None:
        try:
            secret_text.parse(t.secret)
        except secret_text.SecretError as exc:
            raise _bad("webhook_bad_secret", str(exc)) from None
        given = t.secret
    generated: dict[str, str] | None = None
    async with rt.pool.acquire() as conn, conn.transaction():
        owner = await conn.fetchval(Q.webhook_target_queue_owner, ident.tenant, t.queue, t.name)
        if owner is not None:
            raise QueenError(
                "webhook_queue_taken",
                "webhook_queue_taken",
                f"queue {t.queue!r} is already delivered by target {owner!r}: one target per "
                "queue (a target's retries re-enter its queue)",
                409,
            )
        created = await conn.fetchval(
            Q.webhook_target_upsert,
            ident.tenant,
            t.name,
            t.queue,
            t.url,
            t.method,
            t.headers,
            t.timeout_ms,
            t.max_attempts,
            t.max_age_ms,
            t.backoff_ms,
            t.max_backoff_ms,
            t.concurrency,
            t.rate_per_s,
            t.paused,
        )
        if given is None and created:
            given = secret_text.generate()
            generated = {"value": given}
        if given is not None:  # an update without a secret needs no key: nothing is sealed
            await _add_secret(conn, _sealer(rt), ident.tenant, t.name, given, generated)
        view = await _one(conn, ident.tenant, t.name)
    answer: dict[str, Any] = {"status": "created" if created else "updated", "target": view}
    if generated is not None:
        answer["secret"] = {"id": generated["id"], "value": generated["value"]}
    return answer


async def _add_secret(
    conn: Any,
    cipher: Any,
    tenant: uuid.UUID,
    target: str,
    value: str,
    shown: dict[str, str] | None,
) -> tuple[str, str]:
    held = await conn.fetchval(Q.webhook_secret_count, tenant, target)
    if held >= MAX_SECRETS:
        raise _bad(
            "webhook_too_many_secrets",
            f"a target holds at most {MAX_SECRETS} secrets; delete an old one first",
        )
    sid = secret_text.new_id()
    created = await conn.fetchval(
        Q.webhook_secret_insert, tenant, target, sid, secret_text.seal(cipher, value)
    )
    if shown is not None:
        shown["id"] = sid
    return sid, created


async def list_targets(
    rt: Runtime, ident: Identity, *, after: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    n = MAX_LIST if limit is None else limit
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LIST:
        raise _bad("webhook_bad_limit", f"limit must be an integer from 1 to {MAX_LIST}")
    if after is not None:
        _target_name(after)
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(Q.webhook_targets_list, ident.tenant, None, after, n + 1)
    views = [_view(r) for r in rows[:n]]
    truncated = len(rows) > n
    return {
        "targets": views,
        "truncated": truncated,
        "nextAfter": views[-1]["name"] if truncated else None,
    }


async def get(rt: Runtime, ident: Identity, name: str) -> dict[str, Any]:
    name = _target_name(name)
    async with rt.pool.acquire() as conn:
        return await _one(conn, ident.tenant, name)


async def delete(rt: Runtime, ident: Identity, name: str) -> dict[str, Any]:
    """Delete a target and its secrets; its queue and what is in it stay (attempts stay until
    trimmed)."""
    name = _target_name(name)
    async with rt.pool.acquire() as conn:
        queue = await conn.fetchval(Q.webhook_target_delete, ident.tenant, name)
    return {"name": name, "deleted": queue is not None}


async def pause(rt: Runtime, ident: Identity, name: str, paused: bool) -> dict[str, Any]:
    """Pause or resume a target's delivery (its messages wait in its queue meanwhile)."""
    name = _target_name(name)
    async with rt.pool.acquire() as conn, conn.transaction():
        if await conn.fetchval(Q.webhook_target_pause, ident.tenant, name, paused) is None:
            raise _not_found(name)
        return await _one(conn, ident.tenant, name)


async def secret_add(
    rt: Runtime, ident: Identity, name: str, secret: str | None = None
) -> dict[str, Any]:
    """Add a signing secret (rotation: every secret signs until it is deleted). Without one,
    a secret is generated and shown in this answer only."""
    name = _target_name(name)
    cipher = _sealer(rt)
    if secret is not None:
        try:
            secret_text.parse(secret)
        except secret_text.SecretError as exc:
            raise _bad("webhook_bad_secret", str(exc)) from None
    value = secret if secret is not None else secret_text.generate()
    async with rt.pool.acquire() as conn, conn.transaction():
        if await conn.fetchval(Q.webhook_target_lock, ident.tenant, name) is None:
            raise _not_found(name)
        sid, created = await _add_secret(conn, cipher, ident.tenant, name, value, None)
    answer: dict[str, Any] = {"target": name, "id": sid, "createdAt": created}
    if secret is None:
        answer["value"] = value
    return answer


async def secret_delete(rt: Runtime, ident: Identity, name: str, secret_id: str) -> dict[str, Any]:
    """Remove a secret. The last one cannot go: a target always signs."""
    name = _target_name(name)
    if not isinstance(secret_id, str) or not secret_id:
        raise _bad("webhook_bad_secret_id", "a secret id is a non-empty string")
    async with rt.pool.acquire() as conn, conn.transaction():
        if await conn.fetchval(Q.webhook_target_lock, ident.tenant, name) is None:
            raise _not_found(name)
        held = await conn.fetchval(Q.webhook_secret_count, ident.tenant, name)
        gone = await conn.fetchval(Q.webhook_secret_delete, ident.tenant, name, secret_id)
        if gone is not None and held <= 1:
            raise _bad(
                "webhook_last_secret",
                "a target keeps at least one signing secret; add the new one first",
            )
    return {"target": name, "id": secret_id, "deleted": gone is not None}


async def attempts(
    rt: Runtime,
    ident: Identity,
    name: str,
    *,
    webhook_id: str | None = None,
    before: int | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The newest attempts of a target (or of one webhook id), newest first, keyset by id."""
    name = _target_name(name)
    if webhook_id is not None and (not isinstance(webhook_id, str) or len(webhook_id) > 200):
        raise _bad("webhook_bad_webhook_id", "webhookId is a string of at most 200 characters")
    n = 100 if limit is None else limit
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_ATTEMPTS_PAGE:
        raise _bad("webhook_bad_limit", f"limit must be an integer from 1 to {MAX_ATTEMPTS_PAGE}")
    if before is not None and (isinstance(before, bool) or not isinstance(before, int)):
        raise _bad("webhook_bad_cursor", "before is an attempt id (an integer)")
    async with rt.pool.acquire() as conn:
        if await conn.fetchval(Q.webhook_target_exists, ident.tenant, name) is None:
            raise _not_found(name)
        rows = await conn.fetch(
            Q.webhook_attempts_list, ident.tenant, name, webhook_id, before, n + 1
        )
    page = [
        {
            "id": r["id"],
            "webhookId": r["webhook_id"],
            "attempt": r["attempt"],
            "at": iso(r["at"]),
            "status": r["status"],
            "latencyMs": r["latency_ms"],
            "outcome": r["outcome"],
            "error": r["error"],
        }
        for r in rows[:n]
    ]
    return {
        "target": name,
        "attempts": page,
        "nextBefore": page[-1]["id"] if len(rows) > n else None,
    }


# -- the delivery plugin's calls ----------------------------------------------------------------
async def all_targets(rt: Runtime) -> list[Target]:
    """Every tenant's targets with their secrets unsealed (for the delivery plugin: never a
    wire operation). A target whose secrets cannot be unsealed (the key changed) is left out."""
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(Q.webhook_targets_all)
        sealed = await conn.fetch(Q.webhook_secrets_all)
    cipher = rt.cipher
    keys: dict[tuple[uuid.UUID, str], list[str]] = {}
    for s in sealed:
        if cipher is None:
            break
        try:
            value = secret_text.unseal(cipher, s["sealed"])
        except Exception:  # noqa: BLE001 - a key that does not open it: the target is skipped
            continue
        keys.setdefault((s["tenant_id"], s["target"]), []).append(value)
    out = []
    for r in rows:
        held = keys.get((r["tenant_id"], r["name_text"]))
        if not held:
            continue
        out.append(
            Target(
                tenant=r["tenant_id"],
                name=r["name_text"],
                queue=r["queue_text"],
                url=r["url"],
                method=r["method"],
                headers=dict(r["headers"]),
                timeout_ms=r["timeout_ms"],
                max_attempts=r["max_attempts"],
                max_age_ms=r["max_age_ms"],
                backoff_ms=r["backoff_ms"],
                max_backoff_ms=r["max_backoff_ms"],
                concurrency=r["concurrency"],
                rate_per_s=r["rate_per_s"],
                paused=r["paused"],
                secrets=tuple(held),
                updated_at=r["updated_at"],
            )
        )
    return out


async def record_attempts(rt: Runtime, rows: Sequence[Attempt]) -> None:
    """Write attempts in one statement."""
    if not rows:
        return
    cols: list[list[Any]] = [[] for _ in range(9)]
    for a in rows:
        err = a.error[:ERROR_CHARS] if a.error is not None else None
        values = (a.tenant, a.target, a.webhook_id, a.attempt, a.at, a.status, a.latency_ms)
        for i, v in enumerate((*values, a.outcome, err)):
            cols[i].append(v)
    async with rt.pool.acquire() as conn:
        await conn.execute(Q.webhook_attempts_insert, *cols)


async def trim_attempts(rt: Runtime, tenant: uuid.UUID, target: str, keep: int) -> None:
    """Keep a target's newest `keep` attempts."""
    async with rt.pool.acquire() as conn:
        await conn.execute(Q.webhook_attempts_trim, tenant, target, keep)
