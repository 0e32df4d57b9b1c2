"""The errors page names every error code and reason the shipped code can refuse with: those
found in the source (every QueenError(...) with literal arguments, through its helpers) and the
SQL API's. A new reason that is not on the page fails here."""

from __future__ import annotations

from .scan import DOCS, raised_codes, sql_reasons


def _page() -> str:
    return (DOCS / "reference" / "errors.md").read_text()


def test_the_scan_finds_the_known_refusals():
    # The scan itself: codes and reasons raised directly, through one helper and through two.
    codes, reasons = raised_codes()
    assert {"timers_bad_request", "bad_request", "unavailable", "forbidden"} <= codes
    assert {"timers_too_many_ops", "switches_bad_body", "origin_not_allowed"} <= reasons
    assert {"timers_bad_queue", "pop_bad_queue", "bad_json"} <= reasons  # via check_name & co


def test_every_error_code_is_on_the_page():
    codes, _ = raised_codes()
    page = _page()
    missing = sorted(c for c in codes if f"`{c}`" not in page)
    assert not missing, f"error codes missing from docs/reference/errors.md: {missing}"


def test_every_reason_is_on_the_page():
    _, reasons = raised_codes()
    page = _page()
    missing = sorted(r for r in reasons | sql_reasons() if f"`{r}`" not in page)
    assert not missing, f"reasons missing from docs/reference/errors.md: {missing}"
