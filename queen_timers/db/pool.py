"""The connection pool and the server checks every broker makes at boot."""

from __future__ import annotations

import os
from typing import Any

import asyncpg
import msgspec

from . import goodbye
from .conn import Conn
from .outage import outage_for, quiet_asyncpg_floor

__all__ = [
    "MIN_SERVER_VERSION",
    "ServerVersionError",
    "check_server_version",
    "connect_one",
    "connect_pool",
    "init_connection",
    "require_server_version",
]

MIN_SERVER_VERSION = 140000  # PostgreSQL 14 (the suite runs on 15 and 18: docs/guides/operators.md)


class ServerVersionError(RuntimeError):
    pass


def _encode_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


async def init_connection(conn: asyncpg.Connection, statement_timeout_ms: int = 0) -> None:
    """Codecs and session settings shared by pooled and dedicated connections."""
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            encoder=_encode_json,
            decoder=msgspec.json.decode,
            schema="pg_catalog",
            format="text",
        )
    if statement_timeout_ms:
        await conn.execute(f"SET statement_timeout = {int(statement_timeout_ms)}")


def require_server_version(num: int, found: str) -> int:
    """The version rule alone (pure, unit-tested with fake numbers): `num` is
    server_version_num, `found` the human version named in the error."""
    if num < MIN_SERVER_VERSION:
        raise ServerVersionError(f"PostgreSQL {found} found; queen needs PostgreSQL 14 or newer")
    return num


async def check_server_version(conn: Conn) -> int:
    num = int(await conn.fetchval("SHOW server_version_num"))
    found = await conn.fetchval("SHOW server_version") if num < MIN_SERVER_VERSION else str(num)
    return require_server_version(num, found)


def application_name(role: str = "pool") -> str:
    """Every connection names its broker process, so an operator (or a test) can tell whose
    backend is whose in pg_stat_activity."""
    return f"queen:{os.getpid()}:{role}"


async def connect_one(
    url: str, statement_timeout_ms: int = 0, role: str = "conn"
) -> asyncpg.Connection:
    """A dedicated connection outside the pool (LISTEN, maintenance, tests)."""
    outage = outage_for(url)
    try:
        conn = await asyncpg.connect(
            url, server_settings={"application_name": application_name(role)}
        )
        await init_connection(conn, statement_timeout_ms)
    except Exception as exc:
        outage.lost(exc)
        raise
    outage.restored()
    return conn


async def _keep_session(conn: Conn) -> None:
    """Pool reset on release: no round trip. asyncpg's default (RESET ALL, UNLISTEN *, CLOSE
    ALL, advisory unlock) costs one per release and would also undo session settings;
    pooled connections keep no session state of their own (settings are given at connect,
    advisory locks are released by whoever takes them, LISTEN lives on its own connection).
    An open transaction is still rolled back by asyncpg before this is called. The
    connection goes back under watch (queen_timers.db.goodbye)."""
    goodbye.released(conn)


async def _handed_out(conn: Conn) -> None:
    """Pool setup on acquire: the connection leaves the watch for idleness."""
    goodbye.acquired(conn)


async def connect_pool(
    url: str,
    *,
    min_size: int = 2,
    max_size: int = 20,
    statement_timeout_ms: int = 0,
    role: str = "pool",
    statement_cache_size: int = 100,  # 0 behind a transaction pooler (db.pooler)
    command_timeout_ms: int = 0,  # behind a pooler only (db.pooler); 0 = none
    read_only: bool = False,  # a replica's pool (db.reads): no transaction of it writes
) -> asyncpg.Pool:
    outage = outage_for(url)
    quiet_asyncpg_floor()

    async def connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
        # Every connection the pool opens, its floor included, comes through here.
        try:
            conn: asyncpg.Connection = await asyncpg.connect(*args, **kwargs)
            await init_connection(conn)
        except Exception as exc:
            outage.lost(exc)
            raise
        goodbye.watch(conn)
        outage.restored()
        return conn

    server_settings = {"application_name": application_name(role)}
    if statement_timeout_ms:
        server_settings["statement_timeout"] = str(int(statement_timeout_ms))
    if read_only:
        server_settings["default_transaction_read_only"] = "on"
    pool = await asyncpg.create_pool(
        url,
        min_size=min_size,
        max_size=max_size,
        connect=connect,
        setup=_handed_out,
        reset=_keep_session,
        server_settings=server_settings,
        statement_cache_size=statement_cache_size,
        command_timeout=command_timeout_ms / 1000 if command_timeout_ms else None,
    )
    async with pool.acquire() as conn:
        try:
            await check_server_version(conn)
        except ServerVersionError:
            await pool.close()
            raise
    return pool
