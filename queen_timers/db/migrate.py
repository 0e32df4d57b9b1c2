"""Apply the schema at every boot.

The deployment model is "always virgin": every file in migrations/ is idempotent and is
re-applied in numeric order at each boot, under one transaction-scoped advisory lock, so two
brokers booting together apply it one after the other. Files must never take an ACCESS
EXCLUSIVE lock on a table that already exists (guard such DDL with a catalogue check); a test
re-applies the schema inside an open transaction and inspects pg_locks.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import asyncpg

__all__ = ["MIGRATION_LOCK_KEY", "apply_migrations", "apply_sql", "migration_files"]

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


async def apply_sql(conn: asyncpg.Connection) -> list[str]:
    """Execute every migration file on `conn`, in the caller's transaction."""
    applied = []
    for f in migration_files():
        try:
            await conn.execute(f.read_text())
        except asyncpg.PostgresError as exc:
            raise RuntimeError(f"migration {f.name} failed: {exc}") from exc
        applied.append(f.name)
    return applied


async def apply_migrations(conn: asyncpg.Connection) -> list[str]:
    """Apply the whole schema in one transaction under the boot advisory lock."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        return await apply_sql(conn)
