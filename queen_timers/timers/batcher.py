"""Group commit for schedules: concurrent schedule calls share one statement.

A single-op schedule costs the database far more than its row: a round trip, a plan, a
transaction and a WAL flush. Under concurrency those fixed costs dominate (~700 us of
PostgreSQL CPU a one-op request against ~45 us an op in 256-op batches, 2026-11-30;
bench/RESULTS.md, "Measurements the code cites"). So schedule calls made outside a caller's
transaction go through this batcher:

* at most `timers_schedule_inflight` statements run at once; a call that finds a free slot
  runs at once, alone (no added latency when the broker is not busy);
* calls that arrive while every slot is busy wait, and the next free slot takes as many of
  them as fit in one statement: the same identity (tenant and producer are arguments of the
  procedure, never op fields), no (queue, timerKey) twice, at most `timers_schedule_batch_ops`
  ops.

Each caller sees what it would see alone: its own results, in its own order. Each call is
atomic (a statement is one transaction); calls merged into one statement commit together.
If a merged statement fails for a reason that is not transient, each call is replayed on its
own, so one call's bad op can never fail a neighbour; a transient failure (connection,
timeout) is reported to every call of the statement, as it would have been alone.
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
        self._pending: collections.deque[_Call[Op, Result]] = collections.deque()
        self._inflight = 0
        self._tasks: set[asyncio.Task[None]] = set()  # strong references while they run
        # Observable (tests, metrics): statements run, and calls that shared one.
        self.statements = 0
        self.merged_calls = 0

    async def submit(self, ident: Identity, ops: Sequence[Op]) -> list[Result]:
        if self.inflight_limit <= 0:  # batching off: every call is its own statement
            return await self._run(ident, ops)
        call = _Call(
            ident,
            ops,
            asyncio.get_running_loop().create_future(),
            frozenset((t.queue, t.timer_key) for t in ops),
        )
        self._pending.append(call)
        if self._inflight < self.inflight_limit:
            self._inflight += 1
            task = asyncio.create_task(self._drain(), name="queen-schedule-batch")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            return await call.future
        except asyncio.CancelledError:
            try:  # not taken yet: it never runs (a call already running still commits)
                self._pending.remove(call)
            except ValueError:
                pass
            raise

    async def _drain(self) -> None:
        try:
            while self._pending:
                await self._execute(self._take())
        finally:
            self._inflight -= 1

    def _take(self) -> list[_Call[Op, Result]]:
        first = self._pending.popleft()
        batch, keys, n = [first], set(first.keys), len(first.ops)
        if n >= self.max_ops:
            return batch
        keep: list[_Call[Op, Result]] = []
        while self._pending:
            c = self._pending.popleft()
            if c.who == first.who and n + len(c.ops) <= self.max_ops and keys.isdisjoint(c.keys):
                batch.append(c)
                keys |= c.keys
                n += len(c.ops)
            else:
                keep.append(c)
        self._pending.extendleft(reversed(keep))  # the others keep their place in line
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
