-- 032_console.sql: the console's Timers page follows its key prefix, and a dead letter that
-- came from a timer names that timer (queen_timers/timers/inspect.py, queen_timers/log/dlq.py).
--
-- The _v2 reads take p_prefix (NULL: no filter, the _v1 answers). The _v1s stay for brokers
-- of the previous release during an upgrade. Where each read goes:
--
-- * The pending count of a prefix is a count over the primary key's (tenant_id, queue,
--   timer_key) range of that prefix, stopped at the cap: the LIKE pattern is rendered into the
--   statement (as in queen.log_timers_count_v1), so the planner reads the range of the prefix
--   only, whatever the queue holds around it.
-- * The near-term figures and the histogram's hour and day windows read the same visible_at
--   ranges as the _v1s, with the prefix as one more filter: their cost does not change.
-- * The 90-day histogram keeps choosing its source by the whole queue's count (the caller
--   decides): 'key' reads the queue's key range only when the whole queue is within the cap.

-- Dead letters of a timer name it: NULL for every dead letter written before (and for a
-- consumer's, which has no timer). ADD COLUMN takes an ACCESS EXCLUSIVE lock even when the
-- column exists (IF NOT EXISTS is checked under the lock), so it runs only when the column is
-- missing, never at every boot. A nullable column without a default is a catalog change only:
-- no rewrite of the table.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute
                  WHERE attrelid = 'queen.log_dlq'::regclass AND attname = 'timer_key'
                    AND NOT attisdropped) THEN
    ALTER TABLE queen.log_dlq ADD COLUMN timer_key text;
  END IF;
END $$;

-- The capped pending count of one tenant's queues (p_queue NULL: all) whose keys start with
-- the literal p_prefix (NULL or '': every key, as log_timers_pending_v1). A prefix needs a
-- queue: key ranges are per queue.
CREATE OR REPLACE FUNCTION queen.log_timers_pending_v2(p_tenant uuid, p_queue text, p_cap int,
                                                       p_prefix text)
RETURNS TABLE (queue text, pending bigint, exact boolean) LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_n bigint;
BEGIN
  IF p_prefix IS NULL OR p_prefix = '' THEN
    RETURN QUERY SELECT * FROM queen.log_timers_pending_v1(p_tenant, p_queue, p_cap);
    RETURN;
  END IF;
  IF p_queue IS NULL OR octet_length(p_prefix) > 128 THEN
    RAISE EXCEPTION 'QTIMER a prefix count needs a queue and a prefix of 1..128 bytes'
      USING ERRCODE = '22023';
  END IF;
  EXECUTE format(
    'SELECT count(*) FROM (SELECT 1 FROM queen.log_timers t'
    '  WHERE t.tenant_id = $1 AND t.queue = $2 COLLATE "C" AND t.timer_key LIKE %L'
    '  LIMIT $3) x',
    replace(replace(replace(p_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%')
    INTO v_n USING p_tenant, p_queue, p_cap + 1;
  IF v_n > 0 THEN
    RETURN QUERY SELECT p_queue, least(v_n, p_cap::bigint), v_n <= p_cap;
  END IF;
END $$;

-- log_timers_near_v1 with the keys of p_prefix only (NULL or '': every key).
CREATE OR REPLACE FUNCTION queen.log_timers_near_v2(p_tenant uuid, p_queue text,
                                                    p_now timestamptz, p_horizon timestamptz,
                                                    p_prefix text)
RETURNS TABLE (queue text, due_minute bigint, due_hour bigint, due_day bigint, overdue bigint,
               oldest_overdue timestamptz, backing_off bigint, claimed bigint)
LANGUAGE sql STABLE AS $$
  SELECT t.queue::text,
         count(*) FILTER (WHERE t.deliver_at >= p_now
                            AND t.deliver_at < p_now + interval '1 minute'),
         count(*) FILTER (WHERE t.deliver_at >= p_now AND t.deliver_at < p_now + interval '1 hour'),
         count(*) FILTER (WHERE t.deliver_at >= p_now AND t.deliver_at < p_now + interval '1 day'),
         count(*) FILTER (WHERE t.deliver_at < p_now),
         min(t.deliver_at) FILTER (WHERE t.deliver_at < p_now),
         count(*) FILTER (WHERE t.claim_token IS NULL AND t.claimed_until > p_now),
         count(*) FILTER (WHERE t.claim_token IS NOT NULL AND t.claimed_until > p_now)
    FROM generate_series(0, 63) AS g(shard)
    CROSS JOIN LATERAL (
      SELECT x.queue, x.deliver_at, x.claim_token, x.claimed_until
        FROM queen.log_timers x
       WHERE x.shard = g.shard AND x.visible_at < p_horizon AND x.tenant_id = p_tenant
         AND (p_queue IS NULL OR x.queue = p_queue COLLATE "C")
         AND (coalesce(p_prefix, '') = '' OR starts_with(x.timer_key, p_prefix))) t
   GROUP BY t.queue
$$;

-- log_timers_histogram_v1 with the keys of p_prefix only (NULL or '': every key). p_mode as
-- in _v1; the caller picks 'key' only when the whole queue is within p_cap.
CREATE OR REPLACE FUNCTION queen.log_timers_histogram_v2(p_tenant uuid, p_queue text,
                                                         p_now timestamptz, p_to timestamptz,
                                                         p_bucket_ms bigint,
                                                         p_horizon timestamptz,
                                                         p_mode text, p_cap int,
                                                         p_prefix text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_prefix text := nullif(p_prefix, '');
  v_n int := ceil(extract(epoch FROM (p_to - p_now)) * 1000 / p_bucket_ms)::int;
  v_pending bigint := 0;
  v_exact boolean := true;
  v_pct float8;
  v_scale float8 := 1;
  v_counts jsonb;
  v_overdue bigint;
  v_later bigint;
  v_in bigint;
BEGIN
  IF p_mode = 'index' THEN
    SELECT coalesce(max(p.pending), 0), coalesce(bool_and(p.exact), true)
      INTO v_pending, v_exact
      FROM queen.log_timers_pending_v2(p_tenant, p_queue, p_cap, v_prefix) p;
    WITH b AS (
      SELECT CASE WHEN t.deliver_at < p_now THEN -1
                  ELSE floor(extract(epoch FROM (t.deliver_at - p_now)) * 1000
                             / p_bucket_ms)::int END AS i
        FROM generate_series(0, 63) AS g(shard)
        CROSS JOIN LATERAL (
          SELECT x.deliver_at FROM queen.log_timers x
           WHERE x.shard = g.shard AND x.visible_at < p_horizon AND x.tenant_id = p_tenant
             AND x.queue = p_queue COLLATE "C" AND x.deliver_at < p_to
             AND (v_prefix IS NULL OR starts_with(x.timer_key, v_prefix))) t
    ), c AS (SELECT b.i, count(*) AS n FROM b GROUP BY b.i)
    SELECT coalesce(jsonb_object_agg(c.i::text, c.n) FILTER (WHERE c.i >= 0), '{}'::jsonb),
           coalesce(sum(c.n) FILTER (WHERE c.i < 0), 0), coalesce(sum(c.n), 0)
      INTO v_counts, v_overdue, v_in FROM c;
    v_later := greatest(v_pending - v_in, 0);
  ELSE
    IF p_mode = 'sample' THEN
      -- about 50,000 rows of the whole table, never under 0.5% of its blocks
      SELECT least(100, greatest(0.5, 100.0 * 50000 / greatest(c.reltuples, 1)))
        INTO v_pct FROM pg_class c WHERE c.oid = 'queen.log_timers'::regclass;
      v_scale := 100.0 / v_pct;
      v_exact := false;
    END IF;
    WITH b AS (
      SELECT CASE WHEN x.deliver_at < p_now THEN -1
                  WHEN x.deliver_at >= p_to THEN v_n
                  ELSE floor(extract(epoch FROM (x.deliver_at - p_now)) * 1000
                             / p_bucket_ms)::int END AS i
        FROM queen.log_timers x
       WHERE p_mode = 'key' AND x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
         AND (v_prefix IS NULL OR starts_with(x.timer_key, v_prefix))
      UNION ALL
      SELECT CASE WHEN x.deliver_at < p_now THEN -1
                  WHEN x.deliver_at >= p_to THEN v_n
                  ELSE floor(extract(epoch FROM (x.deliver_at - p_now)) * 1000
                             / p_bucket_ms)::int END
        FROM queen.log_timers x TABLESAMPLE SYSTEM (coalesce(v_pct, 100))
       WHERE p_mode = 'sample' AND x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
         AND (v_prefix IS NULL OR starts_with(x.timer_key, v_prefix))
    ), c AS (SELECT b.i, round(count(*) * v_scale)::bigint AS n FROM b GROUP BY b.i)
    SELECT coalesce(jsonb_object_agg(c.i::text, c.n) FILTER (WHERE c.i >= 0 AND c.i < v_n),
                    '{}'::jsonb),
           coalesce(sum(c.n) FILTER (WHERE c.i < 0), 0),
           coalesce(sum(c.n) FILTER (WHERE c.i >= v_n), 0),
           coalesce(sum(c.n), 0)
      INTO v_counts, v_overdue, v_later, v_pending FROM c;
  END IF;
  RETURN jsonb_build_object('pending', v_pending, 'exact', v_exact, 'overdue', v_overdue,
                            'counts', v_counts, 'later', v_later, 'samplePercent', v_pct);
END $$;

-- log_timers_dlq_v1 that also records each timer's key on its dead letter. The _v1 stays for
-- brokers of the previous release during an upgrade: its dead letters have no timer key.
CREATE OR REPLACE FUNCTION queen.log_timers_dlq_v2(
  p_tenants uuid[], p_queues text[], p_keys text[], p_snapshots jsonb[], p_max_attempts int,
  p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_n int := coalesce(cardinality(p_keys), 0);
  v_archived int := 0;
  v_pid uuid;
  v_i int;
  v_t uuid[]; v_q text[]; v_k text[]; v_p text[]; v_mid uuid[]; v_txn text[];
  v_att int[]; v_err text[]; v_snap jsonb[];
BEGIN
  IF v_n = 0 THEN
    RETURN jsonb_build_object('archived', 0, 'skipped', 0);
  END IF;
  IF cardinality(p_tenants) IS DISTINCT FROM v_n OR cardinality(p_queues) IS DISTINCT FROM v_n
     OR cardinality(p_snapshots) IS DISTINCT FROM v_n THEN
    RAISE EXCEPTION 'QDLQ misaligned arrays' USING ERRCODE = 'P0001';
  END IF;
  -- Lock order: every timer row first, in key order, in ONE statement (a FOR loop over a
  -- locking query would fetch, and lock, in batches interleaved with the provisioning below),
  -- then queues and partitions through provisioning.
  SELECT array_agg(l.tenant_id ORDER BY l.tenant_id, l.queue, l.timer_key), array_agg(l.queue ORDER BY l.tenant_id, l.queue, l.timer_key),
         array_agg(l.timer_key ORDER BY l.tenant_id, l.queue, l.timer_key), array_agg(l."partition" ORDER BY l.tenant_id, l.queue, l.timer_key),
         array_agg(l.message_id ORDER BY l.tenant_id, l.queue, l.timer_key), array_agg(l.txn ORDER BY l.tenant_id, l.queue, l.timer_key),
         array_agg(l.attempts ORDER BY l.tenant_id, l.queue, l.timer_key), array_agg(l.last_error ORDER BY l.tenant_id, l.queue, l.timer_key),
         array_agg(l.snap ORDER BY l.tenant_id, l.queue, l.timer_key)
    INTO v_t, v_q, v_k, v_p, v_mid, v_txn, v_att, v_err, v_snap
    FROM (SELECT t.tenant_id, t.queue::text AS queue, t.timer_key::text AS timer_key,
                 t."partition", t.message_id, t.txn, t.attempts, t.last_error, x.snap
            FROM unnest(p_tenants, p_queues, p_keys, p_snapshots) AS x(tenant, queue, k, snap)
            JOIN queen.log_timers t
              ON t.tenant_id = x.tenant AND t.queue = x.queue AND t.timer_key = x.k
           WHERE t.attempts >= p_max_attempts AND t.claim_token IS NULL
           ORDER BY t.tenant_id, t.queue, t.timer_key
             FOR UPDATE OF t) l;
  FOR v_i IN 1 .. coalesce(cardinality(v_k), 0) LOOP
    v_pid := (queen.log_provision_v1(v_t[v_i], ARRAY[v_q[v_i]], ARRAY[v_p[v_i]]))[1];
    INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset", message_id,
                               transaction_id, payload, error, retry_count, failed_at,
                               timer_key)
    VALUES (v_pid, '__timer__', -1, v_mid[v_i], v_txn[v_i], v_snap[v_i], v_err[v_i],
            v_att[v_i], v_now, v_k[v_i]);
    DELETE FROM queen.log_timers t
     WHERE t.tenant_id = v_t[v_i] AND t.queue = v_q[v_i] AND t.timer_key = v_k[v_i];
    v_archived := v_archived + 1;
  END LOOP;
  RETURN jsonb_build_object('archived', v_archived, 'skipped', v_n - v_archived);
END $$;

-- log_dlq_list_v2 with each dead letter's timerKey (null: not a timer's, or dead-lettered
-- before this column existed).
CREATE OR REPLACE FUNCTION queen.log_dlq_list_v3(p_tenant uuid, p_queue text, p_partition text,
                                                 p_group text, p_from timestamptz,
                                                 p_to timestamptz, p_limit int, p_offset int)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  WITH m AS (
    SELECT d.*, p.name AS partition_name, q.name AS queue_name
      FROM queen.queues q
      JOIN queen.log_partitions p ON p.queue_id = q.id
      JOIN queen.log_dlq d ON d.partition_id = p.id
     WHERE q.tenant_id = p_tenant AND q.name = p_queue
       AND (p_partition IS NULL OR p.name = p_partition)
       AND (p_group IS NULL OR d.consumer_group = p_group)
       AND (p_from IS NULL OR d.failed_at >= p_from)
       AND (p_to IS NULL OR d.failed_at <= p_to))
  SELECT jsonb_build_object(
    'total', (SELECT count(*) FROM m),
    'messages', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
               'id', x.id, 'queue', x.queue_name, 'partition', x.partition_name,
               'partitionId', x.partition_id,
               'createdAt', queen.ts_v1(coalesce(x.created_at, x.failed_at)),
               'consumerGroup', x.consumer_group, 'offset', x."offset",
               'messageId', x.message_id, 'transactionId', x.transaction_id,
               'payload', x.payload, 'errorMessage', x.error, 'retryCount', x.retry_count,
               'failedAt', queen.ts_v1(x.failed_at), 'timerKey', x.timer_key)
             ORDER BY x.failed_at DESC, x.id)
        FROM (SELECT * FROM m ORDER BY m.failed_at DESC, m.id
               LIMIT p_limit OFFSET p_offset) x), '[]'::jsonb))
$$;
