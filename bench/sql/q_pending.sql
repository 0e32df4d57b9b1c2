-- Named statements of the pending-set scenario (bench/pending.py). BENCH DATABASE ONLY: the
-- load writes the staging table directly and the phases empty the log between them.

-- name: pending_load
-- $1 pending timers, laid out as tenant x queue x key: tenant ($2::uuid[])[t], queue
-- 'pending-<q>' (q < $3), key 'k' || the zero-padded index j inside its (tenant, queue). Rows
-- arrive in the order the planner walks the series (the queues' keys interleave in the heap,
-- as in a live table where many queues schedule at once), and both indexes are maintained
-- row by row. Every column the table computes
-- itself (shard, visible_at, created_at, updated_at, attempts, the flags) is left to its
-- default or generation expression. deliver_at: one day ahead plus a uniform spread over 90
-- days. message_id: md5 of the key as a uuid (unique, and not one read of the server's random
-- source per row).
INSERT INTO queen.log_timers (tenant_id, queue, timer_key, deliver_at, txn, message_id, payload)
SELECT t.id, 'pending-' || q, 'k' || lpad(j::text, 10, '0'),
       $4::timestamptz + interval '1 day' + random() * interval '90 days',
       'p-' || ti || '-' || q || '-' || j,
       md5(t.id::text || q || '/' || j)::uuid, $5::bytea
  FROM unnest($2::uuid[]) WITH ORDINALITY AS t(id, ti)
 CROSS JOIN generate_series(0, $3 - 1) AS q
 CROSS JOIN generate_series(0, ceil($1::numeric / (cardinality($2::uuid[]) * $3))::int - 1) AS j
 WHERE (j * cardinality($2::uuid[]) * $3 + (ti - 1) * $3 + q) < $1;

-- name: pending_sizes
-- Heap, TOAST (its heap and index), each index, and the free-space and visibility maps.
SELECT pg_relation_size(c.oid) AS heap_bytes,
       coalesce(pg_relation_size(c.reltoastrelid), 0)
         + coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i
                      WHERE i.indrelid = c.reltoastrelid), 0) AS toast_bytes,
       pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm') AS maps_bytes,
       pg_relation_size('queen.log_timers_pkey'::regclass) AS pkey_bytes,
       pg_relation_size('queen.idx_log_timers_visible'::regclass) AS visible_bytes
  FROM pg_class c WHERE c.oid = 'queen.log_timers'::regclass;

-- name: pending_table_stats
-- The table's vacuum and analyze counters; total_*_time exist from PostgreSQL 18 (read as NULL
-- before).
SELECT s.n_live_tup, s.n_dead_tup, s.vacuum_count, s.autovacuum_count, s.autoanalyze_count,
       s.n_mod_since_analyze,
       (SELECT c.reltuples FROM pg_class c WHERE c.oid = s.relid)::float8 AS reltuples,
       (to_jsonb(s) ->> 'total_vacuum_time')::float8 AS vacuum_ms,
       (to_jsonb(s) ->> 'total_autovacuum_time')::float8 AS autovacuum_ms
  FROM pg_stat_user_tables s WHERE s.relid = 'queen.log_timers'::regclass;

-- name: pending_function_stats
-- Calls and in-database time of the sweeper's procedures (needs track_functions = 'pl').
SELECT p.funcname, p.calls, p.total_time, p.self_time
  FROM pg_stat_user_functions p
 WHERE p.schemaname = 'queen' AND p.funcname = ANY ($1::text[]);

-- name: pending_track_functions
-- Per database, for every session opened after it (the brokers'): pg_stat_user_functions.
SELECT format('ALTER DATABASE %I SET track_functions = %L', current_database(), 'pl');

-- name: pending_stats_flush
SELECT pg_stat_force_next_flush();

-- name: pending_clear_log
-- Between phases, with no broker running: the log the previous phase's fires wrote, so each
-- phase counts its own frames. The pending set (queen.log_timers) is not touched.
TRUNCATE queen.queues, queen.log_partitions, queen.log_segments, queen.log_txns,
         queen.log_consumers, queen.log_dlq, queen.log_consumer_groups;

-- name: pending_delete_queue
DELETE FROM queen.log_timers WHERE queue = $1;

-- name: pending_av_defaults
-- The PostgreSQL defaults for the table: every storage parameter 025 sets except fillfactor.
ALTER TABLE queen.log_timers RESET (autovacuum_vacuum_scale_factor,
  autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay, vacuum_truncate);

-- name: pending_av_schema
-- Back to 025's parameters (the values its CREATE TABLE sets).
ALTER TABLE queen.log_timers SET (autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 500, autovacuum_vacuum_cost_delay = 0, vacuum_truncate = off);

-- name: pending_shared_buffers
SELECT current_setting('shared_buffers') AS shown,
       pg_size_bytes(current_setting('shared_buffers'))::float8 AS bytes;

-- name: pending_template_note
-- A kept template's note (COMMENT ON DATABASE): its load's fingerprint, time and figures.
SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1;

-- name: pending_template_exists
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1);

-- name: pending_warm_heap
-- Every heap page of the table into shared_buffers: a TID range scan reads through the normal
-- buffer strategy, where a seq scan of a table over a quarter of shared_buffers reads through a
-- 256 kB ring and leaves almost nothing cached. (pg_prewarm would do it; the embedded server
-- ships no contrib modules.)
SELECT count(*) FROM queen.log_timers
 WHERE ctid >= '(0,0)'::tid
   AND ctid < format('(%s,0)', pg_relation_size('queen.log_timers') / 8192 + 1)::tid;
