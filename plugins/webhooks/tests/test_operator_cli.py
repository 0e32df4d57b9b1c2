"""The operator's loop on a real delivery, through the `queen` command as a person runs it: a
receiver refuses a message for good, `queen webhooks attempts` shows why, `queen dlq replay`
sends it again once the receiver is fixed, and the attempts show it delivered."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

from aiohttp import web
from webhook_helpers import count, schedule, set_target, until_settled, worker_of

RUN_TIMEOUT_S = 120  # a subprocess imports the package on a loaded 2-core machine


async def queen_cli(db_url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`queen ARGS --database-url DB` in a subprocess, off the event loop the broker runs on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEEN_")}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "queen_timers", *args, "--database-url", db_url],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            env=env,
        )

    r = await asyncio.to_thread(run)
    if check:
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


async def cli_json(db_url: str, *args: str) -> Any:
    return json.loads((await queen_cli(db_url, *args, "--json")).stdout)


async def test_a_dead_delivery_is_seen_and_replayed_from_the_cli(db_url, broker, http, receiver):
    fixed = False

    async def script(request: web.Request, n: int) -> web.StreamResponse:
        if not fixed:
            return web.Response(status=410, text="no such account")
        return web.Response(status=204)

    receiver.script = script
    await set_target(http, broker, name="billing", queue="invoices", url=receiver.url)
    await schedule(http, "invoices", ["k"], b'{"amount": 3}')
    w = worker_of(broker, "billing")
    await until_settled(w, lambda: count(broker, w, "dead") >= 1)
    first_id = receiver.got[0].headers["webhook-id"]

    page = await cli_json(db_url, "webhooks", "attempts", "billing")
    assert [(a["webhookId"], a["status"], a["outcome"]) for a in page["attempts"]] == [
        (first_id, 410, "dead")
    ]
    table = (await queen_cli(db_url, "webhooks", "attempts", "billing")).stdout
    assert first_id in table and "410" in table and "dead" in table
    (dead,) = (await cli_json(db_url, "dlq", "list", "invoices"))["messages"]
    assert f"webhook billing {first_id} attempt 1" in dead["errorMessage"]

    fixed = True
    replayed = await queen_cli(db_url, "dlq", "replay", "invoices", dead["transactionId"])
    assert replayed.stdout.split("\t")[0] == "replayed"
    await until_settled(w, lambda: count(broker, w, "delivered") >= 1)
    assert json.loads(receiver.got[-1].body) == {"amount": 3}
    page = await cli_json(db_url, "webhooks", "attempts", "billing")
    newest = page["attempts"][0]
    assert (newest["status"], newest["outcome"]) == (204, "delivered")
    assert newest["webhookId"] != first_id  # a replay is a new message
    assert (await cli_json(db_url, "dlq", "list", "invoices"))["messages"] == []
