"""Behind PgBouncer in transaction mode with the database away: a call the pooler queues
answers within QUEEN_POOLER_COMMAND_TIMEOUT_MS instead of the pooler's query_wait_timeout.

PgBouncer 1.18, its server connections gone and its logins refused, holds the first callers
in its queue for query_wait_timeout (120 s, measured) and fails later ones at once for
server_login_retry; no statement_timeout applies through it. The broker bounds the wait
itself (queen_timers.db.pooler).
"""

import time
import urllib.parse
import uuid

import asyncpg
import pytest

from queen_timers.db.pooler import Link
from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker

pytestmark = pytest.mark.pgbouncer

# Far below PgBouncer's own 120 s, far above the 1 s bound (asyncpg answers within about twice
# it: the bound, then the cancel it waits for): a loaded machine stays inside.
ANSWERED_WITHIN_S = 30


async def test_a_call_queued_in_the_pooler_is_bounded_and_answers_503(
    pgbouncer, pg_server_url, db_url, pooled_db_url, conn
):
    name = urllib.parse.urlsplit(db_url).path.lstrip("/")
    ident = Identity(tenant=uuid.uuid4(), subject="tester")
    async with started_broker(
        pooled_db_url,
        pooler_prepared_statements=pgbouncer.keeps_prepared_statements,
        pooler_command_timeout_ms=1000,
    ) as q:
        assert q.rt.link.pooled
        [r] = await q.push(ident, [{"queue": "away", "payload": 1, "transactionId": "before"}])
        assert r["status"] == "queued"
        # ALTER DATABASE may not disallow connections to the database it runs in.
        admin = await asyncpg.connect(pg_server_url)
        try:
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            # Every server connection PgBouncer holds to this database goes; new ones are refused.
            await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                name,
            )
            started = time.monotonic()
            with pytest.raises(QueenError) as ei:
                await q.push(ident, [{"queue": "away", "payload": 2, "transactionId": "during"}])
            waited = time.monotonic() - started
        finally:
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            await admin.close()
        assert (ei.value.status, ei.value.code, ei.value.retry_after) == (503, "unavailable", 1)
        assert waited < ANSWERED_WITHIN_S, waited
    txns = await conn.fetchval("SELECT count(*) FROM queen.log_txns")
    assert txns == 1, "the refused push wrote nothing"


def test_the_bound_applies_behind_a_pooler_only():
    assert Link().pool_options(30000, 35000)["command_timeout_ms"] == 0
    assert Link(pooled=True).pool_options(30000, 35000)["command_timeout_ms"] == 35000
