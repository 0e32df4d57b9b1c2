-- Named statements of the log's consumer side: configure, pop, ack, dead letters, maintenance
-- (queen_timers/db/queries.py loads them).

-- name: configure_queue
SELECT queen.log_configure_queue_v1($1::uuid, $2::text, $3::text, $4::text, $5::jsonb);

-- name: queue_options
SELECT queen.log_queue_options_v1($1::uuid, $2::text);

-- name: pop_claim
SELECT r_queue, r_partition, r_pid, r_base, r_start, r_take, r_created_at, r_blob, r_attempt
  FROM queen.log_pop_v1($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text,
                        $8::int, $9::int, $10::text, $11::boolean, $12::int,
                        coalesce($13::timestamptz, now()));

-- name: queues_matching
SELECT queen.log_queues_matching_v1($1::uuid, $2::text, $3::text) AS name;

-- name: ack_apply
SELECT queen.log_ack_v2($1::uuid, $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[],
                        $7::text[], coalesce($8::timestamptz, now()));

-- name: ack_segment_at
SELECT base_offset, created_at, blob FROM queen.log_segments
 WHERE partition_id = $1 AND base_offset <= $2 AND end_offset >= $2
 ORDER BY base_offset DESC LIMIT 1;

-- name: dlq_head
SELECT queen.log_dlq_head_v2($1::uuid, $2::text, $3::text, $4::bigint, $5::bigint,
                             $6::boolean, $7::uuid, $8::text, $9::text::jsonb, $10::text,
                             $11::timestamptz, coalesce($12::timestamptz, now()));

-- name: renew_lease
SELECT queen.log_renew_lease_v1($1::uuid, $2::text, $3::int, coalesce($4::timestamptz, now()));

-- name: dlq_list
SELECT queen.log_dlq_list_v3($1::uuid, $2::text, $3::text, $4::text, $5::timestamptz,
                             $6::timestamptz, $7::int, $8::int);

-- name: maintenance_now
SELECT coalesce($1::timestamptz, now());

-- name: maintenance_take
SELECT queen.maintenance_take_v1($1::text, $2::int);

-- name: maintenance_release
SELECT queen.maintenance_release_v1($1::text);

-- name: retention_work
SELECT pid, all_cutoff, completed_cutoff FROM queen.log_retention_work_v1($1::timestamptz);

-- name: retention_step
SELECT queen.log_retention_step_v1($1::uuid, $2::timestamptz, $3::timestamptz, $4::int);

-- name: txns_purge_work
SELECT pid, cutoff FROM queen.log_txns_purge_work_v1($1::timestamptz, $2::int);

-- name: txns_purge_step
SELECT queen.log_txns_purge_step_v1($1::uuid, $2::timestamptz, $3::int);

-- name: partition_cleanup_step
SELECT queen.log_partition_cleanup_step_v1($1::timestamptz, $2::int);

-- name: push_segments_checked
SELECT queen.log_push_checked_v1($1::uuid, $2::text[], $3::text[], $4::int[], $5::uuid[],
                                 $6::bytea[], $7::boolean);
