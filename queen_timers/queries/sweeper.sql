-- Named statements of the sweeper, the notifier and the kill switches.

-- name: notify
SELECT pg_notify($1, $2);

-- name: listen_keepalive
SELECT 1;

-- name: broker_secret
-- The brokers' shared secret (031): notification signatures, metrics tenant labels.
SELECT secret FROM queen.broker_secret WHERE id = 1;

-- name: switches_read
SELECT key, value FROM queen.system_state WHERE key = ANY($1::text[]);

-- name: switches_write
INSERT INTO queen.system_state (key, value, updated_at) VALUES ($1, $2::jsonb, now())
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;
