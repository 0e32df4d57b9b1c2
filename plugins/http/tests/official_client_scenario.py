"""What the official `queen-mq` 2.6.0 client does against our broker, step by step.

`run(url)` drives a broker at `url` through the client's public API (except where a step says
why not) and answers the steps it passed; the first failed check raises with what it saw. The
client imports as `queen`, our core as `queen_timers`: both live in the caller's interpreter.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from datetime import datetime

import httpx
import queen.timers.ops as client_ops
from queen import Queen  # the official client
from queen.errors import TimerError


def check(cond, what, seen=None):
    if not cond:
        raise AssertionError(f"{what}; saw: {seen!r}")


STEPS: list[str] = []


def ok(step):
    STEPS.append(step)


def ts(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def pop_one(client, url, queue, deadline_s=20.0):
    """Long-poll until a message arrives. pop() swallows errors into [], so an empty answer is
    re-checked with a raw request to tell a broken route from an empty queue."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        msgs = await client.queue(queue).wait(True).timeout_millis(2000).pop()
        if msgs:
            return msgs
    async with httpx.AsyncClient(base_url=url) as h:
        raw = await h.get(f"/api/v1/pop/queue/{queue}", params={"wait": "false"})
    raise AssertionError(
        f"nothing popped from {queue} in {deadline_s}s; raw pop answered "
        f"{raw.status_code} {raw.text[:300]}"
    )


@contextlib.contextmanager
def _client_guard_off():
    """The client refuses server-owned fields before sending; switch that guard off (as a
    client without it would send) to see the broker's own verdict, then put it back."""
    saved = client_ops.check_not_server_owned
    client_ops.check_not_server_owned = lambda op: None
    try:
        yield
    finally:
        client_ops.check_not_server_owned = saved


async def run(url: str) -> list[str]:
    """Every step against the broker at `url`; answers the steps passed, in order."""
    STEPS.clear()
    client = Queen(
        url.rstrip("/"),
        timeout_millis=10_000,
        retry_attempts=1,
        binary_push=False,
        push_compression=False,
        framed_pop=False,
    )
    try:
        await _steps(client, url.rstrip("/"))
    finally:
        await client.close()
    return list(STEPS)


async def _steps(client, url: str) -> None:
    q = "orders"

    # -- create a queue
    await client.queue(q).config({"lease_time": 30}).create()
    ok("configure")

    # -- schedule, peek, list
    key = "order:9f1/expire"
    sched = await client.timers.schedule(q, key, {"orderId": "9f1"}, delay_ms=300, txn="txn-1")
    check(sched and sched["status"] == "scheduled" and sched["txn"] == "txn-1", "schedule", sched)
    ok("schedule")
    peek = await client.timers.peek(q, key)
    check(peek["found"] is True and peek["messageId"] == sched["messageId"], "peek", peek)
    check(json.loads(base64.b64decode(peek["payload"])) == {"orderId": "9f1"}, "peek payload", peek)
    ok("peek")
    page = await client.timers.list(q)
    check([r["timerKey"] for r in page["rows"]] == [key], "list", page)
    ok("list")

    # -- the fired message
    msgs = await pop_one(client, url, q)
    m = msgs[0]
    check(m["data"] == {"orderId": "9f1"}, "fired data", m)
    check(m["transactionId"] == "txn-1", "fired transactionId = txn", m)
    check(m["id"] == sched["messageId"], "fired id = messageId", m)
    # createdAt has milliseconds, deliverAt microseconds: compare at millisecond precision.
    deliver_ms = ts(sched["deliverAt"]).replace(
        microsecond=ts(sched["deliverAt"]).microsecond // 1000 * 1000
    )
    check(
        ts(m["createdAt"]) >= deliver_ms,
        "createdAt not before deliverAt",
        (m["createdAt"], sched["deliverAt"]),
    )
    ok("pop fired")
    acked = await client.ack(m)
    check(acked.get("success") is True, "ack", acked)
    ok("ack")
    check((await client.timers.peek(q, key))["found"] is False, "fired timer gone")

    # -- cancel twice
    c = await client.timers.schedule(q, "to-cancel", 1, delay_ms=60_000, txn="txn-c")
    first = await client.timers.cancel(q, "to-cancel")
    check(
        first["status"] == "cancelled" and first["txn"] == "txn-c" and bool(first), "cancel", first
    )
    second = await client.timers.cancel(q, "to-cancel", txn=c["txn"])
    check(
        second["status"] == "absent" and second["txn"] == "txn-c" and not second,
        "cancel again",
        second,
    )
    ok("cancel twice")

    # -- reschedule
    s1 = await client.timers.schedule(q, "moving", {"v": 1}, delay_ms=60_000, txn="t-a")
    s2 = await client.timers.reschedule(q, "moving", {"v": 2}, delay_ms=120_000, txn="t-b")
    check(s2["status"] == "rescheduled" and s2["messageId"] != s1["messageId"], "reschedule", s2)
    p = await client.timers.peek(q, "moving")
    check(
        p["txn"] == "t-b" and json.loads(base64.b64decode(p["payload"])) == {"v": 2},
        "rescheduled peek",
        p,
    )
    ok("reschedule")

    # -- list pagination with limit=2
    for i in range(5):
        await client.timers.schedule("pages", f"k{i}", i, delay_ms=60_000)
    first_page = await client.timers.list("pages", limit=2)
    check(
        len(first_page["rows"]) == 2
        and first_page["truncated"] is True
        and first_page["nextAfter"] == "k1",
        "first page",
        first_page,
    )
    rows = await client.timers.list_all("pages", limit=2)
    check([r["timerKey"] for r in rows] == [f"k{i}" for i in range(5)], "list_all", rows)
    ok("list pagination")

    # -- a transaction carrying a push and a timer
    tx = client.transaction()
    tx.queue("next").push([{"data": {"x": 1}, "transactionId": "tx-push"}])
    tx.timer(q).key("from-tx").payload({"y": 2}).after_ms(60_000).txn("tt").schedule()
    res = await tx.commit()
    check(bool(res), "transaction", res)
    pt = await client.timers.peek(q, "from-tx")
    check(pt["found"] is True and pt["txn"] == "tt", "transaction timer", pt)
    got = await pop_one(client, url, "next")
    check(
        got[0]["transactionId"] == "tx-push" and got[0]["data"] == {"x": 1}, "transaction push", got
    )
    await client.ack(got[0])
    ok("transaction")

    # -- refusals as the client's typed error
    try:
        await client.timers.batch(
            [
                {
                    "op": "schedule",
                    "queue": q,
                    "timerKey": "x",
                    "payload": "MQ==",
                    "delayMs": 1,
                    "txn": "t",
                    "producerSub": "forged",
                }
            ]
        )
        raise AssertionError("the client sent a server-owned field")
    except ValueError:
        pass  # the client refuses it before sending
    try:
        await client.timers.schedule(q, "far", 1, delay_ms=100 * 86400 * 1000)
        raise AssertionError("horizon not refused")
    except TimerError as e:
        check(e.code == "timer_horizon_exceeded" and e.status == 403, "horizon", vars(e))
    # The client's own guard hides the server's refusal of server-owned fields.
    try:
        with _client_guard_off():
            await client.timers.batch(
                [
                    {
                        "op": "schedule",
                        "queue": q,
                        "timerKey": "x",
                        "payload": "MQ==",
                        "delayMs": 1,
                        "txn": "t",
                        "producerSub": "forged",
                    }
                ]
            )
        raise AssertionError("server-owned field accepted")
    except TimerError as e:
        check(
            e.code == "timers_bad_request" and e.status == 400 and e.detail, "server-owned", vars(e)
        )
    check((await client.timers.peek(q, "x"))["found"] is False, "nothing scheduled")
    ok("refusals")
