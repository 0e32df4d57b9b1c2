-- Named statements of the operator's views (queen_timers/timers/inspect.py, bulk.py, replay.py).
-- Each is one call of a function of migrations/028_timer_console.sql or 032_console.sql, except
-- the broker list.

-- name: console_timers_pending
SELECT queue, pending, exact FROM queen.log_timers_pending_v2($1::uuid, $2::text, $3::int, $4::text);

-- name: console_timers_near
SELECT * FROM queen.log_timers_near_v2($1::uuid, $2::text, $3::timestamptz, $4::timestamptz,
                                       $5::text);

-- name: console_queue_stats
SELECT * FROM queen.log_queue_stats_v1($1::uuid, $2::text, $3::timestamptz);

-- name: console_histogram
SELECT queen.log_timers_histogram_v2($1::uuid, $2::text, $3::timestamptz, $4::timestamptz,
                                     $5::bigint, $6::timestamptz, $7::text, $8::int, $9::text);

-- name: console_fire_now
SELECT queen.log_timers_fire_now_v1($1::uuid, $2::text, $3::text, $4::timestamptz);

-- name: console_cancel_prefix
SELECT queen.log_timers_cancel_prefix_v1($1::uuid, $2::text, $3::text, $4::int,
                                         $5::timestamptz);

-- name: console_dlq_find
SELECT * FROM queen.log_dlq_find_v1($1::uuid, $2::uuid[], $3::text[]);

-- name: console_dlq_delete
SELECT ord, deleted FROM queen.log_dlq_delete_v1($1::uuid, $2::uuid[], $3::text[]);

-- name: console_dlq_delete_ids
SELECT queen.log_dlq_delete_ids_v1($1::uuid[]);

-- name: console_now
SELECT now();

-- Brokers alive: every process whose connections name it (queen_timers.db.pool.application_name,
-- "queen:<pid>:<role>"), one row per process, with its oldest backend. A `queen` command's
-- connections (role client: queen_timers.service.Queen.client) are not a broker's, nor are
-- the connections to another database of the same server.
-- name: console_brokers
SELECT split_part(application_name, ':', 2) AS pid,
       min(backend_start) AS backend_start,
       host(client_addr) AS client_addr,
       count(*) AS connections
  FROM pg_stat_activity
 WHERE application_name LIKE 'queen:%' AND application_name NOT LIKE 'queen:%:client'
   AND datname = current_database()
 GROUP BY 1, 3
 ORDER BY 2;
