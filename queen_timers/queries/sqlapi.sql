-- Named statements of the SQL API (queen_timers/sqlapi.py). The behaviour lives in
-- migrations/026_timer_sql_api.sql; these are what an application's driver sends, inside the
-- application's own transaction. Parameters are numbered in order of appearance: the psycopg
-- helper turns each $n into %s.

-- name: sqlapi_schedule
SELECT queen.timer_schedule_v2($1::text, $2::text, $3::bigint, $4::bytea, $5::text, $6::text,
                               $7::uuid, $8::boolean, $9::boolean, $10::boolean, $11::text,
                               $12::text)::text;

-- name: sqlapi_cancel
SELECT queen.timer_cancel_v1($1::text, $2::text, $3::text, $4::uuid)::text;

-- name: sqlapi_publish_limits
INSERT INTO queen.system_state AS s (key, value, updated_at)
VALUES ('timers_sql_limits', $1::jsonb, now())
ON CONFLICT (key) DO UPDATE SET value = s.value || excluded.value, updated_at = excluded.updated_at
 WHERE s.value || excluded.value IS DISTINCT FROM s.value;

-- name: sqlapi_unbound_roles
SELECT name FROM queen.timer_unbound_producers_v1() AS name;

-- name: sqlapi_unbound_policy
SELECT queen.timer_sql_tenancy_v1(l) AS tenancy, queen.timer_sql_refuses_unbound_v1(l) AS refused
  FROM queen.log_timers_limits_v1() AS l;
