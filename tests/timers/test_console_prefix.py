"""A key prefix narrows every timer figure of a queue (issue 29): the summary's pending, near
and overdue counts, the histogram in each window, and the count a "cancel by prefix" would
cancel agree with each other and with the rows themselves, for prefixes that hold LIKE's
metacharacters too. And a timer's dead letter names its timer key."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest

from queen_timers.errors import QueenError
from queen_timers.timers import inspect as timer_inspect

MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR

# Keys whose prefixes overlap, hold `%`, `_` and `\` (literal here, wildcards to LIKE), and
# non-ASCII text; with due times in every figure's range: overdue, the next minute, hour, day,
# and weeks out.
KEYS = [
    "job:1",
    "job:2",
    "job:10",
    "job:x/1",
    "jobs",
    "job_1",
    "job%1",
    "jo\\b",
    "é:1",
    "é:2",
    "other",
]
DELAYS = [-5 * MIN, 20_000, 30 * MIN, 3 * HOUR, 2 * DAY, 89 * DAY, 50_000, -MIN, 10 * MIN, HOUR]
PREFIXES = ["job", "job:", "job:1", "job_", "job%", "jo\\", "é", "é:2", "nothing", "j"]


def op(queue: str, key: str, delay_ms: int) -> dict:
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": f"txn-{key}",
        "payload": base64.b64encode(json.dumps({"k": key}).encode()).decode(),
    }


async def _seed(queen, ident, conn) -> dt.datetime:
    ops = [op("q", k, DELAYS[i % len(DELAYS)]) for i, k in enumerate(KEYS)]
    ops.append(op("elsewhere", "job:1", 20_000))  # another queue's key never counts
    res = await queen.timers_apply(ident, ops)
    assert all(r["ok"] for r in res), res
    # A backing-off and a claimed timer among the keys (states the summary counts apart).
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '2 minutes', attempts = 1,"
        " claimed_until = now() + interval '10 minutes' WHERE queue = 'q' AND timer_key = 'job:2'"
    )
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute',"
        " claim_token = gen_random_uuid(), claimed_until = now() + interval '10 minutes'"
        " WHERE queue = 'q' AND timer_key = 'é:1'"
    )
    now: dt.datetime = await conn.fetchval("SELECT now()")
    return now


def _expected(rows, prefix: str, now: dt.datetime) -> dict:
    mine = [r for r in rows if r["timer_key"].startswith(prefix)]

    def due(span: dt.timedelta) -> int:
        return sum(1 for r in mine if now <= r["deliver_at"] < now + span)

    return {
        "pending": len(mine),
        "dueNextMinute": due(dt.timedelta(minutes=1)),
        "dueNextHour": due(dt.timedelta(hours=1)),
        "dueNextDay": due(dt.timedelta(days=1)),
        "overdue": sum(1 for r in mine if r["deliver_at"] < now),
        "backingOff": sum(
            1
            for r in mine
            if r["claim_token"] is None
            and r["claimed_until"] is not None
            and r["claimed_until"] > now
        ),
        "claimed": sum(
            1 for r in mine if r["claim_token"] is not None and r["claimed_until"] > now
        ),
    }


async def test_every_figure_follows_the_prefix(queen, ident, conn):
    now = await _seed(queen, ident, conn)
    rows = await conn.fetch(
        "SELECT timer_key, deliver_at, claim_token, claimed_until FROM queen.log_timers"
        " WHERE queue = 'q'"
    )
    for prefix in PREFIXES:
        want = _expected(rows, prefix, now)
        # A prefix no key holds answers zeros: the queue exists (it holds other timers).
        t = (await queen.queue_summary(ident, "q", prefix, now=now))["timers"]
        assert {k: t[k] for k in want} == want, prefix
        assert t["pendingExact"] is True
        count = (await queen.timers_count(ident, "q", prefix))["count"]
        assert count == want["pending"], prefix
        for window in ("hour", "day", "90d"):
            h = await queen.timers_histogram(ident, "q", window, prefix, now=now)
            inside = sum(b["count"] for b in h["buckets"])
            assert h["pending"] == want["pending"], (prefix, window)
            assert h["overdue"] + inside + h["later"] == want["pending"], (prefix, window)
            assert h["overdue"] == want["overdue"], (prefix, window)
            assert h["prefix"] == prefix
            starts = [dt.datetime.fromisoformat(b["start"]) for b in h["buckets"]]
            width = dt.timedelta(milliseconds=h["bucketMs"])
            for start, b in zip(starts, h["buckets"], strict=True):
                mine = (r for r in rows if r["timer_key"].startswith(prefix))
                expect = sum(1 for r in mine if start <= r["deliver_at"] < start + width)
                assert b["count"] == expect, (prefix, window, b)
    # No prefix (None or ""): the whole queue, as before.
    whole = (await queen.queue_summary(ident, "q", now=now))["timers"]
    assert whole == (await queen.queue_summary(ident, "q", "", now=now))["timers"]
    assert whole["pending"] == len(KEYS)
    plain = await queen.timers_histogram(ident, "q", "day", now=now)
    assert "prefix" not in plain and plain["pending"] == len(KEYS)


async def test_the_http_read_takes_a_prefix_with_the_histogram(queen, ident, conn):
    await _seed(queen, ident, conn)
    h = await queen.timers_read(ident, "q", mode="histogram", prefix="job:", window="90d")
    assert h["pending"] == 4 and h["prefix"] == "job:"
    with pytest.raises(QueenError) as e:
        await queen.timers_read(ident, "q", mode="histogram", after="a")
    assert (e.value.status, e.value.reason) == (400, "timers_histogram_parameters")


async def test_a_prefix_is_checked_as_the_count_checks_it(queen, ident, conn):
    await _seed(queen, ident, conn)
    for bad, reason in (("x" * 129, "timers_count_prefix_too_long"), ("a\x00", None)):
        for call in (
            queen.queue_summary(ident, "q", bad),
            queen.timers_histogram(ident, "q", "hour", bad),
        ):
            with pytest.raises(QueenError) as e:
                await call
            assert e.value.status == 400
            if reason:
                assert e.value.reason == reason
    # 128 bytes is the bound, and a prefix longer than every key counts nothing.
    h = await queen.timers_histogram(ident, "q", "hour", "x" * 128)
    assert h["pending"] == 0


async def test_the_prefix_count_is_capped_like_the_queues(queen, ident, conn, monkeypatch):
    monkeypatch.setattr(timer_inspect, "PENDING_EXACT_UP_TO", 3)
    await queen.timers_apply(ident, [op("q", f"a:{i}", (i + 2) * MIN) for i in range(5)])
    await queen.timers_apply(ident, [op("q", f"b:{i}", (i + 2) * MIN) for i in range(2)])
    t = (await queen.queue_summary(ident, "q", "a:"))["timers"]
    assert (t["pending"], t["pendingExact"], t["dueNextHour"]) == (3, False, 5)
    t = (await queen.queue_summary(ident, "q", "b:"))["timers"]
    assert (t["pending"], t["pendingExact"]) == (2, True)
    # The 90-day window's source follows the whole queue (7, past the cap): a block sample,
    # here all of a tiny table.
    d = await queen.timers_histogram(ident, "q", "90d", "b:")
    assert d["exact"] is False and d["buckets"][0]["count"] == 2


async def test_a_queue_with_nothing_is_not_found_prefix_or_not(queen, ident, conn):
    await _seed(queen, ident, conn)
    for prefix in (None, "job:"):
        with pytest.raises(QueenError) as e:
            await queen.queue_summary(ident, "nope", prefix)
        assert (e.value.status, e.value.code) == (404, "queue_not_found")


async def test_a_consumers_dead_letter_names_no_timer(queen, ident):
    await queen.push(ident, [{"queue": "c", "payload": {"n": 1}, "transactionId": "t1"}])
    got = await queen.pop(ident, queue="c", batch=1)
    assert got is not None
    m = got["messages"][0]
    ack = {k: m[k] for k in ("transactionId", "partitionId", "leaseId")}
    await queen.ack(ident, [{**ack, "status": "dlq", "error": "poison"}])
    [d] = (await queen.dlq(ident, queue="c"))["messages"]
    assert d["transactionId"] == "t1" and d["timerKey"] is None


async def test_the_prefix_count_reads_the_prefixs_key_range_only(queen, ident, conn):
    """The rendered LIKE of log_timers_pending_v2 is a range on the primary key (the planner
    turns a literal prefix under the "C" collation into >= and <), so its cost follows the
    prefix's keys, not the queue's."""
    await _seed(queen, ident, conn)
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                "EXPLAIN SELECT 1 FROM queen.log_timers t WHERE t.tenant_id = $1"
                " AND t.queue = 'q' COLLATE \"C\" AND t.timer_key LIKE 'job:%' LIMIT 10",
                ident.tenant,
            )
        )
    assert "timer_key >= 'job:'" in plan and "timer_key < 'job;'" in plan, plan


async def test_the_v1_reads_stay_for_brokers_mid_upgrade(queen, ident, conn):
    now = await _seed(queen, ident, conn)
    horizon = now + dt.timedelta(days=2)
    v1 = await conn.fetch("SELECT * FROM queen.log_timers_pending_v1($1, 'q', 1000)", ident.tenant)
    v2 = await conn.fetch(
        "SELECT * FROM queen.log_timers_pending_v2($1, 'q', 1000, NULL)", ident.tenant
    )
    assert [dict(r) for r in v1] == [dict(r) for r in v2]
    v1 = await conn.fetch(
        "SELECT * FROM queen.log_timers_near_v1($1, 'q', $2, $3)", ident.tenant, now, horizon
    )
    v2 = await conn.fetch(
        "SELECT * FROM queen.log_timers_near_v2($1, 'q', $2, $3, '')", ident.tenant, now, horizon
    )
    assert [dict(r) for r in v1] == [dict(r) for r in v2]
    args = (ident.tenant, now, now + dt.timedelta(days=1), 1_800_000, horizon)
    h1 = await conn.fetchval(
        "SELECT queen.log_timers_histogram_v1($1, 'q', $2, $3, $4, $5, 'index', 1000)", *args
    )
    h2 = await conn.fetchval(
        "SELECT queen.log_timers_histogram_v2($1, 'q', $2, $3, $4, $5, 'index', 1000, NULL)",
        *args,
    )
    assert h1 == h2
    listing = await conn.fetchval(
        "SELECT queen.log_dlq_list_v2($1, 'q', NULL, NULL, NULL, NULL, 10, 0)", ident.tenant
    )
    assert listing is not None
