-- Named statements of the log (queen_timers/db/queries.py loads them).

-- name: queue_encryption
SELECT name, encryption_enabled FROM queen.queues WHERE tenant_id = $1 AND name = ANY($2::text[]);

-- name: push_segments
SELECT queen.log_push_v1($1::uuid, $2::text[], $3::text[], $4::int[], $5::uuid[], $6::bytea[]);

-- name: segment_at
SELECT base_offset, blob FROM queen.log_segments
 WHERE partition_id = $1 AND base_offset <= $2 AND end_offset >= $2
 ORDER BY base_offset DESC LIMIT 1;

-- name: schema_ready
SELECT to_regclass('queen.log_segments') IS NOT NULL AND to_regclass('queen.system_state') IS NOT NULL;

-- name: schema_stamp_write
INSERT INTO queen.system_state (key, value, updated_at) VALUES ('schema', $1::text::jsonb, now())
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;

-- name: schema_stamp_read
SELECT value || jsonb_build_object('appliedAt', updated_at)
  FROM queen.system_state WHERE key = 'schema';

-- name: server_version
SHOW server_version;
