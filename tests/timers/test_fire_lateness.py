"""Lateness counts from when a timer could first fire: its deliver_at, never before it was
scheduled. A negative delay is legal (it orders a timer before others), and measured from its
deliver_at any tenant could make the fire read as days late: the fire-lag metric, the console's
p99 (both fed by FireReport.lags_ms) and the backlog gauge (the probe's lateMs)."""

import datetime as dt
import uuid

from queen_timers.timers import fire, store
from queen_timers.timers.store import ClaimedTimer

from .helpers import at, sched

DAY_MS = 86_400_000
# The fire stamps its frames with the database's clock whatever `now` says, so these tests
# schedule in the past of that clock and fire in its present: a lag is then at least what the
# schedule says and at most that plus the time the test itself takes (bounded generously).
SLACK_MS = 30_000


async def put(conn, ops, now: float | dt.datetime, tenant: uuid.UUID):
    when = now if isinstance(now, dt.datetime) else at(now)
    return await store.apply(conn, ops, tenant, "alice", when)


async def db_ago(conn, seconds: float) -> dt.datetime:
    return await conn.fetchval("SELECT now() - make_interval(secs => $1)", seconds)


async def test_a_negative_delay_is_late_from_its_schedule_not_its_deliver_at(queen, conn):
    t = uuid.uuid4()
    three_s_ago = await db_ago(conn, 3)
    await put(conn, [sched("q", "past", -3 * DAY_MS), sched("q", "soon", 1000)], three_s_ago, t)
    r = await fire.drain(queen.rt)
    assert r.fired == 2
    # "past" could fire when it was scheduled (3 s ago), "soon" a second later
    soon, past = sorted(r.lags_ms)
    assert 2000 <= soon < 2000 + SLACK_MS and 3000 <= past < 3000 + SLACK_MS
    # "past" counts from its uuid7's stamp, whole milliseconds cut down from the instant;
    # "soon" from its deliver_at, exact to the microsecond: the gap is 1 s plus that cut
    assert 1000 <= past - soon < 1001


async def test_a_reschedule_to_the_past_counts_from_the_reschedule(queen, conn):
    t = uuid.uuid4()
    await put(conn, [sched("q", "k", DAY_MS)], await db_ago(conn, 12), t)
    await put(conn, [sched("q", "k", -DAY_MS)], await db_ago(conn, 2), t)
    r = await fire.drain(queen.rt)
    assert r.fired == 1 and 2000 <= r.lags_ms[0] < 2000 + SLACK_MS


async def test_the_backlog_gauge_reads_the_same_lateness(queen, conn):
    t = uuid.uuid4()
    await put(conn, [sched("q", "past", -3 * DAY_MS)], 0, t)
    p = await fire.probe(queen.rt, now=at(5))
    assert p.due == 1 and round(p.late_ms) == 5000
    # an ordinary late timer still reads from its deliver_at
    await put(conn, [sched("q", "late", 1000)], 0, t)
    p = await fire.probe(queen.rt, now=at(61))
    assert round(p.late_ms) == 61000  # "past": scheduled at 0; "late" is 60 s late


async def test_the_broker_path_stamps_its_schedule_instant_too(queen, ident, conn):
    """Through the service (no time travel: the broker stamps a uuid7 of its own clock)."""
    [res] = await queen.timers_apply(ident, [sched("q", "neg", -3 * DAY_MS)])
    assert res["status"] == "scheduled"
    r = await fire.drain(queen.rt)
    assert r.fired == 1 and 0 <= r.lags_ms[0] < 60_000


def test_an_id_that_is_not_a_uuid7_leaves_deliver_at():
    t = ClaimedTimer.__new__(ClaimedTimer)
    object.__setattr__(t, "message_id", uuid.uuid4())
    object.__setattr__(t, "deliver_at", at(0))
    assert fire.could_fire_at(t) == at(0)
