-- Named statements of the amplification scenario. BENCH DATABASE ONLY: they rewrite the
-- staging table directly (rows in backoff are made by INSERT, not by failing fires).

-- name: checkpoint
CHECKPOINT;

-- name: vacuum_timers
VACUUM queen.log_timers;

-- name: vacuum_analyze_timers
VACUUM ANALYZE queen.log_timers;

-- name: vacuum_full_timers
VACUUM FULL queen.log_timers;

-- name: truncate_timers
TRUNCATE queen.log_timers;

-- name: timers_reloptions
SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class
 WHERE oid = 'queen.log_timers'::regclass;

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
SELECT * FROM queen.log_timers_claim_v2(NULL, $1::timestamptz, 30000, $2::int, 50);
