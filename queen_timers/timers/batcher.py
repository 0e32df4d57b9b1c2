"""Group commit for schedules: concurrent schedule calls share one statement.

A single-op schedule costs the database far more than its row: a round trip, a plan, a
transaction and a WAL flush. Under concurrency those fixed costs dominate (~700 us of
PostgreSQL CPU a one-op request against ~45 us an op in 256-op batches, 2026-11-30;
bench/RESULTS.md, "Measurements the code cites"). So schedule calls made outside a caller's
transaction go through this batcher:

* at most `timers_schedule_inflight` statements of one tenant run at once; a call that finds
  a free slot of its tenant runs at once, alone (no added latency when the broker is not busy);
* calls that arrive while every slot of their tenant is busy wait, and that tenant's next free
  slot takes as many of them as fit in one statement: the same identity (tenant and producer
  are arguments of the procedure, never op fields), no (queue, timerKey) twice, at most
  `timers_schedule_batch_ops` ops.

Slots are per tenant because merging is: calls of two tenants never share a statement, so one
queue for all would only make a tenant wait behind another's statements, which may wait on
that tenant's own locks (queen_timers/timers/locks.py). A single tenant sees what it saw with
one queue.

Each caller sees what it would see alone: its own results, in its own order. Each call is
atomic (a statement is one transaction); calls merged into one statement commit together.
If a merged statement fails for a reason that is not transient, each call is replayed on its
own, so one call's bad op can never fail a neighbour; a transient failure (connection,
timeout) is reported to every call of the statement, as it would have been alone. A key
locked by another transaction (timers_busy) is one call's, like a bad op: the calls are
replayed on their own, side by side, so the others commit and only the call holding that key
is refused (after one more lock wait, not one per call in front of it).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from ..errors import QueenError
from ..identity import Identity
from .locks import is_busy

__all__ = ["ScheduleBatcher"]


class KeyedOp(Protocol):
    """What the batcher reads of an op: the (queue, timerKey) a statement may hold once."""

    @property
    def queue(self) -> str: ...

    @property
    def timer_key(self) -> str: ...


Op = TypeVar("Op", bound=KeyedOp)
Result = TypeVar("Result")  # one op's result; a call gets its ops' results, in order


@dataclasses.dataclass(eq=False)
class _Call(Generic[Op, Result]):
    ident: Identity
    ops: Sequence[Op]
    future: asyncio.Future[list[Result]]
    keys: frozenset[tuple[str, str]]

    @property
    def who(self) -> tuple[uuid.UUID, str | None]:
        return (self.ident.tenant, self.ident.subject)

    def answer(self, result: list[Result]) -> None:
        if not self.future.done():  # else the caller went away
            self.future.set_result(result)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


@dataclasses.dataclass(eq=False)
class _Lane(Generic[Op, Result]):
    """One tenant's calls waiting for a slot, and its statements in flight."""

    pending: collections.deque[_Call[Op, Result]] = dataclasses.field(
        default_factory=collections.deque
    )
    inflight: int = 0


class ScheduleBatcher(Generic[Op, Result]):
    def __init__(
        self,
        run: Callable[[Identity, Sequence[Op]], Awaitable[list[Result]]],
        *,
        inflight: int,
        max_ops: int,
    ):
        self._run = run
        self.inflight_limit = inflight
        self.max_ops = max(1, max_ops)
        self._lanes: dict[uuid.UUID, _Lane[Op, Result]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # strong references while they run
        # Observable (tests, metrics): statements run, and calls that shared one.
        self.statements = 0
        self.merged_calls = 0

    async def submit(self, ident: Identity, ops: Sequence[Op]) -> list[Result]:
        if self.inflight_limit <= 0:  # batching off: every call is its own statement
            return await self._run(ident, ops)
        call: _Call[Op, Result] = _Call(
            ident,
            ops,
            asyncio.get_running_loop().create_future(),
            frozenset((t.queue, t.timer_key) for t in ops),
        )
        tenant = ident.tenant
        lane = self._lanes.get(tenant)
        if lane is None:
            lane = self._lanes[tenant] = _Lane[Op, Result]()
        lane.pending.append(call)
        if lane.inflight < self.inflight_limit:
            lane.inflight += 1
            task = asyncio.create_task(self._drain(tenant, lane), name="queen-schedule-batch")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            return await call.future
        except asyncio.CancelledError:
            try:  # not taken yet: it never runs (a call already running still commits)
                lane.pending.remove(call)
            except ValueError:
                pass
            self._forget(tenant, lane)
            raise

    def inflight(self, tenant: uuid.UUID) -> int:
        """Statements of `tenant` running now (observable: tests, metrics)."""
        lane = self._lanes.get(tenant)
        return 0 if lane is None else lane.inflight

    def waiting(self, tenant: uuid.UUID) -> int:
        """Calls of `tenant` waiting for a slot (observable: tests, metrics)."""
        lane = self._lanes.get(tenant)
        return 0 if lane is None else len(lane.pending)

    async def _drain(self, tenant: uuid.UUID, lane: _Lane[Op, Result]) -> None:
        try:
            while lane.pending:
                await self._execute(self._take(lane.pending, self.max_ops))
        finally:
            lane.inflight -= 1
            self._forget(tenant, lane)

    def _forget(self, tenant: uuid.UUID, lane: _Lane[Op, Result]) -> None:
        """An idle tenant costs nothing."""
        if not lane.inflight and not lane.pending and self._lanes.get(tenant) is lane:
            del self._lanes[tenant]

    @staticmethod
    def _take(
        pending: collections.deque[_Call[Op, Result]], max_ops: int
    ) -> list[_Call[Op, Result]]:
        first = pending.popleft()
        batch, keys, n = [first], set(first.keys), len(first.ops)
        if n >= max_ops:
            return batch
        keep: list[_Call[Op, Result]] = []
        while pending:
            c = pending.popleft()
            if c.who == first.who and n + len(c.ops) <= max_ops and keys.isdisjoint(c.keys):
                batch.append(c)
                keys |= c.keys
                n += len(c.ops)
            else:
                keep.append(c)
        pending.extendleft(reversed(keep))  # the others keep their place in line
        return batch

    async def _execute(self, batch: list[_Call[Op, Result]]) -> None:
        live = [c for c in batch if not c.future.done()]
        if not live:
            return
        self.statements += 1
        if len(live) > 1:
            self.merged_calls += len(live)
        try:
            results = await self._run(live[0].ident, [t for c in live for t in c.ops])
        except QueenError as e:
            if len(live) > 1 and is_busy(e):  # one call's locked key: the others commit
                await asyncio.gather(*(self._alone(c) for c in live))
                return
            if len(live) > 1 and e.status != 503:
                for c in live:  # one call's bad op must not fail its neighbours
                    await self._alone(c)
                return
            for c in live:
                c.fail(e)
            return
        except BaseException as e:
            for c in live:
                c.fail(e)
            if not isinstance(e, Exception):
                raise  # cancelled (shutdown): the callers got the error, the task ends
            return
        at = 0
        for c in live:
            c.answer(results[at : at + len(c.ops)])
            at += len(c.ops)

    async def _alone(self, c: _Call[Op, Result]) -> None:
        if c.future.done():
            return
        self.statements += 1
        try:
            c.answer(await self._run(c.ident, c.ops))
        except BaseException as e:
            c.fail(e)
            if not isinstance(e, Exception):
                raise
