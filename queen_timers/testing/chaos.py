"""Chaos for tests: terminate a broker's backends while calls run (real PostgreSQL, no mocks).

Every connection a broker opens names its process and role in `application_name`
(`queen:<pid>:<role>`, queen_timers.db.pool.application_name), so a test can pick them out of
pg_stat_activity and end them mid-statement, as a failover or a pooler would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

__all__ = ["Chaos", "terminate_while", "terminating"]


class Chaos:
    """What a `terminating` block has done so far: `killed` statements, counted as they die.

    A kill lands only if a statement is running at the instant the poll looks, and a fast
    workload may finish between two polls: a fixed number of calls proved nothing on a quick
    machine (CI once saw 0 kills in 400 batched schedules). So a workload loops on
    `chaos.more(calls_made, minimum)`: it goes on past its minimum until the chaos has hit
    `at_least` statements, bounded by `deadline_s` so a setup that can never be hit fails in
    `assert_hit` instead of hanging."""

    def __init__(self, at_least: int = 3, deadline_s: float = 30.0):
        self.killed = 0
        self.at_least = at_least
        self._deadline = asyncio.get_running_loop().time() + deadline_s

    def more(self, made: int, minimum: int) -> bool:
        """Should a workload that has made `made` calls make another?"""
        if made < minimum:
            return True
        return self.killed < self.at_least and asyncio.get_running_loop().time() < self._deadline

    def assert_hit(self, at_least: int | None = None) -> None:
        at_least = self.at_least if at_least is None else at_least
        assert self.killed >= at_least, (
            f"the chaos hit only {self.killed} statements: it proved nothing"
        )


async def terminate_while(
    conn,
    role: str,
    done: asyncio.Event,
    *,
    every_s: float = 0.01,
    pid: int | None = None,
    chaos: Chaos | None = None,
) -> int:
    """Until `done` is set, every `every_s` terminate the backends of broker process `pid`
    (default: this one) with connection role `role` that are running a statement in the
    database `conn` is connected to (another test's database is never touched). Returns how
    many were terminated (and counts them in `chaos.killed` as they die): a chaos test should
    assert it hit something, or it proves nothing. `conn` is an asyncpg connection or pool
    that nothing else uses while this runs."""
    name = f"queen:{os.getpid() if pid is None else pid}:{role}"
    chaos = chaos if chaos is not None else Chaos()
    while not done.is_set():
        chaos.killed += await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND state = 'active' AND datname = current_database()",
            name,
        )
        await asyncio.sleep(every_s)
    return chaos.killed


@contextlib.asynccontextmanager
async def terminating(
    conn,
    role: str,
    *,
    every_s: float = 0.01,
    pid: int | None = None,
    at_least: int = 3,
    deadline_s: float = 30.0,
) -> AsyncIterator[Chaos]:
    """`async with terminating(conn, "pool") as chaos: ...` runs terminate_while around the
    block; `chaos.killed` says how many statements it has ended, `chaos.more(...)` keeps a
    workload going until that is at least `at_least`, and `chaos.assert_hit()` checks it."""
    done = asyncio.Event()
    chaos = Chaos(at_least, deadline_s)
    task = asyncio.create_task(
        terminate_while(conn, role, done, every_s=every_s, pid=pid, chaos=chaos)
    )
    try:
        yield chaos
    finally:
        done.set()
        await task
