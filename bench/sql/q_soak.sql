-- Named statements of the soak and peers scenarios (read-only on the broker's tables).

-- name: queue_segments
-- The log segments of one queue (default tenant) created at or after an instant (epoch s):
-- the frames carry the message ids, created_at is the fire's commit-time stamp.
SELECT s.partition_id, s.base_offset, extract(epoch FROM s.created_at)::float8 AS created_at,
       s.blob
  FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND s.created_at >= to_timestamp($2)
 ORDER BY s.created_at;

-- name: timers_pending
SELECT count(*) FROM queen.log_timers;

-- name: timers_pending_queue
SELECT count(*) FROM queen.log_timers WHERE queue = $1;
