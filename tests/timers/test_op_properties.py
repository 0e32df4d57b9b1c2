"""Properties of timer op validation, through both ways in: `Queen.timers_apply` and the
`timers` rider of `Queen.transaction`.

- A refused call raises QueenError with a code and reason the errors reference documents (the
  first bad op in input order names it) and writes nothing: no timer, no segment, no txn, not even
  the valid ops beside the bad one, nor the push riding in the same transaction.
- An accepted call answers one result per op, and every schedule reads back through
  `timer_peek` (queue, timerKey, partition, txn, payload as stored) and `timers_list`; the
  cancels that follow remove exactly what it wrote.

The `queen` and `conn` fixtures give each test its own database, not each example, so an
example counts the rows before its call and removes what it wrote before the next one runs.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queen_timers.errors import QueenError
from queen_timers.timers.pack import decompress

from .op_strategies import (
    MAX_PAYLOAD,
    MUTATIONS,
    SEALED,
    Refusal,
    documented_reasons,
    refused_calls,
    valid_calls,
)

# The database is per test, not per example (see the module docstring): each example measures
# its own "before" and cleans up after itself, which is what this health check asks about.
per_test_database = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

# Every example of the refusal property tries every mutation (so each reason is exercised in
# every run), about 25 calls: a sixth of the profile's examples keeps it near four tests' worth.
every_mutation = settings(per_test_database, max_examples=max(5, settings().max_examples // 6))

TAXONOMY = documented_reasons()
# The transaction wire answers its own closed reasons and names the op's reason in the detail
# (queen_timers/log/transaction.py).
WIRE_CODES = {"timer_horizon_exceeded", "payload_too_large"}
ENTRANCES = st.sampled_from(["timers_apply", "transaction"])
# The push riding along with the transaction's timers: a refused rider must not write it.
PUSH = {"type": "push", "items": [{"queue": "ledger", "payload": {"n": 1}}]}


@pytest.fixture
async def broker(queen, ident):
    await queen.configure_queue(ident, SEALED, {"encryptionEnabled": True})
    return queen


async def _rows(conn) -> dict:
    return dict(
        await conn.fetchrow(
            "SELECT (SELECT count(*) FROM queen.log_timers) AS timers,"
            "       (SELECT count(*) FROM queen.log_segments) AS segments,"
            "       (SELECT count(*) FROM queen.log_txns) AS txns"
        )
    )


async def _call(queen, ident, ops, entrance: str) -> list[dict]:
    """The call's timer results, one per op, whichever way in."""
    if entrance == "timers_apply":
        return await queen.timers_apply(ident, ops)
    res = await queen.transaction(ident, {"operations": [PUSH], "timers": ops})
    assert res["success"] is True, res
    timers = [r for r in res["results"] if r.get("type") == "timer"]
    assert [(r["index"], r["opIndex"]) for r in timers] == [(1 + i, i) for i in range(len(ops))]
    return [{k: v for k, v in r.items() if k not in ("index", "opIndex", "type")} for r in timers]


def _plaintext(op: dict) -> bytes:
    data = base64.b64decode(op["payload"])
    return decompress(data, MAX_PAYLOAD) if op.get("payloadZstd") else data


def _check_peek(queen, ident, op: dict, result: dict, peeked: dict) -> None:
    assert peeked["found"] is True
    assert (peeked["queue"], peeked["timerKey"]) == (op["queue"], op["timerKey"])
    assert peeked["partition"] == op.get("partition", "Default")
    assert peeked["txn"] == op["txn"]
    assert (peeked["messageId"], peeked["deliverAt"]) == (result["messageId"], result["deliverAt"])
    assert (peeked["producerSub"], peeked["attempts"], peeked["claimed"]) == (
        ident.subject,
        0,
        False,
    )
    stored = base64.b64decode(peeked["payload"])
    if op["queue"] == SEALED:  # encrypted at schedule, a zstd payload decompressed first
        assert (peeked["encrypted"], peeked["payloadZstd"]) == (True, False)
        assert queen.rt.cipher.decrypt(stored) == _plaintext(op)
    else:
        assert stored == base64.b64decode(op["payload"])
        assert peeked["payloadZstd"] is op.get("payloadZstd", False)
        assert peeked["encrypted"] is op.get("encrypted", False)


@per_test_database
@given(ops=valid_calls(), entrance=ENTRANCES)
async def test_an_accepted_call_reads_back_through_peek_and_list(
    broker, ident, conn, ops, entrance
):
    before = await _rows(conn)
    try:
        results = await _call(broker, ident, ops, entrance)
        assert len(results) == len(ops)
        for op, r in zip(ops, results):
            assert (r["queue"], r["timerKey"]) == (op["queue"], op["timerKey"])
            if op["op"] == "cancel":  # nothing was there: absent, with the txn it was sent
                assert (r["ok"], r["status"], r["txn"]) == (False, "absent", op.get("txn"))
                assert (await broker.timer_peek(ident, op["queue"], op["timerKey"]))[
                    "found"
                ] is False
                continue
            assert (r["ok"], r["status"], r["txn"]) == (True, "scheduled", op["txn"])
            peeked = await broker.timer_peek(ident, op["queue"], op["timerKey"])
            _check_peek(broker, ident, op, r, peeked)

        scheduled = [op for op in ops if op["op"] != "cancel"]
        for queue in {op["queue"] for op in ops}:
            page = await broker.timers_list(ident, queue, limit=1000)
            keys = [op["timerKey"] for op in scheduled if op["queue"] == queue]
            assert [row["timerKey"] for row in page["rows"]] == sorted(keys, key=str.encode)
            assert page["truncated"] is False

        pushed = 1 if entrance == "transaction" else 0
        assert await _rows(conn) == {
            "timers": before["timers"] + len(scheduled),
            "segments": before["segments"] + pushed,
            "txns": before["txns"] + pushed,
        }
        cancels = [
            {"op": "cancel", "queue": o["queue"], "timerKey": o["timerKey"]} for o in scheduled
        ]
        undone = await broker.timers_apply(ident, cancels)
        assert [(r["status"], r["txn"]) for r in undone] == [
            ("cancelled", o["txn"]) for o in scheduled
        ]
        assert (await _rows(conn))["timers"] == before["timers"]
    finally:
        await conn.execute("DELETE FROM queen.log_timers")


def _check_refusal(err: QueenError, refusal: Refusal, entrance: str) -> None:
    if entrance == "timers_apply":
        assert (err.status, err.code, err.reason) == (
            refusal.status,
            refusal.code,
            refusal.reason,
        ), err.detail
        assert {err.code, err.reason} <= TAXONOMY
        return
    code = refusal.code if refusal.code in WIRE_CODES else "bad_request"
    assert (err.status, err.code, err.reason) == (refusal.status, code, code), err.detail
    assert err.detail.startswith(f"{refusal.reason}: "), err.detail
    assert refusal.reason in TAXONOMY
    assert err.extra == {
        "transactionId": err.extra["transactionId"],
        "success": False,
        "results": [],
    }


@every_mutation
@given(data=st.data())
async def test_a_refused_call_writes_nothing(broker, ident, conn, data):
    try:
        for mutation in MUTATIONS:
            ops, refusal = data.draw(refused_calls(mutation), label=mutation)
            entrance = data.draw(ENTRANCES, label="entrance")
            before = await _rows(conn)
            with pytest.raises(QueenError) as e:
                await _call(broker, ident, ops, entrance)
            _check_refusal(e.value, refusal, entrance)
            assert await _rows(conn) == before, mutation
    finally:
        await conn.execute("DELETE FROM queen.log_timers")


def test_the_taxonomy_is_read_from_the_errors_page():
    # A guard on documented_reasons itself: the paragraph it parses still says what it says.
    assert {"timers_bad_request", "timers_duplicate_key", "timer_horizon_exceeded"} <= TAXONOMY
    assert {"timers_count_prefix_too_long", "timers_count_prefix_invalid"} <= TAXONOMY
