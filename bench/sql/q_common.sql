-- Named statements shared by every bench scenario (bench/queries.py loads them as BQ.x).
-- Read-only: catalogue and statistics views.

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
