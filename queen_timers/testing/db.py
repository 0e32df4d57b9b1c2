"""Per-test databases cloned from a migrated template, on any PostgreSQL server."""

from __future__ import annotations

import itertools
import os
import urllib.parse

import asyncpg

from ..db.migrate import apply_migrations
from ..db.pool import connect_one

__all__ = ["TestDatabases", "with_database"]


def with_database(url: str, name: str) -> str:
    """The same server URL, naming another database (works for socket and TCP URLs)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, v) for k, v in query if k != "dbname"]
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, "/" + name, urllib.parse.urlencode(query), parts.fragment)
    )


class TestDatabases:
    __test__ = False  # not a pytest class

    def __init__(self, server_url: str):
        self.server_url = server_url
        self.template = f"queen_tpl_{os.getpid()}"
        self._n = itertools.count()

    async def _admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.server_url)

    async def setup(self) -> None:
        admin = await self._admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{self.template}"')
        finally:
            await admin.close()
        conn = await connect_one(with_database(self.server_url, self.template))
        try:
            await apply_migrations(conn)
        finally:
            await conn.close()

    async def create(self) -> str:
        name = f"queen_t_{os.getpid()}_{next(self._n)}"
        admin = await self._admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        finally:
            await admin.close()
        return with_database(self.server_url, name)

    async def drop(self, url: str) -> None:
        name = urllib.parse.urlsplit(url).path.lstrip("/")
        admin = await self._admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    async def teardown(self) -> None:
        admin = await self._admin()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
        finally:
            await admin.close()
