"""queen_timers.testing.chaos: the fault injector every chaos test depends on. It terminates
the backend of exactly the connection at a point, on exactly the planned arrivals."""

import asyncpg
import pytest

from queen_timers.db import faults
from queen_timers.testing.chaos import Chaos, Kill, killing


def test_kill_is_due_on_every_nth_arrival_up_to_its_times():
    k = Kill(every=3, times=2)
    assert [a for a in range(1, 13) if k.due(a, 0)] == [3, 6, 9, 12]
    assert k.due(6, 1) and not k.due(9, 2), "no termination past `times`"
    assert k.arrivals_needed == 6


async def test_only_planned_arrivals_terminate_and_only_that_connection(conn, db_url):
    victims = [await asyncpg.connect(db_url) for _ in range(4)]
    try:
        async with killing(conn, {"log.push": Kill(every=2, times=2)}) as chaos:
            assert faults.hook is chaos
            for v in victims:
                await faults.hook("log.push", v)
                await faults.hook("log.pop", v)  # not planned: never terminates
        assert faults.hook is None, "the hook is removed when the block ends"
        chaos.assert_done()
        assert (chaos.reached["log.push"], chaos.killed["log.push"]) == (4, 2)
        alive = []
        for v in victims:
            try:
                alive.append(await v.fetchval("SELECT 1") == 1)
            except (asyncpg.PostgresError, asyncpg.InterfaceError):
                alive.append(False)
        assert alive == [True, False, True, False]
    finally:
        for v in victims:
            v.terminate()


async def test_a_plan_short_of_its_arrivals_fails_assert_done(conn):
    chaos = Chaos(conn, {"timers.fire": Kill(every=5, times=1)})
    with pytest.raises(AssertionError, match=r"timers\.fire"):
        chaos.assert_done()
    with pytest.raises(ValueError, match="no such fault point"):
        Chaos(conn, {"timers.nowhere": Kill(every=1, times=1)})


@pytest.mark.pgbouncer
async def test_behind_a_pooler_only_that_client_is_dropped(conn, pooled_db_url):
    # Through PgBouncer in transaction mode get_server_pid() is PgBouncer's key and, between
    # transactions, no backend is the connection's: its link to the pooler is what goes.
    # Inside a transaction it holds one backend, and that one is terminated.
    victims = [await asyncpg.connect(pooled_db_url, statement_cache_size=0) for _ in range(4)]
    try:
        assert await victims[0].fetchval("SELECT pg_backend_pid()") != victims[0].get_server_pid()
        async with killing(conn, {"log.push": Kill(every=2, times=2)}) as chaos:
            assert faults.hook is not None
            for v in victims:
                await faults.hook("log.push", v)
        chaos.assert_done()
        assert [v.is_closed() for v in victims] == [False, True, False, True]
        assert [await v.fetchval("SELECT 1") for v in victims[::2]] == [1, 1]
        held = victims[0]
        async with killing(conn, {"transaction.timers_applied": Kill(every=1, times=1)}):
            tx = held.transaction()
            await tx.start()
            backend = await held.fetchval("SELECT pg_backend_pid()")
            assert faults.hook is not None
            await faults.hook("transaction.timers_applied", held)
        gone = await conn.fetchval(
            "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $1", backend
        )
        assert gone, "the backend the pooler lent inside the transaction is terminated"
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError)):
            await held.fetchval("SELECT 1")
        assert await victims[2].fetchval("SELECT 1") == 1, "another client is untouched"
    finally:
        for v in victims:
            v.terminate()
