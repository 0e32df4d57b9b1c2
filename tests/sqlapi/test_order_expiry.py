"""examples/order_expiry: the application killed between its two writes leaves nothing half
done; a committed order expires exactly once; a paid one never does."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
from timers.helpers import timer_row

from queen_timers.identity import Identity
from queen_timers.timers import fire

from .test_schedule_cancel import later

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_expiry"
sys.path.insert(0, str(EXAMPLE))

import consumer  # noqa: E402 - the example's modules, from its directory
import shop  # noqa: E402


async def app(db_url: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE / "app.py"),
        "--database-url",
        db_url,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def app_backends_gone(conn, timeout: float = 30.0) -> None:
    """Until the server has ended the killed application's session (its own signal)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'order-expiry-app'"
        " AND datname = current_database()"
    ):
        assert loop.time() < end, "the killed application's session never ended"
        await asyncio.sleep(0.02)


async def order(conn, order_id: int):
    return await conn.fetchrow("SELECT * FROM shop.orders WHERE id = $1", order_id)


@pytest.mark.parametrize("step", ["order", "timer"])
async def test_killed_between_the_writes_leaves_nothing(db_url, conn, step):
    await shop.create_schema(conn)
    proc = await app(db_url, "create", "1", "--pause-after", step)
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert line.decode().strip() == f"paused after {step}"
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL
    await app_backends_gone(conn)
    assert await order(conn, 1) is None
    assert await timer_row(conn, shop.EXPIRY_QUEUE, shop.expiry_key(1)) is None
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_a_committed_order_expires_once_and_a_paid_one_never(db_url, queen, conn):
    await shop.create_schema(conn)
    for order_id in (1, 2, 3):
        proc = await app(db_url, "create", str(order_id), "--expire-after-ms", "1000")
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        assert json.loads(out)["timer"]["status"] == "scheduled"
        assert (await order(conn, order_id))["status"] == "pending"
    # order 2 is paid in time: its expiry is cancelled in the payment's transaction
    proc = await app(db_url, "pay", "2")
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert json.loads(out)["paid"] is True
    assert await timer_row(conn, shop.EXPIRY_QUEUE, shop.expiry_key(2)) is None

    assert (await fire.drain(queen.rt, now=later(60))).fired == 2  # orders 1 and 3
    # order 3 is paid after its expiry fired and before the consumer saw it: it stays paid
    assert await shop.pay(conn, 3) is True

    ident = Identity(subject="consumer")
    assert await consumer.handle_once(queen, conn, ident) == 2
    assert (await order(conn, 1))["status"] == "expired"
    assert (await order(conn, 2))["status"] == "paid"
    assert (await order(conn, 3))["status"] == "paid"
    assert await consumer.handle_once(queen, conn, ident) == 0  # acked: nothing comes back
    assert await shop.expire(conn, 1) is False  # and a redelivery would change nothing
