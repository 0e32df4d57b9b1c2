"""Schedule and cancel timers inside the caller's own database transaction.

The SQL API (migrations/026_timer_sql_api.sql, docs/guides/sql-api.md) is callable from any
driver; these helpers are its Python face, on whatever transaction the caller has open:

    async with conn.transaction():                      # asyncpg
        await conn.execute("INSERT INTO orders ...")
        await queen_timers.schedule(conn, "order-expiry", order_id, 30 * 60_000, {"id": 1})

`schedule` / `cancel` take an asyncpg connection or a psycopg 3 AsyncConnection;
`schedule_sync` / `cancel_sync` a psycopg 3 Connection (psycopg is the optional extra
`queen-timers[psycopg]`). They never commit, roll back or open a transaction of their own.

What they add over calling the SQL yourself: the payload is any JSON value or bytes; they
encrypt when given the broker's key (a queue that encrypts at rest refuses a clear payload
through SQL, which cannot hold the key) and zstd-compress when asked; and a refusal raises
`TimerRefused`, a QueenError carrying the wire's code, reason and status. As any SQL error, a
refusal aborts the caller's transaction (use a savepoint to go on after one).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

import msgspec
import zstandard

from . import tracing
from .crypto import Cipher, parse_key
from .db.queries import Q
from .errors import TimerRefused, refusal
from .settings import Settings

__all__ = [
    "TimerRefused",
    "cancel",
    "cancel_sync",
    "publish_limits",
    "refusal",
    "schedule",
    "schedule_sync",
    "tenancy",
    "warn_unbound_roles",
]

log = logging.getLogger("queen_timers.sqlapi")

_PLACEHOLDER = re.compile(r"\$\d+")


def _payload_bytes(payload: Any) -> bytes:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    return msgspec.json.encode(payload)


def _cipher(key: str | bytes | Cipher | None) -> Cipher | None:
    if key is None or isinstance(key, Cipher):
        return key
    raw = parse_key(key) if isinstance(key, str) else key
    return Cipher(raw) if raw else None


def _schedule_args(
    queue: str,
    timer_key: str,
    delay_ms: int,
    payload: Any,
    txn: str | None,
    partition: str | None,
    tenant: uuid.UUID | str | None,
    compress: bool,
    encryption_key: str | bytes | Cipher | None,
    wake: bool,
    traceparent: str | None,
    tracestate: str | None,
) -> tuple[object, ...]:
    data = _payload_bytes(payload)
    cipher = _cipher(encryption_key)
    zstd = encrypted = False
    if cipher is not None:
        # Encryption is outermost and the fire must not need the key, so an encrypted
        # payload is never also zstd (the broker does the same at schedule).
        data, encrypted = cipher.encrypt(data), True
    elif compress:
        data, zstd = zstandard.ZstdCompressor().compress(data), True
    t = None if tenant is None else uuid.UUID(str(tenant))
    if traceparent is None:
        # with the [otel] extra, the caller's current span (docs/guides/tracing.md)
        otel = tracing.api()
        carrier = otel.current() if otel is not None else None
        if carrier is not None:
            traceparent, tracestate = carrier
    return (
        queue,
        timer_key,
        delay_ms,
        data,
        txn,
        partition,
        t,
        zstd,
        encrypted,
        wake,
        traceparent,
        tracestate,
    )


def _is_asyncpg(conn: Any) -> bool:
    return type(conn).__module__.startswith("asyncpg")


def _psycopg_sql(sql: str) -> str:
    # The named statements number their parameters in order of appearance.
    return _PLACEHOLDER.sub("%s", sql)


def _translate(exc: BaseException) -> BaseException:
    """A refusal becomes TimerRefused; any other error is the driver's own."""
    state = getattr(exc, "sqlstate", None)
    diag = getattr(exc, "diag", None)  # psycopg
    message = diag.message_primary if diag is not None else getattr(exc, "message", str(exc))
    return refusal(state, message or "") or exc


async def _call(conn: Any, sql: str, args: tuple[object, ...]) -> dict[str, Any]:
    try:
        if _is_asyncpg(conn):
            text = await conn.fetchval(sql, *args)
        else:
            cur = await conn.execute(_psycopg_sql(sql), args)
            text = (await cur.fetchone())[0]
    except Exception as exc:
        translated = _translate(exc)
        if translated is exc:
            raise
        raise translated from exc
    answer: dict[str, Any] = json.loads(text)  # every SQL API function answers an object
    return answer


def _call_sync(conn: Any, sql: str, args: tuple[object, ...]) -> dict[str, Any]:
    try:
        text = conn.execute(_psycopg_sql(sql), args).fetchone()[0]
    except Exception as exc:
        translated = _translate(exc)
        if translated is exc:
            raise
        raise translated from exc
    answer: dict[str, Any] = json.loads(text)  # every SQL API function answers an object
    return answer


async def schedule(
    conn: Any,
    queue: str,
    timer_key: str,
    delay_ms: int,
    payload: Any,
    *,
    txn: str | None = None,
    partition: str | None = None,
    tenant: uuid.UUID | str | None = None,
    compress: bool = False,
    encryption_key: str | bytes | Cipher | None = None,
    wake: bool = True,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> dict[str, Any]:
    """Schedule (or reschedule) `(queue, timer_key)` to be delivered no earlier than `delay_ms`
    after this call, in the caller's open transaction: it exists when that transaction
    commits. `payload`: bytes as delivered, or any JSON value. `encryption_key`: the broker's
    QUEEN_ENCRYPTION_KEY (hex) or a Cipher, required by queues that encrypt at rest.
    `wake=False` for a transaction that will PREPARE TRANSACTION (no NOTIFY). `traceparent`
    (and `tracestate`): the W3C trace context stored with the timer, which its consumer gets
    (docs/guides/tracing.md); by default, with the `[otel]` extra, the current span's. Returns
    the wire's result: {ok, status: scheduled | rescheduled | too_late, txn, messageId, ...}."""
    args = _schedule_args(
        queue,
        timer_key,
        delay_ms,
        payload,
        txn,
        partition,
        tenant,
        compress,
        encryption_key,
        wake,
        traceparent,
        tracestate,
    )
    return await _call(conn, Q.sqlapi_schedule, args)


async def cancel(
    conn: Any,
    queue: str,
    timer_key: str,
    *,
    txn: str | None = None,
    tenant: uuid.UUID | str | None = None,
) -> dict[str, Any]:
    """Cancel `(queue, timer_key)` in the caller's open transaction. Returns {ok, status:
    cancelled | absent | too_late, txn}; `absent` means no longer pending, never "not
    delivered"."""
    t = None if tenant is None else uuid.UUID(str(tenant))
    return await _call(conn, Q.sqlapi_cancel, (queue, timer_key, txn, t))


def schedule_sync(
    conn: Any,
    queue: str,
    timer_key: str,
    delay_ms: int,
    payload: Any,
    *,
    txn: str | None = None,
    partition: str | None = None,
    tenant: uuid.UUID | str | None = None,
    compress: bool = False,
    encryption_key: str | bytes | Cipher | None = None,
    wake: bool = True,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> dict[str, Any]:
    """`schedule` on a psycopg 3 (sync) Connection."""
    args = _schedule_args(
        queue,
        timer_key,
        delay_ms,
        payload,
        txn,
        partition,
        tenant,
        compress,
        encryption_key,
        wake,
        traceparent,
        tracestate,
    )
    return _call_sync(conn, Q.sqlapi_schedule, args)


def cancel_sync(
    conn: Any,
    queue: str,
    timer_key: str,
    *,
    txn: str | None = None,
    tenant: uuid.UUID | str | None = None,
) -> dict[str, Any]:
    """`cancel` on a psycopg 3 (sync) Connection."""
    t = None if tenant is None else uuid.UUID(str(tenant))
    return _call_sync(conn, Q.sqlapi_cancel, (queue, timer_key, txn, t))


def limits(settings: Settings) -> dict[str, int]:
    """The limits the value rules apply (queen.log_timers_limits_v1 reads the published ones;
    a broker passes its own with each apply)."""
    return {
        "maxHorizonS": settings.timers_max_horizon_s,
        "maxPayloadBytes": settings.timers_max_payload_bytes,
        "notifyWithinMs": settings.sweeper_max_sleep_ms,
    }


def tenancy(settings: Settings) -> dict[str, Any]:
    """What the SQL API needs of the tenants' settings (migrations/030): the default cap of
    pending timers, whether this broker authenticates tokens (tenancy on), and whether an
    unbound role may act as the default tenant anyway."""
    return {
        "tenantMaxPending": settings.timers_tenant_max_pending,
        "tenancy": bool(settings.jwt_secret or settings.jwt_public_key),
        "allowUnboundRoles": settings.timers_sql_allow_unbound_roles,
    }


async def publish_limits(conn: Any, settings: Settings) -> None:
    """Boot: make the SQL API apply this broker's limits (a write only when they changed;
    other keys of the row, set by an operator, are kept), and warn about the producer roles
    no tenant binds. `conn` is a broker connection (its jsonb codec takes the dict)."""
    await conn.execute(Q.sqlapi_publish_limits, limits(settings) | tenancy(settings))
    await warn_unbound_roles(conn)


async def warn_unbound_roles(conn: Any) -> list[str]:
    """Where tenancy is on, log one warning naming the login roles that hold queen_producer
    without a tenant binding, and what the SQL API does with them; answers their names (none
    while tenancy is off: there every role is the default tenant's, as intended)."""
    policy = await conn.fetchrow(Q.sqlapi_unbound_policy)
    if not policy["tenancy"]:
        return []
    names = [r["name"] for r in await conn.fetch(Q.sqlapi_unbound_roles)]
    if names:
        what = (
            "are refused (42501 timers_role_unbound)"
            if policy["refused"]
            else "act as the default tenant (QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES=true)"
        )
        log.warning(
            "SQL API roles granted queen_producer with no tenant binding %s: %s; bind each in "
            "queen.timer_producer_roles (docs/guides/sql-api.md)",
            what,
            ", ".join(names),
        )
    return names
