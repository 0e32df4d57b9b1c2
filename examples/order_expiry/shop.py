"""A small shop: an order and its expiry timer are written in ONE transaction.

The order row and the "expire in N minutes" timer commit together or not at all, because the
timer is scheduled through the SQL API (queen.timer_schedule_v1) on the shop's own connection,
inside the shop's own transaction. Paying cancels the timer in the payment's transaction. The
consumer (consumer.py) pops the expiries and cancels the orders still unpaid.

This is application code, so its SQL sits where an application keeps it: here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

import queen_timers

EXPIRY_QUEUE = "order-expiry"

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS shop;
CREATE TABLE IF NOT EXISTS shop.orders (
  id         bigint PRIMARY KEY,
  amount     numeric NOT NULL,
  status     text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid', 'expired')),
  created_at timestamptz NOT NULL DEFAULT now()
);
"""


def expiry_key(order_id: int) -> str:
    return f"order-{order_id}"


async def create_schema(conn: asyncpg.Connection) -> None:
    await conn.execute(SCHEMA)


async def create_order(
    conn: asyncpg.Connection,
    order_id: int,
    amount: float,
    expire_after_ms: int,
    pause: Callable[[str], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Insert the order and schedule its expiry, in one transaction. `pause(step)` is a hook
    called between the steps ("order", "timer"): the crash test kills the process there."""
    async with conn.transaction():
        await conn.execute("INSERT INTO shop.orders (id, amount) VALUES ($1, $2)", order_id, amount)
        if pause:
            await pause("order")
        timer = await queen_timers.schedule(
            conn,
            EXPIRY_QUEUE,
            expiry_key(order_id),
            expire_after_ms,
            {"orderId": order_id},
            txn=f"{expiry_key(order_id)}-expiry",
        )
        if pause:
            await pause("timer")
    return timer


async def pay(conn: asyncpg.Connection, order_id: int) -> bool:
    """Mark the order paid and cancel its expiry, in one transaction. False when the order is
    no longer pending (it expired first)."""
    async with conn.transaction():
        status = await conn.fetchval(
            "UPDATE shop.orders SET status = 'paid' WHERE id = $1 AND status = 'pending'"
            " RETURNING status",
            order_id,
        )
        if status is None:
            return False
        # `absent` is fine here: the expiry may have fired already; the consumer then finds
        # the order paid and leaves it alone.
        await queen_timers.cancel(conn, EXPIRY_QUEUE, expiry_key(order_id))
    return True


async def expire(conn: asyncpg.Connection, order_id: int) -> bool:
    """Expire the order if it is still unpaid. Idempotent: a redelivered expiry changes
    nothing."""
    done = await conn.fetchval(
        "UPDATE shop.orders SET status = 'expired' WHERE id = $1 AND status = 'pending'"
        " RETURNING id",
        order_id,
    )
    return done is not None
