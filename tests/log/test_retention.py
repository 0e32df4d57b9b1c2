import asyncio

from queen_timers.log.retention import Maintenance

from .helpers import acks_for, items, later


def maint(queen) -> Maintenance:
    return Maintenance(queen.rt)


async def cycle(m: Maintenance, now) -> dict:
    """One maintenance cycle that holds the lease (run_once answers None when it does not)."""
    out = await m.run_once(now=now)
    assert out is not None
    return out


async def counts(conn):
    return (
        await conn.fetchval("SELECT count(*) FROM queen.log_segments"),
        await conn.fetchval("SELECT log_start FROM queen.log_partitions"),
    )


async def test_rule1_deletes_old_segments_consumed_or_not(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retentionEnabled": True, "retentionSeconds": 60})
    await queen.push(ident, items("q", 2))
    await queen.push(ident, items("q", 1, start=2))
    m = maint(queen)
    assert (await cycle(m, later(30)))["segments"] == 0
    out = await cycle(m, later(61))
    assert out["segments"] == 2
    assert await counts(conn) == (0, 3)
    # their txn hashes outlive them until the dedup window (3600 s) has passed
    assert await conn.fetchval("SELECT count(*) FROM queen.log_txns") == 3
    assert (await cycle(m, later(3700)))["txns"] == 3
    # a cursor below log_start resumes at the next live segment
    await queen.push(ident, items("q", 1, start=3))
    r = await queen.pop(ident, "q", batch=10)
    assert [x["offset"] for x in r["messages"]] == [3]


async def test_rule2_waits_for_every_group_and_keeps_whole_segments(queen, ident, conn):
    await queen.configure_queue(
        ident, "q", {"retentionEnabled": True, "completedRetentionSeconds": 60}
    )
    for k in range(3):
        await queen.push(ident, items("q", 2, start=2 * k))  # segments [0,1] [2,3] [4,5]
    m = maint(queen)
    assert (await cycle(m, later(61)))["segments"] == 0  # nobody consumed anything
    r = await queen.pop(ident, "q", batch=3)  # offsets 0..2: the second segment half done
    await queen.ack(ident, acks_for(r))
    assert (await cycle(m, later(61)))["segments"] == 1
    assert await counts(conn) == (2, 2)
    # a second group that has read nothing pins everything
    await queen.pop(ident, "q", group="slow", batch=1)
    r = await queen.pop(ident, "q", batch=10)
    await queen.ack(ident, acks_for(r))
    assert (await cycle(m, later(61)))["segments"] == 0


async def test_retention_off_keeps_everything(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"retentionSeconds": 60})  # not enabled
    await queen.push(ident, items("q", 2))
    assert (await cycle(maint(queen), later(3600)))["segments"] == 0


async def test_txn_purge_spares_unconsumed_messages(queen, ident, conn):
    await queen.configure_queue(ident, "q", {"dedupWindowSeconds": 60})
    await queen.push(ident, items("q", 2, partition="a") + items("q", 2, partition="b"))
    r = await queen.pop(ident, "q", partition="a", batch=10)
    await queen.ack(ident, acks_for(r))
    m = maint(queen)
    assert (await cycle(m, later(600)))["txns"] == 0  # under the 900 s floor
    assert (await cycle(m, later(901)))["txns"] == 2  # partition a only
    starts = dict(
        await conn.fetch("SELECT name, txns_start FROM queen.log_partitions ORDER BY name")
    )
    assert starts == {"a": 2, "b": 0}
    # the lagging consumer of b can still ack by txn hours later
    r = await queen.pop(ident, "q", partition="b", batch=10, now=later(7200))
    res = await queen.ack(ident, acks_for(r), now=later(7201))
    assert all(x["success"] for x in res)


async def test_dead_partitions_are_cleaned_up(queen, ident, conn):
    await queen.configure_queue(
        ident, "q", {"retentionEnabled": True, "retentionSeconds": 60, "retryLimit": 0}
    )
    await queen.push(ident, items("q", 1, partition="idle") + items("q", 1, partition="pinned"))
    r = await queen.pop(ident, "q", partition="pinned")
    await queen.ack(ident, [{**acks_for(r)[0], "status": "failed"}])  # a DLQ row pins it
    m = maint(queen)
    out = await cycle(m, later(120))
    assert out["segments"] == 2 and out["partitions"] == 0  # not idle for long enough yet
    out = await cycle(m, later(8 * 86400))
    assert out["partitions"] == 1
    assert [r["name"] for r in await conn.fetch("SELECT name FROM queen.log_partitions")] == [
        "pinned"
    ]
    # a later push to the same name starts a new partition at offset 0
    res = await queen.push(ident, items("q", 1, partition="idle"))
    assert res[0]["offset"] == 0


async def test_partition_dead_is_plain_sql_without_timers(conn):
    lang, src = await conn.fetchrow(
        """SELECT l.lanname, p.prosrc FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'queen.log_partition_dead_v1(uuid, timestamptz)'::regprocedure"""
    )
    assert lang == "sql" and "log_timers" not in src


async def test_loop_runs_from_the_service_and_stops(db_url, ident):
    from queen_timers.service import Queen

    q = Queen(database_url=db_url, sweeper=False, retention_interval_ms=20)
    await q.start()
    try:
        m = q.maintenance
        assert m is not None
        await asyncio.wait_for(m.cycle_done.wait(), 10)
        assert m.cycles >= 1
    finally:
        await q.stop()
    await m.stop()  # twice is fine
    await Maintenance(m.rt).stop()  # stop before start is fine


async def test_only_one_broker_runs_a_cycle(queen, conn):
    assert await conn.fetchval("SELECT queen.maintenance_take_v1('other broker', 60000)")
    try:
        assert await maint(queen).run_once() is None
    finally:
        await conn.execute("SELECT queen.maintenance_release_v1('other broker')")
    assert await maint(queen).run_once() is not None
    # the cycle gave its lease back: another broker takes it at once
    assert await conn.fetchval("SELECT queen.maintenance_take_v1('other broker', 60000)")


async def test_a_dead_brokers_lease_lapses(queen, conn):
    # a holder that never releases (killed mid-cycle): its lease runs out, then ours is taken
    assert await conn.fetchval("SELECT queen.maintenance_take_v1('dead broker', 0)")
    m = maint(queen)
    assert await m.run_once() is not None
    assert await conn.fetchval("SELECT holder FROM queen.maintenance_lease") == m.holder
