"""The sweeper: every broker fires due timers. Event-driven, leaderless, with a one-second net.

One cycle: probe (next wake-up, due count, lateness) -> while due: claim a batch, pack outside
any transaction, fire in one transaction (queen_timers.timers.fire) -> sleep until the earliest
visible_at, never less than the floor (2 ms) nor more than the fallback poll (1 s).

Wake-ups, besides the deadline: a schedule committed on this broker earlier than the deadline
(in-process, queen_timers.wake.WakeHub); a peer's schedule, through its NOTIFY
(queen_timers.notify). Both
are hints; the fallback poll keeps "no earlier than" and bounds lateness when a hint is lost.

Leaderless: no advisory lock, no shard ownership. Every broker's probe visits all 64 shards, and
its claims walk the shards that probe saw due (each claim starting where the previous claim's
walk ended), sharing the work through FOR UPDATE SKIP LOCKED, so a dead broker orphans nothing:
its claims simply expire after the lease and fire elsewhere, and no shard is starved, since
every probe of every broker looks at every shard. The sweeper runs on its own small pool of
warmed connections (_own_connections).

Shutdown contract: stop() claims nothing new, lets the fire in flight finish, and hands back
(token NULL, visible now) any claim it will not fire, so another broker fires those at once
instead of after the 30 s lease. stop() is safe before start() and twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from typing import Any

import asyncpg

from ..db import Q
from ..db.outage import absorbed
from ..db.pool import connect_pool
from ..runtime import Runtime
from . import fire, store
from .fire import SHARDS, shard_ring

__all__ = ["SHARDS", "Sweeper", "claim_ring", "plan_sleep", "shard_ring"]

log = logging.getLogger("queen_timers.sweeper")

_ERROR_LOG_EVERY_S = 30.0  # sampled error logging, as the reference does


def claim_ring(shards: list[int] | None, start: int, want: int) -> tuple[list[int], int]:
    """The shards one claim of `want` rows walks, in walk order from `start` (all 64 when
    `shards` is None), and where the next claim starts: past the last shard this claim can
    reach at v_per = max(ceil(want / len(ring)), 8) rows a shard (queen.log_timers_claim_v3)."""
    if shards is None:
        ring = shard_ring(start)
    else:
        ring = sorted(set(shards), key=lambda sh: (sh - start) % SHARDS)
    if not ring:
        return [], start
    per = max(-(-want // len(ring)), 8)
    walked = min(len(ring), -(-want // per))
    return ring, (ring[walked - 1] + 1) % SHARDS


def plan_sleep(next_in_ms: float | None, due: int, *, floor_ms: float, max_ms: float) -> float:
    """Sleep (ms) after a probe that found nothing to drain: until the earliest visible_at,
    clamped into [floor, max]; an empty table polls at max (the fallback poll)."""
    floor_ms = max(1.0, floor_ms)
    max_ms = max(floor_ms, max_ms)
    if next_in_ms is None:
        return max_ms
    return min(max(float(next_in_ms), floor_ms), max_ms)


class _Budget:
    """The row budget and the deadline (half the lease) of one cycle, shared by its workers."""

    def __init__(self, rows: int, deadline: float):
        self.rows = rows
        self.deadline = deadline

    def spent(self) -> bool:
        return self.rows <= 0 or time.monotonic() >= self.deadline

    def take(self, want: int) -> int:
        n = max(1, min(want, self.rows))
        self.rows -= n
        return n

    def give_back(self, n: int) -> None:
        self.rows += n


class Sweeper:
    def __init__(self, rt: Runtime):
        self.rt = rt
        s = rt.settings
        self.floor_s = max(1, s.sweeper_min_sleep_ms) / 1000.0
        self.max_s = max(self.floor_s, s.sweeper_max_sleep_ms / 1000.0)
        self.empty_min_s = s.sweeper_empty_claim_min_ms / 1000.0
        self.empty_max_s = max(self.empty_min_s, s.sweeper_empty_claim_max_ms / 1000.0)
        self.parallelism = min(max(1, s.sweeper_parallelism), 8)
        self._ring_start = int(time.time() * 1000) % SHARDS
        self._pool: asyncpg.Pool | None = None  # its own connections (see _own_connections)
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._last_error_log = 0.0
        # Set by a sleep that ended at its deadline: claim before probing. _expect_shards is what
        # that claim walks (None: all 64, after a hint, whose timer's shard is not known here).
        self._expect_due = False
        self._expect_shards: list[int] | None = None
        self._last_probe: tuple[fire.Probe, float] | None = (
            None  # (probe, monotonic instant) the sleep came from
        )
        # Observable state (tests, metrics): cycles run, timers fired, claims handed back.
        self.cycles = 0
        self.fired = 0
        self.released = 0
        self.cycle_done = asyncio.Event()

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None and not self._stopping:
            await self._own_connections()
            self._task = asyncio.create_task(self._run(), name="queen-sweeper")
            log.info(
                "sweeper started (leaderless, %d shards, floor %d ms, poll %d ms, parallelism %d)",
                SHARDS,
                self.floor_s * 1000,
                self.max_s * 1000,
                self.parallelism,
            )

    async def stop(self) -> None:
        self._stopping = True
        self.rt.hub.timer_due(float("-inf"), "stop")  # interrupt a sleep at once
        task, self._task = self._task, None
        if task is not None:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001 - already logged by the loop
                pass
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _own_connections(self) -> None:
        """The sweeper runs on connections of its own, warmed before the first cycle.

        Why not the broker's pool: there the fire waits behind whatever holds the pool (a burst
        of pops or pushes can hold every connection), and each pooled backend meets the fire
        procedures cold on its first fire (the first fires after start 40-55 ms late, a third of
        a steady run's p99: 2026-11-30, bench/RESULTS.md "Measurements the code cites"). Here:
        one connection per claim and per fire of each drain worker, plus one for the probe;
        each has compiled the procedures (probe, a claim and a fire that touch nothing) before
        the loop starts."""
        base = self.rt
        s = base.settings
        size = 2 * self.parallelism + 1
        self._pool = await connect_pool(
            base.database_url,
            min_size=size,
            max_size=size,
            role="sweeper",
            **base.link.pool_options(s.statement_timeout_ms, s.pooler_command_timeout_ms),
        )
        self.rt = dataclasses.replace(base, pool=self._pool)
        try:
            await asyncio.gather(*(self._warm() for _ in range(size)))
        except Exception as exc:  # noqa: BLE001 - a cold connection is slow, not wrong
            log.warning("sweeper warm-up failed (%s); continuing cold", exc)

    async def _warm(self) -> None:
        assert self._pool is not None
        async with self._pool.acquire() as conn:
            await store.due(conn, [0], None, 1)
            await conn.fetch(Q.timers_claim, [], None, 1000, 1, 1)  # no shard: claims nothing
            await store.fire(conn, [], [], [], [], [], [], [], [], [], None)  # nothing to fire
            await asyncio.sleep(0.01)  # hold it, so every warm-up gets its own connection

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        hub = self.rt.hub
        metrics = self.rt.metrics
        while not self._stopping:
            hub.begin_cycle()
            t0 = time.perf_counter()
            try:
                sleep_s, reason = await self._cycle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing cycle never kills the sweeper
                if not absorbed(self.rt.database_url, exc):
                    self._log_error("sweeper cycle failed: %s", exc)
                sleep_s, reason = self._empty_claim_sleep(), "error"
            metrics.cycle.observe(time.perf_counter() - t0)
            self.cycles += 1
            self.cycle_done.set()
            self.cycle_done = asyncio.Event()
            if self._stopping:
                break
            await self._sleep(sleep_s, reason)

    async def _cycle(self) -> tuple[float, str]:
        """One cycle: (probe -> drain)* -> the sleep to take. Draining repeats while the probe
        finds due rows, within the cycle's row budget and half the lease."""
        rt = self.rt
        if not rt.switches.timers_fire_enabled:
            return self.max_s, "poll"  # paused: timers wait; the poll notices the resume
        s = rt.settings
        budget = _Budget(
            max(s.sweeper_cycle_max_rows, 1), time.monotonic() + s.sweeper_lease_ms / 2000.0
        )
        self._ring_start = (self._ring_start + 1) % SHARDS
        ahead: tuple[fire.Probe, float] | None = None  # a probe taken while a drain's last fire ran
        if self._expect_due:
            # The sleep ended at the instant the last probe (or a hint) named: rows are due
            # now, so claim first and save the probe's round trip on the hot path.
            # Whatever it finds, the probe below decides what comes next (an empty claim here
            # may only mean the timer was cancelled, not that another broker holds work).
            # The claim walks the shards the last probe saw due by now (_sleep), not all 64;
            # a row due meanwhile in another shard is found by that probe.
            self._expect_due = False
            moved, _, ahead = await self._drain(budget, self._expect_shards)
            if not moved:
                ahead = None  # an empty claim at a deadline: ask the database afresh
        while True:
            taken_during_fire = ahead is not None
            p, at = ahead if ahead is not None else await self._probe()
            ahead = None
            self._last_probe = (p, at)
            m = rt.metrics
            m.timers_due.set(p.due)
            m.timers_due_capped.set(1 if p.due_capped else 0)
            m.timers_oldest_late.set(max(0.0, p.late_ms) / 1000.0)
            if p.next_in_ms is None:
                return self.max_s, "poll"
            # nextInMs counts from the database's now() inside the probe (`at`, the middle of
            # its round trip): what has passed since is already slept.
            next_ms = p.next_in_ms - (time.monotonic() - at) * 1000.0
            if p.due <= 0:
                if next_ms <= 0 and taken_during_fire:
                    # Due by this broker's reckoning of a probe taken during the fire, not yet
                    # when the probe ran: claim the shards it saw falling due by now, as after
                    # a sleep to its deadline, instead of probing again first (that probe was
                    # a sixth of a steady run's p99, 2026-12-06; bench/RESULTS.md). An empty
                    # claim here is no sign of another broker's work (no jittered sleep): the
                    # probe below asks the database afresh.
                    shards = p.shards_due_within((time.monotonic() - at) * 1000.0)
                    if shards and not (budget.spent() or self._stopping):
                        moved, _, ahead = await self._drain(budget, shards)
                        if not moved:
                            ahead = None
                    continue
                return plan_sleep(
                    max(next_ms, 0.0), 0, floor_ms=self.floor_s * 1000, max_ms=self.max_s * 1000
                ) / 1000.0, "deadline"
            if budget.spent() or self._stopping:
                return self.floor_s, "deadline"
            moved, empty, ahead = await self._drain(budget, p.due_shards)
            if not moved:
                # work is due but another broker holds it: a short jittered sleep
                return (self._empty_claim_sleep(), "empty") if empty else (self.floor_s, "deadline")

    async def _probe(self) -> tuple[fire.Probe, float]:
        """(the probe, the monotonic instant of the middle of its round trip)."""
        sent = time.monotonic()
        p = await fire.probe(self.rt)
        return p, (sent + time.monotonic()) / 2

    async def _drain(
        self, budget: _Budget, shards: list[int] | None = None
    ) -> tuple[int, bool, tuple[fire.Probe, float] | None]:
        """Claim and fire, walking `shards` (those a probe saw due; None or empty: all 64),
        until a claim comes back short (nothing more is claimable now), the row budget is
        spent, or half the lease has gone (a claim older than that risks expiring before its
        fire commits). Returns (rows moved, saw an empty claim, a probe
        taken during the last fire or None).

        The next probe runs beside the last fire of the drain, on its own connection, instead
        of after it: it cannot see the rows in flight (claimed, so not due), and the cycle
        saves a round trip on its critical path. At 500 timers/s a new timer falls due while
        the sweeper is busy about 40% of the time and waits for the cycle to end, so a
        shorter cycle is lower lateness. Not used when the fire handed rows back or failed
        some (those are due again at once or at their backoff): the cycle probes afresh.

        Only the shards given are walked: a claim costs one index descent per shard it visits
        (a level of the (shard, visible_at) B-tree each, 2 at 10^4 pending and 4 at 10^7), so
        with few shards due it follows the due work instead of 64 x the depth, and its per-shard
        share v_per = max(ceil(rows / shards), 8) grows as fewer shards are given. A row that
        falls due meanwhile in a shard not given waits for the probe that ends the drain (a
        short claim ends it), at most one cycle.

        Each claim starts its walk of the given shards where the previous claim's walk ended.
        The reference rotates the start by one shard per cycle only; then every claim of a
        cycle takes from the same ~25 shards, a backlog empties those first, and its tail
        sits in a few shards whose per-shard cap (8 rows) makes every claim short, so each
        ends the drain with a probe in between and nothing pipelined (the last third of a
        20,000-timer drain at one claim of ~110 rows per cycle: 2026-11-30, bench/RESULTS.md
        "Measurements the code cites"). Every shard is still visited by every broker's probe."""
        rt = self.rt
        s = rt.settings
        state: dict[str, Any] = {"moved": 0, "empty": False, "short": False, "probe": None}
        walk = shards or None

        async def claim_next() -> fire.Packed:
            """One claim against the shared budget, packed; records a short or empty claim."""
            want = budget.take(s.sweeper_claim_batch)
            ring, self._ring_start = claim_ring(walk, self._ring_start, want)
            claimed = await fire.claim(rt, shards=ring, max_rows=want)
            budget.give_back(want - len(claimed))
            if not claimed:
                state["empty"] = True
            elif len(claimed) < want:
                state["short"] = True  # drained for now; the next probe says what is left
            return await fire.pack(rt, claimed)

        def more() -> bool:
            return not (self._stopping or state["empty"] or state["short"] or budget.spent())

        async def worker() -> None:
            # Claim and fire are pipelined: while one batch fires (its own transaction), the
            # next is claimed and packed on another connection, so a backlog drains at the
            # pace of the slower of the two rather than of their sum (~12 ms to claim and ~11 ms
            # to fire 200 rows: 2026-11-29, bench/RESULTS.md "Measurements the code cites").
            # Packing happens in the prefetch, so the fire's transaction is all the critical
            # path has.
            packed = await claim_next() if more() else None
            while packed is not None and packed.claimed:
                if self._stopping:  # claimed but will not fire: hand back at once
                    self._count_released(await fire.release(rt, packed.claimed))
                    return
                ahead = asyncio.ensure_future(claim_next()) if more() else None
                probing = (
                    asyncio.ensure_future(self._probe())
                    if ahead is None and self.parallelism == 1 and not self._stopping
                    else None
                )
                try:
                    report = await fire.fire_packed(rt, packed)
                except BaseException:
                    if ahead is not None:  # do not leave the prefetched claim to its lease
                        await self._hand_back(ahead)
                    if probing is not None:
                        probing.cancel()
                    raise
                if ahead is not None and self._stopping:
                    await self._hand_back(ahead)
                    ahead = None
                state["moved"] += len(packed.claimed)
                # Metrics (a histogram sample per timer) wait for the loop's next turn: by
                # then the next batch's fire is on the wire, so they overlap its transaction.
                asyncio.get_running_loop().call_soon(self._account, report)
                if probing is not None:
                    try:
                        got = await probing
                    except Exception:  # noqa: BLE001 - the cycle probes again
                        got = None
                    clean = report.moved == len(packed.claimed) and not report.released
                    state["probe"] = got if clean else None
                packed = await ahead if ahead is not None else None

        if self.parallelism == 1:
            await worker()
        else:
            # A TaskGroup cancels the sibling workers when one fails, so no worker keeps
            # claiming into the next cycle (or past stop()) on its own.
            async with asyncio.TaskGroup() as tg:
                for _ in range(self.parallelism):
                    tg.create_task(worker())
        return state["moved"], state["empty"] and not state["moved"], state["probe"]

    async def _hand_back(self, pending: asyncio.Future[fire.Packed]) -> None:
        try:
            packed = await pending
            if packed.claimed:
                self._count_released(await fire.release(self.rt, packed.claimed))
        except Exception as exc:  # noqa: BLE001 - the lease will expire instead
            if not absorbed(self.rt.database_url, exc):
                self._log_error("could not hand back a prefetched claim: %s", exc)

    def _account(self, report: fire.FireReport) -> None:
        self.fired += report.fired
        self.rt.fire_window.record(report.fired, report.lags_ms)
        m = self.rt.metrics
        for result in ("fired", "duplicate", "stale", "skipped"):
            n = getattr(report, result, 0)
            if n:
                m.timers_fired.labels(result).inc(n)
        if report.failed_transient:
            m.fire_failures.labels("transient").inc(report.failed_transient)
        if report.failed_permanent:
            m.fire_failures.labels("permanent").inc(report.failed_permanent)
        if report.dead_lettered:
            m.timers_dlq.inc(report.dead_lettered)
        m.fire_lag.observe_ms(report.lags_ms)

    def _count_released(self, n: int) -> None:
        self.released += n
        if n:
            self.rt.metrics.released.inc(n)
        if n:
            log.info("handed back %d claimed timers at shutdown", n)

    def _empty_claim_sleep(self) -> float:
        return self.empty_min_s + random.random() * (self.empty_max_s - self.empty_min_s)

    async def _sleep(self, seconds: float, reason: str) -> None:
        hub = self.rt.hub
        deadline, hint_reason, ev = hub.sleep_plan(time.time() + seconds)
        timeout = max(0.0, deadline - time.time())
        try:
            if timeout > 0:
                await asyncio.wait_for(ev.wait(), timeout)
            woke = hub.timer_hint_reason or "local"
        except TimeoutError:
            woke = hint_reason or reason
            # We slept to the instant a probe or a hint named: something is due now.
            self._expect_due = woke in ("deadline", "local", "notify")
            self._expect_shards = None  # a hint's timer may sit in any shard
            if woke == "deadline" and self._last_probe is not None:
                # The shards the probe saw due by now, plus a floor of slack for the claim's
                # round trip; none (the earliest row lies past the probe's second): probe.
                p, at = self._last_probe
                by_ms = (time.monotonic() - at) * 1000.0 + self.floor_s * 1000.0
                self._expect_shards = p.shards_due_within(by_ms)
                self._expect_due = bool(self._expect_shards)
        if woke != "stop":
            self.rt.metrics.wakeups.labels(woke).inc()

    def _log_error(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= _ERROR_LOG_EVERY_S:
            self._last_error_log = now
            log.warning(msg, *args)
