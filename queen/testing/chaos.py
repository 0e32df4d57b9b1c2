"""Chaos for tests: terminate a broker's backends while calls run (real PostgreSQL, no mocks).

Every connection a broker opens names its process and role in `application_name`
(`queen:<pid>:<role>`, queen.db.pool.application_name), so a test can pick them out of
pg_stat_activity and end them mid-statement, as a failover or a pooler would.
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["terminate_while"]


async def terminate_while(conn, role: str, done: asyncio.Event, *, every_s: float = 0.01,
                          pid: int | None = None) -> int:
    """Until `done` is set, every `every_s` terminate the backends of broker process `pid`
    (default: this one) with connection role `role` that are running a statement. Returns how
    many were terminated: a chaos test should assert it hit something, or it proves nothing.
    `conn` is an asyncpg connection or pool that nothing else uses while this runs."""
    name = f"queen:{os.getpid() if pid is None else pid}:{role}"
    killed = 0
    while not done.is_set():
        killed += await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND state = 'active'", name)
        await asyncio.sleep(every_s)
    return killed
