-- Named statements of the floor driver (bench/peer_drivers/floor_driver.py). BENCH DATABASE
-- ONLY. Not a copy of the migration's claim and fire: the deliberate floor `queen bench peers`
-- measures our broker against (docs/guides/benchmarks.md), the least work that durably moves
-- a due row out of a table of the staging table's shape, with no packing, log, lease or
-- fairness.

-- name: floor_schema
-- A table of the staging table's shape (same columns, generated columns and keys as
-- queen.log_timers) plus an index on visible_at alone so that one statement can take the
-- oldest due rows across shards, and a table that records deliveries.
CREATE SCHEMA IF NOT EXISTS bench_floor;
CREATE TABLE IF NOT EXISTS bench_floor.timers
  (LIKE queen.log_timers INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING INDEXES);
CREATE INDEX IF NOT EXISTS floor_timers_visible ON bench_floor.timers (visible_at);
CREATE TABLE IF NOT EXISTS bench_floor.delivered (
  message_id   UUID NOT NULL,
  deliver_at   TIMESTAMPTZ NOT NULL,
  delivered_at TIMESTAMPTZ NOT NULL
);

-- name: floor_insert_at
-- schedule: one row per key, due at the epoch instant $2
INSERT INTO bench_floor.timers (queue, timer_key, deliver_at, txn, message_id, payload)
SELECT 'floor', k, to_timestamp($2::float8), k, gen_random_uuid(),
       convert_to('{"bench":true}', 'UTF8')
  FROM unnest($1::text[]) k;

-- name: floor_claim_delete
-- claim + delete + record, one statement, one transaction
WITH c AS (
  SELECT tenant_id, queue, timer_key FROM bench_floor.timers
   WHERE visible_at <= clock_timestamp()
   ORDER BY visible_at LIMIT $1
     FOR UPDATE SKIP LOCKED
), d AS (
  DELETE FROM bench_floor.timers t USING c
   WHERE t.tenant_id = c.tenant_id AND t.queue = c.queue AND t.timer_key = c.timer_key
  RETURNING t.message_id, t.deliver_at
)
INSERT INTO bench_floor.delivered (message_id, deliver_at, delivered_at)
SELECT message_id, deliver_at, clock_timestamp() FROM d
RETURNING extract(epoch FROM deliver_at)::float8 AS due,
          extract(epoch FROM delivered_at)::float8 AS at;
