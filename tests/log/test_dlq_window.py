"""The dead-letter listing's window on failedAt (Queen.dlq from_ / to, client-wire §9)."""

from __future__ import annotations

import datetime as dt

import pytest

from queen_timers.errors import QueenError

from .helpers import acks_for

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


async def _dead_letters(queen, ident, partitions=("a", "b", "a")) -> None:
    for n, part in enumerate(partitions, 1):  # failed at T0 + 1 h, + 2 h, ...
        await queen.push(ident, [{"queue": "q", "partition": part, "payload": {"n": n}}])
        r = await queen.pop(ident, "q", partition=part, batch=1, now=_at(n))
        res = await queen.ack(ident, [{**acks_for(r)[0], "status": "dlq"}], now=_at(n))
        assert res[0]["dlq"] is True


def _ns(page: dict) -> list[int]:
    return [m["data"]["n"] for m in page["messages"]]


async def test_the_window_is_inclusive_and_counts_in_total(queen, ident):
    await _dead_letters(queen, ident)
    page = await queen.dlq(ident, queue="q", from_=_at(2), to=_at(3))
    assert (_ns(page), page["total"]) == ([3, 2], 2)
    page = await queen.dlq(ident, queue="q", from_=_at(1.5))
    assert (_ns(page), page["total"]) == ([3, 2], 2)
    page = await queen.dlq(ident, queue="q", to=_at(1))
    assert (_ns(page), page["total"]) == ([1], 1)
    page = await queen.dlq(ident, queue="q", partition="a", from_=_at(1), limit=1, offset=1)
    assert (_ns(page), page["total"]) == ([1], 2)
    other_zone = dt.timezone(dt.timedelta(hours=-5))
    page = await queen.dlq(
        ident, queue="q", from_=_at(2).astimezone(other_zone), to=_at(2).astimezone(other_zone)
    )
    assert _ns(page) == [2]
    assert (await queen.dlq(ident, queue="q", from_=_at(4)))["total"] == 0


@pytest.mark.parametrize(
    "kw, reason",
    [
        ({"from_": "2030-01-01T00:00:00Z"}, "dlq_bad_from"),
        ({"from_": dt.datetime(2030, 1, 1)}, "dlq_bad_from"),  # no offset: ambiguous
        ({"to": 1893456000}, "dlq_bad_to"),
        ({"from_": _at(2), "to": _at(1)}, "dlq_bad_range"),
    ],
)
async def test_bad_windows_are_refused(queen, ident, kw, reason):
    with pytest.raises(QueenError) as ei:
        await queen.dlq(ident, queue="q", **kw)
    assert (ei.value.code, ei.value.reason, ei.value.status) == ("bad_request", reason, 400)
