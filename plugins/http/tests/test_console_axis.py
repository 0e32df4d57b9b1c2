"""Unit tests of the chart's axis arithmetic (console_static/axis.js): the y-axis's integer
ticks and the time axis's round instants, as pure functions. They run in the same Chromium as
the browser tests (the module is imported by the page, nothing else of it is used); the
browser's own zone plays no part, since the zone's offset is an argument."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from console_browser import Console, find_chromium, start_driver

from queen_http import HttpTransport
from queen_http.testing import http_settings

BINARIES = find_chromium()
pytestmark = pytest.mark.skipif(
    BINARIES is None,
    reason="no chromium and chromedriver (apt-get install chromium chromium-driver; .ci/run "
    "installs them)",
)

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


@pytest.fixture(scope="module")
def driver():
    assert BINARIES is not None
    d = start_driver(*BINARIES)
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture
async def axis(queen, driver) -> AsyncIterator[Any]:
    """Call axis.js's functions in the page: `await axis("countTicks", [args], ...)` runs the
    function once per argument list, in one round trip, and answers the results in order."""
    t = HttpTransport(http_settings())
    await t.start(queen)
    try:
        c = Console(driver, t.url)
        await c.open("#/overview")

        async def call(name: str, *calls: list[Any]) -> list[Any]:
            script = (
                "const done = arguments[arguments.length - 1];"
                "import('/console/axis.js').then((m) =>"
                " done(arguments[1].map((a) => m[arguments[0]](...a))));"
            )
            found: list[Any] = await c.run(c.d.execute_async_script, script, name, list(calls))
            return found

        yield call
    finally:
        await t.stop()


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


# -- the y-axis ----------------------------------------------------------------------------------
async def test_small_counts_get_every_integer_once(axis):
    got = await axis("countTicks", [0], [1], [2], [3], [4], [5], [7], [9], [23], [1000])
    ticks = [g["ticks"] for g in got]
    assert ticks == [
        [0, 1],
        [0, 1],
        [0, 1, 2],
        [0, 1, 2, 3],
        [0, 1, 2, 3, 4],
        [0, 2, 4, 6],
        [0, 2, 4, 6, 8],
        [0, 5, 10],
        [0, 10, 20, 30],
        [0, 500, 1000],
    ]
    assert [g["top"] for g in got] == [t[-1] for t in ticks]


async def test_count_ticks_hold_for_every_max_up_to_5000(axis):
    maxes = list(range(0, 5001))
    got = await axis("countTicks", *([m] for m in maxes))
    for m, g in zip(maxes, got, strict=True):
        ticks, top, step = g["ticks"], g["top"], g["step"]
        assert all(isinstance(v, int) for v in ticks), (m, ticks)
        assert ticks[0] == 0 and ticks[-1] == top >= m, (m, g)
        assert len(set(ticks)) == len(ticks) and ticks == sorted(ticks), (m, ticks)
        assert all(b - a == step for a, b in zip(ticks, ticks[1:], strict=False)), (m, ticks)
        assert 2 <= len(ticks) <= 5, (m, ticks)  # at most 4 steps
        assert str(step).lstrip("0")[0] in "125" and set(str(step)[1:]) <= {"0"}, (m, step)
        assert m == 0 or top < 2 * m + 2, (m, top)  # the scale never wastes half the plot


async def test_a_count_ticks_top_makes_bars_proportional(axis):
    # The chart draws a bar of n at n / top of the plot: with one top for every bar, 3 is
    # three times 1, whatever the top.
    [g] = await axis("countTicks", [3])
    assert (3 / g["top"]) == 3 * (1 / g["top"])
    assert g["top"] == 3


# -- the time axis -------------------------------------------------------------------------------
def _check(g: dict, start: int, end: int, most: int, offset: int) -> None:
    ats = [t["at"] for t in g["ticks"]]
    assert len(ats) <= most, g
    assert all(start <= a <= end for a in ats), g
    assert all(b - a == g["step"] for a, b in zip(ats, ats[1:], strict=False)), g
    assert all((a + offset) % g["step"] == 0 for a in ats), g  # round in local time


async def test_a_minute_gets_seconds(axis):
    start = ms("2030-01-01T12:00:00+00:00")
    [g] = await axis("timeTicks", [start, start + MINUTE, 10, 0])
    assert (g["kind"], g["step"]) == ("seconds", 10 * SECOND)
    assert [t["at"] - start for t in g["ticks"]] == [i * 10 * SECOND for i in range(7)]
    _check(g, start, start + MINUTE, 10, 0)


async def test_an_hour_gets_ten_minute_ticks_on_the_round_minutes(axis):
    start = ms("2030-01-01T12:03:27+00:00")
    [g] = await axis("timeTicks", [start, start + HOUR, 10, 0])
    assert (g["kind"], g["step"]) == ("minutes", 10 * MINUTE)
    at = [dt.datetime.fromtimestamp(t["at"] / 1000, dt.UTC) for t in g["ticks"]]
    labels = [a.strftime("%H:%M") for a in at]
    assert labels == ["12:10", "12:20", "12:30", "12:40", "12:50", "13:00"]


async def test_a_day_gets_hourly_ticks_in_local_time_and_names_midnight(axis):
    # India is 5 h 30 min east of UTC: ticks fall on its round hours, not UTC's.
    offset = 5 * HOUR + 30 * MINUTE
    start = ms("2030-01-01T07:47:00+00:00")  # 13:17 local
    [g] = await axis("timeTicks", [start, start + DAY, 10, offset])
    assert (g["kind"], g["step"]) == ("minutes", 3 * HOUR)
    local = [
        dt.datetime.fromtimestamp((t["at"] + offset) / 1000, dt.UTC).strftime("%H:%M")
        for t in g["ticks"]
    ]
    assert local == ["15:00", "18:00", "21:00", "00:00", "03:00", "06:00", "09:00", "12:00"]
    assert [t["midnight"] for t in g["ticks"]] == [False, False, False, True] + [False] * 4
    _check(g, start, start + DAY, 10, offset)


async def test_ninety_days_get_dates_at_local_midnight(axis):
    offset = -5 * HOUR
    start = ms("2030-01-01T10:00:00+00:00")
    [g] = await axis("timeTicks", [start, start + 90 * DAY, 10, offset])
    assert (g["kind"], g["step"]) == ("days", 14 * DAY)
    assert 5 <= len(g["ticks"]) <= 10
    _check(g, start, start + 90 * DAY, 10, offset)
    assert not any(t["midnight"] for t in g["ticks"])  # a date label says the day already


async def test_time_ticks_hold_for_any_span_and_zone(axis):
    rng = random.Random(29)
    cases = []
    for _ in range(400):
        start = ms("2030-01-01T00:00:00+00:00") + rng.randrange(0, 365 * DAY)
        span = rng.choice([SECOND, MINUTE, HOUR, DAY, 90 * DAY]) * rng.uniform(0.2, 3)
        offset = rng.choice([0, 3600, -18000, 19800, 45900]) * SECOND
        most = rng.choice([4, 6, 8, 10, 12])
        cases.append([start, start + int(span), most, offset])
    got = await axis("timeTicks", *cases)
    for (start, end, most, offset), g in zip(cases, got, strict=True):
        _check(g, start, end, most, offset)
        # Past the smallest step, the next smaller one labelled more than `most`, and no step
        # is over 2.5 times the one before: so at least most / 2.5 ticks, rounded down.
        if g["step"] > SECOND:
            assert len(g["ticks"]) >= most // 3, (start, end, most, g)
        expect = "seconds" if g["step"] < MINUTE else "minutes" if g["step"] < DAY else "days"
        assert g["kind"] == expect


async def test_an_empty_span_has_no_ticks(axis):
    start = ms("2030-01-01T00:00:00+00:00")
    got = await axis("timeTicks", [start, start, 10, 0], [start, start - 1, 10, 0])
    assert [g["ticks"] for g in got] == [[], []]
