"""The whole conformance suite over the HTTP transport, with the broker behind PgBouncer in
transaction mode (skipped where pgbouncer is not installed)."""

import pytest

from queen_http import HttpTransport
from queen_http.testing import HttpAdapter, http_settings
from queen_timers.testing.conformance import *  # noqa: F403 - the suite's tests and fixtures
from queen_timers.testing.conformance import CONFORMANCE_JWT_SECRET
from queen_timers.testing.fixtures import started_broker

pytestmark = pytest.mark.pgbouncer


@pytest.fixture
async def conformance_queen(pooled_db_url, pgbouncer):
    """The suite's broker, its pool through PgBouncer (its `conn` fixture stays direct)."""
    async with started_broker(
        pooled_db_url,
        jwt_secret=CONFORMANCE_JWT_SECRET,
        pooler_prepared_statements=pgbouncer.keeps_prepared_statements,
    ) as q:
        assert q.rt.link.pooled
        yield q


@pytest.fixture
async def conformance_connect(conformance_queen):
    t = HttpTransport(http_settings())
    await t.start(conformance_queen)

    async def connect(token):
        return HttpAdapter(t.url, token)

    try:
        yield connect
    finally:
        await t.stop()
