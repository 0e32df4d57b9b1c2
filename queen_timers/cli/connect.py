"""How a `queen` command reaches the database: through a client Queen (no background loops,
no schema applied, no embedded server launched; see queen_timers.service), with the identity
of an operator of one tenant."""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import AsyncIterator

from ..identity import DEFAULT_TENANT, Identity
from ..service import Queen
from ..settings import Settings
from .failures import Refusal

__all__ = ["add_database_flags", "client", "identity", "settings_of"]

# The producer subject stamped on what a command writes (a timer scheduled from the CLI).
CLI_SUBJECT = "queen-cli"


def add_database_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("database")
    g.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL URL (default: QUEEN_DATABASE_URL; unset: the embedded server of "
        "--data-dir, which must be running)",
    )
    g.add_argument(
        "--data-dir",
        metavar="DIR",
        help="data directory of the embedded PostgreSQL (default: QUEEN_DATA_DIR)",
    )
    g.add_argument(
        "--tenant",
        metavar="UUID",
        help=f"the tenant to act as (default: the default tenant {DEFAULT_TENANT})",
    )


def settings_of(ns: argparse.Namespace) -> Settings:
    given = {k: getattr(ns, k, None) for k in ("database_url", "data_dir")}
    return Settings({k: v for k, v in given.items() if v is not None})


def identity(ns: argparse.Namespace) -> Identity:
    """An operator with access to the database acts as an admin of the tenant it names."""
    raw = getattr(ns, "tenant", None)
    if raw is None:
        return Identity(DEFAULT_TENANT, CLI_SUBJECT, admin=True)
    try:
        tenant = uuid.UUID(raw)
    except ValueError:
        raise Refusal(f"--tenant {raw!r} is not a UUID (the tenant's id)", 2) from None
    return Identity(tenant, CLI_SUBJECT, admin=True)


@contextlib.asynccontextmanager
async def client(ns: argparse.Namespace) -> AsyncIterator[Queen]:
    queen = Queen.client(settings_of(ns))
    await queen.start()
    try:
        yield queen
    finally:
        await queen.stop()
