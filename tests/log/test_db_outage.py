"""The database going away under the log calls: its backends terminated mid-statement while
pushes and pops run. Every refusal is the transient 503 a client retries (never an unhandled
exception, never a 500), and nothing is half done: a push answered ok is in the log once."""

import asyncio

import pytest

from queen_timers.errors import QueenError
from queen_timers.log.frames import txn_hash
from queen_timers.testing.chaos import terminating

pytestmark = pytest.mark.slow


def _transient(e: QueenError) -> None:
    assert e.status == 503 and e.code == "unavailable", e.to_dict()
    assert e.reason == "database_unavailable" and e.retry_after == 1, e.to_dict()


async def test_pushes_and_pops_while_the_backends_are_killed(queen, ident, conn):
    pushed: dict[str, str] = {}  # txn -> message id, answered ok
    refused = 0
    popped: list[str] = []
    done = asyncio.Event()

    async def pusher(i: int) -> None:
        nonlocal refused
        j = 0
        while chaos.more(j, 25):
            j += 1
            txn = f"t{i}-{j}"
            try:
                [r] = await queen.push(
                    ident, [{"queue": "outage", "payload": {"i": i, "j": j}, "transactionId": txn}]
                )
                assert r["status"] == "queued", r
                pushed[txn] = r["message_id"]
            except QueenError as e:
                _transient(e)
                refused += 1

    async def popper() -> None:
        nonlocal refused
        while not done.is_set():
            try:
                r = await queen.pop(ident, "outage", batch=10, auto_ack=True)
            except QueenError as e:
                _transient(e)
                refused += 1
                continue
            if r is None:
                await asyncio.sleep(0.005)
                continue
            popped.extend(m["transactionId"] for m in r["messages"])

    async with terminating(conn, "pool") as chaos:
        poppers = [asyncio.create_task(popper()) for _ in range(4)]
        try:
            await asyncio.gather(*(pusher(i) for i in range(12)))
        finally:
            done.set()
            await asyncio.gather(*poppers)
    chaos.assert_hit()
    assert refused > 0, "no call was refused: the chaos never hit one in flight"
    # Whatever was answered ok is in the log exactly once (a refused push may have committed
    # before its connection died: the answer was lost, not the write; its retry is deduplicated
    # by transactionId).
    rows = await conn.fetch(
        "SELECT t.txn_hash FROM queen.log_txns t JOIN queen.log_partitions p "
        "ON p.id = t.partition_id JOIN queen.queues q ON q.id = p.queue_id "
        "WHERE q.name = 'outage'"
    )
    logged = [r["txn_hash"] for r in rows]
    assert len(logged) == len(set(logged))
    assert {txn_hash(t) for t in pushed} <= set(logged)
    assert len(popped) == len(set(popped))
    # The broker has healed: a push and a pop succeed.
    [r] = await queen.push(ident, [{"queue": "outage", "payload": 1, "transactionId": "after"}])
    assert r["status"] == "queued"
