"""`queen status` (is it healthy?) and `queen queues` (where is the work?)."""

from __future__ import annotations

import argparse
from typing import Any

from .connect import add_database_flags, client, identity
from .output import add_json_flag, ago, print_json, table

__all__ = ["register"]


def register(sub: Any) -> None:
    st = sub.add_parser(
        "status",
        help="database, schema, brokers alive, kill switches, pending and overdue timers",
    )
    add_json_flag(st)
    add_database_flags(st)
    st.set_defaults(run=_status)

    q = sub.add_parser(
        "queues", help="per queue: pending timers, due soon, oldest overdue, dead letters"
    )
    add_json_flag(q)
    add_database_flags(q)
    q.set_defaults(run=_queues)


def _pending(timers: dict[str, Any]) -> str:
    # Past a cap per queue the service counts "at least" (pendingExact false), so that a
    # summary costs the same however large a queue grows.
    exact = timers.get("pendingExact", True)
    return f"{timers['pending']}" if exact else f">= {timers['pending']}"


def _schema_line(schema: dict[str, Any]) -> str:
    applied = schema["applied"]
    if applied is None:
        return "applied by a version that does not stamp it: run `queen migrate`"
    line = (
        f"applied {applied.get('appliedAt')} by queen-timers {applied.get('queenTimers')}, "
        f"digest {applied.get('digest')}"
    )
    if schema["current"]:
        return line + " (matches this installation)"
    return line + (
        f"; this installation's is {schema['installed']['digest']}: run `queen migrate` "
        "(or restart a broker) to apply it"
    )


async def _status(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        schema = await queen.schema_status()
        overview = await queen.overview(ident)
        target = str(queen.database_target)
        embedded = queen.embedded
    out = {
        "database": {
            "reachable": True,
            "at": target,
            "embedded": str(embedded.data_dir) if embedded is not None else None,
            "serverVersion": schema["serverVersion"],
        },
        "schema": schema,
        "brokers": overview["brokers"],
        "switches": overview["switches"],
        "timers": overview["timers"],
        "deadLetters": overview.get("deadLetters"),
    }
    if ns.json:
        print_json(out)
        return 0 if schema["current"] else 1
    brokers = overview["brokers"]
    alive = ", ".join(f"pid {b['pid']} since {b['backendStart']}" for b in brokers["list"])
    timers = overview["timers"]
    where = f"embedded PostgreSQL in {embedded.data_dir}" if embedded is not None else target
    rows = [
        ("database", f"reachable: PostgreSQL {schema['serverVersion']}, {where}"),
        ("schema", _schema_line(schema)),
        (
            "brokers",
            f"{brokers['alive']} alive"
            + (f": {alive}" if alive else " (nothing fires timers: start `queen serve`)"),
        ),
        (
            "switches",
            ", ".join(
                f"{k} {'on' if overview['switches'].get(k) else 'OFF'}"
                for k in ("timersScheduleEnabled", "timersFireEnabled")
            ),
        ),
        (
            "timers",
            f"{_pending(timers)} pending, {timers['overdue']} overdue"
            + (
                f" (oldest {ago(timers['oldestOverdueMs'])} late)"
                if timers.get("oldestOverdueMs")
                else ""
            )
            + f", {timers['dueNextMinute']} due in the next minute",
        ),
        ("dead letters", str(overview.get("deadLetters", "-"))),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if schema["current"] else 1


async def _queues(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        out = await queen.queues_overview(ident)
    if ns.json:
        print_json(out)
        return 0
    queues = out["queues"]
    table(
        None,
        ["queue", "pending", "due 1m", "due 1h", "overdue", "oldest overdue", "dead letters"],
        (
            [
                q["name"],
                _pending(q["timers"]),
                q["timers"]["dueNextMinute"],
                q["timers"]["dueNextHour"],
                q["timers"]["overdue"],
                ago(q["timers"]["oldestOverdueMs"]),
                q["deadLetters"],
            ]
            for q in queues
        ),
        caption=f"{len(queues)} queue(s) at {out['at']}",
    )
    return 0
