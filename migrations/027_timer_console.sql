-- 027_timer_console.sql: what an operator reads and does to pending timers and dead letters
-- (the console and `queen status`; queen_timers/timers/inspect.py, bulk.py, replay.py).
--
-- No index is added: queen.log_timers keeps exactly its primary key (tenant_id, queue,
-- timer_key) and the one secondary index (shard, visible_at) of 025. Every statement here is
-- read through one of those two, and the choice is written next to it:
--
-- * The pending count of a queue is a count over the primary key's (tenant_id, queue) range,
--   stopped at a cap (p_cap): exact up to it, "at least the cap" past it, and says which. An
--   uncapped count is O(pending of the queue), and no index changes that: at 10^6 pending it
--   took 167-240 ms here against 47 ms for the first 100,000 (2026-12-02, bench/RESULTS.md,
--   "The operator's routes at 10^6 pending"). The tenant's queue names come from a skip scan
--   of the same key (one descent per queue), not from a scan of its rows.
-- * The near-term figures (overdue, due in the next minute / hour / day, backing off, claimed)
--   are read from the visible_at index, one range per shard, bounded above by a horizon:
--   O(timers of every tenant due before the horizon), independent of how far out the rest of
--   the pending set lies. This works because every row those figures count has visible_at
--   below the horizon: a waiting row's visible_at is its deliver_at, and a row whose deliver_at
--   is past (overdue, claimed, backing off) has visible_at = its lease or backoff expiry,
--   which the broker bounds (QUEEN_SWEEPER_LEASE_MS, QUEEN_SWEEPER_BACKOFF_MAX_MS); the caller
--   passes a horizon of at least a day and at least those.
-- * The histogram's hour and day windows read the same index ranges. Its 90-day window covers
--   nearly every pending timer, so it reads the queue's primary-key range when the queue's
--   count is exact (at most the cap), and otherwise a block sample of the table (TABLESAMPLE
--   SYSTEM, sized to read about 50,000 rows), scaled up and declared as sampled.
--
-- Time comes in as p_now (tests travel); every function answers one snapshot (STABLE, or
-- one statement).

-- Signatures this file had before its first release, on databases of the branch that made it.
DROP FUNCTION IF EXISTS queen.log_timers_pending_v1(uuid, text);
DROP FUNCTION IF EXISTS queen.log_timers_histogram_v1(uuid, text, timestamptz, timestamptz,
                                                      bigint, timestamptz, boolean);

-- Pending timers by queue of one tenant (p_queue NULL: every queue of the tenant), each
-- counted up to p_cap: exact is false when the queue holds more (pending is then p_cap).
CREATE OR REPLACE FUNCTION queen.log_timers_pending_v1(p_tenant uuid, p_queue text, p_cap int)
RETURNS TABLE (queue text, pending bigint, exact boolean) LANGUAGE sql STABLE AS $$
  WITH RECURSIVE names(q) AS (
    SELECT CASE WHEN p_queue IS NOT NULL THEN p_queue COLLATE "C"
                ELSE (SELECT min(t.queue) FROM queen.log_timers t
                       WHERE t.tenant_id = p_tenant) END
    UNION ALL
    SELECT (SELECT min(t.queue) FROM queen.log_timers t
             WHERE t.tenant_id = p_tenant AND t.queue > n.q)
      FROM names n WHERE p_queue IS NULL AND n.q IS NOT NULL
  )
  SELECT n.q::text, least(c.n, p_cap), c.n <= p_cap
    FROM names n
    CROSS JOIN LATERAL (
      SELECT count(*) AS n FROM (
        SELECT 1 FROM queen.log_timers t
         WHERE t.tenant_id = p_tenant AND t.queue = n.q
         LIMIT p_cap + 1) x) c
   WHERE n.q IS NOT NULL AND c.n > 0
$$;

-- The near-term figures by queue of one tenant, from the visible_at index below p_horizon.
-- "Overdue" is deliver_at before now, whatever the row's state (late waiting, claimed by a
-- fire in progress, or backing off after failures); oldest_overdue is the earliest such
-- deliver_at. The due counts are deliver_at in [now, now + window).
CREATE OR REPLACE FUNCTION queen.log_timers_near_v1(p_tenant uuid, p_queue text,
                                                    p_now timestamptz, p_horizon timestamptz)
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
         AND (p_queue IS NULL OR x.queue = p_queue COLLATE "C")) t
   GROUP BY t.queue
$$;

-- The log side of the queues of one tenant (p_queue NULL: all): partitions, retained frames
-- (total), frames the queue-mode cursor has not committed (pending), frames under a live lease
-- of any group (processing), and dead letters. One row per partition and per cursor: cheap.
CREATE OR REPLACE FUNCTION queen.log_queue_stats_v1(p_tenant uuid, p_queue text,
                                                    p_now timestamptz)
RETURNS TABLE (queue text, id uuid, namespace text, task text, created_at timestamptz,
               partitions bigint, total bigint, pending bigint, processing bigint,
               dead_letters bigint)
LANGUAGE sql STABLE AS $$
  SELECT q.name::text, q.id, q.namespace, q.task, q.created_at,
         (SELECT count(*) FROM queen.log_partitions p WHERE p.queue_id = q.id),
         (SELECT coalesce(sum(p.last_offset + 1 - p.log_start), 0)::bigint
            FROM queen.log_partitions p WHERE p.queue_id = q.id),
         (SELECT coalesce(sum(p.last_offset
                              - greatest(coalesce(c.committed, -1), p.log_start - 1)), 0)::bigint
            FROM queen.log_partitions p
            LEFT JOIN queen.log_consumers c
              ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
           WHERE p.queue_id = q.id),
         (SELECT coalesce(sum(c.batch_end - c.committed), 0)::bigint
            FROM queen.log_partitions p
            JOIN queen.log_consumers c ON c.partition_id = p.id
           WHERE p.queue_id = q.id AND c.batch_end IS NOT NULL AND c.lease_expires_at > p_now),
         (SELECT count(*) FROM queen.log_partitions p
            JOIN queen.log_dlq d ON d.partition_id = p.id WHERE p.queue_id = q.id)
    FROM queen.queues q
   WHERE q.tenant_id = p_tenant AND (p_queue IS NULL OR q.name = p_queue COLLATE "C")
$$;

-- Pending timers of one queue by due time: buckets of p_bucket_ms from p_now up to p_to, the
-- overdue ones (deliver_at before p_now) and the later ones (at or after p_to), one snapshot.
-- p_mode 'index': the visible_at ranges below p_horizon give the buckets and the overdue ones,
-- and later = pending - both, exact when pending is (the hour and day windows). 'key': one
-- pass over the queue's primary-key range (the 90-day window of a queue within the cap).
-- 'sample': one pass over a block sample of the table, every count scaled up (the 90-day
-- window of a larger queue); the answer names the percentage read.
CREATE OR REPLACE FUNCTION queen.log_timers_histogram_v1(p_tenant uuid, p_queue text,
                                                         p_now timestamptz, p_to timestamptz,
                                                         p_bucket_ms bigint,
                                                         p_horizon timestamptz,
                                                         p_mode text, p_cap int)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
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
      INTO v_pending, v_exact FROM queen.log_timers_pending_v1(p_tenant, p_queue, p_cap) p;
    WITH b AS (
      SELECT CASE WHEN t.deliver_at < p_now THEN -1
                  ELSE floor(extract(epoch FROM (t.deliver_at - p_now)) * 1000
                             / p_bucket_ms)::int END AS i
        FROM generate_series(0, 63) AS g(shard)
        CROSS JOIN LATERAL (
          SELECT x.deliver_at FROM queen.log_timers x
           WHERE x.shard = g.shard AND x.visible_at < p_horizon AND x.tenant_id = p_tenant
             AND x.queue = p_queue COLLATE "C" AND x.deliver_at < p_to) t
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
      UNION ALL
      SELECT CASE WHEN x.deliver_at < p_now THEN -1
                  WHEN x.deliver_at >= p_to THEN v_n
                  ELSE floor(extract(epoch FROM (x.deliver_at - p_now)) * 1000
                             / p_bucket_ms)::int END
        FROM queen.log_timers x TABLESAMPLE SYSTEM (coalesce(v_pct, 100))
       WHERE p_mode = 'sample' AND x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
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

-- Fire now: the timer's deliver_at becomes p_now and any backoff is cleared (claimed_until
-- NULL), so it is due at once; everything else stays: message id, txn, payload, partition,
-- producer, attempts and last error (a timer that failed before keeps its count toward the
-- dead-letter limit). A claimed row (a fire in progress) answers too_late; no row, absent.
CREATE OR REPLACE FUNCTION queen.log_timers_fire_now_v1(p_tenant uuid, p_queue text,
                                                        p_key text, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  r record;
BEGIN
  UPDATE queen.log_timers t
     SET deliver_at = v_now, claimed_until = NULL, updated_at = v_now
   WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
     AND t.timer_key = p_key COLLATE "C"
     AND (t.claim_token IS NULL OR t.claimed_until <= v_now)
  RETURNING t.txn, t.message_id, t.deliver_at INTO r;
  IF FOUND THEN
    RETURN jsonb_build_object('ok', true, 'status', 'rescheduled', 'queue', p_queue,
                              'timerKey', p_key, 'txn', r.txn, 'messageId', r.message_id,
                              'deliverAt', queen.ts_v1(r.deliver_at));
  END IF;
  IF EXISTS (SELECT 1 FROM queen.log_timers t WHERE t.tenant_id = p_tenant
                AND t.queue = p_queue COLLATE "C" AND t.timer_key = p_key COLLATE "C") THEN
    RETURN jsonb_build_object('ok', false, 'status', 'too_late', 'queue', p_queue,
                              'timerKey', p_key);
  END IF;
  RETURN jsonb_build_object('ok', false, 'status', 'absent', 'queue', p_queue,
                            'timerKey', p_key);
END $$;

-- Cancel by a LITERAL key prefix, ONE bounded batch: the first p_limit unclaimed keys of the
-- prefix in byte order (a range on the primary key: the pattern is rendered into the statement,
-- as in queen.log_timers_count_v1), locked in that order (the table's lock order) and deleted.
-- A key claimed between the read and the lock answers tooLate, one that vanished (fired) absent.
-- remaining: more unclaimed keys of the prefix were seen past this batch. Claimed rows are
-- skipped by the read: they are being fired, and a caller looping on `remaining` must finish.
CREATE OR REPLACE FUNCTION queen.log_timers_cancel_prefix_v1(p_tenant uuid, p_queue text,
                                                             p_prefix text, p_limit int,
                                                             p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_keys text[];
  v_more boolean;
  v_locked int;
  v_deleted int;
BEGIN
  IF p_prefix IS NULL OR p_prefix = '' OR octet_length(p_prefix) > 128 THEN
    RAISE EXCEPTION 'QTIMER cancel prefix must be 1..128 bytes' USING ERRCODE = '22023';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    RAISE EXCEPTION 'QTIMER cancel limit must be 1..10000' USING ERRCODE = '22023';
  END IF;
  EXECUTE format(
    'SELECT array_agg(k ORDER BY k) FROM ('
    '  SELECT t.timer_key AS k FROM queen.log_timers t'
    '   WHERE t.tenant_id = $1 AND t.queue = $2 COLLATE "C" AND t.timer_key LIKE %L'
    '     AND (t.claim_token IS NULL OR t.claimed_until <= $3)'
    '   ORDER BY t.timer_key LIMIT $4) s',
    replace(replace(replace(p_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%')
    INTO v_keys USING p_tenant, p_queue, v_now, p_limit + 1;
  v_keys := coalesce(v_keys, '{}');
  v_more := cardinality(v_keys) > p_limit;
  IF v_more THEN
    v_keys := v_keys[1:p_limit];
  END IF;
  WITH locked AS MATERIALIZED (
    SELECT t.timer_key, (t.claim_token IS NOT NULL AND t.claimed_until > v_now) AS held
      FROM queen.log_timers t
     WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
       AND t.timer_key = ANY (v_keys)
     ORDER BY t.timer_key
       FOR UPDATE
  ), del AS (
    DELETE FROM queen.log_timers t USING locked l
     WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
       AND t.timer_key = l.timer_key AND NOT l.held
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM locked), (SELECT count(*) FROM del) INTO v_locked, v_deleted;
  RETURN jsonb_build_object('cancelled', v_deleted, 'tooLate', v_locked - v_deleted,
                            'absent', cardinality(v_keys) - v_locked, 'remaining', v_more);
END $$;

-- Dead letters of one tenant addressed by (partitionId, transactionId): every matching row with
-- its queue and partition names, for a replay. Another tenant's partition matches nothing.
CREATE OR REPLACE FUNCTION queen.log_dlq_find_v1(p_tenant uuid, p_partitions uuid[],
                                                 p_txns text[])
RETURNS TABLE (ord int, id uuid, queue text, partition_name text, message_id uuid,
               payload jsonb, consumer_group text)
LANGUAGE sql STABLE AS $$
  SELECT i.ord::int, d.id, q.name::text, p.name::text, d.message_id, d.payload,
         d.consumer_group
    FROM unnest(p_partitions, p_txns) WITH ORDINALITY AS i(pid, txn, ord)
    JOIN queen.log_partitions p ON p.id = i.pid
    JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = p_tenant
    JOIN queen.log_dlq d ON d.partition_id = i.pid AND d.transaction_id = i.txn
   ORDER BY i.ord, d.failed_at, d.id
$$;

-- Delete dead letters of one tenant: by (partitionId, transactionId) pairs; answers how many
-- rows went for each pair, by its position (1-based).
CREATE OR REPLACE FUNCTION queen.log_dlq_delete_v1(p_tenant uuid, p_partitions uuid[],
                                                   p_txns text[])
RETURNS TABLE (ord int, deleted bigint) LANGUAGE sql AS $$
  WITH i AS (
    SELECT x.pid, x.txn, x.ord::int AS ord
      FROM unnest(p_partitions, p_txns) WITH ORDINALITY AS x(pid, txn, ord)
  ), del AS (
    DELETE FROM queen.log_dlq d
     USING i, queen.log_partitions p, queen.queues q
     WHERE d.partition_id = i.pid AND d.transaction_id = i.txn AND p.id = i.pid
       AND q.id = p.queue_id AND q.tenant_id = p_tenant
    RETURNING i.ord
  )
  SELECT i.ord, (SELECT count(*) FROM del WHERE del.ord = i.ord) FROM i ORDER BY i.ord
$$;

-- Delete dead letters by id (a replay removes exactly the rows it replayed).
CREATE OR REPLACE FUNCTION queen.log_dlq_delete_ids_v1(p_ids uuid[])
RETURNS bigint LANGUAGE sql AS $$
  WITH del AS (DELETE FROM queen.log_dlq d WHERE d.id = ANY (p_ids) RETURNING 1)
  SELECT count(*) FROM del
$$;
