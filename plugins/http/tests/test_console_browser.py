"""The operator console in a real Chromium against a real broker on the embedded PostgreSQL.

Each test gets its own database and a broker on a fresh port (so a fresh sessionStorage), and
drives the page as an operator would: links, inputs, buttons and the confirm dialog. Every
wait is a DOM condition with a generous timeout (console_browser.WAIT_S); what a click does is
then checked in the database itself.

Skipped, saying why, only where no Chromium and chromedriver are installed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator

import jwt
import pytest
from console_browser import By, Console, find_chromium, start_driver

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.identity import Identity
from queen_timers.switches import SWITCH_KEYS
from queen_timers.testing.fixtures import started_broker

BINARIES = find_chromium()
pytestmark = pytest.mark.skipif(
    BINARIES is None,
    reason="no chromium and chromedriver (apt-get install chromium chromium-driver; .ci/run "
    "installs them)",
)

SECRET = "console-browser-secret-that-is-long-enough-0123456789"
HOSTILE = "<img src=x onerror=window.__xss=1>"
MIN = 60_000


def b64(doc) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


def op(queue: str, key: str, delay_ms: float, payload=None, **extra) -> dict:
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": f"txn-{key}",
        "payload": b64(payload if payload is not None else {"key": key}),
        **extra,
    }


async def schedule(queen, ident, ops: list[dict]) -> None:
    for i in range(0, len(ops), 256):
        res = await queen.timers_apply(ident, ops[i : i + 256])
        assert all(r["ok"] for r in res), res


@pytest.fixture(scope="module")
def driver():
    assert BINARIES is not None
    d = start_driver(*BINARIES)
    try:
        yield d
    finally:
        d.quit()


async def _serve(q) -> AsyncIterator[HttpTransport]:
    t = HttpTransport(http_settings())
    await t.start(q)
    try:
        yield t
    finally:
        await t.stop()


@pytest.fixture
async def page(queen, driver) -> AsyncIterator[Console]:
    """The console on a broker without authentication (loopback: every caller is admin)."""
    async for t in _serve(queen):
        c = Console(driver, t.url)
        await c.console_errors()  # drain what an earlier test left in the browser's log
        yield c


@pytest.fixture
async def jwt_broker(db_url):
    async with started_broker(db_url, jwt_secret=SECRET) as q:
        yield q


@pytest.fixture
async def jwt_page(jwt_broker, driver) -> AsyncIterator[Console]:
    async for t in _serve(jwt_broker):
        yield Console(driver, t.url)


def token(admin: bool, tenant: uuid.UUID | None = None) -> str:
    claims: dict = {"sub": "operator"}
    if admin:
        claims["admin"] = True
    if tenant is not None:
        claims["tenant"] = str(tenant)
    return jwt.encode(claims, SECRET, algorithm="HS256")


def row_keys(c: Console):
    return c.texts("#timers-table tbody tr td.key")


async def wait_keys(c: Console, expect: list[str]) -> None:
    def same(d) -> bool:
        return [e.text for e in d.find_elements(By.CSS_SELECTOR, "#timers-table td.key")] == expect

    await c.wait(same, f"the timer rows {expect}")


async def test_a_hostile_key_and_payload_render_as_text(page, queen, ident, conn):
    await schedule(
        queen,
        ident,
        [op("q", HOSTILE, 5 * MIN, {"html": "<img src=x onerror=window.__xss=2>"})],
    )
    await page.open("#/queue?name=q")
    await wait_keys(page, [HOSTILE])
    await page.click("#timers-table tr .peek")
    assert await page.wait_text("#peek-key", HOSTILE) == HOSTILE
    shown = await page.wait_text("#peek-payload", lambda t: "onerror" in t)
    assert json.loads(shown) == {"html": "<img src=x onerror=window.__xss=2>"}
    # Nothing became an element: no <img> anywhere, and the handler never ran.
    assert await page.js("return document.querySelectorAll('img').length") == 0
    assert await page.js("return window.__xss === undefined") is True
    assert not [e for e in await page.console_errors() if "Content Security Policy" in e]


async def test_paging_by_key(page, queen, ident):
    keys = [f"a:{i}" for i in range(1, 8)] + ["b:1", "b:2"]
    await schedule(queen, ident, [op("pages", k, (i + 1) * MIN) for i, k in enumerate(keys)])
    await page.open("#/queue?name=pages&size=3")
    await wait_keys(page, keys[0:3])
    await page.click("#next-page")
    await wait_keys(page, keys[3:6])
    await page.click("#next-page")
    await wait_keys(page, keys[6:9])
    assert await page.js("return document.getElementById('next-page').disabled") is True
    await page.click("#prev-page")
    await wait_keys(page, keys[3:6])
    await page.click("#first-page")
    await wait_keys(page, keys[0:3])


async def test_peek_decodes_a_json_payload_and_names_an_encrypted_one(page, queen, ident):
    await queen.configure_queue(ident, "secret", {"encryptionEnabled": True})
    await schedule(
        queen,
        ident,
        [op("plain", "order:1", 10 * MIN, {"order": 1, "items": ["tea"]})],
    )
    await schedule(queen, ident, [op("secret", "card:1", 10 * MIN, {"pan": "4111"})])
    await page.open("#/queue?name=plain")
    await wait_keys(page, ["order:1"])
    await page.click("#timers-table tr .peek")
    shown = await page.wait_text("#peek-payload", lambda t: "tea" in t)
    assert json.loads(shown) == {"order": 1, "items": ["tea"]}
    assert "txn-order:1" in (await page.texts("#peek dl"))[0]
    await page.open("#/queue?name=secret")
    await wait_keys(page, ["card:1"])
    await page.click("#timers-table tr .peek")
    shown = await page.wait_text("#peek-payload", lambda t: "encrypted" in t)
    assert "4111" not in shown


async def test_cancel_reaches_the_database(page, queen, ident, conn):
    await schedule(queen, ident, [op("c", k, 30 * MIN) for k in ("keep", "drop")])
    await page.open("#/queue?name=c")
    await wait_keys(page, ["drop", "keep"])
    await page.click('#timers-table tr[data-key="drop"] .cancel')
    said = await page.confirm("Cancel this timer?")
    assert "drop" in said
    await page.wait_text("#action-status", "cancelled: drop")
    await wait_keys(page, ["keep"])
    keys = await conn.fetch("SELECT timer_key FROM queen.log_timers WHERE queue = 'c'")
    assert [r["timer_key"] for r in keys] == ["keep"]


async def test_a_cancel_dismissed_in_the_dialog_changes_nothing(page, queen, ident, conn):
    await schedule(queen, ident, [op("c", "stay", 30 * MIN)])
    await page.open("#/queue?name=c")
    await wait_keys(page, ["stay"])
    await page.click("#timers-table tr .cancel")
    await page.wait_css("dialog#confirm[open]")
    await page.click("#confirm-cancel")
    await page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "dialog#confirm[open]"))
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 1


async def test_reschedule_moves_the_due_time(page, queen, ident, conn):
    await schedule(queen, ident, [op("r", "later", 5 * MIN)])
    before = await conn.fetchval("SELECT deliver_at FROM queen.log_timers")
    await page.open("#/queue?name=r")
    await wait_keys(page, ["later"])
    await page.click("#timers-table tr .reschedule")
    await page.wait_css("dialog#confirm[open]")
    await page.type("#delay-amount", "2")
    await page.js("document.getElementById('delay-unit').value = '3600000'")
    await page.confirm("Reschedule this timer?")
    await page.wait_text("#action-status", lambda t: t.startswith("rescheduled: later"))
    after = await conn.fetchval("SELECT deliver_at FROM queen.log_timers")
    moved = (after - before).total_seconds()
    assert 115 * 60 - 60 < moved < 115 * 60 + 600, moved  # +2 h from now, not +5 min
    payload = await conn.fetchval("SELECT payload FROM queen.log_timers")
    assert json.loads(payload) == {"key": "later"}


async def test_live_refresh_shows_a_new_timer_without_reloading(page, queen, ident):
    await schedule(queen, ident, [op("live", "first", 10 * MIN)])
    await page.open("#/queue?name=live", refresh_s=1)
    await wait_keys(page, ["first"])
    await page.js("window.__sameDocument = true")
    await schedule(queen, ident, [op("live", "second", 10 * MIN)])
    await wait_keys(page, ["first", "second"])
    assert await page.js("return window.__sameDocument") is True


async def test_the_token_is_kept_for_the_tab_and_a_missing_one_is_named(jwt_page, jwt_broker):
    await jwt_page.open("#/queue?name=q")
    await jwt_page.wait_text("#banner", lambda t: "unauthorized" in t)
    await jwt_page.set_token(token(admin=False))
    await jwt_page.wait_css("#no-timers")
    # A reload keeps the token (sessionStorage of this tab); the banner stays away.
    await jwt_page.open("#/queue?name=q")
    await jwt_page.wait_css("#no-timers")
    assert await jwt_page.wait_text("#token-state", "token set for this tab")
    stored = await jwt_page.js("return sessionStorage.getItem('queen-console-token')")
    assert stored == token(admin=False)
    assert await jwt_page.js("return localStorage.length") == 0


async def _switch_rows(conn) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM queen.system_state WHERE key = ANY($1)", list(SWITCH_KEYS)
    )


async def test_the_kill_switch_toggle_is_refused_for_a_non_admin_token(jwt_page, jwt_broker, conn):
    await jwt_page.open("#/overview")
    await jwt_page.set_token(token(admin=False))
    await jwt_page.wait_text('[data-switch="timersFire"] [data-field="state"]', "enabled")
    await jwt_page.click('[data-switch="timersFire"] button')
    said = await jwt_page.confirm("Pause fire?")
    assert "firing due timers" in said
    await jwt_page.wait_text("#switch-message", lambda t: "admin_required" in t)
    await jwt_page.wait_text('[data-switch="timersFire"] [data-field="state"]', "enabled")
    assert await _switch_rows(conn) == 0
    assert jwt_broker.rt.switches.timers_fire_enabled is True


async def test_an_admin_token_pauses_and_resumes_the_fire(jwt_page, jwt_broker, conn):
    await jwt_page.open("#/overview")
    await jwt_page.set_token(token(admin=True))
    state = '[data-switch="timersFire"] [data-field="state"]'
    await jwt_page.wait_text(state, "enabled")
    await jwt_page.click('[data-switch="timersFire"] button')
    await jwt_page.confirm("Pause fire?")
    await jwt_page.wait_text(state, "paused")
    assert (await jwt_broker.switches_get(Identity(admin=True)))["timersFireEnabled"] is False
    await jwt_page.click('[data-switch="timersFire"] button')
    await jwt_page.confirm("Resume fire?")
    await jwt_page.wait_text(state, "enabled")
    await asyncio.wait_for(jwt_broker.switches_get(Identity(admin=True)), 10)
    assert jwt_broker.rt.switches.timers_fire_enabled is True
