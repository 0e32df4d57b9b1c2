"""`queen webhooks ...` as a person runs it: targets, set, show, delete, secrets, attempts."""

from __future__ import annotations

import datetime as dt

from queen_timers.webhooks.targets import Attempt

from . import helpers
from .helpers import failure_line, queen, queen_json

KEY = "11" * 32  # QUEEN_ENCRYPTION_KEY: secrets are stored sealed with it
SECRET = "whsec_" + "QUJD" * 8  # 24 bytes of base64
OTHER = "whsec_" + "WFla" * 8
HOSTILE = "<img src=x onerror=alert(1)>"


def test_a_target_round_trip(db_url):
    db = ("--database-url", db_url)
    made = queen(
        "webhooks", "set", "billing", "--queue", "invoices", "--url", "https://hooks.example.com/in",
        "--header", "Authorization=Bearer s3cr3t-value", "--header", "X-Team=billing",
        "--max-attempts", "3", "--rate-per-s", "2.5", *db, QUEEN_ENCRYPTION_KEY=KEY,
    ).stdout  # fmt: skip
    lines = made.splitlines()
    assert lines[0].split("\t")[:4] == ["created", "billing", "queue invoices", "active"]
    assert "shown once" in lines[1]
    generated = lines[2]
    assert generated.startswith("whsec_")

    listed = queen("webhooks", "targets", *db).stdout
    assert "billing" in listed and "invoices" in listed and "2.5/s" in listed
    assert "1 target(s)" in listed

    shown = queen("webhooks", "show", "billing", *db).stdout
    assert "https://hooks.example.com/in" in shown and "at most 3 attempts within 1d00h" in shown
    assert "***" in shown and "s3cr3t" not in shown and "X-Team" in shown
    assert generated not in shown
    view = queen_json("webhooks", "show", "billing", *db)
    assert view["headers"] == {"Authorization": "***", "X-Team": "billing"}
    (first,) = view["secrets"]

    # A secret from stdin is never echoed; a generated one is printed once.
    add = ("webhooks", "secrets", "add", "billing")
    given = queen(*add, "--secret", "-", *db, stdin=SECRET + "\n", QUEEN_ENCRYPTION_KEY=KEY)
    assert given.stdout.startswith("added\tbilling\tsec_") and SECRET not in given.stdout
    rotated = queen_json("webhooks", "secrets", "add", "billing", *db, QUEEN_ENCRYPTION_KEY=KEY)
    assert rotated["value"].startswith("whsec_") and rotated["id"].startswith("sec_")
    assert len(queen_json("webhooks", "show", "billing", *db)["secrets"]) == 3

    assert "deleted" in queen("webhooks", "secrets", "delete", "billing", first["id"], *db).stdout
    gone = queen("webhooks", "secrets", "delete", "billing", first["id"], *db, check=False)
    assert gone.returncode == 1 and "no secret" in failure_line(gone)

    # pause and resume change nothing else (the header the view redacts stays as stored), and
    # need no encryption key.
    paused = queen("webhooks", "pause", "billing", *db).stdout
    assert paused.strip() == "paused\tbilling\tqueue invoices"
    view = queen_json("webhooks", "show", "billing", *db)
    assert view["paused"] is True and view["maxAttempts"] == 3
    assert view["headers"] == {"Authorization": "***", "X-Team": "billing"}
    assert queen_json("webhooks", "resume", "billing", *db)["paused"] is False
    missing = queen("webhooks", "pause", "nope", *db, check=False)
    assert "webhook_target_not_found" in failure_line(missing)

    # set is a full replace: no new secret is printed for an existing target, and headers left
    # out are gone.
    again = queen(
        "webhooks", "set", "billing", "--queue", "invoices", "--url", "https://hooks.example.com/v2",
        "--paused", *db, QUEEN_ENCRYPTION_KEY=KEY,
    ).stdout  # fmt: skip
    assert again.splitlines() == [
        "updated\tbilling\tqueue invoices\tpaused\thttps://hooks.example.com/v2"
    ]
    view = queen_json("webhooks", "show", "billing", *db)
    assert view["headers"] == {} and view["paused"] is True and len(view["secrets"]) == 2
    assert view["maxAttempts"] == 10  # back to the default

    assert queen("webhooks", "delete", "billing", *db).stdout.strip() == "deleted\tbilling"
    again_gone = queen("webhooks", "delete", "billing", *db, check=False)
    assert again_gone.returncode == 1 and "no webhook target 'billing'" in failure_line(again_gone)
    assert queen_json("webhooks", "targets", *db)["targets"] == []


def test_refusals_are_one_line_and_change_nothing(db_url):
    db = ("--database-url", db_url)
    loopback = queen(
        "webhooks", "set", "t", "--queue", "q", "--url", "http://127.0.0.1:9/x", *db,
        check=False, QUEEN_ENCRYPTION_KEY=KEY,
    )  # fmt: skip
    assert "webhook_url_refused" in failure_line(loopback)
    bad_header = queen(
        "webhooks", "set", "t", "--queue", "q", "--url", "https://a.example", "--header", "oops",
        *db, check=False, QUEEN_ENCRYPTION_KEY=KEY,
    )  # fmt: skip
    assert bad_header.returncode == 2 and "NAME=VALUE" in failure_line(bad_header)
    twice = queen(
        "webhooks", "set", "t", "--queue", "q", "--url", "https://a.example",
        "--header", "X-A=1", "--header", "x-a=2", *db, check=False, QUEEN_ENCRYPTION_KEY=KEY,
    )  # fmt: skip
    assert twice.returncode == 2 and "given twice" in failure_line(twice)
    reserved = queen(
        "webhooks", "set", "t", "--queue", "q", "--url", "https://a.example",
        "--header", "webhook-id=forged", *db, check=False, QUEEN_ENCRYPTION_KEY=KEY,
    )  # fmt: skip
    assert "webhook_reserved_header" in failure_line(reserved)
    no_key = queen(
        "webhooks", "set", "t", "--queue", "q", "--url", "https://a.example", *db, check=False
    )
    assert "encryption_key_missing" in failure_line(no_key)
    assert "QUEEN_ENCRYPTION_KEY" in failure_line(no_key)
    missing = queen("webhooks", "show", "nope", *db, check=False)
    assert "webhook_target_not_found" in failure_line(missing)
    assert queen_json("webhooks", "targets", *db)["targets"] == []

    queen(
        "webhooks",
        "set",
        "t",
        "--queue",
        "q",
        "--url",
        "https://a.example",
        *db,
        QUEEN_ENCRYPTION_KEY=KEY,
    )
    (only,) = queen_json("webhooks", "show", "t", *db)["secrets"]
    last = queen("webhooks", "secrets", "delete", "t", only["id"], *db, check=False)
    assert "webhook_last_secret" in failure_line(last)
    taken = queen(
        "webhooks", "set", "u", "--queue", "q", "--url", "https://b.example", *db,
        check=False, QUEEN_ENCRYPTION_KEY=KEY,
    )  # fmt: skip
    assert "webhook_queue_taken" in failure_line(taken)
    assert [t["name"] for t in queen_json("webhooks", "targets", *db)["targets"]] == ["t"]


async def test_attempts_newest_first_with_their_errors_as_text(db_url, queen, ident):
    db = ("--database-url", db_url)
    await queen.webhook_target_set(
        ident, {"name": "hooks", "queue": HOSTILE, "url": "https://hooks.example.com/x"}
    )
    t0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    rows = [
        Attempt(ident.tenant, "hooks", "msg_a", 1, t0, 503, 120, "retry", "503 busy"),
        Attempt(
            ident.tenant,
            "hooks",
            "msg_a",
            2,
            t0 + dt.timedelta(seconds=2),
            200,
            35,
            "delivered",
            None,
        ),
        Attempt(
            ident.tenant,
            "hooks",
            "msg_b",
            1,
            t0 + dt.timedelta(seconds=3),
            None,
            10_000,
            "dead",
            f"timeout\n{HOSTILE} [red]x[/red]",
        ),
    ]
    await queen.webhook_attempts_record(rows, 100)

    page = queen_json("webhooks", "attempts", "hooks", *db)
    assert [(a["webhookId"], a["attempt"], a["outcome"]) for a in page["attempts"]] == [
        ("msg_b", 1, "dead"),
        ("msg_a", 2, "delivered"),
        ("msg_a", 1, "retry"),
    ]
    text = _cli("webhooks", "attempts", "hooks", *db)
    assert "timeout\\x0a<img src=x onerror=alert(1)> [red]x[/red]" in text  # text, escaped
    assert "10000 ms" in text and "3 attempt(s), newest first" in text
    for header in ("at", "webhook id", "attempt", "status", "latency", "outcome", "error"):
        assert header in text

    one = queen_json("webhooks", "attempts", "hooks", "--webhook-id", "msg_a", *db)
    assert [a["attempt"] for a in one["attempts"]] == [2, 1]
    first = _cli("webhooks", "attempts", "hooks", "--limit", "1", *db)
    cursor = page["attempts"][0]["id"]
    assert f"add --before {cursor}" in first
    rest = queen_json("webhooks", "attempts", "hooks", "--before", str(cursor), *db)
    assert [a["webhookId"] for a in rest["attempts"]] == ["msg_a", "msg_a"]
    listed = _cli("webhooks", "targets", *db)
    assert HOSTILE in listed
    _cli("webhooks", "attempts", "nope", *db, ok=False)


def _cli(*args: str, ok: bool = True) -> str:
    """The command's stdout (the tests that take the `queen` fixture, a broker in this process,
    run the CLI through here)."""
    r = helpers.queen(*args, check=ok)
    if not ok:
        assert "webhook_target_not_found" in failure_line(r)
    return r.stdout
