"""The restart race: every broker stopped and new ones started at an occurrence instant, 50
times, and each occurrence delivered once (no double, no skip).

Other schedulers double a slot and then skip the next one when a deploy restarts them at the
minute: the new process recomputes "the next run" from its clock. Here the pending occurrence
lives in the database, staged by the fire of the one before, so a restart recomputes nothing;
this test walks the ways a stop can meet an instant, with time travel (the procedures take
`now`) and the sweeper's own steps (claim, release, fire: timers/fire.py), so 50 restarts take
seconds. At each instant T, the outgoing brokers stop in one of five states:

  0  nothing claimed yet (stopped exactly at T);
  1  one broker holds the claims of T and stops gracefully: it hands them back (the
     sweeper's stop), and the new brokers fire T at once;
  2  one broker holds the claims of T and dies: the new brokers find them leased, fire them
     after the lease, and the dead broker's late fire moves nothing;
  3  one broker fired part of T (a claim of a few rows) and the rest is left;
  4  one broker's fire lost its connection as the statement was next (the fault point
     `timers.fire`): a transient failure, T backs off and fires after it.

At every second restart the application declares its schedules again as it boots (an upsert
of the same definitions at T, before any broker fired T): the pending occurrence stays T, staged
afresh (so due at once even where a dead broker held it). Then two new brokers drain
concurrently at T (and after the lease or backoff where one is
pending), and the test counts T's messages per schedule and checks that T+1 is what is staged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter

from queen_timers.service import Queen
from queen_timers.testing.chaos import Kill, killing
from queen_timers.timers import fire

from .helpers import body, frames, pending, utc

T0 = utc(2030, 1, 1)
EVERY_MS = 10_000
LEASE_MS = 3000
SCHEDULES = 10
RESTARTS = 50
QUEUE = "restart"


def at(n: int, extra_ms: float = 0) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=EVERY_MS * n + extra_ms)


def iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


async def _broker(db_url: str) -> Queen:
    q = Queen(
        database_url=db_url,
        sweeper=False,
        retention_interval_ms=0,
        sweeper_lease_ms=LEASE_MS,
        apply_schema=False,
    )
    await q.start()
    return q


async def test_all_brokers_restarted_at_an_occurrence_50_times_no_double_no_skip(
    queen, conn, ident, db_url
):
    for i in range(SCHEDULES):
        await queen.schedule_set(ident, body(QUEUE, f"k{i}", everyMs=EVERY_MS), now=T0)
    backoff_ms = queen.rt.settings.sweeper_transient_backoff_ms
    assert max(LEASE_MS, backoff_ms) < EVERY_MS / 2  # a late fire of T still precedes T+1
    gen = [await _broker(db_url), await _broker(db_url)]
    try:
        for n in range(1, RESTARTS + 1):
            t = at(n)
            mode = n % 5
            dead: list = []
            later_ms = 0.0
            if mode in (1, 2):
                claimed = await fire.claim(gen[0].rt, now=t)
                assert len(claimed) == SCHEDULES
                if mode == 1:
                    assert await fire.release(gen[0].rt, claimed, now=t) == SCHEDULES
                else:
                    dead, later_ms = claimed, LEASE_MS + 1
            elif mode == 3:
                assert (
                    await fire.fire_claimed(
                        gen[0].rt, await fire.claim(gen[0].rt, now=t, max_rows=3), now=t
                    )
                ).fired == 3
            elif mode == 4:
                async with killing(conn, {"timers.fire": Kill(every=1, times=1)}) as chaos:
                    report = await fire.drain(gen[0].rt, now=t)
                chaos.assert_done()
                assert report.fired == 0
                later_ms = backoff_ms + 1
            # every broker stops at T; two new ones start and race at T
            await asyncio.gather(*(b.stop() for b in gen))
            gen = list(await asyncio.gather(_broker(db_url), _broker(db_url)))
            if n % 2 == 0:  # a deploy: the application declares its schedules again at boot
                for i in range(SCHEDULES):
                    await gen[0].schedule_set(ident, body(QUEUE, f"k{i}", everyMs=EVERY_MS), now=t)
                later_ms = 0.0  # the pending occurrence is staged afresh: due at once
            reports = await asyncio.gather(*(fire.drain(b.rt, now=t) for b in gen))
            fired = sum(r.fired for r in reports)
            if later_ms:
                assert fired == 0, f"restart {n}: fired before the lease or backoff ran out"
                late = at(n, later_ms)
                reports = await asyncio.gather(*(fire.drain(b.rt, now=late) for b in gen))
                fired = sum(r.fired for r in reports)
            want = SCHEDULES - (3 if mode == 3 else 0)
            assert fired == want, f"restart {n} (mode {mode}): fired {fired}, want {want}"
            if dead:  # the dead broker's late fire: its lease is gone, nothing moves
                late = at(n, LEASE_MS + 1)
                assert (await fire.fire_claimed(gen[0].rt, dead, now=late)).fired == 0
            staged = {r["txn"].split("@", 1)[1] for r in await pending(conn, QUEUE)}
            assert staged == {iso(at(n + 1))}, f"restart {n}: staged {staged}"
    finally:
        await asyncio.gather(*(b.stop() for b in gen))

    counts = Counter(
        (f["txn"].split("@", 1)[0], f["txn"].split("@", 1)[1]) for f in await frames(conn, QUEUE)
    )
    assert set(counts.values()) == {1}, "an occurrence was delivered twice"
    per_instant = Counter(instant for _, instant in counts)
    assert per_instant == {iso(at(n)): SCHEDULES for n in range(1, RESTARTS + 1)}
    runs = await conn.fetch("SELECT outcome, fired_at, occurrence_at FROM queen.schedule_runs")
    assert len(runs) == SCHEDULES * RESTARTS
    assert {r["outcome"] for r in runs} == {"fired"}
    assert all(r["fired_at"] >= r["occurrence_at"] for r in runs)
