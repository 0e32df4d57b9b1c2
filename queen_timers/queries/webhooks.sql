-- Named statements of the webhook targets (queen_timers/webhooks/store.py). Plain statements
-- on the tables of migrations/035_webhooks.sql, each scoped to the caller's tenant ($1), except
-- the delivery plugin's reads across tenants (webhook_targets_all, webhook_secrets_all).

-- name: webhook_target_upsert
INSERT INTO queen.webhook_targets AS t
       (tenant_id, name, queue, url, method, headers, timeout_ms, max_attempts, max_age_ms,
        backoff_ms, max_backoff_ms, concurrency, rate_per_s, paused)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (tenant_id, name) DO UPDATE
   SET queue = excluded.queue, url = excluded.url, method = excluded.method,
       headers = excluded.headers, timeout_ms = excluded.timeout_ms,
       max_attempts = excluded.max_attempts, max_age_ms = excluded.max_age_ms,
       backoff_ms = excluded.backoff_ms, max_backoff_ms = excluded.max_backoff_ms,
       concurrency = excluded.concurrency, rate_per_s = excluded.rate_per_s,
       paused = excluded.paused, updated_at = now()
RETURNING (xmax = 0) AS created;

-- name: webhook_target_queue_owner
SELECT name::text FROM queen.webhook_targets
 WHERE tenant_id = $1 AND queue = $2 COLLATE "C" AND name <> $3 COLLATE "C";

-- name: webhook_targets_list
SELECT t.*, t.name::text AS name_text, t.queue::text AS queue_text,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                   'id', s.secret_id::text,
                   'createdAt', to_char(s.created_at AT TIME ZONE 'UTC',
                                        'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                   ORDER BY s.created_at, s.secret_id)
                   FROM queen.webhook_secrets s
                  WHERE s.tenant_id = t.tenant_id AND s.target = t.name), '[]'::jsonb)
         AS secrets
  FROM queen.webhook_targets t
 WHERE t.tenant_id = $1 AND ($2::text IS NULL OR t.name = $2 COLLATE "C")
   AND ($3::text IS NULL OR t.name > $3 COLLATE "C")
 ORDER BY t.name
 LIMIT $4;

-- name: webhook_target_delete
DELETE FROM queen.webhook_targets WHERE tenant_id = $1 AND name = $2 COLLATE "C"
RETURNING queue::text;

-- name: webhook_target_exists
SELECT 1 FROM queen.webhook_targets WHERE tenant_id = $1 AND name = $2 COLLATE "C";

-- name: webhook_target_lock
SELECT 1 FROM queen.webhook_targets WHERE tenant_id = $1 AND name = $2 COLLATE "C" FOR UPDATE;

-- name: webhook_secret_insert
INSERT INTO queen.webhook_secrets (tenant_id, target, secret_id, sealed)
VALUES ($1, $2, $3, $4)
RETURNING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

-- name: webhook_secret_count
SELECT count(*) FROM queen.webhook_secrets WHERE tenant_id = $1 AND target = $2 COLLATE "C";

-- name: webhook_secret_delete
DELETE FROM queen.webhook_secrets
 WHERE tenant_id = $1 AND target = $2 COLLATE "C" AND secret_id = $3 COLLATE "C"
RETURNING 1;

-- name: webhook_targets_all
SELECT t.*, t.name::text AS name_text, t.queue::text AS queue_text
  FROM queen.webhook_targets t
 ORDER BY t.tenant_id, t.name;

-- name: webhook_secrets_all
SELECT tenant_id, target::text, secret_id::text, sealed
  FROM queen.webhook_secrets
 ORDER BY tenant_id, target, created_at, secret_id;

-- name: webhook_attempts_insert
INSERT INTO queen.webhook_attempts
       (tenant_id, target, webhook_id, attempt, at, status, latency_ms, outcome, error)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::timestamptz[],
                     $6::int[], $7::int[], $8::text[], $9::text[]);

-- name: webhook_attempts_trim
-- The edge is a scalar subquery, run once: as a joined derived table the planner ran it per
-- row (a nested loop, 325-417 ms at 1,000 rows against 0.4-0.7 ms; bench/RESULTS.md).
DELETE FROM queen.webhook_attempts
 WHERE tenant_id = $1 AND target = $2 COLLATE "C"
   AND id <= (SELECT id FROM queen.webhook_attempts
               WHERE tenant_id = $1 AND target = $2 COLLATE "C"
               ORDER BY id DESC OFFSET $3 LIMIT 1);

-- name: webhook_attempts_list
SELECT id, webhook_id, attempt, at, status, latency_ms, outcome, error
  FROM queen.webhook_attempts
 WHERE tenant_id = $1 AND target = $2 COLLATE "C"
   AND ($3::text IS NULL OR webhook_id = $3)
   AND ($4::bigint IS NULL OR id < $4)
 ORDER BY id DESC
 LIMIT $5;

-- name: webhook_target_pause
UPDATE queen.webhook_targets SET paused = $3, updated_at = now()
 WHERE tenant_id = $1 AND name = $2 COLLATE "C"
RETURNING 1;
