"""`queen timers list|peek|count|cancel|schedule QUEUE ...`: one queue's pending timers."""

from __future__ import annotations

import argparse
import base64
import binascii
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..identity import Identity
from ..service import Queen
from ..wire.timers import TimerRow, TimersPage
from .connect import add_database_flags, client, identity
from .failures import Refusal
from .output import add_json_flag, print_json, shown, table

__all__ = ["list_with_prefix", "parse_delay", "register"]

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")

_ANSWERED = ("scheduled", "rescheduled", "cancelled", "absent")

# The service's page is 1..1000 timers; a person reads a screenful.
DEFAULT_PAGE = 100


def parse_delay(text: str) -> float:
    """`1500`, `1500ms`, `30s`, `5m`, `2h`, `1d` as milliseconds."""
    m = _DELAY.match(text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a delay: a number of milliseconds, or with a unit (30s, 5m, 2h, 1d)"
        )
    return float(m.group(1)) * _UNITS[m.group(2) or "ms"]


def register(sub: Any) -> None:
    p = sub.add_parser("timers", help="list, peek, count, cancel and schedule timers")
    tsub = p.add_subparsers(dest="timers_command", required=True, metavar="ACTION")

    ls = tsub.add_parser("list", help="one page of a queue's timers, by key (keyset paging)")
    ls.add_argument("queue")
    ls.add_argument("--prefix", help="only keys starting with this literal text")
    ls.add_argument("--after", metavar="KEY", help="start after this key (the last page's end)")
    ls.add_argument("--limit", type=int, default=DEFAULT_PAGE, help="timers per page (1..1000)")
    ls.add_argument("--all", action="store_true", help="follow the pages to the end")
    add_json_flag(ls)
    ls.set_defaults(run=_list)

    pk = tsub.add_parser("peek", help="one timer, with its payload")
    pk.add_argument("queue")
    pk.add_argument("key")
    add_json_flag(pk)
    pk.set_defaults(run=_peek)

    ct = tsub.add_parser("count", help="how many keys start with a prefix")
    ct.add_argument("queue")
    ct.add_argument("--prefix", required=True, help="the literal prefix (1..128 bytes)")
    add_json_flag(ct)
    ct.set_defaults(run=_count)

    cn = tsub.add_parser(
        "cancel", help="cancel timers by key or by key prefix (never blocked by a switch)"
    )
    cn.add_argument("queue")
    cn.add_argument("keys", nargs="*", metavar="KEY")
    cn.add_argument("--txn", help="cancel only if the timer carries this txn")
    cn.add_argument(
        "--prefix", help="cancel every unclaimed timer whose key starts with this literal text"
    )
    add_json_flag(cn)
    cn.set_defaults(run=_cancel)

    sc = tsub.add_parser("schedule", help="schedule (or reschedule) one timer")
    sc.add_argument("queue")
    sc.add_argument("key")
    sc.add_argument(
        "--delay",
        type=parse_delay,
        required=True,
        help="from now: milliseconds, or with a unit (30s, 5m, 2h, 1d)",
    )
    body = sc.add_mutually_exclusive_group(required=True)
    body.add_argument("--payload", help="the payload, as text (sent as its UTF-8 bytes)")
    body.add_argument("--payload-base64", metavar="B64", help="the payload's bytes, base64")
    sc.add_argument("--partition", help="destination partition (default: Default)")
    sc.add_argument("--txn", help="the delivered message's transaction id (default: a new one)")
    sc.add_argument(
        "--reschedule", action="store_true", help="move an existing timer (op reschedule)"
    )
    add_json_flag(sc)
    sc.set_defaults(run=_schedule)

    for action in (ls, pk, ct, cn, sc):
        add_database_flags(action)


async def list_with_prefix(
    queen: Queen,
    ident: Identity,
    queue: str,
    prefix: str,
    *,
    after: str | None = None,
    limit: int = DEFAULT_PAGE,
) -> TimersPage:
    """A keyset page of the keys starting with `prefix`, through the service's list and peek.

    Keys are ordered by their bytes, so the keys starting with `prefix` follow `prefix`
    itself without a gap: the page lists after `prefix` (exclusive), and `prefix` as a key of
    its own is looked up with peek. The page ends where a key stops matching."""
    rows: list[TimerRow] = []
    start = after
    if after is None or after < prefix:  # str order is code point order: UTF-8 byte order
        head = await queen.timer_peek(ident, queue, prefix)
        if head.get("found"):
            row = {k: v for k, v in head.items() if k not in ("found", "payload")}
            rows.append(cast(TimerRow, row))
        start = prefix
    page = await queen.timers_list(ident, queue, after=start, limit=limit)
    matching = [r for r in page["rows"] if r["timerKey"].startswith(prefix)]
    rows.extend(matching)
    ran_out = len(matching) < len(page["rows"])  # passed the last key with the prefix
    if len(rows) > limit:
        rows = rows[:limit]
        return {"rows": rows, "truncated": True, "nextAfter": rows[-1]["timerKey"]}
    more = bool(page["truncated"]) and not ran_out
    return {"rows": rows, "truncated": more, "nextAfter": page["nextAfter"] if more else None}


def _state(row: Mapping[str, Any]) -> str:
    """The row's state as a person reads it: a backing-off row says when it is retried, since
    its deliverAt (kept from the schedule) has passed and would read as late."""
    if "state" in row:
        state = str(row["state"])
    elif row.get("claimed"):
        state = "claimed"
    else:
        state = "backing_off" if row.get("attempts") else "waiting"
    retry_at = row.get("retryAt")
    return f"{state}, retry at {retry_at}" if state == "backing_off" and retry_at else state


async def _pages(queen: Queen, ident: Identity, ns: argparse.Namespace) -> list[TimersPage]:
    pages: list[TimersPage] = []
    after = ns.after
    while True:
        if ns.prefix:
            page = await list_with_prefix(
                queen, ident, ns.queue, ns.prefix, after=after, limit=ns.limit
            )
        else:
            page = await queen.timers_list(ident, ns.queue, after=after, limit=ns.limit)
        pages.append(page)
        if not (ns.all and page["truncated"]):
            return pages
        after = page["nextAfter"]


async def _list(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        pages = await _pages(queen, ident, ns)
    rows = [r for p in pages for r in p["rows"]]
    last = pages[-1]
    if ns.json:
        print_json({"rows": rows, "truncated": last["truncated"], "nextAfter": last["nextAfter"]})
        return 0
    more = (
        f"more after {last['nextAfter']!r}: add --after {last['nextAfter']!r} (or --all)"
        if last["truncated"]
        else f"{len(rows)} timer(s)"
    )
    table(
        f"timers of {ns.queue}" + (f" starting with {ns.prefix!r}" if ns.prefix else ""),
        ["timerKey", "state", "deliverAt", "attempts", "lastError", "partition"],
        (
            [
                shown(r["timerKey"]),
                _state(r),
                r["deliverAt"],
                r["attempts"],
                None if r.get("lastError") is None else shown(r["lastError"]),
                r.get("partition"),
            ]
            for r in rows
        ),
        caption=more,
    )
    return 0


def _payload_text(t: Mapping[str, Any]) -> str:
    raw = t.get("payload")
    if raw is None:
        return "-"
    if t.get("encrypted") or t.get("payloadZstd"):
        return f"(base64, {'encrypted' if t.get('encrypted') else 'zstd'}) {raw}"
    try:
        return base64.b64decode(raw).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return f"(base64) {raw}"


async def _peek(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        t = await queen.timer_peek(ident, ns.queue, ns.key)
    if ns.json:
        print_json(t)
    elif not t.get("found"):
        print(f"no pending timer {ns.key!r} in {ns.queue} (absent: delivered or cancelled)")
    else:
        fields = ["timerKey", "queue", "partition", "deliverAt", "txn", "messageId", "attempts"]
        fields += ["lastError", "claimed", "producerSub", "createdAt", "updatedAt"]
        width = max(len(f) for f in fields)
        row: Mapping[str, Any] = t
        for f in fields:
            print(f"{f:<{width}}  {shown(row[f]) if row.get(f) is not None else '-'}")
        print(f"{'state':<{width}}  {_state(t)}")
        print(f"{'payload':<{width}}  {shown(_payload_text(t))}")
    return 0 if t.get("found") else 1


async def _count(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        out = await queen.timers_count(ident, ns.queue, ns.prefix)
    if ns.json:
        print_json(out)
    else:
        print(out["count"])
    return 0


def _say(results: Sequence[Mapping[str, Any]], as_json: bool) -> int:
    if as_json:
        print_json(results)
    else:
        for r in results:
            line = f"{r.get('status')}\t{r.get('queue')}\t{shown(r.get('timerKey'))}"
            if r.get("deliverAt"):
                line += f"\tdeliverAt {r['deliverAt']}"
            print(line)
    # absent is an answer (no longer pending), not a failure; too_late (it is firing) is.
    return 0 if all(r.get("status") in _ANSWERED for r in results) else 1


async def _cancel(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    if bool(ns.keys) == bool(ns.prefix):
        raise Refusal("timers cancel: name KEY(s) or --prefix, one of the two", 2)
    if ns.prefix:
        return await _cancel_prefix(ns)
    async with client(ns) as queen:
        results = [await queen.timer_cancel(ident, ns.queue, k, ns.txn) for k in ns.keys]
    return _say(results, ns.json)


async def _cancel_prefix(ns: argparse.Namespace) -> int:
    """The service cancels one bounded batch per call: call until nothing remains."""
    ident = identity(ns)
    total = {"cancelled": 0, "absent": 0, "tooLate": 0}
    async with client(ns) as queen:
        while True:
            batch = await queen.timers_cancel_prefix(ident, ns.queue, ns.prefix)
            total["cancelled"] += batch["cancelled"]
            total["absent"] += batch["absent"]
            total["tooLate"] += batch["tooLate"]
            if not batch["remaining"]:
                break
    out = {"queue": ns.queue, "prefix": ns.prefix, **total}
    if ns.json:
        print_json(out)
    else:
        print(
            f"cancelled {total['cancelled']} timer(s) of {ns.queue} starting with "
            f"{ns.prefix!r} ({total['absent']} absent, {total['tooLate']} too late: firing)"
        )
    return 1 if total["tooLate"] else 0


async def _schedule(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    if ns.payload is not None:
        payload = base64.b64encode(ns.payload.encode()).decode()
    else:
        payload = ns.payload_base64
    op: dict[str, Any] = {
        "op": "reschedule" if ns.reschedule else "schedule",
        "queue": ns.queue,
        "timerKey": ns.key,
        "delayMs": ns.delay,
        "payload": payload,
        "txn": ns.txn or f"queen-cli-{uuid.uuid4()}",
    }
    if ns.partition:
        op["partition"] = ns.partition
    async with client(ns) as queen:
        results = await queen.timers_apply(ident, [op])
    if not results:
        raise Refusal("the broker answered no result")
    return _say(results, ns.json)
