"""The fire, driven directly: claim + fire_claimed in one transaction, exactly once."""

import json

from queen_timers.identity import DEFAULT_TENANT
from queen_timers.timers import fire, store

from .helpers import at, log_frames, sched, timer_row


async def test_schedule_then_fire_delivers_the_promised_frame(queen, conn):
    rt = queen.rt
    res = await store.apply(
        conn,
        [sched("orders", "k1", 5000, txn="t-1", payload={"a": 1})],
        DEFAULT_TENANT,
        "alice",
        at(0),
    )
    assert res[0]["status"] == "scheduled" and res[0]["ok"] is True
    assert res[0]["deliverAt"] == "2030-01-01T00:00:05.000000Z"
    assert await conn.fetchval("SELECT count(*) FROM queen.queues") == 0  # never at schedule

    assert (await fire.drain(rt, now=at(4.9))).fired == 0
    report = await fire.drain(rt, now=at(5.1))
    assert report.fired == 1 and report.stale == 0
    frames = await log_frames(conn, queue="orders")
    assert len(frames) == 1
    f = frames[0]
    assert str(f["id"]) == res[0]["messageId"]
    assert f["txn"] == "t-1" and f["producerSub"] == "alice" and f["partition"] == "Default"
    assert json.loads(f["payload"]) == {"a": 1}
    assert await timer_row(conn, "orders", "k1") is None
    assert (await fire.drain(rt, now=at(60))).fired == 0
