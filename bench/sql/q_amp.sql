-- Named statements of the amplification scenario. BENCH DATABASE ONLY: they rewrite the
-- staging table directly (rows in backoff are made by INSERT, not by failing fires).

-- name: vacuum_full_timers
VACUUM FULL queen.log_timers;

-- name: truncate_timers
TRUNCATE queen.log_timers;

-- name: timers_indexes
SELECT string_agg(pg_get_indexdef(indexrelid), '; ' ORDER BY indexrelid)
  FROM pg_index WHERE indrelid = 'queen.log_timers'::regclass;

-- name: insert_backoff
-- $1 rows serving out a permanent-failure backoff: due long ago (deliver_at at the head of a
-- (shard, deliver_at) index), claimed_until an hour ahead, claim_token NULL, 3 attempts spent.
INSERT INTO queen.log_timers (queue, timer_key, deliver_at, txn, message_id, payload, attempts,
                              last_error, claimed_until, updated_at)
SELECT 'bench-backoff', 'b' || g, $2::timestamptz - make_interval(secs => 600 + g * 0.001),
       'b' || g, gen_random_uuid(), convert_to('{"poisoned":true}', 'UTF8'), 3,
       'bench: permanent failure', $2::timestamptz + interval '1 hour', $2::timestamptz
  FROM generate_series(1, $1) g;

-- name: variant_b_fillfactor
-- Variant B: the design's index, fillfactor 100 instead of 70 (on an empty table, then
-- VACUUM FULL rewrites it at the new fillfactor).
ALTER TABLE queen.log_timers SET (fillfactor = 100);

-- name: autovacuum_off
-- No autovacuum on the tables a timer writes while WAL is attributed to one phase at a time
-- (an autovacuum's WAL would land in whichever phase it overlapped).
ALTER TABLE queen.log_timers SET (autovacuum_enabled = false);
ALTER TABLE queen.log_segments SET (autovacuum_enabled = false);
ALTER TABLE queen.log_txns SET (autovacuum_enabled = false);
ALTER TABLE queen.log_partitions SET (autovacuum_enabled = false);

-- name: autovacuum_on
-- Back to the schema's autovacuum settings.
ALTER TABLE queen.log_timers RESET (autovacuum_enabled);
ALTER TABLE queen.log_segments RESET (autovacuum_enabled);
ALTER TABLE queen.log_txns RESET (autovacuum_enabled);
ALTER TABLE queen.log_partitions RESET (autovacuum_enabled);
