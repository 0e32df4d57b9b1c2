"""`queen tenants`: read and override the per-tenant limits (docs/guides/tenants.md).

    queen tenants list                         the defaults and every tenant with an override
    queen tenants show TENANT                  one tenant's limits and pending count
    queen tenants set TENANT [--max-pending N|unlimited|default]
                             [--writes-per-sec R|unlimited|default] [--burst N|default]

A command of its own, registered through the entry-point group queen_timers.commands like any
installed distribution's, so it sits beside the core's commands without touching them. It
talks to the database through the service (a Queen with no background loop) with an admin
identity: whoever can reach the database is trusted with it. The answer is the service's JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from .errors import QueenError
from .identity import Identity
from .service import Queen

__all__ = ["register"]

_ADMIN = Identity(subject="queen-cli", admin=True)


def _limit(text: str) -> Any:
    """A value on the command line: a number, `unlimited`, or `default` (the broker setting)."""
    if text == "default":
        return None
    if text == "unlimited":
        return "unlimited"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a number, 'unlimited' or 'default'"
            ) from None


_UNSET = object()


def register(subparsers: Any) -> None:
    """The queen_timers.commands entry point: adds `queen tenants`."""
    p = subparsers.add_parser(
        "tenants",
        help="read and override per-tenant limits (pending timers, write rate)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--database-url", default=None, help="the database (QUEEN_DATABASE_URL)")
    sub = p.add_subparsers(dest="tenants_command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="the defaults and every tenant with an override")
    show = sub.add_parser("show", help="one tenant's limits and pending count")
    show.add_argument("tenant", help="tenant UUID")
    put = sub.add_parser("set", help="override a tenant's limits")
    put.add_argument("tenant", help="tenant UUID")
    for flag, what in (
        ("--max-pending", "cap on pending timers"),
        ("--writes-per-sec", "schedule calls per second on each broker"),
        ("--burst", "token bucket size, in calls"),
    ):
        put.add_argument(
            flag, type=_limit, default=_UNSET, help=f"{what}: a number, unlimited, or default"
        )
    p.set_defaults(command_main=main)


def _changes(ns: argparse.Namespace) -> dict[str, Any]:
    keys = (("max_pending", "maxPending"), ("writes_per_sec", "writesPerSec"), ("burst", "burst"))
    return {wire: getattr(ns, attr) for attr, wire in keys if getattr(ns, attr) is not _UNSET}


async def _run(ns: argparse.Namespace) -> Any:
    overrides: dict[str, Any] = {
        "sweeper": False,
        "sweeper_notify": False,
        "retention_interval_ms": 0,
        "timers_tenant_quota_refresh_ms": 0,
        "timers_tenant_quota_census_ms": 0,
    }
    if ns.database_url:
        overrides["database_url"] = ns.database_url
    async with Queen(**overrides) as q:
        if ns.tenants_command == "list":
            return await q.tenant_quotas_list(_ADMIN)
        if ns.tenants_command == "show":
            return await q.tenant_quota_get(_ADMIN, ns.tenant)
        return await q.tenant_quota_set(_ADMIN, ns.tenant, _changes(ns))


def main(ns: argparse.Namespace) -> int:
    try:
        out = asyncio.run(_run(ns))
    except QueenError as e:
        print(json.dumps(e.to_dict()), file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0
