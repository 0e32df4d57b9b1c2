-- Named statements of the boot's look at the link to PostgreSQL (queen_timers.db.pooler).

-- name: link_backend_pid
SELECT pg_backend_pid();

-- name: link_statement_timeout
SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout';  -- ms
