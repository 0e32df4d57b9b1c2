"""Per-tenant limits on one broker (queen_timers/quotas.py, timers-contract §8): the cap on
pending timers is exact, sticky until a measurement is under 90 % of it, and charges of calls
that did not commit come back; the write rate is a token bucket per call with Retry-After.
Measurements are driven by calling refresh() (the loop is off: refresh_ms=0); the bucket's
clock is replaced, so nothing waits on time."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from prometheus_client import generate_latest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.chaos import Kill, killing
from queen_timers.testing.fixtures import started_broker

from .helpers import sched

NO_LOOP = {"timers_tenant_quota_refresh_ms": 0, "timers_tenant_quota_census_ms": 0}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def tenant() -> Identity:
    return Identity(tenant=uuid.uuid4(), subject="tester")


async def pending(conn, who: Identity) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM queen.log_timers WHERE tenant_id = $1", who.tenant
    )


async def refused(awaitable) -> QueenError:
    with pytest.raises(QueenError) as ei:
        await awaitable
    return ei.value


async def test_one_broker_never_passes_the_cap(db_url, conn):
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP) as q:
        who = tenant()
        calls = [q.timers_apply(who, [sched("q", f"k{i}", 60_000)]) for i in range(40)]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        ok = [o for o in outcomes if isinstance(o, list)]
        errors = [o for o in outcomes if isinstance(o, QueenError)]
        assert len(ok) == 10 and len(errors) == 30, outcomes
        assert {(e.code, e.status, e.retry_after) for e in errors} == {
            ("timers_quota_exceeded", 403, None)
        }
        assert await pending(conn, who) == 10
        # Another tenant has a cap of its own.
        other = tenant()
        assert (await q.timers_apply(other, [sched("q", "k", 60_000)]))[0]["ok"]


async def test_the_refusal_is_sticky_until_under_ninety_percent(db_url, conn):
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP) as q:
        who = tenant()
        await q.timers_apply(who, [sched("q", f"k{i}", 60_000) for i in range(10)])
        await refused(q.timers_apply(who, [sched("q", "k10", 60_000)]))
        # 9 pending is not under 90 % of 10: still refused after a measurement.
        assert (await q.timer_cancel(who, "q", "k0"))["status"] == "cancelled"
        await q.quotas.refresh()
        err = await refused(q.timers_apply(who, [sched("q", "k10", 60_000)]))
        assert err.code == "timers_quota_exceeded"
        assert (await q.tenant_quota_get(who))["overQuota"] is True
        # 8 is: the next measurement lets it schedule again, up to the cap.
        await q.timer_cancel(who, "q", "k1")
        await q.quotas.refresh()
        await q.timers_apply(who, [sched("q", "k10", 60_000), sched("q", "k11", 60_000)])
        assert await pending(conn, who) == 10
        await refused(q.timers_apply(who, [sched("q", "k12", 60_000)]))


async def test_a_refused_batch_writes_nothing_and_reschedules_add_no_row(db_url, conn):
    async with started_broker(db_url, timers_tenant_max_pending=3, **NO_LOOP) as q:
        who = tenant()
        await refused(q.timers_apply(who, [sched("q", f"k{i}", 60_000) for i in range(4)]))
        assert await pending(conn, who) == 0
        await q.timers_apply(who, [sched("q", "a", 60_000), sched("q", "b", 60_000)])
        # rescheduling pending keys charges nothing that stays: the third new key fits
        for _ in range(3):
            res = await q.timers_apply(who, [sched("q", "a", 90_000, op="reschedule")])
            assert res[0]["status"] == "rescheduled"
        await q.timers_apply(who, [sched("q", "c", 60_000)])
        await refused(q.timers_apply(who, [sched("q", "d", 60_000)]))
        assert await pending(conn, who) == 3


async def test_a_batch_refused_for_its_size_leaves_no_sticky_refusal(db_url, conn):
    # The attack: a tenant under its cap sends a batch bigger than its headroom; the refusal
    # must not flag it, or its next one-op schedule would be refused under the cap.
    async with started_broker(db_url, timers_tenant_max_pending=10, **NO_LOOP) as q:
        who = tenant()
        await q.timers_apply(who, [sched("q", f"k{i}", 60_000) for i in range(5)])
        for size in (6, 100):
            err = await refused(
                q.timers_apply(who, [sched("q", f"b{i}", 60_000) for i in range(size)])
            )
            assert (err.code, err.status) == ("timers_quota_exceeded", 403)
        view = await q.tenant_quota_get(who)
        assert (view["overQuota"], view["pending"]) == (False, 5)
        await q.timers_apply(who, [sched("q", "one", 60_000)])
        await q.timers_apply(who, [sched("q", f"c{i}", 60_000) for i in range(4)])  # exactly 10
        assert await pending(conn, who) == 10
        # at the cap the refusal is sticky, whatever the call's size
        await refused(q.timers_apply(who, [sched("q", "eleven", 60_000)]))
        assert (await q.tenant_quota_get(who))["overQuota"] is True


async def test_fire_now_takes_a_token_of_the_write_rate(db_url, conn):
    clock = Clock()
    async with started_broker(
        db_url,
        timers_tenant_max_pending=1,
        timers_tenant_writes_per_sec=1.0,
        timers_tenant_write_burst=1,
        **NO_LOOP,
    ) as q:
        q.quotas.clock = clock
        who = tenant()
        await q.timers_apply(who, [sched("q", "k", 60_000)])
        # the bucket is empty: fire now is refused as a schedule would be, and changes nothing
        before = await conn.fetchval(
            "SELECT deliver_at FROM queen.log_timers WHERE tenant_id = $1", who.tenant
        )
        err = await refused(q.timer_fire_now(who, "q", "k"))
        assert (err.code, err.status, err.retry_after) == ("rate_limited", 429, 1)
        after = await conn.fetchval(
            "SELECT deliver_at FROM queen.log_timers WHERE tenant_id = $1", who.tenant
        )
        assert after == before
        clock.t += 1.0
        # at its cap (1 pending of 1), fire now still works: it adds no timer
        assert (await q.timer_fire_now(who, "q", "k"))["status"] == "rescheduled"
        # and it took the token: the next schedule-like call waits for the next one
        err = await refused(q.timer_fire_now(who, "q", "k"))
        assert err.status == 429
        clock.t += 1.0
        # a call refused before the database (bad key) takes no token
        assert (await refused(q.timer_fire_now(who, "q", ""))).status == 400
        assert (await q.timer_fire_now(who, "q", "k"))["status"] == "rescheduled"


async def test_cancels_and_reads_are_never_blocked(db_url):
    async with started_broker(
        db_url,
        timers_tenant_max_pending=1,
        timers_tenant_writes_per_sec=0.001,
        timers_tenant_write_burst=1,
        **NO_LOOP,
    ) as q:
        who = tenant()
        await q.timers_apply(who, [sched("q", "k", 60_000)])
        assert (await refused(q.timers_apply(who, [sched("q", "j", 60_000)]))).status == 429
        assert (await q.timer_peek(who, "q", "k"))["found"] is True
        assert len((await q.timers_list(who, "q"))["rows"]) == 1
        assert (await q.timers_count(who, "q", "k"))["count"] == 1
        assert (await q.timers_apply(who, [{"op": "cancel", "queue": "q", "timerKey": "k"}]))[0][
            "status"
        ] == "cancelled"
        assert (await q.timer_cancel(who, "q", "k"))["status"] == "absent"


async def test_the_write_rate_is_a_bucket_per_call_with_retry_after(db_url):
    clock = Clock()
    async with started_broker(
        db_url, timers_tenant_writes_per_sec=2.0, timers_tenant_write_burst=2, **NO_LOOP
    ) as q:
        q.quotas.clock = clock
        who = tenant()
        # one token per call, whatever its size
        await q.timers_apply(who, [sched("q", f"a{i}", 60_000) for i in range(50)])
        await q.timers_apply(who, [sched("q", "b", 60_000)])
        err = await refused(q.timers_apply(who, [sched("q", "c", 60_000)]))
        assert (err.code, err.status, err.retry_after) == ("rate_limited", 429, 1)
        clock.t += 0.5  # one token back (2 a second)
        await q.timers_apply(who, [sched("q", "c", 60_000)])
        await refused(q.timers_apply(who, [sched("q", "d", 60_000)]))
        # cancels take no token
        await q.timer_cancel(who, "q", "c")
    async with started_broker(
        db_url, timers_tenant_writes_per_sec=0.1, timers_tenant_write_burst=1, **NO_LOOP
    ) as q:
        q.quotas.clock = clock
        who = tenant()
        await q.timers_apply(who, [sched("q", "a", 60_000)])
        clock.t += 2.5
        err = await refused(q.timers_apply(who, [sched("q", "b", 60_000)]))
        assert err.retry_after == 8  # 0.75 of a token missing at 0.1 a second: 7.5 s, rounded up


async def test_a_call_the_cap_refuses_keeps_its_token(db_url):
    async with started_broker(
        db_url,
        timers_tenant_max_pending=1,
        timers_tenant_writes_per_sec=0.001,
        timers_tenant_write_burst=2,
        **NO_LOOP,
    ) as q:
        q.quotas.clock = Clock()
        who = tenant()
        await q.timers_apply(who, [sched("q", "a", 60_000)])
        for _ in range(3):
            assert (await refused(q.timers_apply(who, [sched("q", "b", 60_000)]))).status == 403
        await q.timer_cancel(who, "q", "a")
        await q.quotas.refresh()
        await q.timers_apply(who, [sched("q", "b", 60_000)])  # the second token, still there
        assert (await refused(q.timers_apply(who, [sched("q", "c", 60_000)]))).status == 429


async def test_a_call_that_did_not_commit_gives_its_charge_back(db_url, conn):
    async with started_broker(db_url, timers_tenant_max_pending=2, **NO_LOOP) as q:
        who = tenant()
        async with killing(conn, {"timers.schedule": Kill(every=1, times=2)}) as chaos:
            for key in ("a", "b"):
                err = await refused(q.timers_apply(who, [sched("q", key, 60_000)]))
                assert err.status == 503
        chaos.assert_done()
        # a transaction-wire bundle that rolls back (a duplicate push) gives it back too
        await q.push(who, [{"queue": "log", "payload": "x", "transactionId": "dup"}])
        body = {
            "operations": [
                {
                    "type": "push",
                    "items": [{"queue": "log", "payload": "y", "transactionId": "dup"}],
                }
            ],
            "timers": [sched("q", "c", 60_000)],
        }
        assert (await q.transaction(who, body))["success"] is False
        # No charge is left: both slots of the cap are free, without a measurement.
        await q.timers_apply(who, [sched("q", "a", 60_000), sched("q", "b", 60_000)])
        assert await pending(conn, who) == 2


async def test_the_transaction_wire_obeys_both_limits(db_url, conn):
    async with started_broker(
        db_url,
        timers_tenant_max_pending=1,
        timers_tenant_writes_per_sec=0.001,
        timers_tenant_write_burst=2,
        **NO_LOOP,
    ) as q:
        q.quotas.clock = Clock()
        who = tenant()
        ok = await q.transaction(who, {"timers": [sched("q", "a", 60_000)]})
        assert ok["success"] is True
        err = await refused(q.transaction(who, {"timers": [sched("q", "b", 60_000)]}))
        assert (err.code, err.status) == ("timers_quota_exceeded", 403)
        assert err.to_dict()["success"] is False and "transactionId" in err.to_dict()
        # a cancel-only rider is never gated, and a push-only bundle takes no token
        cancel = {"timers": [{"op": "cancel", "queue": "q", "timerKey": "a"}]}
        assert (await q.transaction(who, cancel))["success"] is True
        push = {"operations": [{"type": "push", "items": [{"queue": "l", "payload": "p"}]}]}
        for _ in range(3):
            assert (await q.transaction(who, push))["success"] is True
        await q.quotas.refresh()
        assert (await q.transaction(who, {"timers": [sched("q", "b", 60_000)]}))["success"]
        err = await refused(q.transaction(who, {"timers": [sched("q", "c", 60_000)]}))
        assert (err.code, err.status, err.retry_after) == ("rate_limited", 429, 1000)
        assert await pending(conn, who) == 1


async def test_overrides_are_admin_only_validated_and_reach_the_gate(db_url, conn):
    async with started_broker(db_url, timers_tenant_max_pending=100, **NO_LOOP) as q:
        who = tenant()
        admin = Identity(tenant=uuid.uuid4(), subject="ops", admin=True)
        t = str(who.tenant)
        err = await refused(q.tenant_quota_set(who, t, {"maxPending": 1}))
        assert (err.code, err.status) == ("forbidden", 403)
        assert (await refused(q.tenant_quota_get(who, str(admin.tenant)))).status == 403
        for body, reason in (
            ({}, "quota_nothing_to_set"),
            ({"maxPending": -2}, "quota_bad_value"),
            ({"maxPending": 1.5}, "quota_bad_value"),
            ({"maxPending": True}, "quota_bad_value"),
            ({"writesPerSec": 0}, "quota_bad_value"),
            ({"burst": "unlimited"}, "quota_bad_value"),
            ({"maxPending": 1, "maxPendng": 2}, "quota_unknown_key"),
            ([1], "quota_bad_body"),
        ):
            e = await refused(q.tenant_quota_set(admin, t, body))
            assert (e.status, e.reason) == (400, reason), (body, e.to_dict())
        assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quotas") == 0
        assert (await refused(q.tenant_quota_set(admin, "nope", {"burst": 1}))).status == 400

        view = await q.tenant_quota_set(admin, t, {"maxPending": 1, "writesPerSec": 5})
        assert view["maxPending"] == 1 and view["writesPerSec"] == 5.0 and view["burst"] == 5
        assert view["overrides"] == {"maxPending": 1, "writesPerSec": 5.0, "burst": None}
        await q.timers_apply(who, [sched("q", "a", 60_000)])
        await refused(q.timers_apply(who, [sched("q", "b", 60_000)]))
        # the tenant reads its own; "unlimited" lifts the cap whatever the default
        mine = await q.tenant_quota_get(who)
        assert mine["pending"] == 1 and mine["overQuota"] is True
        view = await q.tenant_quota_set(admin, t, {"maxPending": "unlimited"})
        assert view["maxPending"] is None and view["overQuota"] is False
        await q.timers_apply(who, [sched("q", "b", 60_000)])
        # null returns to the setting; with no override left, the row goes
        await q.tenant_quota_set(admin, t, {"maxPending": None, "writesPerSec": None})
        assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quotas") == 0
        listed = await q.tenant_quotas_list(admin)
        assert listed["defaults"]["maxPending"] == 100 and listed["tenants"] == []
        assert (await refused(q.tenant_quotas_list(who))).status == 403


async def test_the_measurement_is_bounded_by_the_cap(db_url, conn):
    async with started_broker(db_url, **NO_LOOP) as q:
        who = tenant()
        await q.timers_apply(who, [sched("q", f"k{i}", 60_000) for i in range(50)])
        rows = await conn.fetch(
            "SELECT * FROM queen.tenant_quota_measure_v1($1, $2)", [who.tenant], [10]
        )
        assert [(r["pending"], r["over"]) for r in rows] == [(11, True)]
        # no cap: no row answered, and the usage row goes
        rows = await conn.fetch(
            "SELECT * FROM queen.tenant_quota_measure_v1($1, $2)", [who.tenant], [None]
        )
        assert rows == []
        assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quota_usage") == 0


async def test_rejections_are_counted_by_reason_and_a_bounded_tenant_label(db_url):
    async with started_broker(
        db_url, timers_tenant_max_pending=0, metrics_tenant_labels=1, **NO_LOOP
    ) as q:
        first, second, third = tenant(), tenant(), tenant()
        for who in (first, second, third, first):
            await refused(q.timers_apply(who, [sched("q", "k", 60_000)]))
        reg = q.metrics_registry

        def count(tenant_label: str) -> float | None:
            return reg.get_sample_value(
                "queen_timers_tenant_rejected_total", {"reason": "quota", "tenant": tenant_label}
            )

        # the label is the tenant's keyed digest, which an operator finds with SQL; no id
        label_of = "SELECT queen.tenant_metrics_label_v1($1)"
        assert count(await q.rt.pool.fetchval(label_of, first.tenant)) == 2
        assert count("other") == 2
        assert count(await q.rt.pool.fetchval(label_of, second.tenant)) is None
        exposed = generate_latest(reg).decode()
        assert not any(str(who.tenant) in exposed for who in (first, second, third))
        assert (
            reg.get_sample_value("queen_timers_schedule_rejected_total", {"reason": "quota"}) == 4
        )
        assert reg.get_sample_value("queen_timers_tenants_over_quota") == 3


async def _dead_letters(q, who: Identity, n: int) -> list[dict]:
    """`n` dead letters of queue dq for `who`: each pushed, popped and acked as dlq."""
    for i in range(n):
        await q.push(who, [{"queue": "dq", "payload": {"n": i}, "transactionId": f"d{i}"}])
        [m] = (await q.pop(who, "dq", batch=1))["messages"]
        ack = {k: m[k] for k in ("transactionId", "partitionId", "leaseId")}
        await q.ack(who, [{**ack, "status": "dlq"}])
    letters = (await q.dlq(who, queue="dq"))["messages"]
    assert len(letters) == n
    return [{"transactionId": m["transactionId"], "partitionId": m["partitionId"]} for m in letters]


async def test_a_replay_as_timers_is_charged_like_any_schedule(db_url, conn):
    """A dead-letter replay in schedule mode goes through the tenant's gate: over the cap it
    is refused whole and every dead letter stays; under it, it takes the cap's room."""
    async with started_broker(db_url, timers_tenant_max_pending=3, **NO_LOOP) as q:
        who = tenant()
        await q.timers_apply(who, [sched("q", "held", 60_000)])
        items = await _dead_letters(q, who, 3)
        err = await refused(q.dlq_replay(who, items, "schedule", delay_ms=60_000))
        assert (err.code, err.status) == ("timers_quota_exceeded", 403)
        assert await pending(conn, who) == 1
        assert (await q.dlq(who, queue="dq"))["total"] == 3
        # refused, so sticky until a measurement; then two fit beside the one held
        await q.quotas.refresh()
        res = await q.dlq_replay(who, items[:2], "schedule", delay_ms=60_000)
        assert [r["status"] for r in res["results"]] == ["replayed", "replayed"]
        assert await pending(conn, who) == 3
        await refused(q.dlq_replay(who, items[2:], "schedule", delay_ms=60_000))
        assert (await q.dlq(who, queue="dq"))["total"] == 1
        # a replay as pushes never touches the timers' cap
        res = await q.dlq_replay(who, items[2:], "push")
        assert res["results"][0]["status"] == "replayed"
