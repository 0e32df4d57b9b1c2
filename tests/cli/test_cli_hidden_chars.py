"""Timer keys may hold controls, bidirectional overrides and zero-width characters (queue names
may not): every place the CLI prints a key for a person writes them as escapes, so a key never
reads as another; --json keeps the key itself for scripts."""

from __future__ import annotations

import pytest

from queen_timers.cli.output import shown

from .helpers import queen, queen_json

KEY = "invoice-\u202egpj.exe\u2066-\x07\u200b9"
KEY_SHOWN = "invoice-\\u202egpj.exe\\u2066-\\x07\\u200b9"
HIDDEN = "\u202e\u2066\x07\u200b"


@pytest.mark.parametrize(
    ("raw", "expect"),
    [
        ("order-42", "order-42"),
        ("with space", "with space"),
        ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"),  # letters of any script stay
        (KEY, KEY_SHOWN),
        ("a\\u202eb", "a\\\\u202eb"),  # a typed escape: its backslash doubles, so it differs
        ("tab\there\nline", "tab\\x09here\\x0aline"),
        ("nb\u00a0sp", "nb\\xa0sp"),
        ("lrm\u200erli\u2067pdi\u2069", "lrm\\u200erli\\u2067pdi\\u2069"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("bom\ufeff", "bom\\ufeff"),
    ],
)
def test_shown_escapes_what_does_not_show_itself(raw, expect):
    assert shown(raw) == expect


@pytest.mark.slow
def test_list_peek_and_cancel_print_a_hidden_character_escaped(db_url):
    url = ("--database-url", db_url)
    markup = "[red]not red[/red]"
    for key in (KEY, markup):
        queen("timers", "schedule", "bidi", key, "--delay", "1h", "--payload", "{}", *url)

    table = queen("timers", "list", "bidi", *url).stdout
    assert KEY_SHOWN in table and markup in table  # and rich read no markup in a key
    peek = queen("timers", "peek", "bidi", KEY, *url).stdout
    assert any(line.split() == ["timerKey", KEY_SHOWN] for line in peek.splitlines()), peek
    cancelled = queen("timers", "cancel", "bidi", KEY, *url).stdout
    assert cancelled.strip().split("\t") == ["cancelled", "bidi", KEY_SHOWN], cancelled
    for out in (table, peek, cancelled):
        assert not any(ch in out for ch in HIDDEN), out

    # scripts get the key itself
    rows = queen_json("timers", "list", "bidi", *url)["rows"]
    assert [r["timerKey"] for r in rows] == [markup]
