"""The sweeper in real time: one broker in process, and several broker processes.

Real time matters here, so these tests wait on what the code does (rows appearing in the log,
sweeper cycles) with generous timeouts, never on fixed sleeps for the outcome.
"""

import asyncio
import random
import signal

import pytest
from sweeper_helpers import (
    assert_exactly_once,
    lateness_ms,
    schedule_many,
    schedule_op,
    wait_delivered,
)

from queen_timers.identity import Identity
from queen_timers.log.frames import txn_hash
from queen_timers.service import Queen
from queen_timers.testing.broker import BrokerProcess
from queen_timers.testing.chaos import Kill, killing

pytestmark = pytest.mark.slow

IDENT = Identity(subject="scheduler")


async def test_one_broker_fires_1000_timers_exactly_once_never_early(db_url, conn):
    q = Queen(database_url=db_url, retention_interval_ms=0)  # sweeper on
    await q.start()
    try:
        rnd = random.Random(7)
        ops = [schedule_op(f"q{i % 3}", f"k{i}", rnd.uniform(50, 500)) for i in range(1000)]
        results = await schedule_many(q, IDENT, ops)
        log = await wait_delivered(conn, 1000)
    finally:
        await q.stop()
    assert_exactly_once(results, log)
    late = lateness_ms(results, log)
    assert min(late) >= 0, "a timer was delivered before its deliver_at"


async def _fire_lateness_across_brokers(db_url, conn, notify: bool) -> float:
    flag = "true" if notify else "false"
    async with BrokerProcess(db_url, env={"QUEEN_SWEEPER_NOTIFY": flag}):
        scheduler = Queen(
            database_url=db_url, sweeper=False, sweeper_notify=notify, retention_interval_ms=0
        )
        await scheduler.start()
        try:
            # Let the other broker settle into its idle poll, so the wake-up has to come
            # from the NOTIFY (or the poll) rather than from a cycle that happens to run.
            await asyncio.sleep(1.2)
            res = await schedule_many(scheduler, IDENT, [schedule_op("x", "k", 200)])
            log = await wait_delivered(conn, 1, timeout=10)
        finally:
            await scheduler.stop()
    assert_exactly_once(res, log)
    late = lateness_ms(res, log)[0]
    assert late >= 0
    return late


async def test_cross_broker_wake_by_notify(db_url, conn):
    late = await _fire_lateness_across_brokers(db_url, conn, notify=True)
    assert late <= 150, f"fired {late:.1f} ms after deliver_at"


async def test_cross_broker_poll_only(db_url, conn):
    late = await _fire_lateness_across_brokers(db_url, conn, notify=False)
    assert late <= 1500, f"fired {late:.1f} ms after deliver_at"


async def _held_partition(conn, queue: str):
    """Provision `queue` and hold its Default partition row locked in an open transaction, so
    a fire into it blocks on the pre-lock (the broker is then frozen 'right after claiming')."""
    from queen_timers.service import Queen  # noqa: F401 - the fixture's queen pushes

    tr = conn.transaction()
    await tr.start()
    await conn.execute(
        "SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id "
        "WHERE q.name = $1 FOR UPDATE OF p",
        queue,
    )
    return tr


async def test_sigkill_after_claim_fires_elsewhere_after_the_lease_exactly_once(
    db_url, conn, test_databases
):
    setup = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await setup.start()
    try:
        seeded = await setup.push(IDENT, [{"queue": "victim", "payload": "seed"}])  # provision
        held = await _held_partition(conn, "victim")
        a = await BrokerProcess(db_url, env={"QUEEN_SWEEPER_LEASE_MS": "3000"}).start()
        res = await schedule_many(
            setup, IDENT, [schedule_op("victim", f"k{i}", 0) for i in range(50)]
        )
        # Wait until broker A holds the claims (its fire now blocks on our partition lock).
        for _ in range(400):
            held_rows = await setup.rt.pool.fetchval(
                "SELECT count(*) FROM queen.log_timers WHERE claim_token IS NOT NULL"
            )
            if held_rows == 50:
                break
            await asyncio.sleep(0.025)
        assert held_rows == 50
        await a.signal(signal.SIGKILL)
        # The machine is gone: its backends go too (PostgreSQL would notice eventually).
        await setup.rt.pool.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1",
            f"queen:{a.pid}:%",
        )
        await held.rollback()
        async with BrokerProcess(db_url):
            log = await wait_delivered(conn, 51, timeout=30)
        seed_txn = seeded[0]["transaction_id"]
        assert seed_txn is not None
        seed = txn_hash(seed_txn)
        assert_exactly_once(res, {k: v for k, v in log.items() if k != seed})
        assert await setup.rt.pool.fetchval("SELECT count(*) FROM queen.log_timers") == 0
    finally:
        await setup.stop()


async def test_sigterm_mid_backlog_hands_back_its_claims(db_url, conn):
    setup = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await setup.start()
    try:
        admin = Identity(admin=True)
        await setup.switches_set(admin, {"timersFire": False})
        res = await schedule_many(
            setup, IDENT, [schedule_op(f"q{i % 7}", f"k{i}", 0) for i in range(6000)]
        )
        a = await BrokerProcess(
            db_url, env={"QUEEN_SWEEPER_PARALLELISM": "2", "QUEEN_SWEEPER_CLAIM_BATCH": "100"}
        ).start()
        await setup.switches_set(admin, {"timersFire": True})
        # Stop it while it drains.
        for _ in range(400):
            if await conn.fetchval("SELECT count(*) FROM queen.log_segments") > 3:
                break
            await asyncio.sleep(0.01)
        assert await a.terminate() == 0
        live = await conn.fetchval(
            "SELECT count(*) FROM queen.log_timers "
            "WHERE claim_token IS NOT NULL AND claimed_until > now()"
        )
        assert live == 0, "a stopped broker left claims to wait for the lease"
        left = await conn.fetchval("SELECT count(*) FROM queen.log_timers")
        assert left > 0, "the broker finished the whole backlog before the signal"
        async with BrokerProcess(db_url):
            log = await wait_delivered(conn, 6000, timeout=60)
        assert_exactly_once(res, log)
    finally:
        await setup.stop()


async def test_three_brokers_drain_20000_due_at_one_instant_exactly_once(db_url, conn):
    setup = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await setup.start()
    brokers = [BrokerProcess(db_url) for _ in range(3)]
    try:
        admin = Identity(admin=True)
        await setup.switches_set(admin, {"timersFire": False})
        res = await schedule_many(
            setup,
            IDENT,
            [schedule_op(f"q{i % 5}", f"k{i}", 0, partition=f"p{i % 4}") for i in range(20000)],
        )
        await asyncio.gather(*(b.start() for b in brokers))
        await setup.switches_set(admin, {"timersFire": True})
        log = await wait_delivered(conn, 20000, timeout=120)
        assert_exactly_once(res, log)
    finally:
        await asyncio.gather(*(b.kill() for b in brokers))
        await setup.stop()


async def test_a_draining_sweeper_survives_its_connections_being_killed(db_url, conn):
    """The backends of the sweeper's connections terminated while it drains 3000 timers in
    claims of 50, at the points the sweeper names: before a claim (every 5th, 4 times),
    before a fire (every 5th, 4 times) and before a probe (every 2nd, 2 times). A killed
    claim or probe only fails its cycle; a killed fire is transient (no attempt spent, its
    rows back off and fire later); everything is still delivered exactly once, nothing
    dead-lettered, nothing left staged."""
    setup = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await setup.start()
    admin = Identity(admin=True)
    await setup.switches_set(admin, {"timersFire": False})
    n = 3000
    res = await schedule_many(
        setup, IDENT, [schedule_op(f"q{i % 3}", f"k{i}", 0) for i in range(n)]
    )
    # Small claims so the drain takes at least 60 claims and 60 fires, more than the plan
    # needs (20 of each); the probes go on at the idle poll after the drain.
    plan = {
        "timers.claim": Kill(every=5, times=4),
        "timers.fire": Kill(every=5, times=4),
        "timers.probe": Kill(every=2, times=2),
    }
    q = Queen(database_url=db_url, retention_interval_ms=0, sweeper_claim_batch=50)
    await q.start()
    try:
        # The terminations run on the setup broker's pool: `conn` watches the log meanwhile.
        async with killing(setup.rt.pool, plan) as chaos:
            await setup.switches_set(admin, {"timersFire": True})
            log = await wait_delivered(conn, n, timeout=60)
            await asyncio.wait_for(chaos.all_done.wait(), 30)

        def failures(cls: str) -> float:
            return (
                q.metrics_registry.get_sample_value(
                    "queen_timers_fire_failures_total", {"class": cls}
                )
                or 0
            )

        permanent, transient = failures("permanent"), failures("transient")
    finally:
        await q.stop()
        await setup.stop()
    chaos.assert_done()
    # Each killed fire failed its batch (up to 50 rows) as transient: no attempt spent.
    assert permanent == 0, f"{permanent} fires counted as permanent failures"
    assert 4 <= transient <= 4 * 50, transient
    assert_exactly_once(res, log)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.log_dlq") == 0
