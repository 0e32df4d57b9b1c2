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
import datetime as dt
import json
import re
import uuid
from collections.abc import AsyncIterator

import jwt
import pytest
from console_browser import By, Console, find_chromium, start_driver

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.identity import Identity
from queen_timers.service import Queen
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
HOUR = 60 * MIN
DAY = 24 * HOUR
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


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
    # A key with a ".." segment cannot travel in a URL path (the browser folds it): the
    # console cancels it through the JSON route instead.
    dots = "x/../y"
    await schedule(queen, ident, [op("c", k, 30 * MIN) for k in ("keep", "drop", dots)])
    await page.open("#/queue?name=c")
    await wait_keys(page, ["drop", "keep", dots])
    await page.click('#timers-table tr[data-key="drop"] .cancel')
    said = await page.confirm("Cancel this timer?")
    assert "drop" in said
    await page.wait_text("#action-status", "cancelled: drop")
    await wait_keys(page, ["keep", dots])
    await page.click('#timers-table tr[data-key="x/../y"] .cancel')
    await page.confirm("Cancel this timer?")
    await page.wait_text("#action-status", f"cancelled: {dots}")
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


async def dead_letters(queen, ident, queue: str, hours: list[int]) -> None:
    """One dead letter of `queue` per entry, failed at 2030-01-01 plus that many hours."""
    for n in hours:
        at = T0 + dt.timedelta(hours=n)
        await queen.push(ident, [{"queue": queue, "payload": {"n": n, "html": HOSTILE}}])
        got = await queen.pop(ident, queue, batch=1, now=at)
        m = got["messages"][0]
        ack = {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "leaseId": m["leaseId"],
            "status": "dlq",
            "error": f"poison {n} {HOSTILE}",
        }
        assert (await queen.ack(ident, [ack], now=at))[0]["dlq"] is True


async def test_dead_letters_in_a_time_window_with_their_detail(page, queen, ident):
    await dead_letters(queen, ident, "dq", [1, 2, 3])
    await page.open("#/dlq?queue=dq")
    await page.wait_text("#dlq-total", "3 dead letters in the window")
    # A shared link carries the window: failures from 01:30 to 02:30 UTC.
    window = "from=2030-01-01T01%3A30%3A00Z&to=2030-01-01T02%3A30%3A00Z"
    await page.open(f"#/dlq?queue=dq&{window}")
    await page.wait_text("#dlq-total", "1 dead letter in the window")
    errors = await page.texts("#dlq-table td.lasterror")
    assert errors == [f"poison 2 {HOSTILE}"]
    await page.click("#dlq-table .detail")
    shown = await page.wait_text("#dlq-payload", lambda t: '"n": 2' in t)
    assert json.loads(shown) == {"n": 2, "html": HOSTILE}
    assert await page.js("return document.querySelectorAll('img').length") == 0


# -- views on the routes of the queues overview, histogram, fire and bulk cancel -----------------
async def test_the_overview_lists_a_seeded_queue_with_its_counts(page, queen, ident):
    ops = [op("ov", f"late:{i}", d) for i, d in enumerate((-10 * MIN, -5 * MIN))]
    ops += [op("ov", f"hour:{i}", 30 * MIN + i * MIN) for i in range(3)]
    ops += [op("ov", f"day:{i}", 5 * HOUR + i * MIN) for i in range(4)]
    ops += [op("ov", "far", 10 * DAY)]
    await schedule(queen, ident, ops)
    await schedule(queen, ident, [op("other", "x", HOUR * 2)])
    await dead_letters(queen, ident, "ov", [1])
    await page.open("#/overview")
    row = 'tr[data-queue="ov"] [data-field="{}"]'.format
    await page.wait_text(row("pending"), "10")
    expect = {
        "dueNextMinute": "0",  # due in [now, now + 1 min): the overdue ones are counted apart
        "dueNextHour": "3",
        "dueNextDay": "7",
        "overdue": "2",
        "backingOff": "0",
        "claimed": "0",
        "deadLetters": "1",
    }
    for field, value in expect.items():
        assert await page.wait_text(row(field), value), field
    late = await page.wait_text(row("oldestOverdue"), lambda t: t.endswith("late"))
    assert late.startswith("10 min"), late
    await page.wait_text('tr[data-queue="other"] [data-field="pending"]', "1")
    await page.wait_text('#cluster [data-field="pending"]', "11")
    await page.wait_text('#cluster [data-field="brokersAlive"]', lambda t: int(t) >= 1)
    # The queue's name opens its timers.
    await page.click('tr[data-queue="ov"] th a')
    await wait_keys(
        page,
        [
            "day:0",
            "day:1",
            "day:2",
            "day:3",
            "far",
            "hour:0",
            "hour:1",
            "hour:2",
            "late:0",
            "late:1",
        ],
    )


async def test_the_prefix_filter_counts_exactly_and_is_a_shareable_link(page, queen, ident):
    keys = [f"a:{i}" for i in range(1, 8)] + ["b:1", "b:2", "b:3/x"]
    await schedule(queen, ident, [op("pf", k, (i + 1) * MIN) for i, k in enumerate(keys)])
    await page.open("#/queue?name=pf&size=3")
    await wait_keys(page, keys[0:3])
    await page.type("#prefix", "b:")
    await page.click("#queue-form button[type=submit]")
    await wait_keys(page, ["b:1", "b:2", "b:3/x"])
    assert await page.wait_text("#count", "3 timers with keys starting with b:")
    link = await page.js("return window.location.hash")
    assert "prefix=b%3A" in link and "name=pf" in link
    await page.open("#/queue?name=pf&prefix=a%3A&size=3")
    await page.wait_text("#count", "7 timers with keys starting with a:")
    await wait_keys(page, keys[0:3])
    await page.click("#next-page")
    await wait_keys(page, keys[3:6])
    await page.click("#next-page")
    await wait_keys(page, keys[6:7])


async def test_bulk_cancel_by_prefix_in_batches(page, queen, ident, conn):
    doomed = [op("bulk", f"job:{i:05}", HOUR) for i in range(2100)]
    await schedule(queen, ident, doomed + [op("bulk", f"keep:{i}", HOUR) for i in range(3)])
    await page.open("#/queue?name=bulk&prefix=job%3A")
    await page.wait_text("#count", "2,100 timers with keys starting with job:")
    await page.click("#bulk-cancel")
    said = await page.confirm("Cancel 2,100 timers?")
    assert "job:" in said and "2,100" in said
    await page.wait_text(
        "#bulk-status", "Done in 3 batches: cancelled 2,100, absent 0, too_late 0."
    )
    left = await conn.fetch("SELECT timer_key FROM queen.log_timers ORDER BY timer_key")
    assert [r["timer_key"] for r in left] == ["keep:0", "keep:1", "keep:2"]
    await page.wait_css("#no-timers")


def _expected_buckets(starts: list[str], bucket_ms: int, due: list[dt.datetime]) -> list[int]:
    edges = [dt.datetime.fromisoformat(s.replace("Z", "+00:00")) for s in starts]
    width = dt.timedelta(milliseconds=bucket_ms)
    counts = [0] * len(edges)
    for t in due:
        for i, start in enumerate(edges):
            if start <= t < start + width:
                counts[i] += 1
    return counts


_BARS_JS = """
const svg = document.getElementById('histogram-svg');
const edge = (n) => Number(svg.querySelector(`rect.bar[data-bucket="${n}"]`).dataset.count);
const inner = [...svg.querySelectorAll('rect.bar')].filter((b) => b.dataset.start);
return [
  {overdue: edge('overdue'), later: edge('later'), bucketMs: Number(svg.dataset.bucketMs)},
  inner.map((b) => b.dataset.start),
  inner.map((b) => Number(b.dataset.count)),
];
"""


async def _bars(c: Console) -> tuple[dict, list[str], list[int]]:
    return await c.js(_BARS_JS)


async def test_the_histogram_puts_seeded_due_times_in_their_buckets(page, queen, ident, conn):
    delays = [-20 * MIN, -MIN, 10 * MIN, 10 * MIN + 1000, 25 * MIN, 40 * MIN, 3 * HOUR, 30 * DAY]
    await schedule(queen, ident, [op("h", f"k{i}", d) for i, d in enumerate(delays)])
    due = [r["deliver_at"] for r in await conn.fetch("SELECT deliver_at FROM queen.log_timers")]
    await page.open("#/queue?name=h&window=hour")
    await page.wait_css('#histogram-svg[data-window="hour"]')
    meta, starts, counts = await _bars(page)
    assert (meta["overdue"], meta["later"], sum(counts)) == (2, 2, 4)
    assert counts == _expected_buckets(starts, meta["bucketMs"], due)
    summary = await page.wait_text("#histogram-summary", lambda t: "overdue" in t)
    assert summary.startswith("2 overdue")
    await page.click('[data-window="90d"]')
    await page.wait_css('#histogram-svg[data-window="90d"]')
    meta, starts, counts = await _bars(page)
    assert (meta["overdue"], meta["later"], sum(counts)) == (2, 0, 6)
    assert counts == _expected_buckets(starts, meta["bucketMs"], due)
    assert "window=90d" in await page.js("return window.location.hash")


async def test_fire_now_reaches_the_database_and_the_queue(page, queen, ident, conn, db_url):
    await schedule(
        queen, ident, [op("f", "soon", 2 * HOUR, {"fired": True}), op("f", "stay", HOUR)]
    )
    before = await conn.fetchrow(
        "SELECT message_id, txn, deliver_at FROM queen.log_timers WHERE timer_key = 'soon'"
    )
    await page.open("#/queue?name=f")
    await wait_keys(page, ["soon", "stay"])
    await page.click('#timers-table tr[data-key="soon"] .fire')
    said = await page.confirm("Fire this timer now?")
    assert "message id and txn" in said
    await page.wait_text("#action-status", "rescheduled: soon")
    after = await conn.fetchrow(
        "SELECT message_id, txn, deliver_at <= now() AS due FROM queen.log_timers"
        " WHERE timer_key = 'soon'"
    )
    # Due at once, with the message id and txn it was scheduled with (this broker runs no
    # sweeper, so the row waits for one).
    assert (after["message_id"], after["txn"], after["due"]) == (
        before["message_id"],
        before["txn"],
        True,
    )
    # A broker with a sweeper delivers it; the long-poll returns when it lands.
    async with Queen(database_url=db_url, retention_interval_ms=0, encryption_key="11" * 32) as q:
        got = await q.pop(ident, "f", batch=10, wait=True, timeout_ms=30_000)
    assert [m["transactionId"] for m in got["messages"]] == [before["txn"]]
    assert got["messages"][0]["id"] == str(before["message_id"])
    assert got["messages"][0]["data"] == {"fired": True}
    left = await conn.fetch("SELECT timer_key FROM queen.log_timers")
    assert [r["timer_key"] for r in left] == ["stay"]


async def test_dead_letters_replay_and_delete(page, queen, ident, conn):
    await dead_letters(queen, ident, "dr", [1, 2, 3])
    await page.open("#/dlq?queue=dr")
    await page.wait_text("#dlq-total", "3 dead letters in the window")
    rows = await page.js(
        "return [...document.querySelectorAll('#dlq-table tbody tr')].map((r) => r.dataset.txn)"
    )
    newest, middle, oldest = rows  # newest first
    # Push the newest back into the queue.
    await page.click(f'#dlq-table tr[data-txn="{newest}"] input.pick')
    await page.click("#dlq-replay-push")
    await page.confirm(lambda t: t.startswith("Replay 1 into"))
    await page.wait_text("#dlq-status", "Pushed again: replayed 1")
    got = await queen.pop(ident, "dr", batch=10)
    assert [m["data"]["n"] for m in got["messages"]] == [3]  # a replay is a new message
    # Schedule the middle one again as a timer, a minute out.
    await page.click(f'#dlq-table tr[data-txn="{middle}"] input.pick')
    await page.click("#dlq-replay-schedule")
    await page.wait_css("dialog#confirm[open]")
    await page.type("#dlq-delay", "60")
    await page.confirm("Schedule 1 again?")
    await page.wait_text("#dlq-status", "Scheduled again: replayed 1")
    timers = await conn.fetch(
        "SELECT queue, payload, deliver_at > now() AS later FROM queen.log_timers"
    )
    assert [(r["queue"], json.loads(r["payload"])["n"], r["later"]) for r in timers] == [
        ("dr", 2, True)
    ]
    # Delete the oldest.
    await page.click(f'#dlq-table tr[data-txn="{oldest}"] input.pick')
    await page.click("#dlq-delete")
    await page.confirm("Delete 1 dead letter?")
    await page.wait_text("#dlq-status", "Deleted: deleted 1")
    left = await conn.fetch("SELECT transaction_id FROM queen.log_dlq ORDER BY failed_at")
    assert oldest not in [r["transaction_id"] for r in left]


# -- a timer backing off after a failed fire, beside one a broker holds -------------------------
# What the peek shows for a field with no value (an en dash).
NONE = "\u2013"
# The error a failed fire left, hostile: it must show as the characters it is, never as markup.
BOOM = "permanent: <script>window.__xss=3</script><img src=x onerror=window.__xss=4> &amp; <b>"


async def backing_off_and_claimed(queen, ident, conn, queue: str, backing: list[str]) -> None:
    """A waiting timer `w`, the `backing` timers backing off (a fire failed twice: due a minute
    ago, retried in 20 min) and a timer `c` a broker holds, as
    tests/timers/test_console_ops.py::test_states_backing_off_and_claimed puts them. The claim
    lasts 20 min, not a fire's 30 s: a slow machine must not see it expire mid-test (cancel
    would then succeed). This broker runs no sweeper: nothing moves them while the test looks."""
    await schedule(queen, ident, [op(queue, k, HOUR) for k in ["w", "c", *backing]])
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute', attempts = 2,"
        " last_error = $1, claimed_until = now() + interval '20 minutes'"
        " WHERE queue = $2 AND timer_key = ANY($3)",
        BOOM,
        queue,
        backing,
    )
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute',"
        " claim_token = gen_random_uuid(), claimed_until = now() + interval '20 minutes'"
        " WHERE queue = $1 AND timer_key = 'c'",
        queue,
    )


_ROWS_JS = """
return [...document.querySelectorAll('#timers-table tbody tr')].map((tr) => {
  const cells = [...tr.children].map((td) => td.textContent);
  const rel = tr.querySelector('td.due .rel');
  return {key: tr.dataset.key, state: tr.dataset.state, pill: cells[2], attempts: cells[3],
          lastError: cells[4], errorNodes: tr.querySelector('td.lasterror').childElementCount,
          rel: rel.textContent, relAt: rel.dataset.at, dueClass: tr.children[1].className};
});
"""

_PEEK_JS = """
const out = {};
for (const dt of document.querySelectorAll('#peek dl dt')) out[dt.textContent] =
  dt.nextElementSibling.textContent;
return out;
"""


def _minutes_to_retry(text: str) -> int:
    """The whole minutes of "retry in 19 min 58 s" (or "retry in 20 min")."""
    m = re.fullmatch(r"retry in (\d+) min( \d+ s)?", text)
    assert m, text
    return int(m.group(1))


async def _no_markup_ran(c: Console) -> None:
    assert await c.js("return document.querySelectorAll('img, b, main script').length") == 0
    assert await c.js("return window.__xss === undefined") is True


async def test_a_backing_off_row_shows_its_state_attempts_and_error_as_text(
    page, queen, ident, conn
):
    await backing_off_and_claimed(queen, ident, conn, "bo", ["b"])
    await page.open("#/queue?name=bo")
    await wait_keys(page, ["b", "c", "w"])
    rows = {r["key"]: r for r in await page.js(_ROWS_JS)}
    retry_at = (await queen.timer_peek(ident, "bo", "b"))["retryAt"]
    # Due a minute ago but waiting out its backoff: the row counts down to the service's
    # retryAt (20 min from the update), not up from deliverAt, and is not marked late.
    due = {k: rows["b"].pop(k) for k in ("rel", "relAt", "dueClass")}
    assert (due["relAt"], due["dueClass"]) == (retry_at, "due retry")
    assert _minutes_to_retry(due["rel"]) in range(10, 21), due["rel"]
    # The one a broker holds is late indeed (its fire is under way); w is due in an hour.
    assert (rows["c"]["dueClass"], rows["c"]["rel"].endswith(" late")) == ("due warn", True)
    assert (rows["w"]["dueClass"], rows["w"]["rel"].startswith("in ")) == ("due", True)
    assert rows["b"] == {
        "key": "b",
        "state": "backing_off",
        "pill": "backing off",
        "attempts": "2",
        "lastError": BOOM,
        "errorNodes": 0,  # one text node: no element came out of the error
    }
    assert (rows["c"]["state"], rows["c"]["pill"], rows["c"]["attempts"]) == (
        "claimed",
        "claimed",
        "0",
    )
    assert (rows["c"]["lastError"], rows["w"]["pill"]) == ("", "waiting")
    assert await page.texts('#timers-table tr[data-key="b"] td.lasterror') == [BOOM]
    # The queue's own cards count them too.
    await page.wait_text('#queue-summary [data-field="backingOff"]', "1")
    await page.wait_text('#queue-summary [data-field="claimed"]', "1")
    await page.wait_text('#queue-summary [data-field="overdue"]', "2")
    # Peek says the same as the row, from the service's peek.
    await page.click('#timers-table tr[data-key="b"] .peek')
    await page.wait_text("#peek-key", "b")
    fields = await page.js(_PEEK_JS)
    assert (fields["State"], fields["Attempts"], fields["Last error"]) == ("backing off", "2", BOOM)
    assert "late" not in fields["Due"] and "(" not in fields["Due"], fields["Due"]
    instant, _, rel = fields["Retry"].partition(" (")
    assert instant and _minutes_to_retry(rel.removesuffix(")")) in range(10, 21), fields["Retry"]
    assert (
        await page.js(
            "return document.querySelector('#peek dl').querySelectorAll('script, img').length"
        )
        == 0
    )
    await page.click('#timers-table tr[data-key="c"] .peek')
    await page.wait_text("#peek-key", "c")
    fields = await page.js(_PEEK_JS)
    assert (fields["State"], fields["Attempts"], fields["Last error"]) == ("claimed", "0", NONE)
    assert "Retry" not in fields and fields["Due"].endswith(" late)"), fields
    await _no_markup_ran(page)
    assert not [e for e in await page.console_errors() if "Content Security Policy" in e]


async def test_actions_on_backing_off_and_claimed_rows_answer_as_the_service(
    page, queen, ident, conn
):
    await backing_off_and_claimed(queen, ident, conn, "ba", ["b1", "b2"])
    held = await conn.fetchrow(
        "SELECT claim_token, claimed_until, deliver_at FROM queen.log_timers"
        " WHERE queue = 'ba' AND timer_key = 'c'"
    )
    await page.open("#/queue?name=ba")
    await wait_keys(page, ["b1", "b2", "c", "w"])
    # A broker is firing c: cancel is too late, and says so as a failure.
    await page.click('#timers-table tr[data-key="c"] .cancel')
    await page.confirm("Cancel this timer?")
    await page.wait_text("#action-status.error", "too_late: c")
    # Fire now on a backing-off timer clears the backoff: due now, waiting, its attempts and
    # last error kept (they count toward the dead-letter limit).
    await page.click('#timers-table tr[data-key="b1"] .fire')
    await page.confirm("Fire this timer now?")
    await page.wait_text("#action-status.ok", "rescheduled: b1")
    await page.wait_css('#timers-table tr[data-key="b1"][data-state="waiting"]')
    rows = {r["key"]: r for r in await page.js(_ROWS_JS)}
    assert (rows["b1"]["pill"], rows["b1"]["attempts"], rows["b1"]["lastError"]) == (
        "waiting",
        "2",
        BOOM,
    )
    # A backing-off timer is not held by a broker: cancel removes it.
    await page.click('#timers-table tr[data-key="b2"] .cancel')
    await page.confirm("Cancel this timer?")
    await page.wait_text("#action-status.ok", "cancelled: b2")
    await wait_keys(page, ["b1", "c", "w"])
    # Fire now on the claimed one is too late as well.
    await page.click('#timers-table tr[data-key="c"] .fire')
    await page.confirm("Fire this timer now?")
    await page.wait_text("#action-status.error", "too_late: c")
    await page.wait_css('#timers-table tr[data-key="c"][data-state="claimed"]')
    await _no_markup_ran(page)
    left = {
        r["timer_key"]: r
        for r in await conn.fetch(
            "SELECT timer_key, attempts, last_error, claimed_until, claim_token, deliver_at,"
            " deliver_at <= now() AS due FROM queen.log_timers WHERE queue = 'ba'"
        )
    }
    assert sorted(left) == ["b1", "c", "w"]
    b1 = left["b1"]
    assert (b1["attempts"], b1["last_error"], b1["claimed_until"], b1["due"]) == (
        2,
        BOOM,
        None,
        True,
    )
    c = left["c"]
    assert (c["claim_token"], c["claimed_until"], c["deliver_at"]) == tuple(held)


async def test_the_overview_counts_a_backing_off_and_a_claimed_timer(page, queen, ident, conn):
    await backing_off_and_claimed(queen, ident, conn, "ob", ["b"])
    await schedule(queen, ident, [op("calm", "x", HOUR)])
    await page.open("#/overview")
    row = 'tr[data-queue="ob"] [data-field="{}"]'.format
    await page.wait_text(row("pending"), "3")
    for field, value in {"backingOff": "1", "claimed": "1", "overdue": "2"}.items():
        assert await page.wait_text(row(field), value), field
    calm = 'tr[data-queue="calm"] [data-field="{}"]'.format
    await page.wait_text(calm("backingOff"), "0")
    await page.wait_text(calm("claimed"), "0")
    # The backing-off count links to the queue, whose rows carry the last errors.
    await page.click(f"{row('backingOff')} a")
    await wait_keys(page, ["b", "c", "w"])
    assert await page.texts('#timers-table tr[data-key="b"] td.lasterror') == [BOOM]
    await _no_markup_ran(page)


# -- what one tab may cost the broker ------------------------------------------------------------
async def test_the_refresh_interval_has_a_floor_and_a_ceiling(page):
    """`?refresh=0.001` would make one tab send ~200 calls a second: the floor is 1 s. A huge
    N would overflow setInterval into a 1 ms delay: the ceiling is a day. 0 is still "never"."""
    await page.open("#/overview", refresh_s="0.001")  # type: ignore[arg-type]
    assert await page.js("return document.getElementById('live').dataset.seconds") == "1"
    await page.open("#/overview", refresh_s="1e12")  # type: ignore[arg-type]
    assert await page.js("return document.getElementById('live').dataset.seconds") == "86400"
    raws = [None, "0", "", "0.001", "0.5", "1", "7", "1e12", "abc", "-3", "Infinity"]
    parsed = await page.run(
        page.d.execute_async_script,
        "const done = arguments[arguments.length - 1];"
        "import('/console/refresh.js').then((m) => done(arguments[0].map(m.parseRefresh)));",
        raws,
    )
    assert parsed == [5, 0, 0, 1, 1, 1, 7, 86400, 5, 5, 5]


# -- keys that would hide what they are ----------------------------------------------------------
BIDI_KEY = "invoice-\u202egpj.exe\u2066-\x07\u200b9"
BIDI_SHOWN = "invoice-\\u202egpj.exe\\u2066-\\x07\\u200b9"


async def test_a_key_with_controls_and_bidi_overrides_is_shown_escaped(page, queen, ident, conn):
    """Every place the console shows a key writes its hidden characters as marked escapes (a
    span.esc a typed backslash cannot imitate), and every action still uses the key itself."""
    typed = BIDI_SHOWN  # a key that spells the escapes with real backslashes
    await schedule(queen, ident, [op("bidi", k, 30 * MIN) for k in (BIDI_KEY, typed)])
    await page.open("#/queue?name=bidi")

    def cells(d):
        return [
            (e.text, len(e.find_elements(By.CSS_SELECTOR, "span.esc")))
            for e in d.find_elements(By.CSS_SELECTOR, "#timers-table td.key")
        ]

    await page.wait(lambda d: len(cells(d)) == 2, "two rows")
    shown = sorted(await page.run(cells, page.d), key=lambda c: c[1])
    # the same letters on screen, told apart by the marks: none for the typed one
    assert shown == [(BIDI_SHOWN, 0), (BIDI_SHOWN, 4)]
    assert not any(ch in t for t, _ in shown for ch in "\u202e\u2066\x07\u200b")

    row = "#timers-table tr:has(td.key span.esc)"
    await page.click(f"{row} .peek")
    assert await page.wait_text("#peek-key", BIDI_SHOWN) == BIDI_SHOWN
    assert len(await page.js("return document.querySelectorAll('#peek-key span.esc')")) == 4

    await page.click(f"{row} .cancel")
    said = await page.confirm("Cancel this timer?")
    assert BIDI_SHOWN in said and "\u202e" not in said
    await page.wait_text("#action-status", f"cancelled: {BIDI_SHOWN}")
    keys = await conn.fetch("SELECT timer_key FROM queen.log_timers WHERE queue = 'bidi'")
    assert [r["timer_key"] for r in keys] == [typed]  # the action took the key itself


async def test_a_tenant_token_sees_no_broker_wide_fire(jwt_page, jwt_broker):
    """The broker fires every tenant's timers: its rate and lag are an admin's to see."""
    dash = "\u2013"  # what the console shows for no figure
    jwt_broker.rt.fire_window.record(40, [1500.0] * 40)
    await jwt_page.open("#/overview")
    await jwt_page.set_token(token(admin=False, tenant=uuid.uuid4()))
    await jwt_page.wait_text('[data-field="brokersAlive"]', lambda t: t not in ("", dash))
    for field in ("firedPerSec", "fireLagP50", "fireLagP99"):
        assert await jwt_page.wait_text(f'[data-field="{field}"]', dash) == dash
    await jwt_page.set_token(token(admin=True))
    await jwt_page.wait_text('[data-field="fireLagP99"]', lambda t: t.endswith(" ms"))


async def test_the_schedules_view_shows_next_and_last_runs_and_acts(page, queen, ident, conn):
    from queen_timers.timers import fire

    await queen.schedule_set(
        ident,
        {
            "queue": "jobs",
            "scheduleKey": "report/daily",
            "cron": "0 9 * * *",
            "zone": "Europe/Paris",
            "payload": b64({"r": 1}),
        },
        now=T0,
    )
    # one occurrence fired 1.5 s late, so the ledger has a run to show
    assert (await fire.drain(queen.rt, now=T0 + dt.timedelta(hours=8, seconds=1.5))).fired == 1
    await page.open("#/schedules?queue=jobs&key=report/daily")
    await page.wait_text("#schedules-table tr td.key", "report/daily")
    await page.wait_text("#schedules-table tr td.state", "active")
    locals_ = await page.wait_text("#schedule-next tbody", lambda t: "09:00:00+01:00" in t)
    assert locals_.count("09:00:00+01:00") == 5
    runs = await page.wait_text("#schedule-runs tbody", lambda t: "fired" in t)
    assert "1,500 ms" in runs

    await page.click('#schedules-table tr[data-key="report/daily"] .pause')
    said = await page.confirm(lambda t: "report/daily" in t)
    assert "Pause" in said
    await page.wait_text("#schedules-status", "paused: report/daily")
    await page.wait_text("#schedules-table tr td.state", "paused")
    assert await conn.fetchval("SELECT paused FROM queen.schedules") is True
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0

    await page.click('#schedules-table tr[data-key="report/daily"] .resume')
    await page.confirm(lambda t: "Resume" in t)
    await page.wait_text("#schedules-table tr td.state", "active")
    await page.click('#schedules-table tr[data-key="report/daily"] .run')
    await page.confirm(lambda t: "Run now" in t)
    await page.wait_text("#schedules-status", lambda t: t.startswith("run now: report/daily"))
    keys = {r["timer_key"] for r in await conn.fetch("SELECT timer_key FROM queen.log_timers")}
    assert "schedule:next:report/daily" in keys and len(keys) == 2
    assert await page.console_errors() == []
