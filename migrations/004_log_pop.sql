-- 004_log_pop.sql: queue configuration and pop (claim a lease over the next messages of a
-- partition).
--
-- A pop never waits on a lock: it claims consumer rows with FOR UPDATE SKIP LOCKED and only
-- rows whose lease is free (no batch, or expired at p_now). "Never two consumers holding the
-- same message under a live lease" follows: the claim predicate is re-evaluated on the latest
-- row version under the row lock, and a live lease fails it.
--
-- Lock order: a pop touches queen.log_consumers only (plus, on a group's first contact with a
-- queue, one ON CONFLICT DO NOTHING insert into queen.queues / queen.log_consumer_groups before
-- any consumer row). Inserting a consumer row takes FOR KEY SHARE on its partition row, which
-- does not conflict with the pushes' FOR NO KEY UPDATE, so a pop never queues behind a push.
--
-- Every function takes p_now: tests time-travel lease expiry by passing a future instant.

-- Queue configuration. p_o holds column names -> values, already validated by the broker
-- (queen_timers/log/queues.py); a key that is absent keeps the stored value ("merge"; "replace" is the
-- broker sending every key, defaults included). Creates the row when missing. namespace/task
-- NULL = keep (or derive from a dotted name on creation).
CREATE OR REPLACE FUNCTION queen.log_configure_queue_v1(p_tenant uuid, p_queue text,
                                                        p_namespace text, p_task text, p_o jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO queen.queues (tenant_id, name, namespace, task)
  VALUES (p_tenant, p_queue,
          coalesce(p_namespace, CASE WHEN position('.' IN p_queue) > 0
                                     THEN split_part(p_queue, '.', 1) ELSE '' END),
          coalesce(p_task, CASE WHEN position('.' IN p_queue) > 0
                                THEN split_part(p_queue, '.', 2) ELSE '' END))
  ON CONFLICT (tenant_id, name) DO NOTHING;
  UPDATE queen.queues q
     SET namespace = coalesce(p_namespace, q.namespace),
         task = coalesce(p_task, q.task),
         lease_time = coalesce((p_o->>'lease_time')::int, q.lease_time),
         retry_limit = coalesce((p_o->>'retry_limit')::int, q.retry_limit),
         retry_delay = coalesce((p_o->>'retry_delay')::int, q.retry_delay),
         dedup_window_seconds = coalesce((p_o->>'dedup_window_seconds')::int, q.dedup_window_seconds),
         retention_seconds = coalesce((p_o->>'retention_seconds')::int, q.retention_seconds),
         completed_retention_seconds = coalesce((p_o->>'completed_retention_seconds')::int, q.completed_retention_seconds),
         delayed_processing = coalesce((p_o->>'delayed_processing')::int, q.delayed_processing),
         priority = coalesce((p_o->>'priority')::int, q.priority),
         ttl = coalesce((p_o->>'ttl')::int, q.ttl),
         max_size = coalesce((p_o->>'max_size')::int, q.max_size),
         window_buffer = coalesce((p_o->>'window_buffer')::int, q.window_buffer),
         max_wait_time_seconds = coalesce((p_o->>'max_wait_time_seconds')::int, q.max_wait_time_seconds),
         min_pop_wait_time = coalesce((p_o->>'min_pop_wait_time')::int, q.min_pop_wait_time),
         retention_sink_hold = coalesce((p_o->>'retention_sink_hold')::int, q.retention_sink_hold),
         retention_sink_hold_max_seconds = coalesce((p_o->>'retention_sink_hold_max_seconds')::int, q.retention_sink_hold_max_seconds),
         dead_letter_queue = coalesce((p_o->>'dead_letter_queue')::boolean, q.dead_letter_queue),
         dlq_after_max_retries = coalesce((p_o->>'dlq_after_max_retries')::boolean, q.dlq_after_max_retries),
         encryption_enabled = coalesce((p_o->>'encryption_enabled')::boolean, q.encryption_enabled),
         retention_enabled = coalesce((p_o->>'retention_enabled')::boolean, q.retention_enabled),
         updated_at = now()
   WHERE q.tenant_id = p_tenant AND q.name = p_queue;
  RETURN queen.log_queue_options_v1(p_tenant, p_queue);
END $$;

-- A queue's row as JSON (column names), NULL when the queue does not exist.
CREATE OR REPLACE FUNCTION queen.log_queue_options_v1(p_tenant uuid, p_queue text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT to_jsonb(q) - 'tenant_id' - 'created_at' - 'updated_at'
    FROM queen.queues q WHERE q.tenant_id = p_tenant AND q.name = p_queue
$$;

-- Register a consumer group's subscription to a queue on its first pop (creating the queue row
-- when a group subscribes before the first push). Steady state: one indexed read, no write.
CREATE OR REPLACE FUNCTION queen.log_register_group_v1(p_tenant uuid, p_queue text, p_group text,
                                                       p_mode text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_qid uuid;
BEGIN
  SELECT q.id INTO v_qid FROM queen.queues q WHERE q.tenant_id = p_tenant AND q.name = p_queue;
  IF v_qid IS NULL THEN
    INSERT INTO queen.queues (tenant_id, name, namespace, task)
    VALUES (p_tenant, p_queue,
            CASE WHEN position('.' IN p_queue) > 0 THEN split_part(p_queue, '.', 1) ELSE '' END,
            CASE WHEN position('.' IN p_queue) > 0 THEN split_part(p_queue, '.', 2) ELSE '' END)
    ON CONFLICT (tenant_id, name) DO NOTHING;
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.tenant_id = p_tenant AND q.name = p_queue;
  END IF;
  PERFORM 1 FROM queen.log_consumer_groups WHERE queue_id = v_qid AND consumer_group = p_group;
  IF NOT FOUND THEN
    INSERT INTO queen.log_consumer_groups (queue_id, consumer_group, subscription_mode, subscribed_at)
    VALUES (v_qid, p_group, CASE WHEN p_mode = 'new' THEN 'new' ELSE 'all' END, p_now)
    ON CONFLICT DO NOTHING;
  END IF;
END $$;

-- Where a group starts in a partition it has never read: just before the first segment created
-- at or after its subscription for a 'new' group (the tail when none), the start of the live log
-- otherwise.
CREATE OR REPLACE FUNCTION queen.log_seed_cursor_v1(p_pid uuid, p_queue_id uuid, p_group text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_mode text;
  v_at timestamptz;
  v_p record;
  v_seed bigint;
BEGIN
  SELECT last_offset, log_start, last_write_at INTO v_p FROM queen.log_partitions WHERE id = p_pid;
  SELECT subscription_mode, subscribed_at INTO v_mode, v_at
    FROM queen.log_consumer_groups WHERE queue_id = p_queue_id AND consumer_group = p_group;
  IF v_mode IS DISTINCT FROM 'new' THEN
    RETURN v_p.log_start - 1;
  END IF;
  -- last_write_at is quantized to 1 s (003): older than subscription - 1 s means every
  -- segment predates the subscription, so skip the walk.
  IF v_p.last_write_at < v_at - interval '1 second' THEN
    RETURN v_p.last_offset;
  END IF;
  SELECT s.base_offset - 1 INTO v_seed FROM queen.log_segments s
   WHERE s.partition_id = p_pid AND s.base_offset >= v_p.log_start AND s.created_at >= v_at
   ORDER BY s.base_offset LIMIT 1;
  RETURN coalesce(v_seed, v_p.last_offset);
END $$;

-- Pop: up to p_budget messages from at most p_max_partitions partitions of one queue (or of
-- the queues of a namespace/task), one lease id (p_worker) over all of them. p_partition NULL =
-- any partition with pending messages and a free lease, tried in random order with SKIP LOCKED.
-- One row per delivered segment slice: frames [r_start, r_start + r_take) of r_blob.
-- p_lease_seconds NULL = the queue's lease_time. p_auto_ack commits at delivery (no lease).
CREATE OR REPLACE FUNCTION queen.log_pop_v1(
  p_tenant uuid, p_queue text, p_partition text, p_namespace text, p_task text,
  p_group text, p_sub_mode text, p_budget int, p_lease_seconds int, p_worker text,
  p_auto_ack boolean, p_max_partitions int, p_now timestamptz)
RETURNS TABLE (r_queue text, r_partition text, r_pid uuid, r_base bigint, r_start int,
               r_take int, r_created_at timestamptz, r_blob bytea, r_attempt int)
LANGUAGE plpgsql AS $$
DECLARE
  c record;
  v_cons record;
  s record;
  v_remaining int := p_budget;
  v_claimed int := 0;
  v_wanted bigint;
  v_head bigint;
  v_visible timestamptz;
  v_first bigint;
  v_last bigint;
  v_taken int;
  v_start int;
  v_take int;
  v_attempt int;
  v_lease int;
BEGIN
  IF p_budget IS NULL OR p_budget < 1 THEN
    RETURN;
  END IF;
  IF p_group <> '__QUEUE_MODE__' AND p_queue IS NOT NULL THEN
    -- The subscription starts at the group's first pop, not at its first message.
    PERFORM queen.log_register_group_v1(p_tenant, p_queue, p_group, p_sub_mode, p_now);
  END IF;
  FOR c IN
    SELECT p.id, p.name, p.last_offset, q.id AS queue_id, q.name AS qname, q.lease_time,
           q.delayed_processing, (k.partition_id IS NULL) AS fresh
      FROM queen.queues q
      JOIN queen.log_partitions p ON p.queue_id = q.id
      LEFT JOIN queen.log_consumers k ON k.partition_id = p.id AND k.consumer_group = p_group
     WHERE q.tenant_id = p_tenant
       AND (p_queue IS NULL OR q.name = p_queue)
       AND (p_namespace IS NULL OR q.namespace = p_namespace)
       AND (p_task IS NULL OR q.task = p_task)
       AND (p_partition IS NULL OR p.name = p_partition)
       AND p.last_offset >= p.log_start
       AND (k.partition_id IS NULL
            OR (k.committed < p.last_offset
                AND (k.batch_end IS NULL OR k.lease_expires_at <= p_now)))
     ORDER BY random()
     -- Candidate cap: a pop claims at most p_max_partitions; the rest are spares for rows
     -- another pop locked first. Not measured: the reference's clamp (4x, 64..512).
     LIMIT least(512, greatest(64, 4 * p_max_partitions))
  LOOP
    EXIT WHEN v_remaining <= 0 OR v_claimed >= p_max_partitions;

    IF c.fresh THEN
      -- First contact of this group with this partition. The advisory TRY lock keeps two
      -- pops from both inserting (and one waiting on the other's uncommitted row); the loser
      -- skips the partition this time. Not measured here: the reference's 2026-07-23 block
      -- (unconditional insert-on-conflict per pop livelocked 200+ backends).
      CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended(c.id::text || '/' || p_group, 0));
      BEGIN
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
        VALUES (c.id, p_group, queen.log_seed_cursor_v1(c.id, c.queue_id, p_group))
        ON CONFLICT DO NOTHING;
      EXCEPTION WHEN foreign_key_violation THEN
        CONTINUE;  -- partition cleanup removed it meanwhile (idle for days): nothing to pop
      END;
    END IF;

    SELECT k.committed, k.attempt_offset, k.attempt_count INTO v_cons
      FROM queen.log_consumers k
     WHERE k.partition_id = c.id AND k.consumer_group = p_group
       AND (k.batch_end IS NULL OR k.lease_expires_at <= p_now)
       FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;

    v_wanted := v_cons.committed + 1;
    v_visible := CASE WHEN c.delayed_processing > 0
                      THEN p_now - make_interval(secs => c.delayed_processing) END;
    -- Head probe: the segment holding `wanted` may start before it (resume mid-segment).
    SELECT sg.base_offset INTO v_head FROM queen.log_segments sg
     WHERE sg.partition_id = c.id AND sg.base_offset <= v_wanted
     ORDER BY sg.base_offset DESC LIMIT 1;
    v_head := coalesce(v_head, v_wanted);
    v_taken := 0;
    v_first := NULL;
    v_lease := coalesce(p_lease_seconds, c.lease_time);

    -- Contiguous scan from `wanted`. A retention gap is skipped silently (the batch starts at
    -- the first live segment); a segment not yet visible (delayed_processing) ends the scan,
    -- and so does everything after it, created_at being monotone per partition.
    FOR s IN
      SELECT sg.base_offset, sg.end_offset, sg.created_at, sg.blob FROM queen.log_segments sg
       WHERE sg.partition_id = c.id AND sg.base_offset >= v_head
       ORDER BY sg.base_offset
    LOOP
      CONTINUE WHEN s.end_offset < v_wanted;
      EXIT WHEN v_visible IS NOT NULL AND s.created_at > v_visible;
      v_start := greatest(v_wanted - s.base_offset, 0);
      v_take := least(s.end_offset - s.base_offset + 1 - v_start, v_remaining - v_taken);
      IF v_first IS NULL THEN
        v_first := s.base_offset + v_start;
        -- Same batch start as the last delivery: a redelivery (after a failed ack or an
        -- expired lease); anything else is a first delivery.
        v_attempt := CASE WHEN v_cons.attempt_offset = v_first THEN v_cons.attempt_count + 1
                          ELSE 1 END;
      END IF;
      v_last := s.base_offset + v_start + v_take - 1;
      v_taken := v_taken + v_take;
      r_queue := c.qname; r_partition := c.name; r_pid := c.id; r_base := s.base_offset;
      r_start := v_start; r_take := v_take; r_created_at := s.created_at; r_blob := s.blob;
      r_attempt := v_attempt;
      RETURN NEXT;
      EXIT WHEN v_taken >= v_remaining;
    END LOOP;

    IF v_taken = 0 THEN
      -- Empty-partition cursor seal: messages were counted but no segment is left (retention
      -- took them), so move the cursor to the tail or the partition stays "pending" forever.
      -- Not measured here: the reference's 2026-07-30 block.
      IF v_visible IS NULL AND NOT EXISTS (SELECT 1 FROM queen.log_segments sg
                                            WHERE sg.partition_id = c.id) THEN
        UPDATE queen.log_consumers k
           SET committed = greatest(k.committed,
                                    (SELECT p.last_offset FROM queen.log_partitions p WHERE p.id = c.id))
         WHERE k.partition_id = c.id AND k.consumer_group = p_group;
      END IF;
      CONTINUE;
    END IF;

    IF p_auto_ack THEN
      UPDATE queen.log_consumers k
         SET committed = v_last, total_consumed = k.total_consumed + v_taken,
             batch_end = NULL, worker_id = NULL, lease_expires_at = NULL
       WHERE k.partition_id = c.id AND k.consumer_group = p_group;
    ELSE
      UPDATE queen.log_consumers k
         SET worker_id = p_worker, lease_acquired_at = p_now,
             lease_expires_at = p_now + make_interval(secs => v_lease),
             batch_end = v_last, attempt_offset = v_first, attempt_count = v_attempt
       WHERE k.partition_id = c.id AND k.consumer_group = p_group;
    END IF;
    v_remaining := v_remaining - v_taken;
    v_claimed := v_claimed + 1;
  END LOOP;
END $$;

-- Names of the queues a namespace/task pop reads (the long-poll registers a waiter on each).
CREATE OR REPLACE FUNCTION queen.log_queues_matching_v1(p_tenant uuid, p_namespace text, p_task text)
RETURNS SETOF text LANGUAGE sql STABLE AS $$
  SELECT q.name FROM queen.queues q
   WHERE q.tenant_id = p_tenant
     AND (p_namespace IS NULL OR q.namespace = p_namespace)
     AND (p_task IS NULL OR q.task = p_task)
   ORDER BY q.name
$$;
