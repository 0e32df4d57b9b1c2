"""One tenant cannot stall another (issue 24, "One tenant stalls everyone"), tried as the
attacker would: tenant A holds its own timer rows in an open SQL API transaction and sends
many concurrent cancels and schedules of those keys through the broker.

* The lock bound: A's calls are refused 503 timers_busy / timer_locked with Retry-After while
  its locks are STILL held (so they did not wait for the transaction), and change nothing;
  after A commits, its retry succeeds.
* The fair share: with no lock bound at all, A's waiting calls hold only A's share of the pool,
  and tenant B's schedules and peeks all complete while A's calls still wait.
* One locked key in a merged schedule batch refuses only the call that named it.

No timing assertion: "B is not starved" is shown by B completing while A's transaction is
open (A commits only afterwards), never by a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Sequence

import asyncpg
from asyncpg.transaction import Transaction
from timers.helpers import cancel, sched, timer_row

from queen_timers.db import faults
from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker
from queen_timers.timers import locks, store

SCHEDULE = "SELECT queen.timer_schedule_v1($1, $2, $3, $4)"
CANCEL = "SELECT queen.timer_cancel_v1($1, $2)"
ROWS = "SELECT * FROM queen.log_timers ORDER BY tenant_id, queue, timer_key"
PATIENCE_S = 60  # generous: only a broken build waits this long


class _Attacker:
    """Tenant A's application: its SQL role, and an open transaction holding A's rows."""

    def __init__(self, roles, tenant: uuid.UUID):
        self.roles, self.tenant = roles, tenant
        self.conn: asyncpg.Connection | None = None
        self.tr: Transaction | None = None

    async def hold(self, held: list[str], fresh: list[str], gone: Sequence[str] = ()) -> None:
        """Reschedule `held` (committed rows: row locks), insert `fresh` (uncommitted keys) and
        cancel `gone` (deleted, uncommitted), all in one transaction left open."""
        role = await self.roles.create(self.tenant)
        conn = self.conn = await self.roles.connect(role)
        self.tr = conn.transaction()
        await self.tr.start()
        for k in [*held, *fresh]:
            r = json.loads(await conn.fetchval(SCHEDULE, "q", k, 3_600_000, b"from-sql"))
            assert r["ok"], r
        for k in gone:
            r = json.loads(await conn.fetchval(CANCEL, "q", k))
            assert r["status"] == "cancelled", r

    async def still_open(self) -> bool:
        assert self.conn is not None
        return self.conn.is_in_transaction()

    async def commit(self) -> None:
        assert self.tr is not None
        await self.tr.commit()

    async def end(self) -> None:
        """Roll back if still open: a failing test must not leave the broker's calls waiting
        on this transaction (its stop would wait for them)."""
        if self.conn is not None and self.tr is not None and self.conn.is_in_transaction():
            await self.tr.rollback()


@contextlib.asynccontextmanager
async def attacker_of(roles, tenant: uuid.UUID):
    attacker = _Attacker(roles, tenant)
    try:
        yield attacker
    finally:
        await attacker.end()


async def _until(done) -> None:
    """Wait for a condition the code under test makes true (polled, generous patience; never
    a guess at how long it takes)."""

    async def seen() -> None:
        # the database's state has no event to wait on: a poll, bounded by the patience
        while not (await done() if asyncio.iscoroutinefunction(done) else done()):  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    await asyncio.wait_for(seen(), PATIENCE_S)


async def _waiters(conn, n: int) -> None:
    """Wait until `n` backends of this database wait on a lock."""

    async def waiting() -> bool:
        return n <= await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )

    await _until(waiting)


async def _tenant_b(q, b: Identity, n: int) -> None:
    """B's ordinary work: n schedules and n peeks, concurrently; every one must succeed."""
    scheduled = await asyncio.gather(
        *(q.timers_apply(b, [sched("q", f"b{i}", 60_000)]) for i in range(n))
    )
    assert [r[0]["status"] for r in scheduled] == ["scheduled"] * n
    peeks = await asyncio.gather(*(q.timer_peek(b, "q", f"b{i}") for i in range(n)))
    assert all(p["found"] for p in peeks)


async def test_locked_keys_are_refused_busy_at_once_and_b_is_served(db_url, conn, roles):
    a = Identity(tenant=uuid.uuid4(), subject="app-a")
    b = Identity(tenant=uuid.uuid4(), subject="app-b")
    async with started_broker(db_url, pool_max=6, timers_lock_wait_ms=50) as q:
        held, fresh, gone = ["h0", "h1"], ["f0", "f1"], ["g0"]
        await q.timers_apply(a, [sched("q", k, 60_000, payload="svc") for k in held + gone])
        before = {k: dict(await timer_row(conn, "q", k, tenant=a.tenant)) for k in held + gone}
        async with attacker_of(roles, a.tenant) as attacker:
            await attacker.hold(held, fresh, gone)

            # the attack, at full concurrency: cancels and schedules of every key A holds
            attack = [q.timer_cancel(a, "q", k) for k in held + gone for _ in range(8)]
            attack += [
                q.timers_apply(a, [sched("q", k, 1_000, payload="attack")])
                for k in held + fresh + gone
                for _ in range(8)
            ]
            attack += [q.timers_apply(a, [cancel("q", k) for k in held])]  # a batch of cancels
            a_tasks = [asyncio.ensure_future(c) for c in attack]
            await _tenant_b(q, b, 20)
            outcomes = await asyncio.wait_for(
                asyncio.gather(*a_tasks, return_exceptions=True), PATIENCE_S
            )
            assert await attacker.still_open()  # everything above happened under A's locks

            assert outcomes and all(isinstance(o, QueenError) for o in outcomes), outcomes
            for e in outcomes:
                assert isinstance(e, QueenError)
                assert (e.code, e.reason, e.status, e.retry_after) == (
                    "timers_busy",
                    "timer_locked",
                    503,
                    1,
                )
                assert set(e.to_dict()) == {"error", "reason", "detail"}
            # nothing changed: the committed rows are as they were (A's own writes not yet visible)
            for k in held + gone:
                assert dict(await timer_row(conn, "q", k, tenant=a.tenant)) == before[k]
            for k in fresh:
                assert await timer_row(conn, "q", k, tenant=a.tenant) is None

            await attacker.commit()
            for k in held + fresh:  # A's transaction's writes, not the refused calls'
                assert (await timer_row(conn, "q", k, tenant=a.tenant))["payload"] == b"from-sql"
            assert await timer_row(conn, "q", "g0", tenant=a.tenant) is None
            # the retry after the commit succeeds
            [r] = await q.timers_apply(a, [sched("q", "h0", 1_000, payload="retry")])
            assert r["status"] == "rescheduled"
            assert (await q.timer_cancel(a, "q", "h1"))["status"] == "cancelled"
            [r] = await q.timers_apply(a, [sched("q", "g0", 1_000)])
            assert r["status"] == "scheduled"
            busy = q.rt.metrics.schedule_rejected.labels("busy")._value.get()
            assert busy == len(attack) - 8 * len(held + gone)  # each refused schedule call, once


async def test_waiting_calls_hold_only_their_tenants_share_of_the_pool(db_url, conn, roles):
    """No lock bound and no statement timeout: A's calls wait for as long as A's transaction
    stays open. They hold A's share of the pool (2 of 4 connections) and no more, and B's
    schedules and peeks all complete while A's calls are still waiting."""
    a = Identity(tenant=uuid.uuid4(), subject="app-a")
    b = Identity(tenant=uuid.uuid4(), subject="app-b")
    settings = dict(
        pool_min=1,
        pool_max=4,
        timers_tenant_pool_share=0.5,
        timers_lock_wait_ms=0,
        statement_timeout_ms=0,
    )
    async with started_broker(db_url, **settings) as q:
        cap = locks.share_cap(q.rt.settings)
        assert cap == 2
        await q.timers_apply(a, [sched("q", "h0", 60_000)])
        async with attacker_of(roles, a.tenant) as attacker:
            await attacker.hold(["h0"], ["f0"])

            attack = [q.timer_cancel(a, "q", "h0") for _ in range(10)]
            attack += [q.timers_apply(a, [sched("q", k, 1_000)]) for k in ("h0", "f0") * 5]
            a_tasks = [asyncio.ensure_future(c) for c in attack]
            await _waiters(conn, cap)
            assert q.rt.tenant_share.held(a.tenant) == cap
            assert q.rt.tenant_share.waiting(a.tenant) > 0

            await asyncio.wait_for(_tenant_b(q, b, 20), PATIENCE_S)
            # B was served while A's transaction is open and A's calls still wait on it
            assert await attacker.still_open()
            assert not any(t.done() for t in a_tasks)
            assert q.rt.tenant_share.held(a.tenant) == cap

            await attacker.commit()
            outcomes = await asyncio.wait_for(
                asyncio.gather(*a_tasks, return_exceptions=True), PATIENCE_S
            )
            assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
            assert q.rt.tenant_share.held(a.tenant) == 0


async def test_one_locked_key_refuses_only_its_call_in_a_merged_batch(
    db_url, conn, roles, monkeypatch
):
    """Calls of one producer merged into one statement, one of them naming a key A's open
    transaction holds: that call is refused busy, its neighbours commit."""
    a = Identity(tenant=uuid.uuid4(), subject="app-a")
    async with started_broker(db_url, timers_schedule_inflight=1, timers_lock_wait_ms=50) as q:
        await q.timers_apply(a, [sched("q", "h0", 60_000)])
        async with attacker_of(roles, a.tenant) as attacker:
            await attacker.hold(["h0"], [])

            # the first statement waits at the fault point until the others are queued behind it
            reached, release = asyncio.Event(), asyncio.Event()

            async def hook(point, _conn):
                if point == "timers.schedule" and not reached.is_set():
                    reached.set()
                    await release.wait()

            monkeypatch.setattr(faults, "hook", hook)
            first = asyncio.ensure_future(q.timers_apply(a, [sched("q", "first", 60_000)]))
            await asyncio.wait_for(reached.wait(), PATIENCE_S)
            keys = ["n0", "h0", "n1", "n2"]
            calls = [
                asyncio.ensure_future(q.timers_apply(a, [sched("q", k, 60_000, payload=k)]))
                for k in keys
            ]
            await _until(lambda: q.schedule_batcher.waiting(a.tenant) == len(keys))
            merged_before = q.schedule_batcher.merged_calls
            release.set()
            assert (await first)[0]["status"] == "scheduled"
            res = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), PATIENCE_S)
            assert q.schedule_batcher.merged_calls - merged_before == len(keys)  # one statement
            assert await attacker.still_open()

            by_key = dict(zip(keys, res))
            assert isinstance(by_key["h0"], QueenError) and by_key["h0"].reason == "timer_locked"
            for k in ("n0", "n1", "n2"):
                answer = by_key[k]
                assert not isinstance(answer, BaseException), answer
                assert answer[0]["status"] == "scheduled", by_key[k]
                row = await timer_row(conn, "q", k, tenant=a.tenant)
                assert row["payload"] == json.dumps(k).encode()
            await attacker.commit()


async def test_the_bound_is_local_to_the_call(conn):
    """The bound is set inside the statement and put back: after a bounded apply, alone or in
    a transaction (the transaction wire), the session's lock_timeout is what it was."""
    await conn.execute("SET lock_timeout = '7s'")
    await store.apply(conn, [sched("q", "k", 1_000)], uuid.uuid4(), None, None, None, 50)
    assert await conn.fetchval("SHOW lock_timeout") == "7s"
    async with conn.transaction():
        await store.apply(conn, [sched("q", "k2", 1_000)], uuid.uuid4(), None, None, None, 50)
        assert await conn.fetchval("SHOW lock_timeout") == "7s"
    await store.apply(conn, [sched("q", "k3", 1_000)], uuid.uuid4(), None, None, None, 0)
    assert await conn.fetchval("SHOW lock_timeout") == "7s"


async def test_a_transaction_bundle_on_a_held_key_is_refused_busy_whole(db_url, conn, roles):
    """The transaction wire: a bundle whose timers rider names a held key is refused busy,
    and its push is not appended either (one transaction, all or nothing)."""
    a = Identity(tenant=uuid.uuid4(), subject="app-a")
    async with started_broker(db_url, timers_lock_wait_ms=50) as q:
        await q.timers_apply(a, [sched("q", "h0", 60_000)])
        async with attacker_of(roles, a.tenant) as attacker:
            await attacker.hold(["h0"], [])
            body = {
                "operations": [{"type": "push", "items": [{"queue": "next", "payload": 1}]}],
                "timers": [sched("q", "h0", 1_000)],
            }
            try:
                await q.transaction(a, body)
                raise AssertionError("the bundle was not refused")
            except QueenError as e:
                assert (e.code, e.reason, e.status, e.retry_after) == (
                    "timers_busy",
                    "timer_locked",
                    503,
                    1,
                )
                assert e.extra["success"] is False
            assert await attacker.still_open()
            assert q.rt.tenant_share.held(a.tenant) == 0
            assert await conn.fetchval("SELECT count(*) FROM queen.log_segments") == 0
            await attacker.commit()
        res = await q.transaction(a, body)
        assert res["success"] is True, res


async def test_fire_now_and_cancel_by_prefix_of_held_keys_answer_busy(db_url, conn, roles):
    """The operator's writes on a tenant's timers meet the same locks and get the same bound."""
    a = Identity(tenant=uuid.uuid4(), subject="app-a")
    async with started_broker(db_url, timers_lock_wait_ms=50) as q:
        await q.timers_apply(a, [sched("q", k, 60_000) for k in ("h0", "h1")])
        before = [dict(r) for r in await conn.fetch(ROWS)]
        async with attacker_of(roles, a.tenant) as attacker:
            await attacker.hold(["h0"], [])
            for call in (
                q.timer_fire_now(a, "q", "h0"),
                q.timers_cancel_prefix(a, "q", "h"),
            ):
                try:
                    await call
                    raise AssertionError("not refused")
                except QueenError as e:
                    assert (e.code, e.reason, e.retry_after) == ("timers_busy", "timer_locked", 1)
            assert await attacker.still_open()
            assert [dict(r) for r in await conn.fetch(ROWS)] == before
            assert q.rt.tenant_share.held(a.tenant) == 0
            await attacker.commit()
        assert (await q.timers_cancel_prefix(a, "q", "h"))["cancelled"] == 2
