"""The transaction wire with a timers rider: one PostgreSQL transaction, all or nothing."""

import pytest

from queen_timers.errors import QueenError
from queen_timers.timers import fire

from .helpers import cancel, log_frames, sched, timer_row


async def test_pushes_and_timers_commit_together(queen, ident, conn):
    await queen.timers_apply(ident, [sched("orders", "k2", 60000)])
    res = await queen.transaction(
        ident,
        {
            "operations": [
                {
                    "type": "push",
                    "items": [
                        {
                            "queue": "next",
                            "partition": "p9",
                            "payload": {"x": 1},
                            "transactionId": "tx-push",
                        },
                        {"queue": "next", "payload": {"x": 2}},
                    ],
                }
            ],
            "requiredLeases": [],
            "timers": [
                sched("orders", "k1", 500, txn="tt", payload={"y": 2}),
                cancel("orders", "k2"),
            ],
        },
    )
    assert res["success"] is True and res["transactionId"]
    r = res["results"]
    assert [x["index"] for x in r] == [0, 1, 2, 3]
    assert [x["type"] for x in r] == ["push", "push", "timer", "timer"]
    assert r[0]["transactionId"] == "tx-push" and r[0]["success"] is True
    assert (r[2]["opIndex"], r[2]["status"], r[2]["txn"], r[2]["ok"]) == (
        0,
        "scheduled",
        "tt",
        True,
    )
    assert r[2]["messageId"] and r[2]["deliverAt"]
    assert (r[3]["opIndex"], r[3]["status"]) == (1, "cancelled")
    assert len(await log_frames(conn, queue="next")) == 2
    assert await timer_row(conn, "orders", "k1") is not None
    assert await timer_row(conn, "orders", "k2") is None


async def test_a_duplicate_push_rolls_the_rider_back(queen, ident, conn):
    await queen.push(ident, [{"queue": "next", "payload": 1, "transactionId": "seen"}])
    await queen.timers_apply(ident, [sched("orders", "keep", 60000)])
    res = await queen.transaction(
        ident,
        {
            "operations": [
                {
                    "type": "push",
                    "items": [{"queue": "next", "payload": 2, "transactionId": "seen"}],
                }
            ],
            "timers": [sched("orders", "new", 0), cancel("orders", "keep")],
        },
    )
    assert res["success"] is False and res["reason"] == "duplicate" and res["results"] == []
    assert await timer_row(conn, "orders", "new") is None
    assert await timer_row(conn, "orders", "keep") is not None
    assert len(await log_frames(conn, queue="next")) == 1


async def test_a_rejected_ack_rolls_everything_back(queen, ident, conn):
    res = await queen.transaction(
        ident,
        {
            "operations": [
                {"type": "push", "items": [{"queue": "next", "payload": 1}]},
                {
                    "type": "ack",
                    "transactionId": "nope",
                    "partitionId": "00000000-0000-0000-0000-000000000000",
                    "status": "completed",
                },
            ],
            "timers": [sched("orders", "new", 0)],
        },
    )
    assert res["success"] is False and res["reason"] == "ack_rejected"
    assert await timer_row(conn, "orders", "new") is None
    assert await log_frames(conn) == []


async def test_ack_push_and_timer_in_one_bundle(queen, ident, conn):
    await queen.push(ident, [{"queue": "in", "payload": {"n": 1}, "transactionId": "m1"}])
    popped = await queen.pop(ident, "in")
    m = popped["messages"][0]
    res = await queen.transaction(
        ident,
        {
            "operations": [
                {
                    "type": "ack",
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "leaseId": m["leaseId"],
                    "status": "completed",
                },
                {"type": "push", "items": [{"queue": "out", "payload": {"n": 2}}]},
            ],
            "timers": [sched("later", "k", 0, txn="t-later")],
        },
    )
    assert res["success"] is True
    assert [x["type"] for x in res["results"]] == ["ack", "push", "timer"]
    assert res["results"][0]["success"] is True
    assert await queen.pop(ident, "in") is None  # acked
    assert (await fire.drain(queen.rt)).fired == 1
    assert [f["txn"] for f in await log_frames(conn, queue="later")] == ["t-later"]


async def test_riders_only_bundle_and_refusals(queen, ident, conn):
    res = await queen.transaction(ident, {"operations": [], "timers": [sched("o", "k", 100)]})
    assert res["success"] is True and res["results"][0]["index"] == 0
    res = await queen.transaction(ident, {"timers": [sched("o", "k2", 100)]})
    assert res["success"] is True
    for body, reason, status in [
        ({"operations": [], "timers": {"op": "schedule"}}, "bad_request", 400),
        ({"operations": [{"type": "timer", **sched("o", "x")}]}, "bad_request", 400),
        ({"timers": [sched("o", "x", producerSub="eve")]}, "bad_request", 400),
        ({"timers": [sched("o", "x", 7776000001)]}, "timer_horizon_exceeded", 403),
        ({"timers": [sched("o", "x"), sched("o", "x")]}, "bad_request", 400),
        ({}, "bad_request", 400),
    ]:
        with pytest.raises(QueenError) as e:
            await queen.transaction(ident, body)
        assert (e.value.reason, e.value.status) == (reason, status), body
        assert e.value.extra["success"] is False and e.value.extra["results"] == []
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE timer_key = 'x'") == 0


async def test_paused_schedule_is_403_on_the_wire_and_cancels_pass(queen, ident, conn):
    await queen.timers_apply(ident, [sched("o", "k", 60000)])
    queen.rt.switches.timers_schedule_enabled = False
    try:
        with pytest.raises(QueenError) as e:
            await queen.transaction(ident, {"timers": [sched("o", "k2", 0)]})
        assert (e.value.reason, e.value.status, e.value.retry_after) == (
            "timers_disabled",
            403,
            None,
        )
        res = await queen.transaction(ident, {"timers": [cancel("o", "k")]})
        assert res["results"][0]["status"] == "cancelled"
    finally:
        queen.rt.switches.timers_schedule_enabled = True


async def test_bundles_stay_all_or_nothing_while_the_backends_are_killed(queen, ident, conn):
    """Transactions carrying a push and a timer, 8 callers x 20, while the backend of every
    4th bundle is terminated after its timer step ran inside the open transaction and
    before its push step (fault point transaction.timers_applied, 10 times): exactly those
    10 bundles answer the 503 to retry, and each of them is absent whole (its timer step
    rolled back with the connection); every other bundle is there whole."""
    import asyncio
    from collections import Counter

    from queen_timers.log.frames import txn_hash
    from queen_timers.testing.chaos import Kill, killing

    answers: dict[int, str] = {}

    async def caller(i: int) -> None:
        for j in range(1, 21):
            n = i * 100_000 + j
            try:
                res = await queen.transaction(
                    ident,
                    {
                        "operations": [
                            {
                                "type": "push",
                                "items": [
                                    {
                                        "queue": "bundled",
                                        "payload": {"n": n},
                                        "transactionId": f"p{n}",
                                    }
                                ],
                            }
                        ],
                        "timers": [sched("bundled-timers", f"k{n}", 60_000, txn=f"t{n}")],
                    },
                )
                answers[n] = "ok" if res["success"] else res["reason"]
            except QueenError as e:
                assert e.status == 503 and e.retry_after == 1, e.to_dict()
                answers[n] = "503"

    kills = Kill(every=4, times=10)
    async with killing(conn, {"transaction.timers_applied": kills}) as chaos:
        await asyncio.gather(*(caller(i) for i in range(8)))
    chaos.assert_done()
    assert sorted(Counter(answers.values()).items()) == [("503", 10), ("ok", 150)], answers
    logged = {r["txn_hash"] for r in await conn.fetch("SELECT txn_hash FROM queen.log_txns")}
    staged = {
        r["timer_key"]
        for r in await conn.fetch(
            "SELECT timer_key FROM queen.log_timers WHERE queue = 'bundled-timers'"
        )
    }
    for n, answer in answers.items():
        pushed, timer = txn_hash(f"p{n}") in logged, f"k{n}" in staged
        assert pushed == timer, (n, answer, pushed, timer)  # whole or not at all
        assert pushed == (answer == "ok"), (n, answer)
