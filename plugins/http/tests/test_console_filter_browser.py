"""The console's Timers and Dead letters views in a real Chromium (issue 29): the prefix filter
drives the stat cards, the chart and the "Cancel all N" count; the chart's axes read true; the
queue is picked from a list; a timer's dead letter names its timer. Every user string (keys,
prefixes, errors) shows as text. Waits are DOM conditions (console_browser.WAIT_S); due times
sit minutes or hours from the clock, so no figure changes while a test looks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from console_browser import By, Console, find_chromium, start_driver
from test_console_browser import DAY, HOSTILE, HOUR, MIN, op, schedule, wait_keys

from queen_http import HttpTransport
from queen_http.testing import http_settings
from queen_timers.timers import store

BINARIES = find_chromium()
pytestmark = pytest.mark.skipif(
    BINARIES is None,
    reason="no chromium and chromedriver (apt-get install chromium chromium-driver; .ci/run "
    "installs them)",
)

# A prefix that is markup: every place it shows must show these characters.
PREFIX = "<img src=x onerror=window.__xss=5>:"


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
        await c.console_errors()
        yield c
    finally:
        await t.stop()


async def _no_markup_ran(c: Console) -> None:
    assert await c.js("return document.querySelectorAll('img, b, main script').length") == 0
    assert await c.js("return window.__xss === undefined") is True
    assert not [e for e in await c.console_errors() if "Content Security Policy" in e]


_CARDS_JS = """
const out = {};
for (const v of document.querySelectorAll('#queue-summary .value')) out[v.dataset.field] =
  Number(v.textContent.replace(/,/g, ''));
return out;
"""

_CHART_JS = """
const svg = document.getElementById('histogram-svg');
if (!svg) return null;
const bars = [...svg.querySelectorAll('rect.bar')];
const count = (b) => Number(b.dataset.count);
const edge = (n) => count(svg.querySelector(`rect.bar[data-bucket="${n}"]`));
return {
  prefix: svg.dataset.prefix, window: svg.dataset.window, top: Number(svg.dataset.top),
  total: bars.reduce((a, b) => a + count(b), 0), overdue: edge('overdue'), later: edge('later'),
  bars: bars.map((b) => [b.dataset.bucket, count(b), Number(b.getAttribute('height'))]),
  yticks: [...svg.querySelectorAll('text.ytick')].map((t) => t.textContent),
  xticks: [...svg.querySelectorAll('text.xtick')].map((t) => t.textContent),
};
"""


async def cards(c: Console, expect: dict[str, int]) -> dict[str, int]:
    def ready(d) -> dict | bool:
        got = d.execute_script(_CARDS_JS)
        return got if all(got.get(k) == v for k, v in expect.items()) else False

    found: dict[str, int] = await c.wait(ready, f"the stat cards to read {expect}")
    return found


async def chart(c: Console, **expect) -> dict:
    def ready(d) -> dict | bool:
        got = d.execute_script(_CHART_JS)
        return got if got and all(got.get(k) == v for k, v in expect.items()) else False

    found: dict = await c.wait(ready, f"the chart to show {expect}")
    return found


async def test_the_prefix_drives_the_cards_the_chart_and_the_cancel_count(page, queen, ident):
    # 9 keys of the prefix (2 overdue) among 23 (5 overdue): what the issue saw as
    # "Cancel all 9" beside "23 pending".
    mine = [op("pf", f"{PREFIX}{i}", d) for i, d in enumerate([-10 * MIN, -5 * MIN])]
    mine += [op("pf", f"{PREFIX}{i + 2}", 30 * MIN + i * HOUR) for i in range(7)]
    others = [op("pf", f"other:{i}", -20 * MIN) for i in range(3)]
    others += [op("pf", f"other:{i + 3}", 2 * HOUR + i * MIN) for i in range(11)]
    await schedule(queen, ident, mine + others)
    await page.open("#/queue?name=pf")
    await cards(page, {"pending": 23, "overdue": 5})
    await chart(page, total=23, overdue=5, prefix="")
    assert await page.js("return document.getElementById('bulk-cancel').hidden") is True

    await page.type("#prefix", PREFIX)
    await page.click("#queue-form button[type=submit]")
    await cards(page, {"pending": 9, "overdue": 2, "dueNextMinute": 0})
    c = await chart(page, total=9, overdue=2, prefix=PREFIX)
    assert c["later"] == 0  # all 9 inside the day
    await page.wait_text("#count", f"9 timers with keys starting with {PREFIX}")
    await page.wait_text("#bulk-cancel", "Cancel all 9…")
    await page.wait_text("#filter-line", lambda t: PREFIX in t)
    summary = await page.wait_text("#histogram-summary", lambda t: PREFIX in t)
    assert summary.startswith("2 overdue")
    await _no_markup_ran(page)

    # The window's buttons keep the filter.
    await page.click('[data-window="90d"]')
    await chart(page, window="90d", total=9, prefix=PREFIX)

    # Cancel all 9: the dialog names 9, and the cards and chart then agree on 0 of the prefix
    # while the 14 others stay.
    await page.click("#bulk-cancel")
    said = await page.confirm("Cancel 9 timers?")
    assert PREFIX in said
    await page.wait_text("#bulk-status", lambda t: t.startswith("Done") and "cancelled 9" in t)
    await cards(page, {"pending": 0, "overdue": 0})
    await chart(page, total=0, prefix=PREFIX)
    await page.type("#prefix", "")
    await page.click("#queue-form button[type=submit]")
    await cards(page, {"pending": 14, "overdue": 3})
    await chart(page, total=14, prefix="")
    assert await page.js("return document.getElementById('filter-line').hidden") is True
    await _no_markup_ran(page)


def _height(c: dict, bucket: str) -> float:
    return next(h for b, _, h in c["bars"] if b == bucket)


async def test_the_chart_axes_read_true_at_small_counts_and_every_window(page, queen, ident, conn):
    # Overdue 2, one bucket of 3 and one of 1 in the hour window.
    ops = [op("ax", f"late:{i}", -10 * MIN) for i in range(2)]
    ops += [op("ax", f"three:{i}", 20 * MIN) for i in range(3)]  # one instant, one bucket
    ops += [op("ax", "one", 40 * MIN + 30_000)]
    await schedule(queen, ident, ops)
    same = "SELECT count(DISTINCT deliver_at) FROM queen.log_timers WHERE timer_key LIKE 'three:%'"
    assert await conn.fetchval(same) == 1  # one batch, one clock: no bucket edge between them
    await page.open("#/queue?name=ax&window=hour")
    c = await chart(page, window="hour", total=6)
    assert c["yticks"] == ["0", "1", "2", "3"] and c["top"] == 3
    three = next(h for _, n, h in c["bars"] if n == 3)
    one = next(h for _, n, h in c["bars"] if n == 1)
    assert abs(three - 3 * one) < 0.01, (three, one)
    assert abs(_height(c, "overdue") - 2 * one) < 0.01  # the edge bars share the scale
    # An hour: ten-minute ticks, every label different.
    assert 5 <= len(c["xticks"]) <= 10 and len(set(c["xticks"])) == len(c["xticks"])

    await page.click('[data-window="day"]')
    c = await chart(page, window="day")
    # A day: ticks every few hours (8 or 9 of them), not three.
    assert 6 <= len(c["xticks"]) <= 10 and len(set(c["xticks"])) == len(c["xticks"]), c
    assert c["yticks"] == ["0", "1", "2", "3"]  # the 3 share the first half hour
    await page.click('[data-window="90d"]')
    c = await chart(page, window="90d")
    assert c["yticks"] == ["0", "1", "2", "3", "4"]  # all 4 due today
    assert 5 <= len(c["xticks"]) <= 10 and len(set(c["xticks"])) == len(c["xticks"]), c
    # Only integers, never repeated, whatever the counts.
    for labels in (c["yticks"],):
        assert len(set(labels)) == len(labels) and all(t.isdigit() for t in labels)


async def test_a_large_count_gets_round_ticks(page, queen, ident):
    await schedule(queen, ident, [op("big", f"k{i:04}", 30 * MIN) for i in range(1234)])
    await page.open("#/queue?name=big&window=hour")
    c = await chart(page, window="hour", total=1234)
    assert c["yticks"] == ["0", "500", "1,000", "1,500"]


async def test_the_queue_picker_lists_the_tenants_queues_and_takes_another(page, queen, ident):
    await schedule(queen, ident, [op("alpha", "a1", HOUR), op("beta", "b1", HOUR)])
    await schedule(queen, ident, [op("beta", "b2", DAY)])
    await page.open("#/queue")

    def options(d) -> list[str] | bool:
        got = [o.text for o in d.find_elements(By.CSS_SELECTOR, "#queue-name-pick option")]
        return got if "alpha" in got else False

    assert await page.wait(options) == ["pick a queue", "alpha", "beta", "Other…"]
    await page.run(
        lambda: page.d.find_element(
            By.CSS_SELECTOR, '#queue-name-pick option[value="beta"]'
        ).click()
    )
    await wait_keys(page, ["b1", "b2"])
    await page.wait_text("#queue-title", "Queue beta")
    assert "name=beta" in await page.js("return window.location.hash")
    await cards(page, {"pending": 2})
    # Other…: a name the list does not hold, typed.
    await page.run(
        lambda: page.d.find_element(
            By.XPATH, '//select[@id="queue-name-pick"]/option[.="Other…"]'
        ).click()
    )
    await page.type("#queue-name", "gamma")
    await page.click("#queue-form button[type=submit]")
    await page.wait_text("#queue-title", "Queue gamma")
    await page.wait_css("#queue-empty")
    picked = await page.js("return document.getElementById('queue-name-pick').value")
    assert picked == "gamma"
    # A shared link to a queue opens with it picked.
    await page.open("#/queue?name=alpha")
    await wait_keys(page, ["a1"])
    assert await page.js("return document.getElementById('queue-name-pick').value") == "alpha"


async def test_a_timers_dead_letter_shows_its_timer_key_as_text(page, queen, ident, conn):
    key = f"invoice/{HOSTILE}"
    await schedule(queen, ident, [op("dq", key, HOUR)])
    await conn.execute(
        "UPDATE queen.log_timers SET attempts = 5, last_error = $1 WHERE queue = 'dq'",
        f"permanent: {HOSTILE}",
    )
    res = await store.dlq(conn, [ident.tenant], ["dq"], [key], [{"k": 1}], 5, None)
    assert res == {"archived": 1, "skipped": 0}
    # A consumer's dead letter beside it names no timer.
    await queen.push(ident, [{"queue": "dq", "payload": {"n": 1}, "transactionId": "consumer"}])
    got = await queen.pop(ident, "dq", batch=1)
    m = got["messages"][0]
    ack = {k: m[k] for k in ("transactionId", "partitionId", "leaseId")}
    await queen.ack(ident, [{**ack, "status": "dlq", "error": "poison"}])

    await page.open("#/dlq")

    def listed(d) -> bool:
        opts = [o.text for o in d.find_elements(By.CSS_SELECTOR, "#dlq-queue-pick option")]
        return "dq" in opts

    await page.wait(listed, "dq in the queue picker")
    await page.run(
        lambda: page.d.find_element(By.CSS_SELECTOR, '#dlq-queue-pick option[value="dq"]').click()
    )
    await page.wait_text("#dlq-total", "2 dead letters in the window")
    rows = await page.js(
        "return [...document.querySelectorAll('#dlq-table tbody tr')].map((tr) =>"
        " [tr.dataset.txn, tr.querySelector('td.timer').textContent]);"
    )
    assert sorted(rows) == sorted([["txn-" + key, key], ["consumer", ""]])
    await page.click(f'#dlq-table tr[data-txn="txn-{key}"] .detail')
    assert await page.wait_text("#dlq-timer-key", key) == key
    await _no_markup_ran(page)
