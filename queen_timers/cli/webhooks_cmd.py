"""`queen webhooks targets|set|show|pause|resume|delete|secrets|attempts ...`: webhook
targets, their signing secrets and their delivery attempts (the delivery itself is
plugins/webhooks)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from .connect import add_database_flags, client, identity
from .failures import Refusal
from .output import add_json_flag, ago, print_json, shown, table

__all__ = ["register"]

# The service's pages are 1..1000 rows; a person reads a screenful.
DEFAULT_PAGE = 100
# `--secret -`: the secret is read from stdin, so it stays out of the shell's history and of
# the process list.
FROM_STDIN = "-"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "webhooks", help="webhook targets: set, list, show, pause, delete, secrets, attempts"
    )
    wsub = p.add_subparsers(dest="webhooks_command", required=True, metavar="ACTION")

    ls = wsub.add_parser("targets", help="the tenant's webhook targets, by name")
    ls.add_argument("--after", metavar="NAME", help="start after this name (the last page's end)")
    ls.add_argument("--limit", type=int, default=DEFAULT_PAGE, help="targets per page")
    ls.set_defaults(run=_targets)

    st = wsub.add_parser(
        "set",
        help="create or replace a target (every field: a flag left out takes its default)",
    )
    st.add_argument("name")
    st.add_argument("--queue", required=True, help="the queue whose messages it delivers")
    st.add_argument("--url", required=True, help="where to send them (http or https)")
    st.add_argument("--method", choices=("POST", "PUT", "PATCH"), help="default POST")
    st.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header to send (repeatable); the target's headers are replaced by these",
    )
    st.add_argument("--timeout-ms", type=int, metavar="MS", help="per attempt (default 10000)")
    st.add_argument("--max-attempts", type=int, metavar="N", help="before the DLQ (default 10)")
    st.add_argument(
        "--max-age-ms", type=int, metavar="MS", help="no retry after this age (default 1 day)"
    )
    st.add_argument("--backoff-ms", type=int, metavar="MS", help="first retry delay (1000)")
    st.add_argument("--max-backoff-ms", type=int, metavar="MS", help="retry delay cap (1 h)")
    st.add_argument("--concurrency", type=int, metavar="N", help="requests in flight (8)")
    st.add_argument("--rate-per-s", type=float, metavar="R", help="requests per second cap")
    st.add_argument("--paused", action="store_true", help="store it paused (nothing is sent)")
    st.add_argument(
        "--secret",
        metavar="whsec_...",
        help="a signing secret to add ('-': read it from stdin); a new target without one "
        "gets a generated secret, printed once",
    )
    st.set_defaults(run=_set)

    sh = wsub.add_parser("show", help="one target (its secrets by id only)")
    sh.add_argument("name")
    sh.set_defaults(run=_show)

    toggles = []
    for action, what in (
        ("pause", "pause a target: nothing is sent, its messages wait in its queue"),
        ("resume", "resume a paused target"),
    ):
        a = wsub.add_parser(action, help=what)
        a.add_argument("name")
        a.set_defaults(run=_pause, action=action)
        toggles.append(a)

    dl = wsub.add_parser("delete", help="delete a target and its secrets (its queue stays)")
    dl.add_argument("name")
    dl.set_defaults(run=_delete)

    sec = wsub.add_parser("secrets", help="add or delete a target's signing secrets (rotation)")
    ssub = sec.add_subparsers(dest="secrets_command", required=True, metavar="ACTION")
    sa = ssub.add_parser("add", help="add a secret; without --secret one is generated")
    sa.add_argument("name")
    sa.add_argument("--secret", metavar="whsec_...", help="the secret ('-': read from stdin)")
    sa.set_defaults(run=_secret_add)
    sd = ssub.add_parser("delete", help="delete a secret by id (the last one stays)")
    sd.add_argument("name")
    sd.add_argument("id", help="the secret's id (sec_..., see `queen webhooks show`)")
    sd.set_defaults(run=_secret_delete)

    at = wsub.add_parser("attempts", help="a target's newest delivery attempts")
    at.add_argument("name")
    at.add_argument("--webhook-id", metavar="ID", help="only this message's attempts")
    at.add_argument("--before", type=int, metavar="ID", help="older than this attempt id")
    at.add_argument("--limit", type=int, default=DEFAULT_PAGE, help="attempts per page")
    at.set_defaults(run=_attempts)

    for action in (ls, st, sh, *toggles, dl, sa, sd, at):
        add_json_flag(action)
        add_database_flags(action)


def _headers(given: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    seen: set[str] = set()
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise Refusal(f"--header {item!r}: write it as NAME=VALUE", 2)
        if name.lower() in seen:
            raise Refusal(f"--header {name!r} is given twice", 2)
        seen.add(name.lower())
        out[name] = value
    return out


def _secret(given: str | None) -> str | None:
    if given != FROM_STDIN:
        return given
    line = sys.stdin.readline().strip()
    if not line:
        raise Refusal("--secret -: stdin held no secret", 2)
    return line


def _body(ns: argparse.Namespace) -> dict[str, Any]:
    b: dict[str, Any] = {"name": ns.name, "queue": ns.queue, "url": ns.url}
    optional = {
        "method": ns.method,
        "timeoutMs": ns.timeout_ms,
        "maxAttempts": ns.max_attempts,
        "maxAgeMs": ns.max_age_ms,
        "backoffMs": ns.backoff_ms,
        "maxBackoffMs": ns.max_backoff_ms,
        "concurrency": ns.concurrency,
        "ratePerS": ns.rate_per_s,
        "secret": _secret(ns.secret),
    }
    b.update({k: v for k, v in optional.items() if v is not None})
    b["headers"] = _headers(ns.header)
    b["paused"] = bool(ns.paused)
    return b


def _print_secret(sid: str, value: str) -> None:
    print(f"signing secret {sid} (shown once, store it now; `queen webhooks show` lists ids only):")
    print(value)


def _rate(t: Mapping[str, Any]) -> str:
    return "-" if t["ratePerS"] is None else f"{t['ratePerS']:g}/s"


async def _set(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    body = _body(ns)
    async with client(ns) as queen:
        out = await queen.webhook_target_set(ident, body)
    if ns.json:
        print_json(out)
        return 0
    t = out["target"]
    state = "paused" if t["paused"] else "active"
    print(f"{out['status']}\t{t['name']}\tqueue {shown(t['queue'])}\t{state}\t{shown(t['url'])}")
    if "secret" in out:
        _print_secret(out["secret"]["id"], out["secret"]["value"])
    return 0


async def _targets(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        page = await queen.webhook_targets_list(ident, after=ns.after, limit=ns.limit)
    if ns.json:
        print_json(page)
        return 0
    rows = page["targets"]
    table(
        "webhook targets",
        ["name", "queue", "url", "method", "paused", "secrets", "concurrency", "rate"],
        (
            [
                t["name"],
                shown(t["queue"]),
                shown(t["url"]),
                t["method"],
                "yes" if t["paused"] else "no",
                len(t["secrets"]),
                t["concurrency"],
                _rate(t),
            ]
            for t in rows
        ),
        caption=(
            f"more after {page['nextAfter']!r}: add --after {page['nextAfter']!r}"
            if page["truncated"]
            else f"{len(rows)} target(s)"
        ),
    )
    return 0


async def _show(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        t = await queen.webhook_target_get(ident, ns.name)
    if ns.json:
        print_json(t)
        return 0
    print(f"{t['name']}: {t['method']} {shown(t['url'])}")
    print(f"queue {shown(t['queue'])}, {'paused' if t['paused'] else 'active'}")
    print(
        f"timeout {t['timeoutMs']} ms, at most {t['maxAttempts']} attempts within "
        f"{ago(t['maxAgeMs'])}, backoff {ago(t['backoffMs'])} to {ago(t['maxBackoffMs'])}"
    )
    print(f"concurrency {t['concurrency']}, rate {_rate(t)}")
    print(f"created {t['createdAt']}, updated {t['updatedAt']}")
    if t["headers"]:
        print("headers (a credential-like header's value shows as ***):")
        table(None, ["name", "value"], ([k, shown(v)] for k, v in t["headers"].items()))
    else:
        print("no headers")
    print("signing secrets (their values are never shown back):")
    table(None, ["id", "createdAt"], ([x["id"], x["createdAt"]] for x in t["secrets"]))
    return 0


async def _pause(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        if ns.action == "pause":
            t = await queen.webhook_target_pause(ident, ns.name)
        else:
            t = await queen.webhook_target_resume(ident, ns.name)
    if ns.json:
        print_json(t)
    else:
        print(f"{'paused' if t['paused'] else 'resumed'}\t{t['name']}\tqueue {shown(t['queue'])}")
    return 0


async def _delete(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        out = await queen.webhook_target_delete(ident, ns.name)
    if ns.json:
        print_json(out)
        return 0
    if not out["deleted"]:
        raise Refusal(f"no webhook target {ns.name!r}", 1)
    print(f"deleted\t{ns.name}")
    return 0


async def _secret_add(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    given = _secret(ns.secret)
    async with client(ns) as queen:
        out = await queen.webhook_secret_add(ident, ns.name, secret=given)
    if ns.json:
        print_json(out)
        return 0
    print(f"added\t{out['target']}\t{out['id']}\t{out['createdAt']}")
    if "value" in out:
        _print_secret(out["id"], out["value"])
    return 0


async def _secret_delete(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        out = await queen.webhook_secret_delete(ident, ns.name, ns.id)
    if ns.json:
        print_json(out)
        return 0
    if not out["deleted"]:
        raise Refusal(f"no secret {ns.id!r} on webhook target {ns.name!r}", 1)
    print(f"deleted\t{out['target']}\t{out['id']}")
    return 0


async def _attempts(ns: argparse.Namespace) -> int:
    ident = identity(ns)
    async with client(ns) as queen:
        page = await queen.webhook_attempts(
            ident, ns.name, webhook_id=ns.webhook_id, before=ns.before, limit=ns.limit
        )
    if ns.json:
        print_json(page)
        return 0
    rows = page["attempts"]
    more = page["nextBefore"]
    table(
        f"attempts of {ns.name}" + (f" for {shown(ns.webhook_id)}" if ns.webhook_id else ""),
        ["at", "webhook id", "attempt", "status", "latency", "outcome", "error"],
        (
            [
                a["at"],
                shown(a["webhookId"]),
                a["attempt"],
                "-" if a["status"] is None else a["status"],
                f"{a['latencyMs']} ms",
                a["outcome"],
                "" if a["error"] is None else shown(a["error"]),
            ]
            for a in rows
        ),
        caption=(
            f"more before attempt {more}: add --before {more}"
            if more is not None
            else f"{len(rows)} attempt(s), newest first"
        ),
    )
    return 0
