"""A schedule's occurrences through the real fire, with time travel: each one delivered once,
the next staged in the same transaction, the ledger written; run now, pause, resume, delete."""

from __future__ import annotations

import datetime as dt

from queen_timers.timers import fire

from .helpers import body, frames, occurrence_counts, pending, utc

T0 = utc(2030, 1, 1)


def s(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


async def test_an_interval_fires_each_occurrence_once_and_stages_the_next(queen, conn, ident):
    made = await queen.schedule_set(ident, body("jobs", "tick", everyMs=60_000), now=T0)
    assert made["status"] == "created"
    sched = made["schedule"]
    assert sched["nextAt"] == "2030-01-01T00:01:00.000000Z"
    (row,) = await pending(conn, "jobs")
    assert row["timer_key"] == "schedule:next:tick"
    assert row["txn"] == f"sched:{sched['scheduleId']}@2030-01-01T00:01:00.000Z"

    assert (await fire.drain(queen.rt, now=s(59.9))).fired == 0
    for n in range(1, 6):
        report = await fire.drain(queen.rt, now=s(60 * n + 0.5))
        assert report.fired == 1
        (row,) = await pending(conn, "jobs")
        assert row["deliver_at"] == s(60 * (n + 1))
    counts = await occurrence_counts(conn, "jobs")
    assert sorted(counts) == [f"2030-01-01T00:0{n}:00.000Z" for n in range(1, 6)]
    assert set(counts.values()) == {1}
    got = await frames(conn, "jobs")
    assert all(f["payload"] == b'{"s": "tick"}' for f in got)

    view = await queen.schedule_peek(ident, "jobs", "tick", count=3, runs=10)
    assert [r["occurrenceAt"] for r in view["runs"]] == [
        f"2030-01-01T00:0{n}:00.000000Z" for n in range(5, 0, -1)
    ]
    assert {r["outcome"] for r in view["runs"]} == {"fired"}
    assert all(abs(r["lateMs"] - 500) < 1 for r in view["runs"])
    assert all(r["firedAt"] > r["occurrenceAt"] for r in view["runs"])  # none early
    assert [o["at"] for o in view["next"]] == [
        "2030-01-01T00:06:00.000Z",
        "2030-01-01T00:07:00.000Z",
        "2030-01-01T00:08:00.000Z",
    ]


async def test_jitter_delays_each_occurrence_inside_its_window(queen, conn, ident):
    await queen.schedule_set(ident, body("jobs", "j", cron="0 * * * *", jitterMs=600_000), now=T0)
    view = await queen.schedule_peek(ident, "jobs", "j", count=4)
    for o in view["next"]:
        at, due = dt.datetime.fromisoformat(o["at"]), dt.datetime.fromisoformat(o["dueAt"])
        assert dt.timedelta(0) <= due - at < dt.timedelta(minutes=10)
    assert len({o["dueAt"][14:] for o in view["next"]}) > 1  # not the same offset each hour
    (row,) = await pending(conn, "jobs")
    first_due = dt.datetime.fromisoformat(view["next"][0]["dueAt"])
    assert row["deliver_at"] == first_due
    assert (await fire.drain(queen.rt, now=first_due - dt.timedelta(milliseconds=1))).fired == 0
    assert (await fire.drain(queen.rt, now=first_due)).fired == 1


async def test_run_now_adds_one_occurrence_and_keeps_the_cadence(queen, conn, ident):
    await queen.schedule_set(ident, body("jobs", "h", cron="0 * * * *"), now=T0)
    ran = await queen.schedule_run_now(ident, "jobs", "h", now=s(600))
    assert ran["status"] == "scheduled" and ran["runAt"] == "2030-01-01T00:10:00.000Z"
    assert (await fire.drain(queen.rt, now=s(600.2))).fired == 1
    assert list(await occurrence_counts(conn, "jobs")) == ["run:2030-01-01T00:10:00.000Z"]
    view = await queen.schedule_peek(ident, "jobs", "h")
    assert view["nextAt"] == "2030-01-01T01:00:00.000000Z"  # the cadence did not move
    assert view["runs"][0]["kind"] == "run"
    assert (await fire.drain(queen.rt, now=s(3600.5))).fired == 1
    assert len(await frames(conn, "jobs")) == 2


async def test_pause_withdraws_the_occurrence_and_resume_restores_it(queen, conn, ident):
    await queen.schedule_set(ident, body("jobs", "p", cron="* * * * *"), now=T0)
    paused = await queen.schedule_pause(ident, "jobs", "p", now=s(10))
    assert paused["paused"] is True and await pending(conn, "jobs") == []
    assert (await fire.drain(queen.rt, now=s(70))).fired == 0
    resumed = await queen.schedule_resume(ident, "jobs", "p", now=s(80))
    assert resumed["paused"] is False and resumed["nextAt"] == "2030-01-01T00:01:00.000000Z"
    # 20 s late, inside the misfire grace: delivered, and the cadence goes on
    assert (await fire.drain(queen.rt, now=s(80))).fired == 1
    (row,) = await pending(conn, "jobs")
    assert row["deliver_at"] == s(120)
    # a long pause under `skip`: the missed occurrence is dropped at its fire, not delivered
    await queen.schedule_pause(ident, "jobs", "p", now=s(100))
    await queen.schedule_resume(ident, "jobs", "p", now=s(3030))
    report = await fire.drain(queen.rt, now=s(3030))
    # 00:02 is missed and skipped; the chain jumps to 00:50, 30 s late: inside the grace
    assert report.skipped == 1 and report.fired == 1
    (row,) = await pending(conn, "jobs")
    assert row["deliver_at"] == s(3060)
    assert sorted(await occurrence_counts(conn, "jobs")) == [
        "2030-01-01T00:01:00.000Z",
        "2030-01-01T00:50:00.000Z",
    ]
    view = await queen.schedule_peek(ident, "jobs", "p")
    assert [r["outcome"] for r in view["runs"][:2]] == ["fired", "skipped"]


async def test_delete_and_recreate_never_delivers_an_occurrence_twice(queen, conn, ident):
    await queen.schedule_set(ident, body("jobs", "d", cron="* * * * *"), now=s(30))
    assert (await fire.drain(queen.rt, now=s(60.5))).fired == 1
    gone = await queen.schedule_delete(ident, "jobs", "d")
    assert gone["deleted"] is True and await pending(conn, "jobs") == []
    assert (await queen.schedule_delete(ident, "jobs", "d"))["deleted"] is False
    # re-created by a broker whose clock lags: its first occurrence is the one already fired
    again = await queen.schedule_set(ident, body("jobs", "d", cron="* * * * *"), now=s(59.9))
    assert again["status"] == "created"
    assert again["schedule"]["nextAt"] == "2030-01-01T00:01:00.000000Z"
    report = await fire.drain(queen.rt, now=s(61))
    assert report.fired == 0 and report.duplicate == 1
    assert await occurrence_counts(conn, "jobs") == {"2030-01-01T00:01:00.000Z": 1}
    # the duplicate still advanced the cadence
    (row,) = await pending(conn, "jobs")
    assert row["deliver_at"] == s(120)
    assert (await fire.drain(queen.rt, now=s(120.5))).fired == 1


async def test_a_new_definition_replaces_an_occurrence_claimed_in_flight(queen, conn, ident):
    await queen.schedule_set(ident, body("jobs", "g", cron="* * * * *"), now=T0)
    claimed = await fire.claim(queen.rt, now=s(60.1))
    assert len(claimed) == 1
    updated = await queen.schedule_set(ident, body("jobs", "g", cron="*/5 * * * *"), now=s(60.2))
    assert updated["status"] == "updated" and updated["schedule"]["generation"] == 2
    report = await fire.fire_claimed(queen.rt, claimed, now=s(60.3))
    assert report.fired == 0 and report.stale == 1  # the old definition's fire lost
    (row,) = await pending(conn, "jobs")
    assert row["deliver_at"] == s(300)
    assert (await fire.drain(queen.rt, now=s(300.5))).fired == 1
    assert list(await occurrence_counts(conn, "jobs")) == ["2030-01-01T00:05:00.000Z"]


async def test_an_end_stops_the_cadence(queen, conn, ident):
    await queen.schedule_set(
        ident,
        body("jobs", "e", everyMs=60_000, endAt="2030-01-01T00:02:00Z"),
        now=T0,
    )
    assert (await fire.drain(queen.rt, now=s(60.5))).fired == 1
    assert (await fire.drain(queen.rt, now=s(120.5))).fired == 1
    assert await pending(conn, "jobs") == []
    view = await queen.schedule_peek(ident, "jobs", "e")
    assert "nextAt" not in view and view["next"] == []


async def test_an_encrypting_queue_stores_and_delivers_no_plaintext(queen, conn, ident):
    import base64
    import json

    await queen.configure_queue(ident, "secret", {"encryptionEnabled": True})
    payload = base64.b64encode(json.dumps({"card": "4111"}).encode()).decode()
    await queen.schedule_set(
        ident,
        {"queue": "secret", "scheduleKey": "c", "everyMs": 60_000, "payload": payload},
        now=T0,
    )
    stored = await conn.fetchrow("SELECT payload, encrypted FROM queen.schedules")
    assert stored["encrypted"] is True and b"4111" not in stored["payload"]
    for n in (1, 2):
        assert (await fire.drain(queen.rt, now=s(60 * n + 0.5))).fired == 1
    got = await frames(conn, "secret")
    assert len(got) == 2 and all(b"4111" not in f["payload"] for f in got)
    popped = await queen.pop(ident, "secret", batch=2)
    assert [m["data"] for m in popped["messages"]] == [{"card": "4111"}] * 2
