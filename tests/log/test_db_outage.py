"""The database going away under the log calls: the backend of the connection a push or a pop
is about to use is terminated (at the fault points log.push and log.pop, a known number of
times). Every refusal is the transient 503 a client retries (never an unhandled exception,
never a 500), and nothing is half done: a push answered ok is in the log once, a refused one
is not there at all, and no message is popped twice."""

import asyncio

import pytest

from queen_timers.errors import QueenError
from queen_timers.log.frames import txn_hash
from queen_timers.testing.chaos import Kill, killing

pytestmark = pytest.mark.slow

PUSHERS, PUSHES = 12, 25
PUSH_KILLS = Kill(every=7, times=12)  # 84 of the 300 pushes reach the point first
POP_KILLS = Kill(every=5, times=6)


def _transient(e: QueenError) -> None:
    assert e.status == 503 and e.code == "unavailable", e.to_dict()
    # A pop or push that lost its link mid-call is in doubt: it says so (the push may have
    # committed; a retry with the same transactionId is safe).
    assert e.reason in ("database_unavailable", "outcome_unknown"), e.to_dict()
    assert e.retry_after == 1, e.to_dict()


async def test_pushes_and_pops_while_the_backends_are_killed(queen, ident, conn):
    pushed: dict[str, str] = {}  # txn -> message id, answered ok
    refused_pushes: list[str] = []
    refused_pops = 0
    popped: list[str] = []
    pushing_done = asyncio.Event()

    async def pusher(i: int) -> None:
        for j in range(PUSHES):
            txn = f"t{i}-{j}"
            try:
                [r] = await queen.push(
                    ident, [{"queue": "outage", "payload": {"i": i, "j": j}, "transactionId": txn}]
                )
                assert r["status"] == "queued", r
                pushed[txn] = r["message_id"]
            except QueenError as e:
                _transient(e)
                refused_pushes.append(txn)

    async def popper() -> None:
        nonlocal refused_pops
        # Pops go on until their own terminations are done, however quick the pushes are.
        while not (pushing_done.is_set() and chaos.killed["log.pop"] >= POP_KILLS.times):
            try:
                r = await queen.pop(ident, "outage", batch=10, auto_ack=True)
            except QueenError as e:
                _transient(e)
                refused_pops += 1
                continue
            if r is None:
                await asyncio.sleep(0.005)
                continue
            popped.extend(m["transactionId"] for m in r["messages"])

    async with killing(conn, {"log.push": PUSH_KILLS, "log.pop": POP_KILLS}) as chaos:
        poppers = [asyncio.create_task(popper()) for _ in range(4)]
        try:
            await asyncio.gather(*(pusher(i) for i in range(PUSHERS)))
        finally:
            pushing_done.set()
            await asyncio.wait_for(asyncio.gather(*poppers), 60)
    chaos.assert_done()
    # Each termination refused exactly the call that reached the point, and no other.
    assert len(refused_pushes) == PUSH_KILLS.times, refused_pushes
    assert refused_pops == POP_KILLS.times
    assert len(pushed) == PUSHERS * PUSHES - PUSH_KILLS.times
    rows = await conn.fetch(
        "SELECT t.txn_hash FROM queen.log_txns t JOIN queen.log_partitions p "
        "ON p.id = t.partition_id JOIN queen.queues q ON q.id = p.queue_id "
        "WHERE q.name = 'outage'"
    )
    logged = [r["txn_hash"] for r in rows]
    assert len(logged) == len(set(logged)), "a push is in the log twice"
    assert set(logged) == {txn_hash(t) for t in pushed}, "the log is not exactly the ok pushes"
    assert len(popped) == len(set(popped)), "a message was popped twice"
    assert set(popped) <= set(pushed)
    # The broker has healed: a push and a pop succeed.
    [r] = await queen.push(ident, [{"queue": "outage", "payload": 1, "transactionId": "after"}])
    assert r["status"] == "queued"
