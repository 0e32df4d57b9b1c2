"""`queen schedules set|list|peek|pause|resume|run|delete QUEUE ...`: recurring schedules."""

from __future__ import annotations

import argparse
import base64
from typing import Any

from .connect import add_database_flags, client, identity
from .failures import Refusal
from .output import add_json_flag, print_json, shown, table

__all__ = ["register"]

# The service's page is 1..1000 schedules; a person reads a screenful.
DEFAULT_PAGE = 100


def register(sub: Any) -> None:
    p = sub.add_parser("schedules", help="recurring schedules: set, list, peek, pause, run")
    ssub = p.add_subparsers(dest="schedules_command", required=True, metavar="ACTION")

    st = ssub.add_parser("set", help="create or replace a schedule (cron or --every)")
    st.add_argument("queue")
    st.add_argument("key")
    when = st.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="5 fields, or 6 with seconds first (quote it)")
    when.add_argument("--every", type=int, metavar="MS", help="a plain interval in milliseconds")
    st.add_argument("--zone", default="UTC", help="IANA time zone of the cron (default UTC)")
    body = st.add_mutually_exclusive_group(required=True)
    body.add_argument("--payload", help="the payload, as text (sent as its UTF-8 bytes)")
    body.add_argument("--payload-base64", metavar="B64", help="the payload's bytes, base64")
    st.add_argument("--partition", help="destination partition (default: Default)")
    st.add_argument("--start", metavar="INSTANT", help="no occurrence before (ISO 8601)")
    st.add_argument("--end", metavar="INSTANT", help="no occurrence after (ISO 8601)")
    st.add_argument("--jitter", type=int, metavar="MS", help="jitter window in milliseconds")
    st.add_argument("--catch-up", choices=("skip", "once", "all"), help="missed occurrences")
    st.add_argument("--catch-up-cap", type=int, metavar="N", help="with --catch-up all")
    st.add_argument("--paused", action="store_true", help="create it paused")
    add_json_flag(st)
    st.set_defaults(run=_set)

    ls = ssub.add_parser("list", help="one page of a queue's schedules, by key")
    ls.add_argument("queue")
    ls.add_argument("--prefix", help="only keys starting with this literal text")
    ls.add_argument("--after", metavar="KEY", help="start after this key (the last page's end)")
    ls.add_argument("--limit", type=int, default=DEFAULT_PAGE, help="schedules per page")
    add_json_flag(ls)
    ls.set_defaults(run=_list)

    pk = ssub.add_parser("peek", help="one schedule: its next occurrences and last runs")
    pk.add_argument("queue")
    pk.add_argument("key")
    pk.add_argument("--next", type=int, default=5, metavar="N", help="occurrences to show")
    pk.add_argument("--runs", type=int, default=10, metavar="N", help="ledger rows to show")
    add_json_flag(pk)
    pk.set_defaults(run=_peek)

    actions = []
    for name, what in (
        ("pause", "pause a schedule (its pending occurrence is withdrawn)"),
        ("resume", "resume a schedule"),
        ("run", "run a schedule once now (the cadence does not move)"),
        ("delete", "delete a schedule and its pending occurrence"),
    ):
        a = ssub.add_parser(name, help=what)
        a.add_argument("queue")
        a.add_argument("key")
        add_json_flag(a)
        a.set_defaults(run=_action, action=name)
        actions.append(a)

    for action in (st, ls, pk, *actions):
        add_database_flags(action)


def _body(ns: argparse.Namespace) -> dict[str, Any]:
    if ns.payload is not None:
        payload = base64.b64encode(ns.payload.encode()).decode()
    else:
        payload = ns.payload_base64
    b: dict[str, Any] = {"queue": ns.queue, "scheduleKey": ns.key, "payload": payload}
    optional = {
        "cron": ns.cron,
        "everyMs": ns.every,
        "partition": ns.partition,
        "startAt": ns.start,
        "endAt": ns.end,
        "jitterMs": ns.jitter,
        "catchUp": ns.catch_up,
        "catchUpCap": ns.catch_up_cap,
    }
    b.update({k: v for k, v in optional.items() if v is not None})
    b["zone"] = ns.zone
    if ns.paused:
        b["paused"] = True
    return b


async def _set(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        out = await queen.schedule_set(ident, _body(ns))
    if ns.json:
        print_json(out)
    else:
        s = out["schedule"]
        nxt = s.get("nextAt", "none" if not s["paused"] else "paused")
        print(f"{out['status']}\t{ns.queue}\t{shown(ns.key)}\tnext {nxt}")
    return 0


async def _list(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        page = await queen.schedules_list(
            ident, ns.queue, prefix=ns.prefix, after=ns.after, limit=ns.limit
        )
    if ns.json:
        print_json(page)
        return 0
    rows = page["schedules"]
    table(
        f"schedules of {ns.queue}" + (f" starting with {ns.prefix!r}" if ns.prefix else ""),
        ["scheduleKey", "cadence", "zone", "paused", "nextAt", "catchUp"],
        (
            [
                shown(r["scheduleKey"]),
                r.get("cron") or f"every {r.get('everyMs')} ms",
                r["zone"],
                "yes" if r["paused"] else "no",
                r.get("nextAt", "-"),
                r["catchUp"],
            ]
            for r in rows
        ),
        caption=(
            f"more after {page['nextAfter']!r}: add --after {page['nextAfter']!r}"
            if page["truncated"]
            else f"{len(rows)} schedule(s)"
        ),
    )
    return 0


async def _peek(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        s = await queen.schedule_peek(ident, ns.queue, ns.key, count=ns.next, runs=ns.runs)
    if ns.json:
        print_json(s)
        return 0
    cadence = s.get("cron") or f"every {s.get('everyMs')} ms"
    print(f"{shown(s['scheduleKey'])} on {s['queue']}: {cadence} ({s['zone']})")
    print(f"paused {'yes' if s['paused'] else 'no'}, catch-up {s['catchUp']}")
    table(
        "next occurrences",
        ["at (UTC)", f"local ({s['zone']})", "due (with jitter)"],
        ([o["at"], o["local"], o["dueAt"]] for o in s.get("next", [])),
    )
    table(
        "last runs",
        ["occurrence", "kind", "outcome", "fired at", "late ms"],
        (
            [r["occurrenceAt"], r["kind"], r["outcome"], r["firedAt"], f"{r['lateMs']:.0f}"]
            for r in s.get("runs", [])
        ),
    )
    return 0


async def _action(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        if ns.action == "pause":
            out: Any = await queen.schedule_pause(ident, ns.queue, ns.key)
        elif ns.action == "resume":
            out = await queen.schedule_resume(ident, ns.queue, ns.key)
        elif ns.action == "run":
            out = await queen.schedule_run_now(ident, ns.queue, ns.key)
        else:
            out = await queen.schedule_delete(ident, ns.queue, ns.key)
    if ns.json:
        print_json(out)
    elif ns.action == "run":
        print(f"{out['status']}\t{ns.queue}\t{shown(ns.key)}\trunAt {out['runAt']}")
    elif ns.action == "delete":
        if not out["deleted"]:
            raise Refusal(f"no schedule {ns.key!r} on {ns.queue}", 1)
        print(f"deleted\t{ns.queue}\t{shown(ns.key)}")
    else:
        print(f"{'paused' if out['paused'] else 'resumed'}\t{ns.queue}\t{shown(ns.key)}")
    return 0
