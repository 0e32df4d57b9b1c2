"""The shop's command line: create or pay an order.

    python app.py --database-url URL create ORDER_ID [--amount 9.5] [--expire-after-ms 1800000]
                                                      [--pause-after order|timer]
    python app.py --database-url URL pay ORDER_ID

`--pause-after STEP` prints `paused after STEP` and waits for a line on standard input before
going on: the crash test kills the process there, inside the open transaction, to show that
nothing is left half-done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shop


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", required=True)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create")
    c.add_argument("order_id", type=int)
    c.add_argument("--amount", type=float, default=9.5)
    c.add_argument("--expire-after-ms", type=int, default=30 * 60 * 1000)
    c.add_argument("--pause-after", choices=["order", "timer"], default=None)
    pay = sub.add_parser("pay")
    pay.add_argument("order_id", type=int)
    ns = p.parse_args(argv)

    conn = await asyncpg.connect(
        ns.database_url, server_settings={"application_name": "order-expiry-app"}
    )
    try:
        await shop.create_schema(conn)
        if ns.command == "create":

            async def pause(step: str) -> None:
                if step == ns.pause_after:
                    print(f"paused after {step}", flush=True)
                    await asyncio.to_thread(sys.stdin.readline)

            timer = await shop.create_order(conn, ns.order_id, ns.amount, ns.expire_after_ms, pause)
            print(json.dumps({"order": ns.order_id, "timer": timer}), flush=True)
        else:
            print(json.dumps({"order": ns.order_id, "paid": await shop.pay(conn, ns.order_id)}))
    finally:
        await conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
