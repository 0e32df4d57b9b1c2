"""`queen tenants list|show|set`: read and override the per-tenant limits
(docs/guides/tenants.md).

    queen tenants list                         the defaults and every tenant with an override
    queen tenants show TENANT                  one tenant's limits and pending count
    queen tenants set TENANT [--max-pending N|unlimited|default]
                             [--writes-per-sec R|unlimited|default] [--burst N|default]

Through the service like every command (a client Queen), as an admin: whoever can reach the
database is trusted with it. A refusal of the service (a bad value) is one line on stderr.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..wire.admin import TenantQuota, TenantQuotaList
from .connect import add_database_flags, client, identity
from .output import add_json_flag, print_json, table

__all__ = ["register"]

_UNSET = object()
_KEYS = (("max_pending", "maxPending"), ("writes_per_sec", "writesPerSec"), ("burst", "burst"))


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


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tenants",
        help="read and override per-tenant limits (pending timers, write rate)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tsub = p.add_subparsers(dest="tenants_command", required=True, metavar="ACTION")
    ls = tsub.add_parser("list", help="the defaults and every tenant with an override")
    show = tsub.add_parser("show", help="one tenant's limits and pending count")
    show.add_argument("tenant_id", metavar="TENANT", help="tenant UUID")
    put = tsub.add_parser("set", help="override a tenant's limits")
    put.add_argument("tenant_id", metavar="TENANT", help="tenant UUID")
    for flag, what in (
        ("--max-pending", "cap on pending timers: a number, unlimited, or default"),
        (
            "--writes-per-sec",
            "schedule calls per second on each broker: a number, unlimited, or default",
        ),
        ("--burst", "token bucket size, in calls: a number, or default"),
    ):
        put.add_argument(flag, type=_limit, default=_UNSET, help=what)
    for q in (ls, show, put):
        add_json_flag(q)
        add_database_flags(q)
        q.set_defaults(run=_run)


def _cell(v: Any) -> str:
    return "default" if v is None else str(v)


async def _run(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    out: TenantQuotaList | TenantQuota
    views: list[TenantQuota]
    defaults: dict[str, Any] | None = None  # the list's only
    async with client(ns) as queen:
        if ns.tenants_command == "list":
            listed = await queen.tenant_quotas_list(ident)
            out, views, defaults = listed, listed["tenants"], listed["defaults"]
        else:
            if ns.tenants_command == "show":
                one = await queen.tenant_quota_get(ident, ns.tenant_id)
            else:
                changes = {w: getattr(ns, a) for a, w in _KEYS if getattr(ns, a) is not _UNSET}
                one = await queen.tenant_quota_set(ident, ns.tenant_id, changes)
            out, views = one, [one]
    if ns.json:
        print_json(out)
        return 0
    if defaults is not None:
        print("defaults: " + ", ".join(f"{w} {_cell(defaults.get(w))}" for _, w in _KEYS))
    table(
        "tenant limits",
        ["tenant", "maxPending", "writesPerSec", "burst", "pending", "overQuota"],
        (
            [
                v["tenant"],
                _cell(v.get("maxPending")),
                _cell(v.get("writesPerSec")),
                _cell(v.get("burst")),
                _cell(v.get("pending")),
                "yes" if v.get("overQuota") else "no",
            ]
            for v in views
        ),
    )
    return 0
