"""The operator's views and actions on the service (issue 16): queue summaries, overview,
histogram, fire now, cancel by prefix, dead-letter replay and delete, and the timer row state."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import uuid

import pytest

from queen_timers.errors import QueenError
from queen_timers.firewindow import FireWindow
from queen_timers.timers import inspect as timer_inspect


def op(queue: str, key: str, delay_ms: int, value=None, txn: str | None = None) -> dict:
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": txn or f"txn-{key}",
        "payload": base64.b64encode(json.dumps(value or {"k": key}).encode()).decode(),
    }


async def db_now(conn) -> dt.datetime:
    return await conn.fetchval("SELECT now()")


MIN = 60_000
HOUR = 60 * MIN


async def test_queue_summary_counts_by_due_time(queen, ident, conn, tenant_ident):
    await queen.timers_apply(
        ident,
        [
            op("q", "a", 30_000),
            op("q", "b", 30 * MIN),
            op("q", "c", 2 * HOUR),
            op("q", "d", 72 * HOUR),
        ],
    )
    now = await db_now(conn)
    t = (await queen.queue_summary(ident, "q", now=now))["timers"]
    assert t == {
        "pending": 4,
        "pendingExact": True,
        "dueNextMinute": 1,
        "dueNextHour": 2,
        "dueNextDay": 3,
        "overdue": 0,
        "oldestOverdueMs": None,
        "backingOff": 0,
        "claimed": 0,
    }
    later = now + dt.timedelta(hours=1, seconds=1)
    s = await queen.queue_summary(ident, "q", now=later)
    assert s["timers"]["overdue"] == 2
    assert s["timers"]["dueNextDay"] == 1  # c; d is 71 h away
    # a's deliver_at is about now + 30 s: late by about 1 h - 29 s at `later`
    assert 3_500_000 < s["timers"]["oldestOverdueMs"] < 3_600_000
    assert s["partitions"] == 0 and s["id"] is None  # born at the first fire
    other = tenant_ident()
    assert (await queen.queues_overview(other))["queues"] == []
    with pytest.raises(QueenError) as e:
        await queen.queue_summary(other, "q")
    assert (e.value.status, e.value.code) == (404, "queue_not_found")


async def test_states_backing_off_and_claimed(queen, ident, conn):
    await queen.timers_apply(ident, [op("q", "w", HOUR), op("q", "b", HOUR), op("q", "c", HOUR)])
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute', attempts = 2,"
        " last_error = 'permanent: boom', claimed_until = now() + interval '10 minutes'"
        " WHERE timer_key = 'b'"
    )
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute',"
        " claim_token = gen_random_uuid(), claimed_until = now() + interval '30 seconds'"
        " WHERE timer_key = 'c'"
    )
    rows = {r["timerKey"]: r for r in (await queen.timers_list(ident, "q"))["rows"]}
    assert {k: r["state"] for k, r in rows.items()} == {
        "b": "backing_off",
        "c": "claimed",
        "w": "waiting",
    }
    assert rows["b"]["lastError"] == "permanent: boom"
    # A backing-off row says when it is retried: its claimed_until, in the wire's instant
    # format; the claimed row's claimed_until is a lease, not a retry, and says nothing.
    until = await conn.fetchval("SELECT claimed_until FROM queen.log_timers WHERE timer_key = 'b'")
    retry_at = until.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert {k: r["retryAt"] for k, r in rows.items()} == {"b": retry_at, "c": None, "w": None}
    assert rows["b"]["deliverAt"] < rows["b"]["retryAt"]  # deliver_at is kept
    peek = await queen.timer_peek(ident, "q", "b")
    assert (peek["state"], peek["retryAt"]) == ("backing_off", retry_at)
    assert (await queen.timer_peek(ident, "q", "c"))["retryAt"] is None
    t = (await queen.queue_summary(ident, "q"))["timers"]
    assert (t["backingOff"], t["claimed"], t["overdue"]) == (1, 1, 2)
    # Once the backoff is over the row waits for the next claim: no retryAt any more.
    await conn.execute(
        "UPDATE queen.log_timers SET claimed_until = now() - interval '1 second'"
        " WHERE timer_key = 'b'"
    )
    peek = await queen.timer_peek(ident, "q", "b")
    assert (peek["state"], peek["retryAt"], peek["attempts"]) == ("waiting", None, 2)


async def test_histogram_buckets_overdue_and_later(queen, ident, conn):
    await queen.timers_apply(
        ident,
        [
            op("q", "a", 90_000),
            op("q", "b", 10 * MIN + 30_000),
            op("q", "c", 2 * HOUR),
            op("q", "x", 1_000),
        ],
    )
    now = (await db_now(conn)) + dt.timedelta(seconds=5)  # x is overdue
    h = await queen.timers_histogram(ident, "q", "hour", now=now)
    assert (h["bucketMs"], len(h["buckets"]), h["overdue"], h["later"]) == (MIN, 60, 1, 1)
    counts = {i: b["count"] for i, b in enumerate(h["buckets"]) if b["count"]}
    assert counts == {1: 1, 10: 1}
    d = await queen.timers_histogram(ident, "q", "90d", now=now)
    assert (len(d["buckets"]), d["buckets"][0]["count"], d["overdue"], d["later"]) == (90, 3, 1, 0)
    day = await queen.timers_read(ident, "q", mode="histogram")
    assert day["window"] == "day" and len(day["buckets"]) == 48
    with pytest.raises(QueenError) as e:
        await queen.timers_histogram(ident, "q", "week")
    assert e.value.status == 400


async def test_fire_now_keeps_the_message(queen, ident, conn):
    [r] = await queen.timers_apply(ident, [op("q", "k/1", HOUR)])
    await conn.execute(
        "UPDATE queen.log_timers SET attempts = 1, claimed_until = now() + interval '2 hours'"
    )
    res = await queen.timer_fire_now(ident, "q", "k/1")
    assert res["status"] == "rescheduled"
    assert (res["messageId"], res["txn"]) == (r["messageId"], "txn-k/1")
    row = await conn.fetchrow(
        "SELECT deliver_at, claimed_until, attempts, message_id FROM queen.log_timers"
    )
    assert row["claimed_until"] is None and row["attempts"] == 1
    assert abs((row["deliver_at"] - await db_now(conn)).total_seconds()) < 60
    assert (await queen.timer_fire_now(ident, "q", "nope"))["status"] == "absent"
    await conn.execute(
        "UPDATE queen.log_timers SET claim_token = gen_random_uuid(),"
        " claimed_until = now() + interval '30 seconds'"
    )
    assert (await queen.timer_fire_now(ident, "q", "k/1"))["status"] == "too_late"
    with pytest.raises(QueenError) as e:
        await queen.timer_fire_now(ident, "q", "")
    assert e.value.status == 400


async def test_fire_now_waits_while_scheduling_is_paused(queen, ident):
    await queen.timers_apply(ident, [op("q", "k", HOUR)])
    await queen.switches_set(dataclasses.replace(ident, admin=True), {"timersSchedule": False})
    with pytest.raises(QueenError) as e:
        await queen.timer_fire_now(ident, "q", "k")
    assert (e.value.status, e.value.code) == (503, "timers_disabled")
    # cancel by prefix is never blocked
    assert (await queen.timers_cancel_prefix(ident, "q", "k"))["cancelled"] == 1


async def test_cancel_prefix_in_bounded_batches(queen, ident, conn, tenant_ident):
    await queen.timers_apply(
        ident, [op("q", f"a/{i:02}", HOUR) for i in range(25)] + [op("q", "b/1", HOUR)]
    )
    other = tenant_ident()
    await queen.timers_apply(other, [op("q", "a/00", HOUR)])
    await conn.execute(
        "UPDATE queen.log_timers SET claim_token = gen_random_uuid(),"
        " claimed_until = now() + interval '30 seconds' WHERE timer_key = 'a/24'"
        " AND tenant_id = $1",
        ident.tenant,
    )
    totals, calls = 0, 0
    while True:
        res = await queen.timers_cancel_prefix(ident, "q", "a/", limit=10)
        calls += 1
        totals += res["cancelled"]
        assert res["cancelled"] <= 10 and res["tooLate"] == 0
        if not res["remaining"]:
            break
    assert (totals, calls) == (24, 3)
    left = await conn.fetch("SELECT tenant_id, timer_key FROM queen.log_timers ORDER BY 2")
    assert sorted(r["timer_key"] for r in left) == ["a/00", "a/24", "b/1"]
    for bad in ({"limit": 0}, {"limit": 10_001}, {"limit": "5"}):
        with pytest.raises(QueenError) as e:
            await queen.timers_cancel_prefix(ident, "q", "a/", **bad)
        assert e.value.status == 400
    with pytest.raises(QueenError):
        await queen.timers_cancel_prefix(ident, "q", "")
    # % and _ are literal
    assert (await queen.timers_cancel_prefix(ident, "q", "%"))["cancelled"] == 0


def acks_for(res: dict, status: str) -> list[dict]:
    return [
        {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "leaseId": m["leaseId"],
            "status": status,
        }
        for m in res["messages"]
    ]


async def _dead_letter(queen, ident, value) -> dict:
    await queen.push(ident, [{"queue": "dq", "payload": value, "transactionId": f"t-{value['n']}"}])
    r = await queen.pop(ident, "dq", batch=1)
    await queen.ack(ident, [{**acks_for(r, "dlq")[0]}])
    [m] = (await queen.dlq(ident, queue="dq"))["messages"]
    return {"transactionId": m["transactionId"], "partitionId": m["partitionId"]}


async def test_dlq_replay_push_and_delete(queen, ident, tenant_ident):
    item = await _dead_letter(queen, ident, {"n": 1})
    assert (await queen.queue_summary(ident, "dq"))["deadLetters"] == 1
    other = tenant_ident()
    res = await queen.dlq_replay(other, [item], "push")
    assert res["results"][0]["status"] == "absent"
    res = await queen.dlq_replay(ident, [item], "push")
    assert res["results"][0]["status"] == "replayed"
    assert (await queen.dlq(ident, queue="dq"))["total"] == 0
    popped = await queen.pop(ident, "dq", batch=10)
    assert [m["data"] for m in popped["messages"]] == [{"n": 1}]
    assert (await queen.dlq_replay(ident, [item], "push"))["results"][0]["status"] == "absent"
    for bad in ([], [{"transactionId": "x"}], [{**item, "extra": 1}]):
        with pytest.raises(QueenError) as e:
            await queen.dlq_replay(ident, bad, "push")
        assert e.value.status == 400
    with pytest.raises(QueenError):
        await queen.dlq_replay(ident, [item], "teleport")


async def test_dlq_replay_schedule_then_delete(queen, ident, conn):
    item = await _dead_letter(queen, ident, {"n": 2})
    res = await queen.dlq_replay(ident, [item], "schedule", delay_ms=HOUR)
    assert res["results"][0]["status"] == "replayed"
    [row] = await conn.fetch("SELECT queue, timer_key, txn FROM queen.log_timers")
    assert row["queue"] == "dq" and row["timer_key"] == row["txn"]
    assert row["txn"].startswith("replay:")
    item2 = await _dead_letter(queen, ident, {"n": 3})
    res = await queen.dlq_delete(ident, [item2, {**item2, "partitionId": str(uuid.uuid4())}])
    assert [r["status"] for r in res["results"]] == ["deleted", "absent"]
    assert (await queen.dlq(ident, queue="dq"))["total"] == 0


async def test_overview(queen, ident, tenant_ident):
    await queen.timers_apply(ident, [op("q", "a", 30_000)])
    await queen.push(ident, [{"queue": "m", "payload": {"x": 1}}])
    ov = await queen.overview(ident)
    assert ov["queues"] == 2 and ov["partitions"] == 1
    assert ov["messages"]["total"] == 1 and ov["messages"]["pending"] == 1
    assert ov["timers"]["pending"] == 1 and ov["timers"]["dueNextMinute"] == 1
    assert ov["brokers"]["alive"] >= 1 and ov["brokers"]["list"] == []
    assert ov["switches"]["timersScheduleEnabled"] is True
    assert ov["thisBroker"]["windowSeconds"] == 300
    admin = await queen.overview(dataclasses.replace(ident, admin=True))
    assert admin["brokers"]["list"][0]["applicationName"].startswith("queen:")
    assert (await queen.overview(tenant_ident()))["queues"] == 0


async def test_pending_is_exact_up_to_a_cap(queen, ident, monkeypatch):
    monkeypatch.setattr(timer_inspect, "PENDING_EXACT_UP_TO", 3)
    await queen.timers_apply(ident, [op("q", f"k{i}", (i + 2) * MIN) for i in range(5)])
    await queen.timers_apply(ident, [op("small", "k", 2 * MIN)])
    ov = await queen.queues_overview(ident)
    by_name = {q["name"]: q["timers"] for q in ov["queues"]}
    assert (by_name["q"]["pending"], by_name["q"]["pendingExact"]) == (3, False)
    assert by_name["q"]["dueNextHour"] == 5  # the near-term figures are never capped
    assert (by_name["small"]["pending"], by_name["small"]["pendingExact"]) == (1, True)
    h = await queen.timers_histogram(ident, "q", "hour")
    assert sum(b["count"] for b in h["buckets"]) == 5 and h["exact"] is False
    d = await queen.timers_histogram(ident, "q", "90d")
    assert d["exact"] is False and d["samplePercent"] == 100  # a tiny table: all of it
    assert d["buckets"][0]["count"] == 5
    exact = await queen.timers_histogram(ident, "small", "90d")
    assert exact["exact"] is True and exact["samplePercent"] is None


def test_fire_window_rate_and_percentiles():
    t = [1000.0]
    w = FireWindow(seconds=60, clock=lambda: t[0])
    assert w.snapshot()["fireLagP50Ms"] is None
    t[0] += 30
    w.record(100, [10.0] * 50 + [1000.0] * 49 + [5000.0])
    s = w.snapshot()
    assert s["firedPerSec"] == pytest.approx(100 / 30, rel=1e-3)
    assert s["fireLagP50Ms"] == pytest.approx(10.0, rel=0.05)
    assert s["fireLagP99Ms"] == pytest.approx(1000.0, rel=0.05)
    t[0] += 61
    assert w.snapshot()["firedPerSec"] == 0 and w.snapshot()["fireLagP99Ms"] is None
