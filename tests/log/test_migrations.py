"""The schema is re-applied at every boot: idempotent, lossless, and gentle on hot tables."""

import uuid

import asyncpg
import pytest

from queen_timers.db.migrate import apply_migrations, apply_sql
from queen_timers.db.pool import (
    MIN_SERVER_VERSION,
    ServerVersionError,
    check_server_version,
    connect_one,
    require_server_version,
)
from queen_timers.testing.db import with_database

from .helpers import acks_for, items

CATALOGUE = {
    "tables": """SELECT c.relname, c.relkind, coalesce(c.reloptions::text, ''),
                        coalesce(t.reloptions::text, '')
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
                  WHERE n.nspname = 'queen' ORDER BY 1""",
    "columns": """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                         a.attstorage, coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
                         a.attgenerated, coalesce(co.collname, '')
                    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                    LEFT JOIN pg_collation co ON co.oid = a.attcollation
                   WHERE n.nspname = 'queen' AND a.attnum > 0 AND NOT a.attisdropped
                   ORDER BY 1, 2""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'queen' ORDER BY 1",
    "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
                        FROM pg_constraint WHERE connamespace = 'queen'::regnamespace
                       ORDER BY 1, 2""",
    "functions": """SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
                      FROM pg_proc p WHERE p.pronamespace = 'queen'::regnamespace
                     ORDER BY 1""",
    "triggers": """SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
                     FROM pg_trigger WHERE NOT tgisinternal
                      AND tgrelid IN (SELECT oid FROM pg_class
                                       WHERE relnamespace = 'queen'::regnamespace)
                    ORDER BY 1, 2""",
}

COUNTED = """SELECT c.relname FROM pg_class c
              WHERE c.relnamespace = 'queen'::regnamespace AND c.relkind = 'r' ORDER BY 1"""


async def snapshot(conn) -> dict:
    return {k: [tuple(r) for r in await conn.fetch(q)] for k, q in CATALOGUE.items()}


async def row_counts(conn) -> dict:
    out = {}
    for r in await conn.fetch(COUNTED):
        out[r["relname"]] = await conn.fetchval(f'SELECT count(*) FROM queen."{r["relname"]}"')
    return out


@pytest.fixture
async def empty_db(pg_server_url):
    name = f"queen_mig_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(pg_server_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(pg_server_url, name)
    try:
        yield url
    finally:
        admin = await asyncpg.connect(pg_server_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def test_reapply_is_idempotent_and_loses_nothing(empty_db, ident):
    from queen_timers.service import Queen

    conn = await connect_one(empty_db)
    try:
        await apply_migrations(conn)
        first = await snapshot(conn)
        assert first["functions"] and first["indexes"]
        await apply_migrations(conn)
        assert await snapshot(conn) == first
    finally:
        await conn.close()

    # populate through the service (queues, segments, txns, consumers, dead letters)
    q = Queen(
        database_url=empty_db, sweeper=False, retention_interval_ms=0, encryption_key="11" * 32
    )
    await q.start()
    try:
        await q.configure_queue(ident, "q", {"leaseTime": 30, "retryLimit": 0})
        await q.push(ident, items("q", 5) + items("q2", 3, partition="p"))
        r = await q.pop(ident, "q", batch=2)
        assert r is not None
        await q.ack(ident, [{**acks_for(r)[0], "status": "failed"}])
        await q.pop(ident, "q2", group="g", batch=2)
    finally:
        await q.stop()

    conn = await connect_one(empty_db)
    try:
        counts = await row_counts(conn)
        assert counts["log_segments"] == 2 and counts["log_dlq"] == 1
        before = await snapshot(conn)
        assert before == first
        await apply_migrations(conn)
        assert await snapshot(conn) == first
        assert await row_counts(conn) == counts
    finally:
        await conn.close()


async def test_reapply_takes_no_access_exclusive_lock_on_existing_tables(queen, ident, conn):
    await queen.push(ident, items("q", 3))
    r = await queen.pop(ident, "q")
    await queen.ack(ident, acks_for(r))
    existing = {
        r["oid"]
        for r in await conn.fetch(
            "SELECT oid FROM pg_class WHERE relnamespace = 'queen'::regnamespace"
        )
    }
    async with conn.transaction():
        await apply_sql(conn)
        locks = await conn.fetch(
            """SELECT l.relation, l.relation::regclass::text AS rel, l.mode FROM pg_locks l
                WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'"""
        )
    strong = [
        (r["rel"], r["mode"])
        for r in locks
        if r["relation"] in existing and r["mode"] == "AccessExclusiveLock"
    ]
    assert strong == []
    # the re-apply did lock something (the check is looking at the right backend)
    assert locks


def test_version_rule_with_fake_numbers():
    assert require_server_version(140000, "14.0") == 140000
    assert require_server_version(180001, "18.1") == 180001
    with pytest.raises(ServerVersionError, match=r"PostgreSQL 13\.9 found"):
        require_server_version(130009, "13.9")
    with pytest.raises(ServerVersionError, match="14 or newer"):
        require_server_version(MIN_SERVER_VERSION - 1, "13.99")


async def test_real_server_passes_the_version_check(conn):
    assert await check_server_version(conn) >= MIN_SERVER_VERSION


async def test_a_database_of_the_previous_build_upgrades_in_place(queen, conn):
    """Before the claim and the fire found rows by version, log_timers_claim_v1 and
    log_timers_fire_v1 were PL/pgSQL functions with SET options; now they are SQL wrappers of
    v2. A boot re-applies the schema on such a database: CREATE OR REPLACE must take the same
    names and signatures (a changed result type would fail the boot), and the brokers of the
    previous build, still running during a rolling restart, keep working through them."""
    from queen_timers.timers import store

    await conn.execute("""
      DROP FUNCTION queen.log_timers_claim_v1(int[], timestamptz, int, int, int);
      CREATE FUNCTION queen.log_timers_claim_v1(p_shards int[], p_now timestamptz,
          p_lease_ms int, p_max_rows int, p_per_tenant int)
      RETURNS TABLE (tenant_id uuid, queue text, timer_key text, "partition" text, txn text,
                     message_id uuid, payload bytea, payload_zstd boolean, encrypted boolean,
                     producer_sub text, attempts int, deliver_at timestamptz, late_ms float8,
                     claim_token uuid, visible_at timestamptz)
      LANGUAGE plpgsql SET enable_bitmapscan = off SET enable_seqscan = off
      AS $$ BEGIN RETURN; END $$;
      DROP FUNCTION queen.log_timers_fire_v1(uuid[], text[], text[], int[], bytea[], int[],
                                             text[], uuid[], uuid[], timestamptz);
      CREATE FUNCTION queen.log_timers_fire_v1(
          p_tenants uuid[], p_queues text[], p_partitions text[], p_counts int[],
          p_blobs bytea[], p_seg_of int[], p_keys text[], p_tokens uuid[], p_hashes uuid[],
          p_now timestamptz)
      RETURNS jsonb LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan
      AS $$ BEGIN RETURN '[]'::jsonb; END $$;""")
    await apply_migrations(conn)
    langs = {
        r["proname"]: (r["lanname"], r["proconfig"])
        for r in await conn.fetch(
            "SELECT p.proname, l.lanname, p.proconfig FROM pg_proc p "
            "JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.proname IN ('log_timers_claim_v1', 'log_timers_fire_v1')"
        )
    }
    assert langs == {"log_timers_claim_v1": ("sql", None), "log_timers_fire_v1": ("sql", None)}
    # the previous build's calls, through the wrappers
    from queen_timers.identity import DEFAULT_TENANT

    await store.apply(
        conn,
        [
            {
                "op": "schedule",
                "queue": "u",
                "timerKey": "k",
                "delayMs": 0,
                "txn": "t-up",
                "payload": "e30=",
            }
        ],
        DEFAULT_TENANT,
        "a",
        None,
    )
    rows = await conn.fetch("SELECT * FROM queen.log_timers_claim_v1(NULL, NULL, 30000, 10, 50)")
    assert [r["timer_key"] for r in rows] == ["k"]
