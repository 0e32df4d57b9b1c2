-- Named statements shared by the bench scenarios (bench/queries.py loads them as BQ.x).
-- The catalogue reads are harmless anywhere; the rest write the staging table directly and
-- run on a bench database only. The probe and the claim are the migrations' own procedures
-- (log_timers_due_v1, log_timers_claim_v3), called under EXPLAIN.

-- name: server_version
SELECT version();

-- name: pg_settings
SELECT name, setting, unit, current_setting(name) AS shown FROM pg_settings
 WHERE name = ANY($1::text[]) ORDER BY name;

-- name: shared_buffers_compare
-- The server's shared_buffers and the size $1 asks for, both in bytes (pg_size_bytes rejects
-- what is not a size).
SELECT pg_size_bytes(current_setting('shared_buffers'))::float8, pg_size_bytes($1)::float8;

-- name: data_directory
SELECT setting FROM pg_settings WHERE name = 'data_directory';

-- name: wal_insert_lsn
SELECT pg_current_wal_insert_lsn()::text;

-- name: now_epoch
SELECT extract(epoch FROM clock_timestamp())::float8;

-- name: table_stats
-- Cumulative counters of one table (flushed by backends at most once a second: callers that
-- need exact deltas wait for the flush, see bench/sampler.py stats_settled).
-- Whole row: PostgreSQL 16 adds n_tup_newpage_upd (updates whose new version left the page),
-- 18 adds total_autovacuum_time.
SELECT * FROM pg_stat_user_tables WHERE relid = to_regclass($1);

-- name: relation_sizes
SELECT pg_relation_size(to_regclass($1)) AS heap_bytes,
       pg_indexes_size(to_regclass($1)) AS index_bytes,
       (SELECT coalesce(json_object_agg(i.indexrelid::regclass::text,
                                        pg_relation_size(i.indexrelid)), '{}'::json)
          FROM pg_index i WHERE i.indrelid = to_regclass($1)) AS indexes;

-- name: sample
-- One 100 ms sample: WAL insert position, the table's counters and sizes, and every
-- autovacuum worker of the server with the table it is on (progress view when vacuuming,
-- the activity's query text otherwise, e.g. for ANALYZE). The table's statistics row is taken
-- whole: PostgreSQL 18 adds total_autovacuum_time, the exact time autovacuum spent on it.
SELECT extract(epoch FROM clock_timestamp())::float8 AS ts,
       pg_current_wal_insert_lsn()::text AS lsn,
       (SELECT row_to_json(s) FROM (
          SELECT * FROM pg_stat_user_tables WHERE relid = to_regclass($1)) s) AS tab,
       pg_relation_size(to_regclass($1)) AS heap_bytes,
       pg_indexes_size(to_regclass($1)) AS index_bytes,
       (SELECT sum((to_jsonb(t) ->> 'total_autovacuum_time')::float8)
          FROM pg_stat_user_tables t) AS av_ms_all_tables,
       (SELECT coalesce(json_agg(json_build_object(
                 'pid', a.pid, 'db', a.datname, 'query', left(a.query, 200),
                 'table', CASE WHEN a.datname = current_database() AND p.relid IS NOT NULL
                               THEN p.relid::regclass::text END,
                 'phase', p.phase)), '[]'::json)
          FROM pg_stat_activity a
          LEFT JOIN pg_stat_progress_vacuum p ON p.pid = a.pid
         WHERE a.backend_type = 'autovacuum worker') AS av,
       (SELECT coalesce(json_agg(json_build_object('pid', a.pid, 'app', a.application_name)),
                        '[]'::json)
          FROM pg_stat_activity a
         WHERE a.datname = current_database() AND a.backend_type = 'client backend') AS backends;

-- name: checkpoint
CHECKPOINT;

-- name: vacuum_timers
VACUUM queen.log_timers;

-- name: vacuum_analyze_timers
VACUUM ANALYZE queen.log_timers;

-- name: timers_reloptions
SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class
 WHERE oid = 'queen.log_timers'::regclass;

-- name: insert_due
-- $1 healthy rows due one second before $2: what a claim pass has to find.
INSERT INTO queen.log_timers (queue, timer_key, deliver_at, txn, message_id, payload)
SELECT 'bench-due', 'd' || g, $2::timestamptz - interval '1 second' + make_interval(secs => g * 0.0001),
       'd' || g, gen_random_uuid(), convert_to('{"healthy":true}', 'UTF8')
  FROM generate_series(1, $1) g;

-- name: explain_due
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT queen.log_timers_due_v1(NULL, $1::timestamptz, 2000);

-- name: explain_claim
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT * FROM queen.log_timers_claim_v3(NULL, $1::timestamptz, 30000, $2::int, 50);

-- name: vacuum_analyze_dlq
VACUUM ANALYZE queen.log_dlq;

-- name: console_load
-- `queen bench console-routes`: $1 pending timers in one queue by the table's column defaults
-- (tenant, partition, flags, timestamps), the statement a schedule would run without the
-- broker's per-op work; 0.1% of them overdue by up to an hour.
INSERT INTO queen.log_timers (queue, timer_key, deliver_at, txn, message_id, payload)
SELECT 'big', 'k/' || lpad(i::text, 7, '0'),
       CASE WHEN i % 1000 = 0 THEN now() - random() * interval '1 hour'
            ELSE now() + random() * interval '90 days' END,
       'txn-' || i, gen_random_uuid(), '\x7b7d'::bytea
  FROM generate_series(0, $1::int - 1) AS i;

-- name: console_dead
-- 1,000 dead letters of partition $1, for the replay and delete routes.
INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset", transaction_id, payload)
SELECT $1::uuid, '__QUEUE_MODE__', i, 'dead-' || i, '{"n": 1}'::jsonb
  FROM generate_series(0, 999) AS i;

-- name: frames_pushed
-- Frames in the log by the partitions' allocator heads (a few rows), not count(*) over
-- log_txns, which reads every frame so far: polled every 50 ms it took a drain's CPU.
SELECT coalesce(sum(last_offset + 1), 0) FROM queen.log_partitions;

-- name: frames_count
SELECT count(*) FROM queen.log_txns;

-- name: frames_duplicated
SELECT count(*) FROM (SELECT txn_hash FROM queen.log_txns GROUP BY txn_hash
                      HAVING count(*) > 1) d;

-- name: drain_span
-- First and last fire of a drain (the log was emptied before it).
SELECT extract(epoch FROM min(created_at))::float8 AS first,
       extract(epoch FROM max(created_at))::float8 AS last FROM queen.log_segments;
