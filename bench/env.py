"""Where a bench runs: the database it owns, and the facts every result records.

A bench never touches a database it did not create. With no `--database-url` it starts its
own embedded PostgreSQL in a short temporary directory (the Unix socket lives inside it) and
removes it at the end; with a URL it creates a fresh database `queen_bench_<scenario>_<pid>`
on that server (the role needs CREATEDB) and drops it at the end, because the amplification
scenario alters the staging table and the peers install foreign schemas.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import asyncpg

from queen_timers.runtime import Runtime
from queen_timers.service import Queen

from .queries import BQ

__all__ = ["PG_SETTINGS", "SIZE", "Target", "fetchrow", "runtime", "server_info", "with_database"]

# PostgreSQL settings every result records: the ones that decide autovacuum, WAL and the
# cost of a non-HOT update.
PG_SETTINGS = [
    "server_version",
    "shared_buffers",
    "max_connections",
    "autovacuum",
    "autovacuum_max_workers",
    "autovacuum_naptime",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_vacuum_cost_limit",
    "vacuum_cost_limit",
    "autovacuum_work_mem",
    "maintenance_work_mem",
    "wal_level",
    "full_page_writes",
    "wal_compression",
    "synchronous_commit",
    "fsync",
    "checkpoint_timeout",
    "max_wal_size",
    "work_mem",
    "effective_io_concurrency",
    "io_method",
    "track_io_timing",
]


# A PostgreSQL memory size as a setting takes it (units are case-sensitive there).
SIZE = re.compile(r"[1-9][0-9]*(kB|MB|GB|TB)")


def with_database(url: str, name: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if k != "dbname"
    ]
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, "/" + name, urllib.parse.urlencode(query), parts.fragment)
    )


class Target:
    """The bench's own database: `async with Target(scenario, url) as t:` -> t.url."""

    def __init__(
        self,
        scenario: str,
        database_url: str | None = None,
        keep: bool = False,
        migrate: bool = True,
        data_dir: str | os.PathLike[str] | None = None,
        shared_buffers: str | None = None,
    ):
        self.scenario = scenario
        self.server_url = database_url
        self.keep = keep
        self.migrate = migrate
        self.embedded = database_url is None
        self._emb: Any = None
        self._root: str | None = None
        self.dbname = f"queen_bench_{scenario}_{os.getpid()}"
        self.url = ""
        self.data_dir: Path | None = None
        self._extra: list[str] = []
        self._runs = 0
        # An embedded server in a directory of the caller's, kept after the run (its databases
        # with it), instead of a temporary one.
        self._kept_dir = Path(data_dir).expanduser().absolute() if data_dir else None
        self.shared_buffers = shared_buffers
        if self._kept_dir is not None and database_url is not None:
            raise ValueError("a kept data directory is an embedded server's: no database URL")
        if shared_buffers is not None and database_url is not None:
            raise ValueError("shared_buffers is set on the embedded server only")
        if shared_buffers is not None and not SIZE.fullmatch(shared_buffers):
            raise ValueError(f"not a PostgreSQL size (such as 6GB): {shared_buffers!r}")

    @property
    def server(self) -> str:
        """The server's URL (the embedded one's once started)."""
        if self.server_url is None:
            raise RuntimeError("the bench server is not started")
        return self.server_url

    async def __aenter__(self) -> Target:
        if self.embedded:
            from queen_timers.db import EmbeddedPostgres

            if self._kept_dir is not None:
                self.data_dir = self._kept_dir
            else:
                self._root = tempfile.mkdtemp(prefix="qb-", dir="/tmp")
                self.data_dir = Path(self._root) / "pg"
            self._emb = EmbeddedPostgres(self.data_dir)
            self.server_url = await asyncio.to_thread(self._emb.start)
            if self.shared_buffers is not None:
                await self._size_shared_buffers(self.shared_buffers)
        admin = await asyncpg.connect(self.server_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{self.dbname}"')
            if self.data_dir is None:
                self.data_dir = await _local_data_dir(admin)
        finally:
            await admin.close()
        self.url = with_database(self.server, self.dbname)
        if self.migrate:
            await self.apply_schema()
        return self

    async def _size_shared_buffers(self, size: str) -> None:
        """Give the embedded server `size` of shared_buffers (a PostgreSQL size: 6GB), with a
        restart when it has another: the setting is read at the server's start only."""
        assert self._emb is not None
        admin = await asyncpg.connect(self.server_url)
        try:
            now, want = await fetchrow(admin, BQ.shared_buffers_compare, size)
            if now != want:
                await admin.execute(f"ALTER SYSTEM SET shared_buffers = '{size}'")
        finally:
            await admin.close()
        if now != want:
            await asyncio.to_thread(self._emb.restart)

    async def database(self, suffix: str, migrate: bool = True, template: str | None = None) -> str:
        """Another fresh database on the same server (one per variant), dropped at the end;
        `template`: a copy of that database (its files copied, no WAL replay of its rows)."""
        name = f"{self.dbname}_{suffix}"
        admin = await asyncpg.connect(self.server_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if template is None:
                await admin.execute(f'CREATE DATABASE "{name}"')
            else:
                await admin.execute(
                    f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY = FILE_COPY'
                )
        finally:
            await admin.close()
        self._extra.append(name)
        url = with_database(self.server, name)
        if migrate:
            await self.apply_schema(url)
        return url

    async def fresh(self) -> str:
        """A new migrated database on the server for one run of a scenario (its URL)."""
        self._runs += 1
        return await self.database(f"r{self._runs}")

    async def drop(self, url: str) -> None:
        """Drop a database made by fresh() or database() before the end (its disk)."""
        name = urllib.parse.urlsplit(url).path.lstrip("/")
        await self.drop_database(name.removeprefix(self.dbname + "_"))

    async def drop_database(self, suffix: str) -> None:
        """Drop one database made by database(suffix) before the end (a large one's disk)."""
        if self.keep:
            return
        name = f"{self.dbname}_{suffix}"
        admin = await asyncpg.connect(self.server_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
        if name in self._extra:
            self._extra.remove(name)

    async def apply_schema(self, url: str | None = None) -> None:
        from queen_timers.db.migrate import apply_migrations
        from queen_timers.db.pool import connect_one

        conn = await connect_one(url or self.url)
        try:
            await apply_migrations(conn)
        finally:
            await conn.close()

    async def __aexit__(self, *exc: object) -> None:
        if self.keep:
            print(f"bench: kept database {self.url}")
            return
        try:
            admin = await asyncpg.connect(self.server_url)
            try:
                for name in [self.dbname, *self._extra]:
                    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.close()
        except Exception as e:  # noqa: BLE001 - best effort cleanup, said aloud
            print(f"bench: could not drop {self.dbname}: {e}", file=sys.stderr)
        if self._emb is not None:
            await asyncio.to_thread(self._emb.stop)
            if self._root is not None:  # a kept data directory stays, its databases in it
                shutil.rmtree(self._root, ignore_errors=True)

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid when the server runs on this machine (CPU is measured by pid)."""
        if self.data_dir is None:
            return None
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def socket_dir_and_port(self) -> tuple[str, int, str, str]:
        """(host or socket directory, port, user, database) for clients that take parts
        (node-postgres, psycopg)."""
        parts = urllib.parse.urlsplit(self.url)
        q = dict(urllib.parse.parse_qsl(parts.query))
        host = q.get("host") or parts.hostname or "localhost"
        return (
            host,
            parts.port or int(q.get("port", 5432)),
            parts.username or "postgres",
            self.dbname,
        )


async def _local_data_dir(conn) -> Path | None:
    try:
        d = await conn.fetchval(BQ.data_directory)
    except asyncpg.PostgresError:
        return None
    p = Path(d) if d else None
    return p if p is not None and (p / "postmaster.pid").exists() else None


async def server_info(url: str) -> dict:
    conn = await asyncpg.connect(url)
    try:
        version = await conn.fetchval(BQ.server_version)
        rows = await conn.fetch(BQ.pg_settings, PG_SETTINGS)
        return {
            "version": version,
            # As SHOW prints them (256MB, 1min): setting || unit read "32768" "8kB" as 327688kB.
            "settings": {r["name"]: r["shown"] for r in rows},
        }
    finally:
        await conn.close()


def runtime(q: Queen) -> Runtime:
    """A started service's runtime (its pool, its settings)."""
    if q.rt is None:
        raise RuntimeError("the service is not started")
    return q.rt


async def fetchrow(conn: Any, query: str, *args: Any) -> asyncpg.Record:
    """The one row a statement always answers."""
    row = await conn.fetchrow(query, *args)
    if row is None:
        raise RuntimeError(f"no row from: {query[:80]}")
    return row
