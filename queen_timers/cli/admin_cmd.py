"""`queen dlq list|replay QUEUE` and `queen switches show|set`."""

from __future__ import annotations

import argparse
from typing import Any

from ..settings import parse_bool
from ..wire.admin import SwitchStates
from .connect import add_database_flags, client, identity
from .failures import Refusal
from .output import add_json_flag, print_json, shown, table

__all__ = ["register"]

# One replay call takes at most this many dead letters (the service's bound).
REPLAY_MAX = 1000

# The wire's switch names, as flags.
_SWITCH_FLAGS = {"timers_schedule": "timersSchedule", "timers_fire": "timersFire"}


def _on_off(text: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not on or off") from None


def register(sub: Any) -> None:
    d = sub.add_parser("dlq", help="dead letters of a queue")
    dsub = d.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")
    dl = dsub.add_parser("list", help="one page of a queue's dead letters, newest first")
    dl.add_argument("queue")
    dl.add_argument("--partition")
    dl.add_argument("--group", help="consumer group")
    dl.add_argument("--limit", type=int, default=20, help="letters per page")
    dl.add_argument("--offset", type=int, default=0)
    add_json_flag(dl)
    add_database_flags(dl)
    dl.set_defaults(run=_dlq_list)
    rp = dsub.add_parser(
        "replay", help="replay dead letters: push them into their queue again, or schedule them"
    )
    rp.add_argument("queue")
    rp.add_argument("txns", nargs="*", metavar="TXN", help="transaction ids (from `dlq list`)")
    rp.add_argument("--all", action="store_true", help=f"the newest {REPLAY_MAX} of the queue")
    rp.add_argument("--partition", help="only dead letters of this partition")
    rp.add_argument(
        "--schedule-in",
        type=int,
        metavar="MS",
        help="schedule each as a timer this many milliseconds out (default: push it now)",
    )
    add_json_flag(rp)
    add_database_flags(rp)
    rp.set_defaults(run=_dlq_replay)

    s = sub.add_parser("switches", help="the kill switches every broker obeys")
    ssub = s.add_subparsers(dest="switches_command", required=True, metavar="ACTION")
    show = ssub.add_parser("show", help="the switches now")
    add_json_flag(show)
    add_database_flags(show)
    show.set_defaults(run=_switches_show)
    st = ssub.add_parser("set", help="flip switches for every broker (cancel is never blocked)")
    st.add_argument("--timers-schedule", type=_on_off, metavar="on|off")
    st.add_argument("--timers-fire", type=_on_off, metavar="on|off")
    add_json_flag(st)
    add_database_flags(st)
    st.set_defaults(run=_switches_set)


async def _dlq_list(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        out = await queen.dlq(
            ident,
            queue=ns.queue,
            partition=ns.partition,
            group=ns.group,
            limit=ns.limit,
            offset=ns.offset,
        )
    if ns.json:
        print_json(out)
        return 0
    msgs = out["messages"]
    counted = f"{len(msgs)} of {out['total']}" + (f" from {ns.offset}" if ns.offset else "")
    table(
        f"dead letters of {ns.queue}",
        ["failedAt", "partition", "transactionId", "timer", "retries", "error"],
        (
            [
                m.get("failedAt"),
                m.get("partition") or m.get("partitionName"),
                m.get("transactionId"),
                # the key of the timer whose fire failed; empty for a consumer's dead letter
                shown(m.get("timerKey") or ""),
                m.get("retryCount"),
                m.get("errorMessage") or m.get("error"),
            ]
            for m in msgs
        ),
        caption=f"{counted} dead letter(s)",
    )
    return 0


async def _dlq_replay(ns: argparse.Namespace) -> int:
    if bool(ns.txns) == ns.all:
        raise Refusal("give transaction ids, or --all (not both)", 2)
    ident = identity(ns)
    wanted = set(ns.txns)
    items: list[dict[str, str]] = []
    async with client(ns) as queen:
        # The dead letters are addressed by (transactionId, partitionId): find each one's
        # partition in the queue's listing, newest first.
        offset = 0
        while len(items) < REPLAY_MAX and (ns.all or wanted):
            page = await queen.dlq(
                ident, queue=ns.queue, partition=ns.partition, limit=REPLAY_MAX, offset=offset
            )
            msgs = page["messages"]
            for m in msgs:
                if ns.all or m["transactionId"] in ns.txns:
                    wanted.discard(m["transactionId"])
                    items.append(
                        {"transactionId": m["transactionId"], "partitionId": m["partitionId"]}
                    )
            if len(msgs) < REPLAY_MAX:
                break
            offset += len(msgs)
        items = items[:REPLAY_MAX]
        if items:
            mode = "push" if ns.schedule_in is None else "schedule"
            out: dict[str, Any] = dict(
                await queen.dlq_replay(ident, items, mode, delay_ms=ns.schedule_in)
            )
        else:
            out = {"mode": "push" if ns.schedule_in is None else "schedule", "results": []}
    missing = [t for t in ns.txns if t in wanted]
    out["notFound"] = missing
    if ns.json:
        print_json(out)
    else:
        for r in out["results"]:
            print(f"{r['status']}\t{shown(ns.queue)}\t{shown(r.get('transactionId'))}")
        for t in missing:
            print(f"absent\t{shown(ns.queue)}\t{shown(t)}")
        if not items and ns.all:
            print(f"no dead letters in {ns.queue}")
    failed = missing or any(r["status"] != "replayed" for r in out["results"])
    return 1 if failed else 0


def _show(state: SwitchStates, as_json: bool) -> None:
    if as_json:
        print_json(state)
        return
    for k in ("timersScheduleEnabled", "timersFireEnabled"):
        print(f"{k:<22} {'on' if state.get(k) else 'OFF (paused)'}")
    msg = state.get("message")
    if msg and msg != "ok":
        print(msg)


async def _switches_show(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        _show(await queen.switches_get(ident), ns.json)
    return 0


async def _switches_set(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    changes = {
        wire: getattr(ns, flag)
        for flag, wire in _SWITCH_FLAGS.items()
        if getattr(ns, flag) is not None
    }
    async with client(ns) as queen:
        _show(await queen.switches_set(ident, changes), ns.json)
    return 0
