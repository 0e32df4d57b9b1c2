"""A database outage is one warning per broker and one line when it is back, not a traceback
per reconnect attempt. The outage is real: every backend of the broker is terminated while
its database refuses new connections (ALLOW_CONNECTIONS false), so the pool's floor, the
sweeper's pool and the listener all fail to reconnect until it is allowed again."""

import asyncio
import logging
import os
import urllib.parse

import asyncpg
import pytest

from queen_timers.db.outage import outage_for
from queen_timers.identity import Identity
from queen_timers.service import Queen

pytestmark = pytest.mark.slow


async def _until(cond, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_an_outage_logs_one_warning_and_one_recovery(db_url, pg_server_url, caplog):
    admin = await asyncpg.connect(pg_server_url)
    name = urllib.parse.urlsplit(db_url).path.lstrip("/")
    q = Queen(database_url=db_url, retention_interval_ms=0)  # sweeper and listener on
    await q.start()
    outage = outage_for(db_url)
    try:
        with caplog.at_level(logging.INFO):
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            try:
                killed = await admin.fetchval(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) "
                    "FROM pg_stat_activity WHERE datname = $1 AND application_name = ANY($2)",
                    name,
                    [f"queen:{os.getpid()}:{role}" for role in ("pool", "sweeper", "listen")],
                )
                assert killed >= 3
                # Several attempts fail: the floors' background retries, the sweeper's
                # cycles, the listener's reconnects.
                await _until(lambda: outage.failures >= 6)
            finally:
                await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            await _until(lambda: outage.down_since is None)
            [r] = await q.push(Identity(subject="t"), [{"queue": "after", "payload": 1}])
            assert r["status"] == "queued"
    finally:
        await q.stop()
        await admin.close()
    told = [r for r in caplog.records if r.levelno >= logging.WARNING]
    text = [f"{r.name}: {r.getMessage()}" for r in told]
    assert [t for t in text if "database unreachable" in t] == text[:1], text
    assert len([t for t in text if "database reachable again" in t]) == 1, text
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert len(told) == 2, text
