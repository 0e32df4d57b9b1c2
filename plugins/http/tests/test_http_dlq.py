"""GET /api/v1/dlq with `from` / `to` (client-wire §9): a window on the instant each message
was dead-lettered (`failedAt`), both ends inclusive, ISO 8601 (no offset: UTC). A value that is
not such an instant, or a window that ends before it starts, is a 400 in the flat envelope."""

from __future__ import annotations

import datetime as dt

import pytest

UTC = dt.UTC
T0 = dt.datetime(2030, 1, 1, tzinfo=UTC)


def _at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def _iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


@pytest.fixture
async def dead_letters(queen, ident):
    """Three dead letters of queue `dq`, failed at T0 + 1 h, + 2 h and + 3 h."""
    for n in (1, 2, 3):
        await queen.push(ident, [{"queue": "dq", "payload": {"n": n}}])
        got = await queen.pop(ident, "dq", batch=1, now=_at(n))
        m = got["messages"][0]
        res = await queen.ack(
            ident,
            [
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "leaseId": m["leaseId"],
                    "status": "dlq",
                    "error": f"poison {n}",
                }
            ],
            now=_at(n),
        )
        assert res[0]["dlq"] is True


async def _list(http, **params) -> dict:
    async with http.get("/api/v1/dlq", params={"queue": "dq", **params}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_from_and_to_window_the_failure_instant(http, dead_letters):
    def ns(doc):
        return [m["data"]["n"] for m in doc["messages"]]

    everything = await _list(http)
    assert (ns(everything), everything["total"]) == ([3, 2, 1], 3)
    assert [m["failedAt"] for m in everything["messages"]][-1].startswith("2030-01-01T01:00:00")
    doc = await _list(http, **{"from": _iso(_at(2))})  # inclusive
    assert (ns(doc), doc["total"]) == ([3, 2], 2)
    doc = await _list(http, to=_iso(_at(2)))  # inclusive
    assert (ns(doc), doc["total"]) == ([2, 1], 2)
    doc = await _list(http, **{"from": _iso(_at(1.5)), "to": _iso(_at(2.5))})
    assert (ns(doc), doc["total"]) == ([2], 1)
    # An offset other than UTC names the same instant; no offset at all means UTC.
    doc = await _list(http, **{"from": "2030-01-01T04:00:00+02:00", "to": "2030-01-01T02:00:00"})
    assert (ns(doc), doc["total"]) == ([2], 1)
    # The window composes with the page and the other filters.
    doc = await _list(http, **{"from": _iso(_at(1)), "limit": "1", "offset": "1"})
    assert (ns(doc), doc["total"]) == ([2], 3)
    doc = await _list(http, **{"from": _iso(_at(4))})
    assert (doc["messages"], doc["total"]) == ([], 0)


async def test_valid_instants_are_accepted(http, dead_letters):
    for params in (
        {"from": "2030-01-01T02:00:00Z"},
        {"to": "2030-01-01"},
        {"from": "2030-01-01T04:00:00.5+02:00", "to": "2030-01-01T04:00:00.5+02:00"},
        {"from": "", "to": ""},
    ):  # empty: not set (as the client leaves them out)
        await _list(http, **params)


@pytest.mark.parametrize(
    "params, reason",
    [
        ({"from": "yesterday"}, "dlq_bad_from"),
        ({"from": "1700000000000"}, "dlq_bad_from"),
        ({"to": "2030-13-01T00:00:00Z"}, "dlq_bad_to"),
        ({"to": "2030-01-01T00:00:00+25:00"}, "dlq_bad_to"),
        ({"from": "2030-01-02T00:00:00Z", "to": "2030-01-01T00:00:00Z"}, "dlq_bad_range"),
    ],
)
async def test_bad_instants_are_400_in_the_flat_envelope(http, params, reason):
    async with http.get("/api/v1/dlq", params={"queue": "dq", **params}) as r:
        doc = await r.json()
        assert r.status == 400
        assert set(doc) == {"error", "reason", "detail"}
        assert (doc["error"], doc["reason"]) == ("bad_request", reason)
        assert isinstance(doc["detail"], str) and doc["detail"]


async def test_a_limit_over_the_maximum_is_clamped_not_refused(http, dead_letters):
    # The official client sends any limit >= 1 and swallows a refusal into an empty listing, so
    # a page larger than QUEEN_DLQ_MAX_LIMIT (1000) is served at that size, like the timer list.
    doc = await _list(http, limit="5000")
    assert doc["total"] == 3 and len(doc["messages"]) == 3
    assert doc["pagination"] == {"limit": 1000, "offset": 0}
    async with http.get("/api/v1/dlq", params={"queue": "dq", "limit": "0"}) as r:
        assert r.status == 400 and (await r.json())["reason"] == "dlq_bad_limit"
