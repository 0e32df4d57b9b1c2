import asyncio
import re
import uuid

import pytest

from queen_timers.errors import QueenError
from queen_timers.log.ack import _dead_letters, apply_acks, parse_acks
from queen_timers.log.frames import txn_hashes
from queen_timers.notify import Notifier

from .helpers import acks_for, items, later

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _notifier_of(q) -> Notifier:
    """The broker's LISTEN/NOTIFY notifier (these tests run with QUEEN_SWEEPER_NOTIFY on)."""
    n = q.rt.notifier
    assert isinstance(n, Notifier)
    return n


async def test_pop_renders_the_wire_shape(queen, ident):
    pushed = await queen.push(
        ident, [{"queue": "q", "partition": "p1", "payload": {"a": 1}, "transactionId": "t1"}]
    )
    res = await queen.pop(ident, "q", batch=10)
    assert res["success"] is True and res["queue"] == "q" and res["partition"] == "p1"
    assert res["consumerGroup"] == "__QUEUE_MODE__" and res["partitionsClaimed"] == 1
    uuid.UUID(res["leaseId"])
    [m] = res["messages"]
    assert set(m) == {
        "id",
        "transactionId",
        "traceId",
        "data",
        "producerSub",
        "createdAt",
        "partitionId",
        "partition",
        "leaseId",
        "consumerGroup",
        "deliveryAttempt",
        "offset",
    }
    assert m["id"] == pushed[0]["message_id"] and m["transactionId"] == "t1"
    assert m["data"] == {"a": 1} and m["traceId"] is None and m["producerSub"] == "tester"
    assert ISO_MS.match(m["createdAt"])
    assert m["partitionId"] == res["partitionId"] == pushed[0]["partitionId"]
    assert m["leaseId"] == res["leaseId"] and m["deliveryAttempt"] == 1 and m["offset"] == 0


async def test_pop_nothing_is_none(queen, ident):
    assert await queen.pop(ident, "missing") is None
    await queen.push(ident, items("q", 1))
    assert await queen.pop(ident, "q", partition="other") is None


async def test_json_values_of_every_kind(queen, ident):
    values = [{"a": [1, 2]}, [1, "x"], "text", 3.5, None, True]
    await queen.push(ident, [{"queue": "q", "payload": v} for v in values])
    res = await queen.pop(ident, "q", batch=10)
    assert [m["data"] for m in res["messages"]] == values


async def test_batch_and_resume_mid_segment(queen, ident):
    await queen.push(ident, items("q", 10))
    a = await queen.pop(ident, "q", batch=4)
    assert [m["offset"] for m in a["messages"]] == [0, 1, 2, 3]
    # the partition is leased: a second pop gets nothing
    assert await queen.pop(ident, "q", batch=4) is None
    await queen.ack(ident, acks_for(a))
    b = await queen.pop(ident, "q", batch=100)
    assert [m["offset"] for m in b["messages"]] == list(range(4, 10))
    assert [m["data"]["n"] for m in b["messages"]] == list(range(4, 10))


async def test_default_batch_is_a_setting(queen, ident):
    await queen.push(ident, items("q", queen.settings.pop_default_batch + 5))
    res = await queen.pop(ident, "q")
    assert len(res["messages"]) == queen.settings.pop_default_batch


async def test_pop_spans_segments(queen, ident):
    for k in range(3):
        await queen.push(ident, items("q", 3, start=3 * k))
    res = await queen.pop(ident, "q", batch=7)
    assert [m["data"]["n"] for m in res["messages"]] == list(range(7))


async def test_queue_mode_competes_groups_each_see_all(queen, ident):
    await queen.push(ident, items("q", 3))
    a = await queen.pop(ident, "q", batch=10)
    assert await queen.pop(ident, "q", batch=10) is None
    g1 = await queen.pop(ident, "q", group="g1", batch=10)
    g2 = await queen.pop(ident, "q", group="g2", batch=10)
    for r in (a, g1, g2):
        assert len(r["messages"]) == 3
    assert g1["consumerGroup"] == "g1" and g1["messages"][0]["consumerGroup"] == "g1"
    # acks are per group
    assert all(x["success"] for x in await queen.ack(ident, acks_for(g1), group="g1"))
    assert await queen.pop(ident, "q", group="g1") is None
    assert (
        await queen.pop(ident, "q", batch=10, now=later(3600)) is not None
    )  # queue mode lease expired


async def test_subscription_new_skips_backlog(queen, ident):
    await queen.push(ident, items("q", 3, partition="a"))
    assert await queen.pop(ident, "q", group="late", subscription_mode="new") is None
    await queen.push(ident, items("q", 2, partition="a", start=3))
    # a partition the group has never touched, written after the subscription
    await queen.push(ident, items("q", 1, partition="b", start=10))
    got = []
    for _ in range(3):
        r = await queen.pop(ident, "q", group="late", batch=10)
        if r:
            got += [m["data"]["n"] for m in r["messages"]]
    assert sorted(got) == [3, 4, 10]
    # 'all' (the default) gets the backlog
    r = await queen.pop(ident, "q", group="early", partition="a", batch=10)
    assert [m["data"]["n"] for m in r["messages"]] == [0, 1, 2, 3, 4]


async def test_pop_by_partition_and_multi_partition(queen, ident):
    await queen.push(ident, items("q", 2, partition="a") + items("q", 2, partition="b", start=2))
    r = await queen.pop(ident, "q", partition="b", batch=10)
    assert r["partition"] == "b" and [m["data"]["n"] for m in r["messages"]] == [2, 3]
    await queen.ack(ident, acks_for(r))
    await queen.push(ident, items("q", 2, partition="b", start=4))
    r = await queen.pop(ident, "q", batch=10, partitions=2)
    assert r["partitionsClaimed"] == 2 and len(r["messages"]) == 4
    assert len({m["leaseId"] for m in r["messages"]}) == 1
    ext = await queen.extend_lease(ident, r["leaseId"])
    assert ext["success"] is True and ext["renewed"] == 2


async def test_pop_by_namespace_and_task(queen, ident):
    await queen.push(
        ident,
        items("billing.invoices", 1)
        + items("billing.refunds", 1, start=1)
        + items("other.x", 1, start=2),
    )
    r = await queen.pop(ident, None, namespace="billing", task="refunds", batch=10)
    assert r["queue"] == "billing.refunds" and r["messages"][0]["data"] == {"n": 1}
    r = await queen.pop(ident, None, namespace="billing", batch=10)
    assert r["queue"] == "billing.invoices"
    assert await queen.pop(ident, None, namespace="billing") is None


async def test_auto_ack_commits_at_delivery(queen, ident):
    await queen.push(ident, items("q", 3))
    r = await queen.pop(ident, "q", batch=2, auto_ack=True)
    assert r["leaseId"] == "" and all(m["leaseId"] == "" for m in r["messages"])
    r = await queen.pop(ident, "q", batch=10, auto_ack=True)
    assert [m["offset"] for m in r["messages"]] == [2]
    assert await queen.pop(ident, "q", now=later(3600)) is None


async def test_ack_batch_results_and_implicit_ack(queen, ident, conn):
    await queen.push(ident, items("q", 5))
    r = await queen.pop(ident, "q", batch=5)
    last = acks_for(r)[-1:]
    res = await queen.ack(ident, last)
    assert res == [
        {
            "index": 0,
            "transactionId": last[0]["transactionId"],
            "success": True,
            "error": None,
            "leaseReleased": True,
            "dlq": False,
            "noop": False,
        }
    ]
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 4
    # acking the rest again is a harmless noop
    res = await queen.ack(ident, acks_for(r)[:2])
    assert all(x["success"] and x["noop"] for x in res)
    assert await queen.pop(ident, "q", now=later(3600)) is None


async def test_partial_ack_keeps_the_lease(queen, ident, conn):
    await queen.push(ident, items("q", 4))
    r = await queen.pop(ident, "q", batch=4)
    res = await queen.ack(ident, acks_for(r)[:2])
    assert all(x["success"] and not x["leaseReleased"] for x in res)
    assert await queen.pop(ident, "q") is None  # still leased
    res = await queen.ack(ident, acks_for(r)[2:])
    assert all(x["leaseReleased"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 3


async def test_failed_redelivers_then_dead_letters(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retryLimit": 2})
    await queen.push(
        ident, [{"queue": "q", "payload": {"n": i}, "transactionId": f"t{i}"} for i in range(3)]
    )
    for attempt in (1, 2, 3):
        r = await queen.pop(ident, "q", batch=10)
        assert [m["offset"] for m in r["messages"]] == [0, 1, 2]
        assert r["messages"][0]["deliveryAttempt"] == attempt
        res = await queen.ack(
            ident, [{**acks_for(r)[0], "status": "failed", "error": f"boom{attempt}"}]
        )
        assert res[0]["success"] and res[0]["leaseReleased"]
        assert res[0]["dlq"] is (attempt == 3)
    dl = await queen.dlq(ident, queue="q")
    assert dl["total"] == 1 and dl["pagination"] == {"limit": 100, "offset": 0}
    [m] = dl["messages"]
    assert m["transactionId"] == "t0" and m["data"] == m["payload"] == {"n": 0}
    assert m["errorMessage"] == "boom3" and m["retryCount"] == 2 and m["offset"] == 0
    assert m["consumerGroup"] == "__QUEUE_MODE__" and m["partition"] == "Default"
    assert set(m) >= {
        "id",
        "queue",
        "partition",
        "partitionId",
        "createdAt",
        "consumerGroup",
        "offset",
        "messageId",
        "transactionId",
        "data",
        "payload",
        "errorMessage",
        "retryCount",
        "failedAt",
    }
    r = await queen.pop(ident, "q", batch=10)
    assert [m["offset"] for m in r["messages"]] == [1, 2]
    assert r["messages"][0]["deliveryAttempt"] == 4  # they rode along in the 3 failed batches


async def test_failed_prefix_commits_and_budget_is_per_head(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retryLimit": 1})
    await queen.push(ident, items("q", 4))
    r = await queen.pop(ident, "q", batch=4)
    a = acks_for(r)
    res = await queen.ack(ident, [a[0], a[1], {**a[2], "status": "failed"}])
    assert all(x["success"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 1
    r = await queen.pop(ident, "q", batch=4)
    assert [m["offset"] for m in r["messages"]] == [2, 3]
    assert r["messages"][0]["deliveryAttempt"] == 2  # counted from the failed message
    # a partial ack keeps the lease; an expiry then redelivers the rest as attempt 3
    await queen.ack(ident, acks_for(r)[:1])
    r = await queen.pop(ident, "q", batch=4, now=later(3600))
    assert [(m["offset"], m["deliveryAttempt"]) for m in r["messages"]] == [(3, 3)]


async def test_no_dlq_drops_after_limit(queen, ident, conn):
    await queen.configure_queue(
        ident, "q", {"retryLimit": 0, "deadLetterQueue": False, "dlqAfterMaxRetries": False}
    )
    await queen.push(ident, items("q", 2))
    r = await queen.pop(ident, "q", batch=1)
    await queen.ack(ident, [{**acks_for(r)[0], "status": "failed"}])
    r = await queen.pop(ident, "q", batch=5)
    assert [m["offset"] for m in r["messages"]] == [1]
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 0


async def test_retry_is_budget_free_and_dlq_is_immediate(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retryLimit": 0})
    await queen.push(ident, items("q", 2))
    for _ in range(3):
        r = await queen.pop(ident, "q", batch=2)
        res = await queen.ack(ident, [{**acks_for(r)[0], "status": "retry"}])
        assert res[0]["success"] and res[0]["leaseReleased"] and not res[0]["dlq"]
    assert await conn.fetchval("SELECT batch_retry_count FROM queen.log_consumers") == 0
    r = await queen.pop(ident, "q", batch=2)
    assert r["messages"][0]["deliveryAttempt"] == 4
    res = await queen.ack(
        ident, [{**acks_for(r)[1], "status": "dlq", "error": "poison"}, acks_for(r)[0]]
    )
    assert res[0]["dlq"] and res[1]["success"]
    dl = await queen.dlq(ident, queue="q")
    assert dl["messages"][0]["offset"] == 1 and dl["messages"][0]["errorMessage"] == "poison"
    assert await queen.pop(ident, "q", now=later(3600)) is None


async def test_bad_acks(queen, ident, tenant_ident, conn):
    await queen.push(ident, items("q", 2))
    r = await queen.pop(ident, "q", batch=2)
    a = acks_for(r)
    # another tenant naming this partition: refused, nothing moves
    other = tenant_ident()
    res = await queen.ack(other, a)
    assert [x["success"] for x in res] == [False, False]
    assert res[0]["error"] == "partition not found"
    res = await queen.ack(
        ident,
        [
            {**a[0], "transactionId": "nope"},
            {**a[0], "partitionId": "not-a-uuid"},
            {**a[0], "leaseId": "someone-else"},
        ],
    )
    assert [x["success"] for x in res] == [False, False, False]
    assert all(x["error"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == -1
    for bad in (
        [1],
        [{"partitionId": a[0]["partitionId"]}],
        [{**a[0], "status": "maybe"}],
        [{**a[0], "extra": 1}],
        "x",
    ):
        with pytest.raises(QueenError) as ei:
            await queen.ack(ident, bad)
        assert ei.value.status == 400
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == -1


async def test_expired_lease_goes_to_the_next_pop(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"leaseTime": 30})
    await queen.push(ident, items("q", 3))
    dead = await queen.pop(ident, "q", batch=3)  # this consumer dies holding the lease
    assert await queen.pop(ident, "q", now=later(29)) is None
    nxt = await queen.pop(ident, "q", batch=3, now=later(31))
    assert [m["offset"] for m in nxt["messages"]] == [0, 1, 2]
    assert nxt["messages"][0]["deliveryAttempt"] == 2 and nxt["leaseId"] != dead["leaseId"]
    # the dead consumer's late ack is refused; the new holder's ack works
    res = await queen.ack(ident, acks_for(dead), now=later(32))
    assert not any(x["success"] for x in res)
    assert all(x["error"] == "invalid or expired lease" for x in res)
    res = await queen.ack(ident, acks_for(nxt), now=later(32))
    assert all(x["success"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 2


async def test_extend_lease(queen, ident):
    await queen.configure_queue(ident, "q", {"leaseTime": 30})
    await queen.push(ident, items("q", 1))
    r = await queen.pop(ident, "q")
    ext = await queen.extend_lease(ident, r["leaseId"], now=later(20))
    assert ext["success"] and ext["renewed"] == 1 and ext["newExpiresAt"] == ext["expiresAt"]
    assert await queen.pop(ident, "q", now=later(45)) is None  # renewed to ~now+50
    # expired but not taken over: still renewable; taken over: not
    assert (await queen.extend_lease(ident, r["leaseId"], now=later(60)))["renewed"] == 1
    assert await queen.pop(ident, "q", now=later(85)) is None  # renewed to ~now+90
    assert await queen.pop(ident, "q", now=later(95)) is not None
    assert (await queen.extend_lease(ident, r["leaseId"], now=later(96)))["renewed"] == 0
    miss = await queen.extend_lease(ident, "unknown")
    assert miss["success"] is False and miss["renewed"] == 0 and miss["error"]


async def test_lease_seconds_setting_overrides_queue(db_url, ident):
    from queen_timers.service import Queen

    q = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0, pop_lease_seconds=5)
    await q.start()
    try:
        await q.push(ident, items("q", 1))
        assert await q.pop(ident, "q") is not None
        assert await q.pop(ident, "q", now=later(6)) is not None
    finally:
        await q.stop()


async def test_delayed_processing(queen, ident):
    await queen.configure_queue(ident, "q", {"delayedProcessing": 60})
    await queen.push(ident, items("q", 1))
    assert await queen.pop(ident, "q") is None
    assert await queen.pop(ident, "q", now=later(61)) is not None


async def test_long_poll_wakes_on_push(queen, ident):
    task = asyncio.create_task(queen.pop(ident, "q", wait=True, timeout_ms=20000))
    await asyncio.sleep(0)  # let it park (it registers before its first query)
    for _ in range(50):
        if queen.rt.hub.has_queue_waiters():
            break
        await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await queen.push(ident, items("q", 1))
    res = await asyncio.wait_for(task, 10)
    assert res["messages"][0]["data"] == {"n": 0}
    assert loop.time() - t0 < 5


async def test_long_poll_times_out(queen, ident):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await queen.pop(ident, "q", wait=True, timeout_ms=200) is None
    assert 0.15 < loop.time() - t0 < 5


async def test_failed_ack_wakes_parked_pop(queen, ident):
    await queen.push(ident, items("q", 1))
    r = await queen.pop(ident, "q")
    parked = asyncio.create_task(queen.pop(ident, "q", wait=True, timeout_ms=20000))
    for _ in range(50):
        if queen.rt.hub.has_queue_waiters():
            break
        await asyncio.sleep(0.01)
    await queen.ack(ident, [{**acks_for(r)[0], "status": "failed"}])
    res = await asyncio.wait_for(parked, 10)
    assert res["messages"][0]["deliveryAttempt"] == 2


async def test_apply_acks_inside_a_caller_transaction(queen, ident, conn):
    await queen.push(ident, items("q", 2))
    r = await queen.pop(ident, "q", batch=2)
    rt = queen.rt
    async with rt.pool.acquire() as c:
        tx = c.transaction()
        await tx.start()
        res = await apply_acks(
            rt, c, ident, acks_for(r)[:1] + [{**acks_for(r)[1], "transactionId": "bogus"}]
        )
        assert [x["success"] for x in res] == [True, False]
        await tx.rollback()  # the bundle detects the failed item and rolls back
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == -1
    wake: set = set()
    async with rt.pool.acquire() as c:
        async with c.transaction():
            res = await apply_acks(rt, c, ident, acks_for(r), wake=wake)
    assert all(x["success"] for x in res) and wake == set()
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 1


async def test_empty_partition_cursor_seal(queen, ident, conn):
    await queen.push(ident, items("q", 3))
    await conn.execute("DELETE FROM queen.log_segments")  # as if retention took everything
    assert await queen.pop(ident, "q") is None
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 2


async def test_pop_refuses_bad_arguments(queen, ident):
    for kwargs in (
        {"batch": 0},
        {"batch": "5"},
        {"partition": ""},
        {"group": ""},
        {"subscription_mode": "timestamp"},
        {"timeout_ms": -1},
        {"partitions": 0},
    ):
        with pytest.raises(QueenError) as ei:
            await queen.pop(ident, "q", **kwargs)
        assert ei.value.status == 400
    with pytest.raises(QueenError):
        await queen.pop(ident, None)


async def test_late_ack_of_an_untaken_expired_lease_is_accepted(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"leaseTime": 30})
    await queen.push(ident, items("q", 2))
    r = await queen.pop(ident, "q", batch=2)
    res = await queen.ack(ident, acks_for(r), now=later(60))  # expired, nobody took it over
    assert all(x["success"] and x["leaseReleased"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 1


async def test_long_poll_wakes_on_a_push_to_another_broker(db_url, ident):
    """Broker B parks a pop with a re-check interval far beyond the test's patience: only the
    cross-broker NOTIFY can wake it in time."""
    from queen_timers.service import Queen

    common = dict(database_url=db_url, sweeper=False, retention_interval_ms=0)
    a = Queen(**common)
    b = Queen(**common, pop_poll_min_ms=60000, pop_poll_max_ms=60000)
    await a.start()
    await b.start()
    try:
        # the LISTEN connection comes up in the background
        await asyncio.wait_for(_notifier_of(b).connected.wait(), 10)
        parked = asyncio.create_task(b.pop(ident, "q", wait=True, timeout_ms=30000))
        for _ in range(100):
            if b.rt.hub.has_queue_waiters():
                break
            await asyncio.sleep(0.01)
        await a.push(ident, items("q", 1))
        res = await asyncio.wait_for(parked, 15)
        assert res is not None and res["messages"][0]["data"] == {"n": 0}
    finally:
        await b.stop()
        await a.stop()


async def test_signal_tie_break_and_signals_without_lease(queen, ident, conn):
    await queen.push(ident, items("q", 2))
    r = await queen.pop(ident, "q", batch=2)
    a = acks_for(r)[0]
    res = await queen.ack(
        ident, [{**a, "status": "retry"}, {**a, "status": "dlq"}, {**a, "status": "failed"}]
    )
    assert [x["dlq"] for x in res] == [False, True, False]
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 1
    # a signal with no lease to act on is refused
    r = await queen.pop(ident, "q", batch=1, auto_ack=True)
    res = await queen.ack(ident, [{**acks_for(r)[0], "status": "failed"}])
    assert res[0]["success"] is False and res[0]["error"] == "already committed"
    await queen.push(ident, items("q", 1, start=5))
    res = await queen.ack(
        ident, [{"transactionId": "missing", "partitionId": r["partitionId"], "status": "failed"}]
    )
    assert res[0]["success"] is False


async def test_dlq_listing_filters_and_pages(queen, ident):
    await queen.configure_queue(ident, "q", {"retryLimit": 0})
    await queen.push(ident, items("q", 3, partition="a") + items("q", 1, partition="b", start=3))
    for part, group in (("a", None), ("a", None), ("b", "g")):
        r = await queen.pop(ident, "q", partition=part, group=group, batch=1)
        await queen.ack(ident, [{**acks_for(r)[0], "status": "dlq"}], group=group)
    assert (await queen.dlq(ident, queue="q"))["total"] == 3
    assert (await queen.dlq(ident, queue="q", partition="a"))["total"] == 2
    only_g = await queen.dlq(ident, queue="q", group="g")
    assert only_g["total"] == 1 and only_g["messages"][0]["consumerGroup"] == "g"
    page = await queen.dlq(ident, queue="q", limit=2, offset=2)
    assert page["total"] == 3 and len(page["messages"]) == 1
    assert (await queen.dlq(ident, queue="other"))["total"] == 0
    with pytest.raises(QueenError):
        await queen.dlq(ident, queue="q", limit=0)


async def test_pop_flags_must_be_booleans(queen, ident):
    # Over TCP the flags arrive as whatever msgpack value the client sent; "false" is truthy,
    # and auto_ack="false" used to commit the message at delivery (lost to a consumer that
    # believed it held a lease).
    await queen.push(ident, [{"queue": "q", "payload": {"n": 1}}])
    for kwargs, reason in (
        ({"auto_ack": "false"}, "pop_bad_auto_ack"),
        ({"wait": "false"}, "pop_bad_wait"),
    ):
        with pytest.raises(QueenError) as ei:
            await queen.pop(ident, "q", **kwargs)
        assert (ei.value.status, ei.value.reason) == (400, reason)
    res = await queen.pop(ident, "q")
    assert res is not None and res["leaseId"] and len(res["messages"]) == 1


_CURSOR = "SELECT committed, batch_end, attempt_offset FROM queen.log_consumers"


def _txns(n: int) -> list[dict]:
    return [{"queue": "q", "payload": {"n": i}, "transactionId": f"t{i}"} for i in range(n)]


async def test_a_dlq_ack_of_one_message_ends_the_batch_lease(queen, ident, conn):
    # As the reference broker: the dead letter moves the cursor to the poison message (what is
    # below it counts as done) and ends the lease; the rest of the batch is redelivered.
    await queen.push(ident, _txns(3))
    r = await queen.pop(ident, "q", batch=3)
    a = acks_for(r)
    [res] = await queen.ack(ident, [{**a[1], "status": "dlq", "error": "poison"}])
    assert res["success"] and res["dlq"] and res["leaseReleased"]
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 1
    [res] = await queen.ack(ident, [a[0]])
    assert res["success"] and res["noop"]  # below the cursor: harmless
    [res] = await queen.ack(ident, [a[2]])
    assert not res["success"] and res["error"] == "invalid or expired lease"
    r = await queen.pop(ident, "q", batch=3)
    assert [(m["offset"], m["deliveryAttempt"]) for m in r["messages"]] == [(2, 2)]
    assert (await queen.dlq(ident, queue="q"))["total"] == 1


async def test_one_ack_call_settles_the_batch_around_a_dead_letter(queen, ident, conn):
    await queen.push(ident, _txns(3))
    r = await queen.pop(ident, "q", batch=3)
    a = acks_for(r)
    res = await queen.ack(ident, [a[0], {**a[1], "status": "dlq"}, a[2]])
    assert all(x["success"] and x["leaseReleased"] for x in res)
    assert [x["dlq"] for x in res] == [False, True, False]
    row = await conn.fetchrow(_CURSOR)
    assert tuple(row) == (2, None, None)
    assert await queen.pop(ident, "q", now=later(3600)) is None
    dl = await queen.dlq(ident, queue="q")
    assert [m["offset"] for m in dl["messages"]] == [1]
    # the next message is a first delivery, not a redelivery of the settled batch
    await queen.push(ident, items("q", 1))
    r = await queen.pop(ident, "q")
    assert [(m["offset"], m["deliveryAttempt"]) for m in r["messages"]] == [(3, 1)]


async def test_settling_stops_at_the_next_signal_and_after_the_last_ok(queen, ident, conn):
    await queen.push(ident, items("q", 6))
    r = await queen.pop(ident, "q", batch=6)
    a = acks_for(r)
    # 0 dead-lettered, 1 ok, 2 retry: the cursor stops at 1; 2..5 come back
    res = await queen.ack(ident, [{**a[0], "status": "dlq"}, a[1], {**a[2], "status": "retry"}])
    assert all(x["success"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 1
    r = await queen.pop(ident, "q", batch=6)
    a = acks_for(r)
    assert [m["offset"] for m in r["messages"]] == [2, 3, 4, 5]
    # 2 dead-lettered, 3 silent below the ok of 4: settled; 5 silent above it: redelivered
    await queen.ack(ident, [{**a[0], "status": "dlq"}, a[2]])
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 4
    r = await queen.pop(ident, "q", batch=6)
    assert [(m["offset"], m["deliveryAttempt"]) for m in r["messages"]] == [(5, 3)]


@pytest.mark.parametrize("dead_letters", [True, False])
async def test_an_exhausted_failed_settles_what_the_call_acks_above_it(
    queen, ident, conn, dead_letters
):
    await queen.configure_queue(
        ident,
        "q",
        {"retryLimit": 0, "deadLetterQueue": dead_letters, "dlqAfterMaxRetries": dead_letters},
    )
    await queen.push(ident, _txns(3))
    r = await queen.pop(ident, "q", batch=3)
    a = acks_for(r)
    res = await queen.ack(ident, [{**a[0], "status": "failed"}, a[1], a[2]])
    assert all(x["success"] for x in res) and res[0]["dlq"] is dead_letters
    row = await conn.fetchrow(_CURSOR)
    assert tuple(row) == (2, None, None)
    assert await queen.pop(ident, "q", now=later(3600)) is None
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == int(dead_letters)


async def test_the_previous_ack_procedure_answers_its_own_shape(queen, ident, conn):
    # Brokers of the previous release call log_ack_v1 and dead-letter through log_dlq_head_v1.
    await queen.push(ident, _txns(2))
    r = await queen.pop(ident, "q", batch=2)
    pid = r["messages"][0]["partitionId"]
    out = await conn.fetchval(
        "SELECT queen.log_ack_v1($1, $2, $3, $4, $5, $6, $7, now())",
        ident.tenant,
        [uuid.UUID(pid)] * 2,
        ["__QUEUE_MODE__"] * 2,
        [r["leaseId"]] * 2,
        txn_hashes(["t0", "t1"]),
        ["dlq", "ok"],
        [None, None],
    )
    [d] = out["dlq"]
    assert d["off"] == 0 and "settle" not in d and "release" not in d


async def test_a_spent_budget_dead_letters_every_failed_message_of_the_call(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retryLimit": 0})
    await queen.push(ident, _txns(3))
    r = await queen.pop(ident, "q", batch=3)
    res = await queen.ack(ident, acks_for(r, "failed", error="boom"))
    assert all(x["success"] and x["dlq"] for x in res)
    assert tuple(await conn.fetchrow(_CURSOR)) == (2, None, None)
    dl = await queen.dlq(ident, queue="q")
    assert sorted((m["offset"], m["transactionId"]) for m in dl["messages"]) == [
        (0, "t0"),
        (1, "t1"),
        (2, "t2"),
    ]
    assert {m["errorMessage"] for m in dl["messages"]} == {"boom"}
    assert await queen.pop(ident, "q", now=later(3600)) is None


async def test_dead_letters_in_one_call_and_where_they_stop(queen, ident, conn):
    await queen.push(ident, _txns(6))
    r = await queen.pop(ident, "q", batch=6)
    a = acks_for(r)
    # 0 and 2 dead-lettered, 1 done; 3 failed with budget left stops the settling there
    res = await queen.ack(
        ident,
        [
            {**a[0], "status": "dlq", "error": "first"},
            a[1],
            {**a[2], "status": "dlq"},
            {**a[3], "status": "failed"},
        ],
    )
    assert [x["dlq"] for x in res] == [True, False, True, False]
    assert all(x["success"] for x in res)
    assert await conn.fetchval("SELECT committed FROM queen.log_consumers") == 2
    dl = await queen.dlq(ident, queue="q")
    got = sorted((m["offset"], m["errorMessage"]) for m in dl["messages"])
    assert got == [(0, "first"), (2, "first")]  # no error of its own: the head's
    r = await queen.pop(ident, "q", batch=6)
    assert [m["offset"] for m in r["messages"]] == [3, 4, 5]


async def test_late_failed_acks_of_a_batch_taken_over_change_nothing(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retryLimit": 0})
    await queen.push(ident, _txns(2))
    r = await queen.pop(ident, "q", batch=2)
    a = acks_for(r, "failed")
    r2 = await queen.pop(ident, "q", batch=2, now=later(3600))  # the lease ran out
    assert [m["offset"] for m in r2["messages"]] == [0, 1]
    res = await queen.ack(ident, a)
    assert [x["error"] for x in res] == ["invalid or expired lease"] * 2
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 0


async def test_a_units_dead_letters_go_in_all_or_none(queen, ident, conn):
    # The lease is lost between two dead letters of one ack: the first is rolled back too.
    await queen.push(ident, _txns(2))
    r = await queen.pop(ident, "q", batch=2)
    valid = parse_acks(acks_for(r, "dlq"), None)
    pid, lease = r["partitionId"], r["leaseId"]
    entry = {"pid": pid, "group": "__QUEUE_MODE__", "settle": 1, "error": None}
    dlq = [
        {**entry, "worker": lease, "off": 0, "release": False, "i": 0},
        {**entry, "worker": "not-the-lease", "off": 1, "release": True, "i": 1},
    ]
    results: list = [None, None]
    await _dead_letters(conn, dlq, valid, results, None)
    assert [x["error"] for x in results] == ["dead-lettering failed: lease lost"] * 2
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 0
    row = await conn.fetchrow("SELECT committed, worker_id FROM queen.log_consumers")
    assert tuple(row) == (-1, lease)  # the lease is still held: nothing moved


async def test_dead_letters_inside_a_caller_transaction_commit_and_roll_back_with_it(
    queen, ident, conn
):
    await queen.push(ident, _txns(3))
    r = await queen.pop(ident, "q", batch=3)
    a = acks_for(r)
    acks = [{**a[0], "status": "dlq"}, a[1], {**a[2], "status": "dlq"}]
    rt = queen.rt
    async with rt.pool.acquire() as c:
        tx = c.transaction()
        await tx.start()
        res = await apply_acks(rt, c, ident, acks)
        assert [x["dlq"] for x in res] == [True, False, True]
        await tx.rollback()  # as a transaction bundle does when another item fails
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 0
    assert await conn.fetchval("SELECT worker_id FROM queen.log_consumers") == r["leaseId"]
    async with rt.pool.acquire() as c, c.transaction():
        res = await apply_acks(rt, c, ident, acks)
    assert all(x["success"] for x in res)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 2
    assert tuple(await conn.fetchrow(_CURSOR)) == (2, None, None)
