"""The table as the design document declares it, and the pure parts (classifier, backoff)."""

from pathlib import Path

import pytest

from queen_timers.db.errors import FailureClass, classify
from queen_timers.db.migrate import apply_sql
from queen_timers.settings import Settings
from queen_timers.timers.backoff import backoff_ms


async def test_table_columns_keys_and_generated_columns(conn):
    cols = await conn.fetch(
        "SELECT attname, format_type(atttypid, atttypmod) AS typ, attnotnull,"
        "       attgenerated::text AS attgenerated,"
        "       (SELECT collname FROM pg_collation c WHERE c.oid = a.attcollation) AS coll"
        "  FROM pg_attribute a WHERE attrelid = 'queen.log_timers'::regclass AND attnum > 0"
        "   AND NOT attisdropped ORDER BY attnum"
    )
    assert [c["attname"] for c in cols] == [
        "tenant_id",
        "queue",
        "timer_key",
        "partition",
        "deliver_at",
        "txn",
        "message_id",
        "payload",
        "payload_zstd",
        "encrypted",
        "producer_sub",
        "attempts",
        "last_error",
        "claimed_until",
        "claim_token",
        "shard",
        "visible_at",
        "created_at",
        "updated_at",
        # the schedule's W3C trace context (migrations/036)
        "trace_parent",
        "trace_state",
    ]
    by = {c["attname"]: c for c in cols}
    assert by["queue"]["coll"] == "C" and by["timer_key"]["coll"] == "C"
    assert by["shard"]["attgenerated"] == "s" and by["visible_at"]["attgenerated"] == "s"
    assert by["shard"]["typ"] == "smallint"
    assert not by["producer_sub"]["attnotnull"] and by["payload"]["attnotnull"]
    pk = await conn.fetchval(
        "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = "
        "'queen.log_timers'::regclass AND indisprimary"
    )
    assert pk.endswith("(tenant_id, queue, timer_key)")


async def test_exactly_one_secondary_index_and_the_storage_settings(conn):
    idx = await conn.fetch(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'queen'"
        " AND tablename = 'log_timers' ORDER BY indexname"
    )
    assert [i["indexname"] for i in idx] == ["idx_log_timers_visible", "log_timers_pkey"]
    assert idx[0]["indexdef"].endswith("(shard, visible_at)")
    opts = set(
        await conn.fetchval(
            "SELECT reloptions FROM pg_class WHERE oid = 'queen.log_timers'::regclass"
        )
    )
    assert {
        "fillfactor=70",
        "autovacuum_vacuum_scale_factor=0",
        "autovacuum_vacuum_threshold=500",
        "autovacuum_vacuum_cost_delay=0",
        "vacuum_truncate=off",
    } <= opts


async def test_shard_is_fixed_at_64_and_visible_at_follows_the_lease(conn):
    await conn.execute(
        "INSERT INTO queen.log_timers (queue, timer_key, deliver_at, txn, message_id, payload) "
        "SELECT 'q', 'k' || g, '2030-01-01Z', 't', gen_random_uuid(), '' "
        "FROM generate_series(1, 2000) g"
    )
    lo, hi, n = await conn.fetchrow(
        "SELECT min(shard), max(shard), count(DISTINCT shard) FROM queen.log_timers"
    )
    assert (lo, hi, n) == (0, 63, 64)
    await conn.execute(
        "UPDATE queen.log_timers SET claimed_until = '2030-01-02Z' WHERE timer_key = 'k1'"
    )
    await conn.execute(
        "UPDATE queen.log_timers SET claimed_until = '2029-12-31Z' WHERE timer_key = 'k2'"
    )
    rows = dict(
        await conn.fetch(
            "SELECT timer_key, visible_at::text FROM queen.log_timers "
            "WHERE timer_key IN ('k1', 'k2')"
        )
    )
    assert rows["k1"].startswith("2030-01-02") and rows["k2"].startswith("2030-01-01")


async def test_reapplying_the_schema_keeps_rows_and_takes_no_exclusive_lock(conn):
    await conn.execute(
        "INSERT INTO queen.log_timers (queue, timer_key, deliver_at, txn, message_id, payload) "
        "VALUES ('q', 'k', now(), 't', gen_random_uuid(), '')"
    )
    async with conn.transaction():
        await apply_sql(conn)
        locks = await conn.fetch(
            "SELECT mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE c.relname = 'log_timers' AND l.pid = pg_backend_pid()"
        )
        assert "AccessExclusiveLock" not in {r["mode"] for r in locks}
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 1


def test_the_fire_goes_through_its_own_procedure_not_the_push_fusion():
    from queen_timers.db import Q

    assert "log_timers_fire_v2" in Q.timers_fire and "push_multi" not in Q.timers_fire
    body = Path("migrations/025_log_timers.sql").read_text()
    fire_sql = body[body.index("FUNCTION queen.log_timers_fire_v2") :]
    fire_sql = fire_sql[: fire_sql.index("END $$;")]
    fire_sql = "\n".join(ln.split("--")[0] for ln in fire_sql.splitlines())  # code, not comments
    assert "log_push_one_v1" in fire_sql
    # the fire never waits in the timer space: every lock it takes on log_timers skips
    assert fire_sql.count("FOR UPDATE OF t SKIP LOCKED") >= 1
    assert fire_sql.count("FOR UPDATE") == fire_sql.count(
        "FOR UPDATE OF t SKIP LOCKED"
    ) + fire_sql.count("ORDER BY p.id FOR UPDATE")  # the one waiting lock: partitions, by id


@pytest.mark.parametrize(
    "code,cls",
    [
        ("40001", "transient"),
        ("40P01", "transient"),
        ("08006", "transient"),
        ("08000", "transient"),
        ("53300", "transient"),
        ("57014", "transient"),
        ("57P01", "transient"),
        ("58030", "transient"),
        (None, "transient"),
        ("42883", "config"),
        ("42P01", "config"),
        ("22001", "permanent"),
        ("22023", "permanent"),
        ("23503", "permanent"),
        ("23505", "permanent"),
        ("23514", "permanent"),
        ("P0001", "permanent"),
        ("55P03", "permanent"),
        ("40002", "permanent"),
        ("40003", "permanent"),
        ("25006", "permanent"),
        ("", "permanent"),
        ("4", "permanent"),
        ("40p01", "permanent"),
        ("éé", "permanent"),
        ("0800", "permanent"),
    ],
)
def test_classifier(code, cls):
    assert classify(code) is FailureClass(cls)
    assert classify(code) is classify(code)  # pure


def test_backoff():
    s = Settings(environ={})
    assert [backoff_ms(s, a, FailureClass.PERMANENT) for a in range(8)] == [
        1000,
        2000,
        4000,
        8000,
        16000,
        32000,
        60000,
        60000,
    ]
    assert backoff_ms(s, 3, FailureClass.CONFIG) == 8000
    assert backoff_ms(s, 10**6, FailureClass.PERMANENT) == 60000
    assert backoff_ms(s, -5, FailureClass.PERMANENT) == 1000
    assert backoff_ms(s, 4, FailureClass.TRANSIENT) == 1000
