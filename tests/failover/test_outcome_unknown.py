"""A write that loses its connection once it was sent may have committed: it answers 503
`outcome_unknown`, and the retry with the same ops is safe. A call that could not open a
connection wrote nothing, and says only that the database is away."""

from __future__ import annotations

import base64

import asyncpg
import pytest

from queen_timers.db.errors import write_in_doubt
from queen_timers.errors import QueenError
from queen_timers.testing.chaos import Kill, killing


def _op(key: str) -> dict:
    return {
        "op": "schedule",
        "queue": "doubt",
        "timerKey": key,
        "delayMs": 60_000,
        "txn": f"txn-{key}",
        "payload": base64.b64encode(b"x").decode(),
    }


@pytest.mark.parametrize(
    ("exc", "in_doubt"),
    [
        (asyncpg.ConnectionDoesNotExistError("closed in the middle of operation"), True),
        (asyncpg.InterfaceError("connection is closed"), True),
        (ConnectionResetError(), True),
        (asyncpg.AdminShutdownError("terminating connection"), True),
        (ConnectionRefusedError(), False),
        (asyncpg.TargetServerAttributeNotMatched("not a primary"), False),
        (asyncpg.CannotConnectNowError("the database system is starting up"), False),
        (asyncpg.SerializationError("could not serialize"), False),
    ],
)
def test_which_failures_leave_a_write_in_doubt(exc, in_doubt):
    assert write_in_doubt(exc) is in_doubt


async def test_a_schedule_cut_off_mid_call_says_outcome_unknown_and_retries_safely(
    queen, ident, conn
):
    async with killing(conn, {"timers.schedule": Kill(every=1, times=1)}) as chaos:
        with pytest.raises(QueenError) as e:
            await queen.timers_apply(ident, [_op("k1")])
    chaos.assert_done()
    err = e.value
    assert (err.status, err.code, err.reason, err.retry_after) == (
        503,
        "timers_unavailable",
        "outcome_unknown",
        1,
    ), err.to_dict()
    assert "retry it with the same txn" in err.detail
    [again] = await queen.timers_apply(ident, [_op("k1")])
    assert again["ok"] and again["status"] in ("scheduled", "rescheduled"), again
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE queue = 'doubt'") == 1


async def test_a_push_cut_off_mid_call_says_outcome_unknown(queen, ident, conn):
    item = {"queue": "doubt", "payload": {"n": 1}, "transactionId": "push-1"}
    async with killing(conn, {"log.push": Kill(every=1, times=1)}) as chaos:
        with pytest.raises(QueenError) as e:
            await queen.push(ident, [item])
    chaos.assert_done()
    assert (e.value.status, e.value.reason) == (503, "outcome_unknown"), e.value.to_dict()
    [r] = await queen.push(ident, [item])
    assert r["status"] == "queued", r
