"""Fixtures of the SQL API tests: application roles (cluster-wide, so named uniquely and
dropped at the end) and connections made as them."""

from __future__ import annotations

import contextlib
import uuid

import asyncpg
import pytest


class Roles:
    """Creates LOGIN roles granted queen_producer, optionally bound to a tenant, and drops
    them (and closes their connections) at the end of the test."""

    def __init__(self, db_url: str, admin: asyncpg.Connection):
        self.db_url = db_url
        self.admin = admin
        self.names: list[str] = []
        self.conns: list = []

    async def create(self, tenant: uuid.UUID | None = None, *, producer: bool = True) -> str:
        name = f"qt_app_{uuid.uuid4().hex[:12]}"
        await self.admin.execute(f'CREATE ROLE "{name}" LOGIN')
        self.names.append(name)
        if producer:
            await self.admin.execute(f'GRANT queen_producer TO "{name}"')
        if tenant is not None:
            await self.admin.execute(
                "INSERT INTO queen.timer_producer_roles (role_name, tenant_id) VALUES ($1, $2)",
                name,
                tenant,
            )
        return name

    async def connect(self, role: str) -> asyncpg.Connection:
        c = await asyncpg.connect(self.db_url, user=role)
        self.conns.append(c)
        return c

    def connect_psycopg(self, role: str | None = None):
        import psycopg

        c = psycopg.connect(_conninfo(self.db_url), user=role)  # None: the URL's user
        self.conns.append(c)
        return c

    async def connect_psycopg_async(self, role: str | None = None):
        import psycopg

        c = await psycopg.AsyncConnection.connect(_conninfo(self.db_url), user=role)
        self.conns.append(c)
        return c

    async def close(self) -> None:
        for c in self.conns:
            with contextlib.suppress(Exception):
                r = c.close()
                if hasattr(r, "__await__"):
                    await r
        for name in self.names:
            await self.admin.execute(f'DROP ROLE IF EXISTS "{name}"')


def _conninfo(url: str) -> str:
    # asyncpg's URL carries the socket directory as ?host=; libpq reads the same form.
    return url


@pytest.fixture
async def roles(db_url, conn):
    r = Roles(db_url, conn)
    try:
        yield r
    finally:
        await r.close()
