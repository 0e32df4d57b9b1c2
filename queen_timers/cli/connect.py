"""How a `queen` command reaches the database: through a client Queen (no background loops,
no schema applied, no embedded server launched; see queen_timers.service), with the identity
of an operator of one tenant.

Where the database is, in this order: `--data-dir`, `--database-url` (not both), then
QUEEN_DATABASE_URL and QUEEN_DATA_DIR (the broker's own precedence), then the data directory
`queen serve` last used (remembered.py) when its PostgreSQL is running, then the default data
directory. When nothing names a database and nothing runs there, the error names every place
the command looked.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from ..db.embedded import EmbeddedNotRunning, server_running
from ..identity import DEFAULT_TENANT, Identity
from ..service import Queen
from ..settings import Settings, default_data_dir
from .failures import Refusal
from .remembered import recall, state_file

__all__ = ["Choice", "add_database_flags", "choose", "client", "identity", "settings_of"]

# The producer subject stamped on what a command writes (a timer scheduled from the CLI).
CLI_SUBJECT = "queen-cli"

_URL_ENV = "QUEEN_DATABASE_URL"
_DIR_ENV = "QUEEN_DATA_DIR"


def add_database_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("database")
    g.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL URL (default: QUEEN_DATABASE_URL; unset: an embedded server, see "
        "--data-dir)",
    )
    g.add_argument(
        "--data-dir",
        metavar="DIR",
        help="data directory of a running embedded PostgreSQL (default: QUEEN_DATA_DIR; "
        "unset: the one `queen serve` last used if it runs, else the default directory)",
    )
    g.add_argument(
        "--tenant",
        metavar="UUID",
        help=f"the tenant to act as (default: the default tenant {DEFAULT_TENANT})",
    )


@dataclasses.dataclass(frozen=True)
class Choice:
    """Where a command connects. `remembered`: the directory `queen serve` last used, when it
    is the one chosen. `looked`: when nothing named a database, every place looked at (for the
    error if the default directory has no server either)."""

    settings: Settings
    remembered: Path | None = None
    looked: tuple[str, ...] = ()


def choose(ns: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Choice:
    env = os.environ if environ is None else environ
    flag_dir = getattr(ns, "data_dir", None)
    flag_url = getattr(ns, "database_url", None)
    if flag_dir and flag_url:
        raise Refusal("give --data-dir or --database-url, not both", 2)
    if flag_dir:
        # The flag beats a QUEEN_DATABASE_URL of the environment, as any flag beats its variable.
        no_url = {k: v for k, v in env.items() if k != _URL_ENV}
        return Choice(Settings({"data_dir": flag_dir}, environ=no_url))
    if flag_url or env.get(_URL_ENV) or env.get(_DIR_ENV):
        return Choice(Settings({"database_url": flag_url}, environ=env))
    default = Path(default_data_dir()).expanduser().absolute()
    kept = recall()
    looked = [f"--data-dir and {_DIR_ENV}: not set", f"--database-url and {_URL_ENV}: not set"]
    if kept is None:
        looked.append(f"the data directory `queen serve` last used: none in {state_file()}")
    elif kept != default:
        if server_running(kept):
            return Choice(Settings({"data_dir": str(kept)}, environ=env), remembered=kept)
        looked.append(
            f"{kept}, the data directory `queen serve` last used ({state_file()}): "
            "no PostgreSQL runs there"
        )
    also = " (the one `queen serve` last used)" if kept == default else ""
    looked.append(f"the default data directory {default}{also}: no PostgreSQL runs there")
    return Choice(Settings({}, environ=env), looked=tuple(looked))


def settings_of(ns: argparse.Namespace) -> Settings:
    return choose(ns).settings


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
    choice = choose(ns)
    if choice.remembered is not None:
        # Said on stderr, so a --json answer on stdout stays clean.
        print(
            f"(the database of {choice.remembered}, the data directory `queen serve` last used; "
            "--data-dir picks another)",
            file=sys.stderr,
        )
    queen = Queen.client(choice.settings)
    try:
        await queen.start()
    except EmbeddedNotRunning:
        if not choice.looked:
            raise
        raise Refusal(
            "found no running database; looked at: "
            + "; ".join(choice.looked)
            + ". Start `queen serve`, or pass --data-dir or --database-url"
        ) from None
    try:
        yield queen
    finally:
        await queen.stop()
