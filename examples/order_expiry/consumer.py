"""The expiry consumer: pops the fired expiries from the broker and cancels unpaid orders.

    python consumer.py --database-url URL

It runs a broker in this process (the service API, with its sweeper, so the timers fire) and
pops `order-expiry`. Each message is handled and then acknowledged: a crash between the two
redelivers it, and `shop.expire` is idempotent, so an order is expired at most once and an
expiry is never lost.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shop

from queen_timers import Identity, Queen


async def handle_once(queen: Queen, conn: asyncpg.Connection, ident: Identity, **pop: Any) -> int:
    """Pop one batch of expiries, expire the orders still pending, ack. Returns how many
    messages were handled."""
    res = await queen.pop(ident, shop.EXPIRY_QUEUE, batch=100, **pop)
    messages = res["messages"] if res else []  # None: nothing to pop (the wire's 204)
    for m in messages:
        await shop.expire(conn, int(m["data"]["orderId"]))
    if messages:
        await queen.ack(
            ident,
            [
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "leaseId": m["leaseId"],
                    "status": "completed",
                }
                for m in messages
            ],
        )
    return len(messages)


async def main(url: str) -> None:
    ident = Identity(subject="order-expiry-consumer")
    async with Queen(database_url=url) as queen:
        conn = await asyncpg.connect(url)
        try:
            await shop.create_schema(conn)
            while True:
                await handle_once(queen, conn, ident, wait=True, timeout_ms=30_000)
        finally:
            await conn.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", required=True)
    asyncio.run(main(p.parse_args().database_url))
