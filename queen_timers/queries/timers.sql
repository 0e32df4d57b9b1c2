-- Named statements of the timers (queen_timers/timers/store.py). Each is one call of a stored
-- procedure of migrations/025_log_timers.sql; the behaviour lives there.

-- name: timers_apply
SELECT queen.log_timers_apply_bounded_v1($1::jsonb, $2::uuid, $3::text, $4::timestamptz, NULL,
                                         $5::jsonb, $6::int);

-- name: timers_apply_checked
SELECT queen.log_timers_apply_bounded_v1($1::jsonb, $2::uuid, $3::text, $4::timestamptz,
                                         $5::text[], $6::jsonb, $7::int);

-- name: timers_lock_wait
-- The lock bound of a write made in the caller's transaction (migrations/029 has the why).
SELECT set_config('lock_timeout', $1::text, true);

-- name: timers_first_refusal
SELECT * FROM queen._log_timers_refusal_v1($1::jsonb, $2::jsonb);

-- name: timers_due
SELECT queen.log_timers_due_v1($1::int[], $2::timestamptz, $3::int);

-- name: timers_claim
SELECT * FROM queen.log_timers_claim_v3($1::int[], $2::timestamptz, $3::int, $4::int, $5::int);

-- name: timers_fire
SELECT queen.log_timers_fire_v2($1::uuid[], $2::text[], $3::text[], $4::int[], $5::bytea[],
                                $6::int[], $7::text[], $8::uuid[], $9::uuid[], $10::tid[],
                                $11::timestamptz);

-- name: timers_fail
SELECT queen.log_timers_fail_v1($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::int[],
                                $6::text, $7::boolean, $8::int, $9::timestamptz);

-- name: timers_dlq
SELECT queen.log_timers_dlq_v2($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::int,
                               $6::timestamptz);

-- name: timers_release
SELECT queen.log_timers_release_v1($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::timestamptz);

-- name: timers_peek
SELECT queen.log_timers_peek_v1($1::uuid, $2::text, $3::text, $4::timestamptz);

-- name: timers_list
SELECT queen.log_timers_list_v1($1::uuid, $2::text, $3::text, $4::int, $5::timestamptz);

-- name: timers_count
SELECT queen.log_timers_count_v1($1::uuid, $2::text, $3::text);

-- name: timers_queue_encryption
SELECT name, encryption_enabled FROM queen.queues
 WHERE tenant_id = $1 AND name = ANY($2::text[]) AND encryption_enabled;
