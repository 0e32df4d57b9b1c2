-- 034_resources.sql: the reads and the queue delete behind the official client's admin surface
-- (queen_timers/resources.py, docs/guides/official-client.md). Every function takes the
-- caller's tenant and reads or deletes that tenant's rows only. Re-applied at every boot:
-- CREATE OR REPLACE only.

-- One row per partition of the tenant's queues (or of one queue): its log span and, for one
-- consumer group (p_group; '__QUEUE_MODE__' for queue mode), the cursor and lease. A group with
-- no cursor in a partition has committed -1: its whole retained log is pending, as its first
-- pop in mode 'all' would see it.
CREATE OR REPLACE FUNCTION queen.log_partition_rows_v1(p_tenant uuid, p_queue text,
                                                       p_group text, p_now timestamptz)
RETURNS TABLE (queue text, queue_id uuid, namespace text, task text, partition_id uuid,
               partition text, created_at timestamptz, last_write_at timestamptz,
               log_start bigint, last_offset bigint, committed bigint, pending bigint,
               leased bigint, lease_expires_at timestamptz, total_consumed bigint,
               consumer_groups bigint, dead_letters bigint)
LANGUAGE sql STABLE AS $$
  SELECT q.name::text, q.id, q.namespace, q.task, p.id, p.name::text, p.created_at,
         p.last_write_at, p.log_start, p.last_offset,
         coalesce(c.committed, -1),
         greatest(p.last_offset - greatest(coalesce(c.committed, -1), p.log_start - 1), 0),
         CASE WHEN c.batch_end IS NOT NULL AND c.lease_expires_at > p_now
              THEN c.batch_end - c.committed ELSE 0 END,
         CASE WHEN c.lease_expires_at > p_now THEN c.lease_expires_at END,
         coalesce(c.total_consumed, 0),
         (SELECT count(*) FROM queen.log_consumers g
           WHERE g.partition_id = p.id AND g.consumer_group <> '__QUEUE_MODE__'),
         (SELECT count(*) FROM queen.log_dlq d WHERE d.partition_id = p.id)
    FROM queen.queues q
    JOIN queen.log_partitions p ON p.queue_id = q.id
    LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
   WHERE q.tenant_id = p_tenant AND (p_queue IS NULL OR q.name = p_queue COLLATE "C")
   ORDER BY q.name, p.name
$$;

-- One queue's configuration (the columns the reference's queue detail names).
CREATE OR REPLACE FUNCTION queen.log_queue_config_v1(p_tenant uuid, p_queue text)
RETURNS TABLE (id uuid, name text, namespace text, task text, created_at timestamptz,
               lease_time int, retry_limit int, retry_delay int, ttl int, priority int,
               max_size int, dead_letter_queue boolean, encryption_enabled boolean)
LANGUAGE sql STABLE AS $$
  SELECT q.id, q.name::text, q.namespace, q.task, q.created_at, q.lease_time, q.retry_limit,
         q.retry_delay, q.ttl, q.priority, q.max_size, q.dead_letter_queue,
         q.encryption_enabled
    FROM queen.queues q
   WHERE q.tenant_id = p_tenant AND q.name = p_queue COLLATE "C"
$$;

-- The newest segments of the tenant's partitions (one queue, optionally one partition), newest
-- first, at most p_limit: the messages list decodes them (frames are packed, so a page of
-- messages is a page of segments cut to size in Python).
CREATE OR REPLACE FUNCTION queen.log_segments_recent_v1(p_tenant uuid, p_queue text,
                                                        p_partition text, p_limit int)
RETURNS TABLE (queue text, namespace text, task text, partition_id uuid, partition text,
               base_offset bigint, end_offset bigint, created_at timestamptz, blob bytea,
               committed bigint, batch_end bigint, lease_expires_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT q.name::text, q.namespace, q.task, p.id, p.name::text, s.base_offset, s.end_offset,
         s.created_at, s.blob, coalesce(c.committed, -1), c.batch_end, c.lease_expires_at
    FROM queen.queues q
    JOIN queen.log_partitions p ON p.queue_id = q.id
    JOIN queen.log_segments s ON s.partition_id = p.id
    LEFT JOIN queen.log_consumers c
      ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
   WHERE q.tenant_id = p_tenant AND q.name = p_queue COLLATE "C"
     AND (p_partition IS NULL OR p.name = p_partition COLLATE "C")
   ORDER BY s.created_at DESC, s.base_offset DESC
   LIMIT p_limit
$$;

-- Where one message is: its partition (the tenant's), the newest offset its txn digest has in
-- the log (queen.log_txns, kept for the dedup window), and the segment holding that offset.
CREATE OR REPLACE FUNCTION queen.log_message_find_v1(p_tenant uuid, p_partition uuid,
                                                     p_txn_hash uuid)
RETURNS TABLE (queue text, namespace text, task text, partition text, "offset" bigint,
               base_offset bigint, created_at timestamptz, blob bytea, committed bigint,
               batch_end bigint, lease_expires_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT q.name::text, q.namespace, q.task, p.name::text, t."offset", s.base_offset,
         s.created_at, s.blob, coalesce(c.committed, -1), c.batch_end, c.lease_expires_at
    FROM queen.log_partitions p
    JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
    JOIN queen.log_txns t ON t.partition_id = p.id AND t.txn_hash = p_txn_hash
    JOIN queen.log_segments s
      ON s.partition_id = p.id AND s.base_offset <= t."offset" AND s.end_offset >= t."offset"
    LEFT JOIN queen.log_consumers c
      ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
   WHERE p.id = p_partition
   ORDER BY t."offset" DESC
   LIMIT 1
$$;

-- Leases held now in the tenant's partitions: {active, partitionsWithLeases, messages}.
CREATE OR REPLACE FUNCTION queen.log_leases_v1(p_tenant uuid, p_now timestamptz)
RETURNS TABLE (active bigint, partitions bigint, messages bigint)
LANGUAGE sql STABLE AS $$
  SELECT count(DISTINCT c.worker_id), count(DISTINCT c.partition_id),
         coalesce(sum(c.batch_end - c.committed), 0)::bigint
    FROM queen.queues q
    JOIN queen.log_partitions p ON p.queue_id = q.id
    JOIN queen.log_consumers c ON c.partition_id = p.id
   WHERE q.tenant_id = p_tenant AND c.batch_end IS NOT NULL AND c.lease_expires_at > p_now
$$;

-- Delete one queue of one tenant in ONE transaction (the caller's): its pending timers, its
-- dead letters and txn digests (neither has a foreign key), then the queue row, whose cascade
-- takes partitions, segments, cursors and subscriptions. Lock order of the house:
-- log_timers -> queues -> log_partitions -> the leaves. A timer row a fire has claimed is
-- deleted too: the fire's verification then finds its token gone and pushes nothing.
-- Answers what went: {existed, partitions, messages, timers, deadLetters}.
CREATE OR REPLACE FUNCTION queen.log_queue_delete_v1(p_tenant uuid, p_queue text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_timers bigint;
  v_queue uuid;
  v_parts uuid[];
  v_messages bigint;
  v_dlq bigint;
BEGIN
  DELETE FROM queen.log_timers
   WHERE tenant_id = p_tenant AND queue = p_queue COLLATE "C";
  GET DIAGNOSTICS v_timers = ROW_COUNT;
  SELECT id INTO v_queue FROM queen.queues
   WHERE tenant_id = p_tenant AND name = p_queue COLLATE "C" FOR UPDATE;
  IF v_queue IS NULL THEN
    RETURN jsonb_build_object('existed', v_timers > 0, 'partitions', 0, 'messages', 0,
                              'timers', v_timers, 'deadLetters', 0);
  END IF;
  SELECT coalesce(array_agg(id ORDER BY id), '{}'),
         coalesce(sum(last_offset + 1 - log_start), 0)::bigint
    INTO v_parts, v_messages
    FROM (SELECT id, last_offset, log_start FROM queen.log_partitions
           WHERE queue_id = v_queue ORDER BY id FOR UPDATE) locked;
  DELETE FROM queen.log_dlq WHERE partition_id = ANY (v_parts);
  GET DIAGNOSTICS v_dlq = ROW_COUNT;
  DELETE FROM queen.log_txns WHERE partition_id = ANY (v_parts);
  DELETE FROM queen.queues WHERE id = v_queue;
  RETURN jsonb_build_object('existed', true, 'partitions', cardinality(v_parts),
                            'messages', v_messages, 'timers', v_timers, 'deadLetters', v_dlq);
END $$;

-- The named consumer groups of the tenant (or one group), one row per (group, queue, partition)
-- where the group has a subscription or a cursor: offset lag (messages of the retained log past
-- its cursor; a partition without a cursor counts what its first pop would deliver: everything
-- in mode 'all', what arrived since the subscription in mode 'new'), the creation time of the
-- oldest of them, and the lease. Queue mode is not a group and is not listed.
CREATE OR REPLACE FUNCTION queen.log_consumer_groups_v1(p_tenant uuid, p_group text,
                                                        p_now timestamptz)
RETURNS TABLE (consumer_group text, queue text, partition text, partition_id uuid,
               worker_id text, lease_active boolean, committed bigint, offset_lag bigint,
               oldest_unconsumed_at timestamptz, total_consumed bigint,
               subscription_mode text, subscribed_at timestamptz)
LANGUAGE sql STABLE AS $$
  WITH groups AS (
    SELECT g.queue_id, g.consumer_group::text AS grp FROM queen.log_consumer_groups g
      JOIN queen.queues q ON q.id = g.queue_id AND q.tenant_id = p_tenant
    UNION
    SELECT p.queue_id, c.consumer_group::text FROM queen.log_consumers c
      JOIN queen.log_partitions p ON p.id = c.partition_id
      JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
     WHERE c.consumer_group <> '__QUEUE_MODE__'
  ), cursors AS (
    SELECT gr.grp, q.name::text AS queue, p.name::text AS partition, p.id AS pid,
           p.log_start, p.last_offset, c.committed AS cursor, c.worker_id, c.lease_expires_at,
           coalesce(c.total_consumed, 0) AS total_consumed,
           s.subscription_mode, s.subscribed_at
      FROM groups gr
      JOIN queen.queues q ON q.id = gr.queue_id
      JOIN queen.log_partitions p ON p.queue_id = q.id
      LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = gr.grp
      LEFT JOIN queen.log_consumer_groups s
        ON s.queue_id = q.id AND s.consumer_group = gr.grp
     WHERE p_group IS NULL OR gr.grp = p_group
  ), starts AS (
    -- the first offset the group has not consumed in each partition
    SELECT k.*, greatest(CASE
             WHEN k.cursor IS NOT NULL THEN k.cursor + 1
             WHEN k.subscription_mode = 'new' THEN coalesce(
               (SELECT min(g.base_offset) FROM queen.log_segments g
                 WHERE g.partition_id = k.pid AND g.created_at >= k.subscribed_at),
               k.last_offset + 1)
             ELSE k.log_start END, k.log_start) AS first_open
      FROM cursors k
  )
  SELECT st.grp, st.queue, st.partition, st.pid,
         CASE WHEN st.lease_expires_at > p_now THEN st.worker_id END,
         coalesce(st.lease_expires_at > p_now, false),
         coalesce(st.cursor, -1),
         greatest(st.last_offset + 1 - st.first_open, 0),
         CASE WHEN st.first_open <= st.last_offset THEN
           (SELECT g.created_at FROM queen.log_segments g
             WHERE g.partition_id = st.pid AND g.base_offset <= st.first_open
             ORDER BY g.base_offset DESC LIMIT 1) END,
         st.total_consumed, st.subscription_mode, st.subscribed_at
    FROM starts st
   ORDER BY st.grp, st.queue, st.partition
$$;

-- Forget one named group on one queue of the tenant: its cursors (and leases) in every
-- partition and, with p_metadata, its subscription. A later pop of the group starts afresh.
CREATE OR REPLACE FUNCTION queen.log_consumer_group_delete_v1(p_tenant uuid, p_group text,
                                                              p_queue text, p_metadata boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_queue uuid;
  v_cursors bigint := 0;
  v_subscriptions bigint := 0;
BEGIN
  SELECT id INTO v_queue FROM queen.queues
   WHERE tenant_id = p_tenant AND name = p_queue COLLATE "C";
  IF v_queue IS NOT NULL THEN
    DELETE FROM queen.log_consumers c USING queen.log_partitions p
     WHERE p.queue_id = v_queue AND c.partition_id = p.id AND c.consumer_group = p_group;
    GET DIAGNOSTICS v_cursors = ROW_COUNT;
    IF p_metadata THEN
      DELETE FROM queen.log_consumer_groups
       WHERE queue_id = v_queue AND consumer_group = p_group;
      GET DIAGNOSTICS v_subscriptions = ROW_COUNT;
    END IF;
  END IF;
  RETURN jsonb_build_object('deletedPartitions', v_cursors,
                            'subscriptionsDeleted', v_subscriptions);
END $$;

-- Move one named group's cursors on one queue of the tenant: to the end of each partition's
-- log (p_to NULL), or to just after the last push made at or before p_to (before the log's
-- start: to its start, so everything retained is delivered again). Every partition the group
-- has a cursor in is moved and its lease released; partitions it never read keep starting
-- where its subscription says. Answers how many partitions moved.
CREATE OR REPLACE FUNCTION queen.log_consumer_group_seek_v1(p_tenant uuid, p_group text,
                                                            p_queue text, p_to timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_moved bigint;
BEGIN
  WITH targets AS (
    SELECT c.partition_id AS pid,
           CASE WHEN p_to IS NULL THEN p.last_offset
                ELSE greatest(coalesce(
                  (SELECT max(g.end_offset) FROM queen.log_segments g
                    WHERE g.partition_id = p.id AND g.created_at <= p_to), -1),
                  p.log_start - 1) END AS to_offset
      FROM queen.queues q
      JOIN queen.log_partitions p ON p.queue_id = q.id
      JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
     WHERE q.tenant_id = p_tenant AND q.name = p_queue COLLATE "C"
     ORDER BY p.id
  )
  UPDATE queen.log_consumers k
     SET committed = t.to_offset, batch_end = NULL, worker_id = NULL, lease_expires_at = NULL,
         lease_acquired_at = NULL, batch_retry_count = 0, attempt_offset = NULL,
         attempt_count = 0
    FROM targets t
   WHERE k.partition_id = t.pid AND k.consumer_group = p_group;
  GET DIAGNOSTICS v_moved = ROW_COUNT;
  RETURN v_moved;
END $$;
