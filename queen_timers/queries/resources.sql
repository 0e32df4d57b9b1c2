-- Named statements of the official client's admin surface (queen_timers/resources.py). Each is
-- one call of a function of migrations/034_resources.sql.

-- name: resources_partitions
SELECT * FROM queen.log_partition_rows_v1($1::uuid, $2::text, $3::text, $4::timestamptz);

-- name: resources_queue_config
SELECT * FROM queen.log_queue_config_v1($1::uuid, $2::text);

-- name: resources_segments_recent
SELECT * FROM queen.log_segments_recent_v1($1::uuid, $2::text, $3::text, $4::int);

-- name: resources_message_find
SELECT * FROM queen.log_message_find_v1($1::uuid, $2::uuid, $3::uuid);

-- name: resources_leases
SELECT * FROM queen.log_leases_v1($1::uuid, $2::timestamptz);

-- name: resources_queue_delete
SELECT queen.log_queue_delete_v1($1::uuid, $2::text);

-- name: resources_consumer_groups
SELECT * FROM queen.log_consumer_groups_v1($1::uuid, $2::text, $3::timestamptz);

-- name: resources_consumer_group_delete
SELECT queen.log_consumer_group_delete_v1($1::uuid, $2::text, $3::text, $4::boolean);

-- name: resources_consumer_group_seek
SELECT queen.log_consumer_group_seek_v1($1::uuid, $2::text, $3::text, $4::timestamptz);
