"""Apply the schema at every boot.

The deployment model is "always virgin": every file in migrations/ is idempotent and is
re-applied in numeric order at each boot, under one transaction-scoped advisory lock, so two
brokers booting together apply it one after the other. The schema has no version number of its
own (a file changes in place); what was applied is stamped in queen.system_state ('schema': the
files, a digest of their text, the queen-timers version), which `queen status` compares with
the files of the installation it runs from. Files must never take an ACCESS
EXCLUSIVE lock on a table that already exists (guard such DDL with a catalogue check); a test
re-applies the schema inside an open transaction and inspects pg_locks.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import asyncpg

from .conn import Conn
from .queries import Q

__all__ = [
    "MIGRATION_LOCK_KEY",
    "apply_migrations",
    "apply_sql",
    "migration_files",
    "read_stamp",
    "schema_stamp",
]

# Advisory lock key of the boot migration (arbitrary, fixed: "queen" in ASCII + 1).
MIGRATION_LOCK_KEY = 0x717565656E01

_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def _migrations_dir() -> Path:
    packaged = resources.files("queen_timers") / "_migrations"
    if packaged.is_dir():  # installed wheel
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "migrations"  # source checkout


def migration_files() -> list[Path]:
    d = _migrations_dir()
    files = sorted(p for p in d.iterdir() if _NAME.match(p.name))
    if not files:
        raise RuntimeError(f"no migrations found in {d}")
    return files


async def apply_sql(conn: Conn) -> list[str]:
    """Execute every migration file on `conn`, in the caller's transaction."""
    applied = []
    for f in migration_files():
        try:
            await conn.execute(f.read_text())
        except asyncpg.PostgresError as exc:
            raise RuntimeError(f"migration {f.name} failed: {exc}") from exc
        applied.append(f.name)
    return applied


def _version() -> str:
    try:
        return importlib.metadata.version("queen-timers")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout never installed
        return "unknown"


def schema_stamp() -> dict[str, Any]:
    """What this installation's migrations are: {files, digest, queenTimers}."""
    files = migration_files()
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return {
        "files": [f.name for f in files],
        "digest": h.hexdigest()[:12],
        "queenTimers": _version(),
    }


async def read_stamp(conn: Conn) -> dict[str, Any] | None:
    """The stamp of the schema applied to the database (with its `appliedAt`), or None: a
    schema applied by a version that did not stamp it. The caller checks that there is a
    schema at all first (Q.schema_ready)."""
    value = await conn.fetchval(Q.schema_stamp_read)
    if isinstance(value, str):  # a connection without the pool's JSON codec
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else None


async def apply_migrations(conn: Conn) -> list[str]:
    """Apply the whole schema in one transaction under the boot advisory lock, and stamp it."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        applied = await apply_sql(conn)
        await conn.execute(Q.schema_stamp_write, json.dumps(schema_stamp()))
        return applied
