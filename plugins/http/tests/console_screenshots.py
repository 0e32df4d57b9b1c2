"""Screenshots of the operator console for docs/guides/console.md, at a desktop (1280 px) and
a narrow (400 px) width.

    python plugins/http/tests/console_screenshots.py [OUT_DIR]   # default docs/guides/assets

Starts the embedded PostgreSQL in a temporary directory, a broker with the HTTP transport and
no sweeper (so the overdue timers stay overdue for the picture), seeds a few queues with
timers spread over the next 90 days, some dead letters and two webhook targets with their
attempts, and drives Debian's chromium
through the same helpers as the browser tests.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from console_browser import Console, find_chromium, start_driver

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.db import EmbeddedPostgres
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.testing.db import TestDatabases
from queen_timers.timers import store
from queen_timers.webhooks.targets import Attempt

ROOT = Path(__file__).resolve().parents[3]
WIDTHS = {"desktop": 1280, "narrow": 400}
MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR


def _op(queue: str, key: str, delay_ms: float, doc: dict) -> dict:
    payload = base64.b64encode(json.dumps(doc).encode()).decode()
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": f"txn-{key}",
        "payload": payload,
    }


async def seed(queen: Queen, ident: Identity) -> None:
    ops = []
    for i in range(240):  # order expiries over the next day, denser in the first hours
        delay = (i / 240) ** 1.8 * DAY - 4 * MIN
        ops.append(_op("orders", f"order:{1000 + i}/expire", delay, {"order": 1000 + i}))
    for i in range(60):  # reminders over the next hour
        ops.append(_op("emails", f"reminder:user-{i:03}", (i + 1) * MIN, {"user": i}))
    for i in range(90):  # reports over the next 90 days
        ops.append(_op("reports", f"report:2030-{i:02}", (i + 0.5) * DAY, {"report": i}))
    for i in range(0, len(ops), 256):
        await queen.timers_apply(ident, ops[i : i + 256])
    for n in range(3):
        await queen.push(ident, [{"queue": "orders", "payload": {"order": 900 + n}}])
        got = await queen.pop(ident, "orders", batch=1)
        m = got["messages"][0]
        await queen.ack(
            ident,
            [
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "leaseId": m["leaseId"],
                    "status": "dlq",
                    "error": f"payment gateway refused order {900 + n}",
                }
            ],
        )
    # A timer whose fire failed five times: its dead letter names the timer.
    key = "order:0999/expire"
    await queen.timers_apply(ident, [_op("orders", key, -HOUR, {"order": 999})])
    async with queen.rt.pool.acquire() as conn:
        await conn.execute(
            "UPDATE queen.log_timers SET attempts = 5,"
            " last_error = 'permanent: order 999 no longer exists' WHERE timer_key = $1",
            key,
        )
        await store.dlq(conn, [ident.tenant], ["orders"], [key], [{"order": 999}], 5, None)


async def seed_webhooks(queen: Queen, ident: Identity) -> None:
    await queen.webhook_target_set(
        ident,
        {
            "name": "billing",
            "queue": "invoices",
            "url": "https://billing.example.com/hooks/queen",
            "headers": {"Authorization": "Bearer demo", "X-Team": "billing"},
            "concurrency": 4,
            "ratePerS": 50,
        },
    )
    await queen.webhook_secret_add(ident, "billing")
    await queen.webhook_target_set(
        ident,
        {
            "name": "crm-sync",
            "queue": "contacts",
            "url": "https://crm.example.net/api/v2/events",
            "method": "PUT",
            "paused": True,
        },
    )
    now = dt.datetime.now(dt.UTC)
    rows = []
    for i in range(8):
        at = now - dt.timedelta(minutes=40 - 5 * i)
        wid = f"msg_0193a7c2-{4000 + i:04}"
        if i == 5:  # a receiver that was down: two retries, then delivered
            rows.append(Attempt(ident.tenant, "billing", wid, 1, at, 503, 88, "retry",
                                "HTTP 503: upstream unavailable"))  # fmt: skip
            rows.append(Attempt(ident.tenant, "billing", wid, 2, at + dt.timedelta(seconds=2),
                                None, 10_000, "retry", "timeout after 10000 ms"))  # fmt: skip
            rows.append(Attempt(ident.tenant, "billing", wid, 3, at + dt.timedelta(seconds=6),
                                200, 143, "delivered", None))  # fmt: skip
        else:
            rows.append(Attempt(ident.tenant, "billing", wid, 1, at, 204, 40 + 7 * i,
                                "delivered", None))  # fmt: skip
    rows.append(Attempt(ident.tenant, "billing", "msg_0193a7c2-4100", 1, now, 410, 61, "dead",
                        "HTTP 410: account 4417 closed"))  # fmt: skip
    await queen.webhook_attempts_record(rows, 100)


async def shoot(console: Console, out: Path) -> list[Path]:
    shots = [
        ("overview", "#/overview", "#queues"),
        ("queue", "#/queue?name=orders&window=day&size=12", "#histogram-svg"),
        ("queue-prefix", "#/queue?name=emails&prefix=reminder%3Auser-00&window=hour", "#count"),
        ("dlq", "#/dlq?queue=orders", "#dlq-table"),
        ("webhooks", "#/webhooks?target=billing", "#webhook-attempts"),
    ]
    written = []
    for name, hash_, ready in shots:
        for label, width in WIDTHS.items():
            await console.run(console.d.set_window_size, width, 900)
            await console.open(hash_)
            await console.wait_css(ready)
            if name == "queue":
                await console.click("#timers-table tr .peek")
                await console.wait_css("#peek-payload")
            path = out / f"console-{name}-{label}.png"
            await console.screenshot(str(path), width)
            written.append(path)
    return written


async def main(out: Path) -> None:
    binaries = find_chromium()
    if binaries is None:
        raise SystemExit("no chromium/chromedriver: apt-get install chromium chromium-driver")
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="qshot", dir="/tmp")  # short: the socket lives in it
    pg = EmbeddedPostgres(os.path.join(tmp, "pg"))
    try:
        dbs = TestDatabases(pg.start())
        await dbs.setup()
        url = await dbs.create()
        queen = Queen(
            database_url=url,
            sweeper=False,
            retention_interval_ms=0,
            encryption_key=secrets.token_hex(32),  # the webhook secrets are sealed with it
        )
        await queen.start()
        transport = HttpTransport(http_settings())
        await transport.start(queen)
        driver = await asyncio.to_thread(start_driver, *binaries)
        try:
            await seed(queen, Identity(subject="demo"))
            await seed_webhooks(queen, Identity(subject="demo"))
            for path in await shoot(Console(driver, transport.url), out):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        finally:
            await asyncio.to_thread(driver.quit)
            await transport.stop()
            await queen.stop()
    finally:
        pg._owned = True  # a fresh directory: this process started it
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "guides" / "assets"
    asyncio.run(main(target))
