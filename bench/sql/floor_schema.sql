-- The floor of the peers scenario (BENCH DATABASE ONLY): a table of the staging table's shape
-- (same columns, generated columns and keys as queen.log_timers) plus an index on visible_at
-- alone so that one statement can take the oldest due rows across shards, and a table that
-- records deliveries.
CREATE SCHEMA IF NOT EXISTS bench_floor;
CREATE TABLE IF NOT EXISTS bench_floor.timers
  (LIKE queen.log_timers INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING INDEXES);
CREATE INDEX IF NOT EXISTS floor_timers_visible ON bench_floor.timers (visible_at);
CREATE TABLE IF NOT EXISTS bench_floor.delivered (
  message_id   UUID NOT NULL,
  deliver_at   TIMESTAMPTZ NOT NULL,
  delivered_at TIMESTAMPTZ NOT NULL
);
