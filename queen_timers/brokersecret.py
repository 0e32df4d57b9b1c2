"""The brokers' shared secret (migrations/031_broker_secret.sql): drawn by the first boot, read
by every broker, and by no other role. It keys what the brokers show others without naming a
tenant: the signatures and queue digests of their notifications (notify.py) and the tenant
label of their metrics."""

from __future__ import annotations

import hashlib
import hmac
import uuid

import asyncpg

from .db.queries import Q

__all__ = ["load", "mac", "tenant_label"]


async def load(pool: asyncpg.Pool) -> bytes:
    return bytes(await pool.fetchval(Q.broker_secret))


def mac(secret: bytes, message: str) -> str:
    """HMAC-SHA256, the first 128 bits as hex: queen._broker_mac_v1 computes the same."""
    return hmac.new(secret, message.encode(), hashlib.sha256).digest()[:16].hex()


def tenant_label(secret: bytes, tenant: uuid.UUID) -> str:
    """A tenant's name in metrics labels: stable across brokers and restarts, not the id.
    An operator finds it with SQL: SELECT queen.tenant_metrics_label_v1('<tenant uuid>')."""
    return "t-" + mac(secret, f"m|{tenant}")[:12]
