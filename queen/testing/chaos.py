"""Chaos for tests: terminate a broker's backends while calls run (real PostgreSQL, no mocks).

Every connection a broker opens names its process and role in `application_name`
(`queen:<pid>:<role>`, queen.db.pool.application_name), so a test can pick them out of
pg_stat_activity and end them mid-statement, as a failover or a pooler would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import AsyncIterator

__all__ = ["terminate_while", "terminating", "Chaos"]


async def terminate_while(conn, role: str, done: asyncio.Event, *, every_s: float = 0.01,
                          pid: int | None = None) -> int:
    """Until `done` is set, every `every_s` terminate the backends of broker process `pid`
    (default: this one) with connection role `role` that are running a statement in the
    database `conn` is connected to (another test's database is never touched). Returns how
    many were terminated: a chaos test should assert it hit something, or it proves nothing.
    `conn` is an asyncpg connection or pool that nothing else uses while this runs."""
    name = f"queen:{os.getpid() if pid is None else pid}:{role}"
    killed = 0
    while not done.is_set():
        killed += await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND state = 'active' AND datname = current_database()",
            name)
        await asyncio.sleep(every_s)
    return killed


class Chaos:
    """What a `terminating` block did: `killed` statements, known once the block has ended."""

    killed: int = 0

    def assert_hit(self, at_least: int = 3) -> None:
        assert self.killed >= at_least, (
            f"the chaos hit only {self.killed} statements: it proved nothing")


@contextlib.asynccontextmanager
async def terminating(conn, role: str, *, every_s: float = 0.01,
                      pid: int | None = None) -> AsyncIterator[Chaos]:
    """`async with terminating(conn, "pool") as chaos: ...` runs terminate_while around the
    block; afterwards `chaos.killed` says how many statements it ended (`chaos.assert_hit()`)."""
    done = asyncio.Event()
    chaos = Chaos()
    task = asyncio.create_task(terminate_while(conn, role, done, every_s=every_s, pid=pid))
    try:
        yield chaos
    finally:
        done.set()
        chaos.killed = await task
