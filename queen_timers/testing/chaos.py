"""Chaos for tests: terminate the backend of the connection that reaches a named fault point.

The code awaits `queen_timers.db.faults.hook` wherever it holds a connection it is about to
use (the points are listed there). `killing` installs a hook that, on the `every`-th arrival
at a point, terminates the backend of exactly that connection (`pg_terminate_backend` on its
`get_server_pid()`, waiting until the backend is gone), up to `times` times. The call that
reached the point then fails on a dead connection, as it would through a failover or a
pooler dropping it; nothing of it reached the database. So a test knows how many faults it
caused, where, and which calls they hit, and counts outcomes instead of hoping a poller
caught a statement in flight (the poller this replaces once hit 2 statements in 3000 timers).

Behind a transaction pooler `get_server_pid()` is the pooler's own key, not a backend, and
between transactions the connection holds no server connection at all, so a due arrival first
asks the connection for `pg_backend_pid()` (a read, harmless) and compares, as boot does
(queen_timers.db.pooler). Equal: a direct connection, terminated as above. Different, inside a
transaction: the backend the pooler lent it is terminated (the pooler then drops the client,
as PgBouncer does on a crashed server connection). Different, between transactions: the
client's connection to the pooler is shut down under it, as a pooler dropping it looks to the
broker (the next read is the end of the stream); the next statement is never sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from collections import Counter
from collections.abc import AsyncIterator

import asyncpg

from ..db import faults
from ..db.conn import Conn

__all__ = ["Chaos", "Kill", "killing"]

# How long a dropped connection may take to be seen as closed (s), like the terminations' 10 s.
_GONE_TIMEOUT_S = 10


@dataclasses.dataclass(frozen=True)
class Kill:
    """At a point: terminate on arrivals every, 2*every, ... up to `times` terminations."""

    every: int
    times: int

    def due(self, arrival: int, done: int) -> bool:
        return done < self.times and arrival % self.every == 0

    @property
    def arrivals_needed(self) -> int:
        return self.every * self.times


class Chaos:
    """What a `killing` block did: `reached[point]` arrivals, `killed[point]` terminations."""

    def __init__(self, admin: Conn | asyncpg.Pool, plan: dict[str, Kill]):
        unknown = set(plan) - faults.POINTS
        if unknown:
            raise ValueError(f"no such fault point: {sorted(unknown)}")
        self.plan = plan
        self.reached: Counter[str] = Counter()
        self.killed: Counter[str] = Counter()
        self._admin = admin
        self._lock = asyncio.Lock()  # the admin may be one connection: one statement at once
        self.all_done = asyncio.Event()
        if not plan:
            self.all_done.set()

    async def __call__(self, point: str, conn: Conn) -> None:
        kill = self.plan.get(point)
        if kill is None:
            return
        self.reached[point] += 1
        if not kill.due(self.reached[point], self.killed[point]):
            return
        self.killed[point] += 1  # counted first: concurrent arrivals never overshoot `times`
        pid = conn.get_server_pid()
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        if backend == pid or conn.is_in_transaction():
            async with self._lock:
                gone = await self._admin.fetchval("SELECT pg_terminate_backend($1, 10000)", backend)
            assert gone, f"backend {backend} at {point} did not go away"
        else:
            await _drop_client(conn, point)
        if self.done():
            self.all_done.set()

    def done(self) -> bool:
        return all(self.killed[p] >= k.times for p, k in self.plan.items())

    def assert_done(self) -> None:
        """Every planned termination happened (a workload that reaches a point fewer times
        than planned proves less than it claims)."""
        short = {
            p: (self.killed[p], k.times, self.reached[p])
            for p, k in self.plan.items()
            if self.killed[p] != k.times
        }
        assert not short, f"(killed, planned, arrivals) per point: {short}"


async def _drop_client(conn: Conn, point: str) -> None:
    """Shut down the socket of a connection to a pooler and wait until asyncpg has seen the
    end of the stream (within the 10 s a termination may take)."""
    # asyncpg keeps its transport private; the test reaches it to cut the link mid-flight.
    transport: asyncio.Transport = getattr(conn, "_transport")  # noqa: B009
    transport.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
    deadline = asyncio.get_running_loop().time() + _GONE_TIMEOUT_S
    while not conn.is_closed():  # asyncpg offers no event for a lost link: look again
        assert asyncio.get_running_loop().time() < deadline, f"connection at {point} stayed open"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def killing(admin: Conn | asyncpg.Pool, plan: dict[str, Kill]) -> AsyncIterator[Chaos]:
    """`async with killing(conn, {"log.push": Kill(every=5, times=6)}) as chaos: ...`.
    `admin` is an asyncpg connection or pool on the same server that the block does not use
    otherwise (it runs the terminations)."""
    chaos = Chaos(admin, plan)
    previous, faults.hook = faults.hook, chaos
    try:
        yield chaos
    finally:
        faults.hook = previous
