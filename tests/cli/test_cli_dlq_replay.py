"""`queen dlq replay QUEUE (TXN... | --all)`: a dead letter pushed into its queue again, or
scheduled as a timer; what is not a dead letter of the queue is named and exits 1."""

from __future__ import annotations

import datetime as dt
import json

from . import helpers
from .helpers import failure_line

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


async def _dead(queen, ident, queue: str, n: int) -> str:
    """One dead letter of `queue` (payload {"n": n}), as a consumer or the webhook delivery
    writes it; its transaction id."""
    await queen.push(ident, [{"queue": queue, "payload": {"n": n}, "transactionId": f"tx-{n}"}])
    m = (await queen.pop(ident, queue, batch=1, now=T0))["messages"][0]
    ack = {
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "leaseId": m["leaseId"],
        "status": "dlq",
        "error": f"webhook hooks msg_{m['id']} attempt 3 (attempts exhausted): HTTP 503",
    }
    assert (await queen.ack(ident, [ack], now=T0))[0]["dlq"] is True
    return str(m["transactionId"])


async def test_replay_by_transaction_id_and_all(db_url, queen, ident, conn):
    db = ("--database-url", db_url)
    first = await _dead(queen, ident, "hq", 1)
    second = await _dead(queen, ident, "hq", 2)
    third = await _dead(queen, ident, "hq", 3)
    out = helpers.queen("dlq", "replay", "hq", first, *db).stdout
    assert out.splitlines() == [f"replayed\thq\t{first}"]
    got = await queen.pop(ident, "hq", batch=10)
    assert [m["data"] for m in got["messages"]] == [{"n": 1}]

    missing = helpers.queen("dlq", "replay", "hq", first, second, *db, check=False)
    assert missing.returncode == 1
    assert missing.stdout.splitlines() == [f"replayed\thq\t{second}", f"absent\thq\t{first}"]

    scheduled = helpers.queen("dlq", "replay", "hq", "--all", "--schedule-in", "60000", *db)
    assert scheduled.stdout.splitlines() == [f"replayed\thq\t{third}"]
    timers = await conn.fetch(
        "SELECT queue, payload, deliver_at > now() AS later FROM queen.log_timers"
    )
    assert [(r["queue"], json.loads(r["payload"]), r["later"]) for r in timers] == [
        ("hq", {"n": 3}, True)
    ]
    empty = helpers.queen("dlq", "replay", "hq", "--all", *db)
    assert empty.stdout.strip() == "no dead letters in hq"
    both = helpers.queen("dlq", "replay", "hq", first, "--all", *db, check=False)
    assert both.returncode == 2 and "not both" in failure_line(both)
