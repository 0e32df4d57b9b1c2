"""Operator reads on a replica (QUEEN_READ_DATABASE_URL): peek, list, count, the overviews and
the histogram read on the standby and say how stale they may be; writes, the fire and pops stay
on the primary, and nothing is written through the replica's connections.

A replica that falls behind is made so, not waited for: its replay is paused
(`pg_wal_replay_pause`), a timer is scheduled on the primary, and the test waits until the
standby has received that WAL without replaying it.
"""

from __future__ import annotations

import asyncio
import base64

import asyncpg
import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.testing.replication import ReplicaPair, replica_pair

pytestmark = pytest.mark.slow

IDENT = Identity(subject="operator")
READS = ("peek", "list", "count", "histogram", "queues", "queue", "overview")


@pytest.fixture
async def pair():
    async with replica_pair(synchronous=False) as p:
        yield p


def _op(key: str) -> dict:
    return {
        "op": "schedule",
        "queue": "reports",
        "timerKey": key,
        "delayMs": 3_600_000,
        "txn": f"txn-{key}",
        "payload": base64.b64encode(key.encode()).decode(),
    }


async def _reads(q: Queen, key: str) -> dict[str, dict]:
    return {
        "peek": dict(await q.timer_peek(IDENT, "reports", key)),
        "list": dict(await q.timers_read(IDENT, "reports")),
        "count": dict(await q.timers_read(IDENT, "reports", mode="count", prefix="k")),
        "histogram": dict(await q.timers_histogram(IDENT, "reports", "day")),
        "queues": dict(await q.queues_overview(IDENT)),
        "queue": dict(await q.queue_summary(IDENT, "reports")),
        "overview": dict(await q.overview(IDENT)),
    }


async def _until_replayed(pair: ReplicaPair, q: Queen, key: str) -> None:
    await pair.caught_up()  # the schema and the timer: an asynchronous standby replays later
    assert (await q.timer_peek(IDENT, "reports", key))["found"], key


async def test_reads_come_from_the_replica_and_say_how_stale(pair: ReplicaPair):
    q = Queen(database_url=pair.url, read_database_url=pair.read_url, sweeper=False)
    await q.start()
    standby = await asyncpg.connect(pair.read_url)
    try:
        await q.timers_apply(IDENT, [_op("k1")])
        await _until_replayed(pair, q, "k1")
        caught_up = await _reads(q, "k1")
        for name in READS:
            assert caught_up[name]["replicaLagMs"] >= 0, (name, caught_up[name])
        assert caught_up["count"]["count"] == 1 and caught_up["list"]["rows"][0]["timerKey"] == "k1"

        # The replica falls behind: what it has received it does not replay.
        await standby.execute("SELECT pg_wal_replay_pause()")
        await q.timers_apply(IDENT, [_op("k2")])  # a write: on the primary, replica or not
        primary = await asyncpg.connect(pair.url)
        try:
            written = await primary.fetchval("SELECT pg_current_wal_lsn()")
        finally:
            await primary.close()
        for _ in range(600):
            if await standby.fetchval("SELECT pg_last_wal_receive_lsn() >= $1", written):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the standby never received the write")
        await asyncio.sleep(0.05)  # the lag only grows from here: at least these 50 ms
        behind = await _reads(q, "k2")
        assert behind["peek"]["found"] is False  # not replayed yet
        assert behind["count"]["count"] == 1
        for name in READS:
            assert behind[name]["replicaLagMs"] >= 50, (name, behind[name])

        await standby.execute("SELECT pg_wal_replay_resume()")
        await _until_replayed(pair, q, "k2")
    finally:
        await standby.close()
        await q.stop()


async def test_nothing_is_written_through_the_replica_pool(pair: ReplicaPair):
    # prefer-standby on the primary alone: the read pool lands on a primary, and still writes
    # nothing (its transactions are read-only), and its answers are current (lag 0).
    q = Queen(
        database_url=pair.url,
        read_database_url=f"{pair.primary_url}?target_session_attrs=prefer-standby",
        sweeper=False,
    )
    await q.start()
    try:
        async with q.rt.reads.acquire() as read:
            assert read.lag_ms == 0
            with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                await read.conn.execute("CREATE TABLE queen.written_through_a_replica ()")
        await q.timers_apply(IDENT, [_op("k1")])
        assert (await q.timer_peek(IDENT, "reports", "k1"))["replicaLagMs"] == 0
    finally:
        await q.stop()


async def test_a_replica_that_is_down_answers_503(pair: ReplicaPair):
    q = Queen(database_url=pair.url, read_database_url=pair.read_url, sweeper=False)
    await q.start()
    try:
        await asyncio.to_thread(pair.standby_stop)
        with pytest.raises(QueenError) as e:
            await q.timer_peek(IDENT, "reports", "k1")
        assert (e.value.status, e.value.retry_after) == (503, 1), e.value.to_dict()
        await q.timers_apply(IDENT, [_op("k1")])  # writes never needed it
    finally:
        await q.stop()
