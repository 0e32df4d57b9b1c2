"""The console's Webhooks view in a real Chromium against a real broker (issue 26): the targets
with their queue, URL, state, secrets and limits; a target's newest attempts; pause and resume
(which change nothing else, a redacted header least of all); delete behind a confirm; the link
to the queue's dead letters, where a failed delivery is replayed. Every user string (queue,
URL, header value, webhook id, error) shows as text. Waits are DOM conditions
(console_browser.WAIT_S); what a click does is checked in the database."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator

import pytest
from console_browser import By, Console, find_chromium, start_driver

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.webhooks.targets import Attempt

BINARIES = find_chromium()
pytestmark = pytest.mark.skipif(
    BINARIES is None,
    reason="no chromium and chromedriver (apt-get install chromium chromium-driver; .ci/run "
    "installs them)",
)

# Markup in every string a tenant chooses; a target's name cannot hold it (1 to 128 of
# [A-Za-z0-9._:-]), its queue, URL, headers and the receiver's answers can.
HOSTILE = "<img src=x onerror=window.__xss=1>"
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
NONE = "\u2013"  # what the console shows for no value (no HTTP status: a timeout)


@pytest.fixture(scope="module")
def driver():
    assert BINARIES is not None
    d = start_driver(*BINARIES)
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture
async def page(queen, driver) -> AsyncIterator[Console]:
    t = HttpTransport(http_settings())
    await t.start(queen)
    try:
        c = Console(driver, t.url)
        await c.console_errors()  # drain what an earlier test left in the browser's log
        yield c
    finally:
        await t.stop()


async def _no_markup_ran(c: Console) -> None:
    assert await c.js("return document.querySelectorAll('img, main script').length") == 0
    assert await c.js("return window.__xss === undefined") is True
    assert not [e for e in await c.console_errors() if "Content Security Policy" in e]


def row(name: str, field: str) -> str:
    return f'#webhooks-table tr[data-target="{name}"] td.{field}'


async def _stored(conn, name: str) -> dict:
    r = await conn.fetchrow("SELECT * FROM queen.webhook_targets WHERE name = $1", name)
    assert r is not None
    out = dict(r)
    out["headers"] = (
        json.loads(out["headers"]) if isinstance(out["headers"], str) else out["headers"]
    )
    return out


async def _secret_ids(conn, name: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT secret_id FROM queen.webhook_secrets WHERE target = $1 ORDER BY secret_id", name
    )
    return [r["secret_id"] for r in rows]


async def test_hostile_strings_render_as_text(page, queen, ident):
    url = f"https://hooks.example.com/in?x={HOSTILE}"
    await queen.webhook_target_set(
        ident, {"name": "evil", "queue": HOSTILE, "url": url, "headers": {"X-Note": HOSTILE}}
    )
    await queen.webhook_attempts_record(
        [Attempt(ident.tenant, "evil", f"msg_{HOSTILE}", 1, T0, 500, 40, "retry", HOSTILE)], 100
    )
    await page.open("#/webhooks")
    assert await page.wait_text(row("evil", "queue"), HOSTILE) == HOSTILE
    assert await page.wait_text(row("evil", "url"), f"POST {url}")
    await page.click(f"{row('evil', 'actions')} .detail")
    assert await page.wait_text("#webhook-queue", HOSTILE)
    assert await page.wait_text("#webhook-url", f"POST {url}")
    assert await page.wait_text("#webhook-headers", f"X-Note: {HOSTILE}")
    assert await page.wait_text("#webhook-attempts td.lasterror", HOSTILE)
    assert await page.wait_text("#webhook-attempts td.key", f"msg_{HOSTILE}")
    assert "target=evil" in await page.js("return window.location.hash")
    # The dead-letter link carries the queue as a query value, not as markup or a path.
    href = await page.js("return document.getElementById('webhook-dlq').getAttribute('href')")
    assert href == "#/dlq?queue=%3Cimg+src%3Dx+onerror%3Dwindow.__xss%3D1%3E"
    await _no_markup_ran(page)


async def test_targets_and_the_newest_attempts_of_one(page, queen, ident):
    made = await queen.webhook_target_set(
        ident,
        {
            "name": "billing",
            "queue": "invoices",
            "url": "https://hooks.example.com/in",
            "concurrency": 2,
            "ratePerS": 2.5,
        },
    )
    await queen.webhook_secret_add(ident, "billing")
    await queen.webhook_target_set(
        ident, {"name": "crm", "queue": "contacts", "url": "https://crm.example/x", "paused": True}
    )
    attempts = [
        Attempt(ident.tenant, "billing", "msg_a", 1, T0, 503, 1200, "retry", "503: busy"),
        Attempt(
            ident.tenant,
            "billing",
            "msg_a",
            2,
            T0 + dt.timedelta(seconds=2),
            204,
            35,
            "delivered",
            None,
        ),
        Attempt(
            ident.tenant,
            "billing",
            "msg_b",
            3,
            T0 + dt.timedelta(seconds=9),
            None,
            10_000,
            "dead",
            "timeout after 10000 ms",
        ),
    ]
    await queen.webhook_attempts_record(attempts, 100)
    await page.open("#/webhooks")
    assert await page.wait_text(row("billing", "queue"), "invoices")
    assert await page.texts("#webhooks-table tbody tr td.name") == ["billing", "crm"]
    assert await page.wait_text(row("billing", "state"), "active")
    assert await page.wait_text(row("crm", "state"), "paused")
    assert await page.wait_text(row("billing", "secrets"), "2")
    assert await page.wait_text(row("billing", "limits"), "2 in flight, 2.5/s")
    assert await page.wait_text(row("crm", "limits"), "8 in flight, no rate cap")
    assert await page.texts('#webhooks-table tr[data-target="crm"] .resume') == ["Resume…"]
    # A shared link opens the target's detail.
    await page.open("#/webhooks?target=billing")
    await page.wait_css("#webhook-attempts")
    cells = await page.js(
        "return [...document.querySelectorAll('#webhook-attempts tbody tr')].map((r) =>"
        " [...r.querySelectorAll('td')].slice(1).map((c) => c.textContent))"
    )
    assert cells == [
        ["msg_b", "3", NONE, "10,000 ms", "dead", "timeout after 10000 ms"],
        ["msg_a", "2", "204", "35 ms", "delivered", ""],
        ["msg_a", "1", "503", "1,200 ms", "retry", "503: busy"],
    ]
    secrets = await page.wait_text("#webhook-detail", lambda t: made["secret"]["id"] in t)
    assert made["secret"]["value"] not in secrets
    await page.click("#webhook-close")
    await page.wait(lambda d: not d.find_element(By.ID, "webhook-detail").is_displayed())
    await page.open("#/webhooks?target=crm")
    await page.wait_css("#webhook-no-attempts")


async def test_pause_and_resume_keep_every_other_field(page, queen, ident, conn):
    await queen.webhook_target_set(
        ident,
        {
            "name": "orders",
            "queue": "orders-out",
            "url": "https://hooks.example.com/orders",
            "method": "PUT",
            "headers": {"X-Team": "shop", "Accept": "application/json"},
            "timeoutMs": 500,
            "maxAttempts": 3,
            "maxAgeMs": 60_000,
            "backoffMs": 50,
            "maxBackoffMs": 5000,
            "concurrency": 4,
            "ratePerS": 7.5,
        },
    )
    secrets = await _secret_ids(conn, "orders")
    before = await _stored(conn, "orders")
    await page.open("#/webhooks")
    await page.click(f"{row('orders', 'actions')} .pause")
    extra = "Queue orders-out → https://hooks.example.com/orders"
    assert await page.wait_text("#confirm-extra", extra)
    said = await page.confirm("Pause webhook target “orders”?")
    assert "wait in the queue" in said
    await page.wait_text("#webhooks-status", "paused: orders")
    await page.wait_text(row("orders", "state"), "paused")
    paused = await _stored(conn, "orders")
    assert paused["paused"] is True
    same = ("paused", "updated_at")
    assert {k: v for k, v in paused.items() if k not in same} == {
        k: v for k, v in before.items() if k not in same
    }
    assert await _secret_ids(conn, "orders") == secrets
    await page.click(f"{row('orders', 'actions')} .resume")
    await page.confirm("Resume webhook target “orders”?")
    await page.wait_text("#webhooks-status", "resumed: orders")
    resumed = await _stored(conn, "orders")
    assert {k: v for k, v in resumed.items() if k != "updated_at"} == {
        k: v for k, v in before.items() if k != "updated_at"
    }
    assert await _secret_ids(conn, "orders") == secrets


async def test_pause_keeps_a_header_the_view_redacts(page, queen, ident, conn):
    await queen.webhook_target_set(
        ident,
        {
            "name": "crm",
            "queue": "contacts",
            "url": "https://crm.example/in",
            "headers": {"Authorization": "Bearer real", "X-Api-Key": "k-123"},
        },
    )
    await page.open("#/webhooks?target=crm")
    await page.wait_text("#webhook-headers", lambda t: "Authorization: ***" in t)
    await page.click("#webhook-detail .pause")
    await page.confirm("Pause webhook target “crm”?")
    await page.wait_text("#webhooks-status", "paused: crm")
    await page.wait_text(row("crm", "state"), "paused")
    stored = await _stored(conn, "crm")
    assert stored["paused"] is True
    assert stored["headers"] == {"Authorization": "Bearer real", "X-Api-Key": "k-123"}
    # A pause dismissed in the dialog changes nothing.
    await page.click(f"{row('crm', 'actions')} .resume")
    await page.wait_css("dialog#confirm[open]")
    await page.click("#confirm-cancel")
    await page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "dialog#confirm[open]"))
    assert (await _stored(conn, "crm"))["paused"] is True


async def test_delete_asks_first_and_the_queue_stays(page, queen, ident, conn):
    await queen.webhook_target_set(
        ident, {"name": "gone", "queue": "g", "url": "https://hooks.example.com/g"}
    )
    await queen.push(ident, [{"queue": "g", "payload": {"n": 1}}])
    await page.open("#/webhooks?target=gone")
    await page.wait_css("#webhook-no-attempts")
    await page.click(f"{row('gone', 'actions')} .delete")
    await page.wait_css("dialog#confirm[open]")
    await page.click("#confirm-cancel")
    await page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "dialog#confirm[open]"))
    assert await conn.fetchval("SELECT count(*) FROM queen.webhook_targets") == 1
    await page.click(f"{row('gone', 'actions')} .delete")
    said = await page.confirm("Delete webhook target “gone”?")
    assert "signing secrets" in said
    await page.wait_text("#webhooks-status", "deleted: gone")
    await page.wait_css("#webhooks-empty")
    assert await page.js("return document.getElementById('webhook-detail').hidden") is True
    assert await conn.fetchval("SELECT count(*) FROM queen.webhook_targets") == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.webhook_secrets") == 0
    got = await queen.pop(ident, "g", batch=10)
    assert [m["data"] for m in got["messages"]] == [{"n": 1}]


async def test_a_failed_delivery_is_replayed_from_the_dead_letters_link(page, queen, ident):
    await queen.webhook_target_set(
        ident, {"name": "hooks", "queue": "hq", "url": "https://hooks.example.com/h"}
    )
    # A dead letter as the delivery writes it (the error names the target and the webhook id).
    await queen.push(ident, [{"queue": "hq", "payload": {"order": 7}}])
    m = (await queen.pop(ident, "hq", batch=1, now=T0))["messages"][0]
    error = f"webhook hooks msg_{m['id']} attempt 3 (exhausted): 503 {HOSTILE}"
    ack = {
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "leaseId": m["leaseId"],
        "status": "dlq",
        "error": error,
    }
    assert (await queen.ack(ident, [ack], now=T0))[0]["dlq"] is True
    await page.open("#/webhooks")
    await page.click(f"{row('hooks', 'actions')} a.dlq")
    await page.wait_text("#dlq-total", "1 dead letter in the window")
    assert "queue=hq" in await page.js("return window.location.hash")
    assert await page.texts("#dlq-table td.lasterror") == [error]
    await page.click("#dlq-table input.pick")
    await page.click("#dlq-replay-push")
    await page.confirm(lambda t: t.startswith("Replay 1 into"))
    await page.wait_text("#dlq-status", "Pushed again: replayed 1")
    got = await queen.pop(ident, "hq", batch=10)
    assert [x["data"] for x in got["messages"]] == [{"order": 7}]
    await _no_markup_ran(page)


async def test_the_nav_names_the_view(page):
    await page.open("#/overview")
    await page.click('#nav a[data-view="webhooks"]')
    await page.wait_css("#webhooks-empty")
    assert await page.js("return document.querySelector('#nav a.active').dataset.view") == (
        "webhooks"
    )
