-- 005_log_ack.sql: ack by transaction id, dead-lettering, lease renewal.
--
-- An ack locks consumer rows only (never a partition row: acks stay out of the push
-- serializer), in ascending (partition id, group) order, so two acks or an ack and a
-- transaction bundle cannot deadlock on them.
--
-- Statuses arrive normalized by the broker: 'ok' (completed), 'failed' (charges the retry
-- budget), 'retry' (redeliver, budget-free), 'dlq' (dead-letter now).

-- Tie-break of two signals at the same offset: dlq > failed > retry.
CREATE OR REPLACE FUNCTION queen.log_signal_rank_v1(p_status text)
RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_status WHEN 'dlq' THEN 0 WHEN 'failed' THEN 1 ELSE 2 END
$$;

-- Apply a batch of acks. Arrays are aligned, one entry per ack item; items are grouped into
-- units (partition, group, lease id) and each unit is applied as one cursor move:
--   1. every txn hash is resolved through queen.log_txns inside the ackable span
--      [max(committed + 1, txns_start), batch_end] (to the tail without a live lease);
--      the lowest matching offset wins;
--   2. the head signal is the lowest-offset failed/dlq/retry item (tie: dlq > failed > retry);
--   3. the cursor moves to the highest ok item strictly below the signal. Gaps below it count
--      as completed: acking the last message of a batch completes the batch (implicit ack);
--   4. 'failed' under the retry limit releases the lease and charges one retry (the poison
--      message and everything after it redeliver); at the limit it dead-letters when the
--      queue dead-letters, else drops the message; 'retry' releases without charging; 'dlq'
--      (or an exhausted 'failed') keeps the lease and reports the poison offset: the broker
--      snapshots the frame and calls queen.log_dlq_head_v2 in the same transaction;
--   5. a dead-lettered or dropped message settles what the same call says above it, as the
--      reference broker does: position by position, ok is done, dlq (and failed on a spent
--      budget) is dead-lettered too (dropped without dead letters), a silent position below
--      the highest ok is done; retry, failed with budget left, or a silent position above the
--      highest ok stops it. So one /ack/batch call with a status per message leaves nothing
--      of the batch to redeliver. The lease ends with the dead letters either way: a message
--      this call does not settle is redelivered, and a later ack under that lease is refused.
--      (p_settle false: the previous release's ack, which settles nothing.)
-- The retry budget counts failures of the message at the head of the cursor: it resets when
-- the cursor moves forward and when a batch completes.
-- Returns {"units":[{"i":[item ordinals], "released":bool}],
--          "exceptions":[{i, ok, error?, noop?, dlq?, dropped?}],
--          "dlq":[{pid, group, worker, queue, off, settle, release, error, i}],
--          "wake":[queue names]}
-- ("dlq": one entry per dead letter in offset order; "settle": where the cursor moves with the
-- last of a unit, the one with "release" true.)
-- (ordinals 0-based). An item of a unit that is not in "exceptions" succeeded plainly (ok, not
-- a noop, not dead-lettered); answering only the exceptions keeps a 500-item batch cheap.
-- "wake" lists the queues where messages became available again (a released lease with a
-- backlog left).
-- p_settle false: the previous release's answer (no settling, one dead letter per unit).
CREATE OR REPLACE FUNCTION queen.log_ack_v2(p_tenant uuid, p_pids uuid[], p_groups text[],
                                            p_workers text[], p_hashes uuid[], p_statuses text[],
                                            p_errors text[], p_now timestamptz,
                                            p_settle boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpgsql
-- Generic plans: key lookups and per-hash index probes only; planning them per call costs more
-- than running them (the measurement of log_push_one_v1, 003).
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_n int := coalesce(cardinality(p_pids), 0);
  v_units jsonb := '[]'::jsonb;
  v_exc jsonb := '[]'::jsonb;
  v_dlq jsonb := '[]'::jsonb;
  v_wake text[] := '{}';
  u record;
  v_q record;
  v_c record;
  v_is int[];
  v_sts text[];
  v_effs bigint[];
  v_belows boolean[];
  v_lease_ok boolean;
  v_mine boolean;
  v_has_lease boolean;
  v_lo bigint;
  v_hi bigint;
  v_sig_off bigint;
  v_sig_st text;
  v_sig_i int;
  v_newc bigint;
  v_commit bigint;
  v_released boolean;
  v_retry int;
  v_dlq_is int[];
  v_files jsonb;
  v_p record;
  v_dropped boolean;
  v_settle bigint;
  v_max_ok_all bigint;
BEGIN
  IF cardinality(p_groups) IS DISTINCT FROM v_n OR cardinality(p_workers) IS DISTINCT FROM v_n
     OR cardinality(p_hashes) IS DISTINCT FROM v_n OR cardinality(p_statuses) IS DISTINCT FROM v_n
     OR cardinality(p_errors) IS DISTINCT FROM v_n THEN
    RAISE EXCEPTION 'QACK misaligned arrays' USING ERRCODE = '22023';
  END IF;

  FOR u IN
    SELECT t.pid, t.grp, t.wrk, array_agg(t.ord::int ORDER BY t.ord) AS ords,
           array_agg(t.h ORDER BY t.ord) AS hs, array_agg(t.st ORDER BY t.ord) AS sts
      FROM unnest(p_pids, p_groups, p_workers, p_hashes, p_statuses)
           WITH ORDINALITY AS t(pid, grp, wrk, h, st, ord)
     GROUP BY t.pid, t.grp, t.wrk
     ORDER BY t.pid, t.grp COLLATE "C", t.wrk
  LOOP
    -- Tenancy guard: the partition must belong to a queue of the caller's tenant.
    SELECT q.name, q.retry_limit, (q.dead_letter_queue OR q.dlq_after_max_retries) AS dlq_on,
           p.txns_start, p.last_offset
      INTO v_q
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = u.pid AND q.tenant_id = p_tenant;
    IF NOT FOUND THEN
      SELECT v_exc || jsonb_agg(jsonb_build_object('i', o - 1, 'ok', false,
                                                   'error', 'partition not found'))
        INTO v_exc FROM unnest(u.ords) o;
      CONTINUE;
    END IF;
    SELECT k.committed, k.batch_end, k.worker_id, k.lease_expires_at, k.batch_retry_count
      INTO v_c
      FROM queen.log_consumers k
     WHERE k.partition_id = u.pid AND k.consumer_group = u.grp
       FOR UPDATE;
    IF NOT FOUND THEN
      SELECT v_exc || jsonb_agg(jsonb_build_object('i', o - 1, 'ok', false,
                                                   'error', 'consumer not found'))
        INTO v_exc FROM unnest(u.ords) o;
      CONTINUE;
    END IF;

    -- A lease that ran out but that nobody took over since is still the acker's: accepting
    -- its ack saves a redelivery and cannot double-deliver (no one else holds the batch).
    v_mine := u.wrk <> '' AND v_c.batch_end IS NOT NULL AND v_c.worker_id = u.wrk;
    v_has_lease := v_c.batch_end IS NOT NULL AND (v_c.lease_expires_at > p_now OR v_mine);
    v_lease_ok := u.wrk = '' OR v_mine;
    v_lo := greatest(v_c.committed + 1, v_q.txns_start);
    v_hi := CASE WHEN v_has_lease THEN v_c.batch_end ELSE v_q.last_offset END;

    -- Resolve every item of the unit: eff = lowest offset inside the span, below = some
    -- occurrence at or under the cursor (already done). One index probe per hash.
    SELECT array_agg(o.i ORDER BY o.i), array_agg(o.st ORDER BY o.i),
           array_agg(x.eff ORDER BY o.i), array_agg(coalesce(x.below, false) ORDER BY o.i)
      INTO v_is, v_sts, v_effs, v_belows
      FROM unnest(u.ords, u.hs, u.sts) AS o(i, h, st)
      LEFT JOIN LATERAL (
        SELECT min(t."offset") FILTER (WHERE t."offset" BETWEEN v_lo AND v_hi) AS eff,
               bool_or(t."offset" <= v_c.committed) AS below
          FROM queen.log_txns t
         WHERE t.partition_id = u.pid AND t.txn_hash = o.h) x ON true;

    IF NOT v_lease_ok THEN
      -- Someone else holds the batch now. An ok for a message already behind the cursor is
      -- harmless; everything else is refused, nothing moves.
      SELECT v_exc || jsonb_agg(CASE WHEN r.st = 'ok' AND r.below
               THEN jsonb_build_object('i', r.i - 1, 'ok', true, 'noop', true)
               ELSE jsonb_build_object('i', r.i - 1, 'ok', false,
                                       'error', 'invalid or expired lease') END)
        INTO v_exc FROM unnest(v_is, v_sts, v_belows) AS r(i, st, below);
      CONTINUE;
    END IF;

    -- Head signal (lowest offset; tie: dlq > failed > retry) and the highest ok below it.
    v_sig_off := NULL; v_sig_st := NULL; v_sig_i := NULL;
    IF v_has_lease THEN
      SELECT r.eff, r.st, r.i INTO v_sig_off, v_sig_st, v_sig_i
        FROM unnest(v_is, v_sts, v_effs) AS r(i, st, eff)
       WHERE r.st <> 'ok' AND r.eff IS NOT NULL
       ORDER BY r.eff, queen.log_signal_rank_v1(r.st), r.i
       LIMIT 1;
    END IF;
    SELECT max(r.eff) INTO v_newc FROM unnest(v_sts, v_effs) AS r(st, eff)
     WHERE r.st = 'ok' AND (v_sig_off IS NULL OR r.eff < v_sig_off);
    v_commit := greatest(v_c.committed, coalesce(v_newc, v_c.committed));
    v_retry := CASE WHEN v_commit > v_c.committed THEN 0 ELSE v_c.batch_retry_count END;
    v_released := false;
    v_dlq_is := '{}';
    v_files := '[]'::jsonb;
    v_dropped := false;
    -- What a dead letter or a drop at the signal settles above it (step 5), position by
    -- position from the signal on, each at the strongest status this unit names there:
    -- ok settles; dlq, and failed on a spent budget, dead-letter (or drop) and settle; a
    -- silent position settles below the highest ok only; retry, or failed with budget left,
    -- stops (that message and the rest of the batch are delivered again).
    v_settle := v_sig_off;
    IF p_settle AND (v_sig_st = 'dlq' OR (v_sig_st = 'failed' AND v_retry >= v_q.retry_limit))
    THEN
      SELECT max(r.eff) FILTER (WHERE r.st = 'ok') INTO v_max_ok_all
        FROM unnest(v_sts, v_effs) AS r(st, eff);
      FOR v_p IN
        SELECT r.eff,
               (array_agg(r.st ORDER BY CASE r.st WHEN 'dlq' THEN 0 WHEN 'failed' THEN 1
                                                   WHEN 'retry' THEN 2 ELSE 3 END, r.i))[1] AS st,
               (array_agg(r.i ORDER BY CASE r.st WHEN 'dlq' THEN 0 WHEN 'failed' THEN 1
                                                  WHEN 'retry' THEN 2 ELSE 3 END, r.i))[1] AS i
          FROM unnest(v_is, v_sts, v_effs) AS r(i, st, eff)
         WHERE r.eff > v_sig_off
         GROUP BY r.eff
         ORDER BY r.eff
      LOOP
        EXIT WHEN v_p.eff > v_settle + 1 AND coalesce(v_max_ok_all, -1) < v_p.eff;
        IF v_p.st = 'ok' THEN
          NULL;
        ELSIF (v_p.st = 'dlq' AND (v_sig_st = 'dlq' OR v_q.dlq_on))
              OR (v_p.st = 'failed' AND v_retry >= v_q.retry_limit AND v_q.dlq_on) THEN
          v_files := v_files || jsonb_build_object('off', v_p.eff, 'i', v_p.i);
        ELSIF NOT (v_p.st = 'failed' AND v_retry >= v_q.retry_limit) THEN
          EXIT;                       -- retry, failed with budget left, or a dlq to drop
        END IF;                       -- (else a spent failed on a queue without dead letters)
        v_settle := v_p.eff;
      END LOOP;
    END IF;

    IF v_sig_st = 'failed' AND v_retry >= v_q.retry_limit AND NOT v_q.dlq_on THEN
      v_commit := v_settle;           -- exhausted, no dead-lettering: drop the message
      v_dropped := true;
    END IF;

    IF v_sig_st = 'dlq' OR (v_sig_st = 'failed' AND v_retry >= v_q.retry_limit AND v_q.dlq_on) THEN
      -- Commit the prefix and keep the lease: the broker dead-letters the poison message
      -- through queen.log_dlq_head_v2, which moves the cursor to "settle" and releases the
      -- lease.
      UPDATE queen.log_consumers k
         SET committed = v_commit, batch_retry_count = v_retry,
             total_consumed = k.total_consumed + (v_commit - v_c.committed)
       WHERE k.partition_id = u.pid AND k.consumer_group = u.grp;
      -- One entry per dead letter, in offset order; the last one settles and releases.
      SELECT v_dlq || jsonb_agg(jsonb_build_object(
               'pid', u.pid, 'group', u.grp, 'worker', v_c.worker_id, 'queue', v_q.name,
               'off', f.off, 'settle', v_settle, 'release', f.n = f.total,
               'error', coalesce(p_errors[f.i], p_errors[v_sig_i]), 'i', f.i - 1) ORDER BY f.n),
             array_agg(f.i)
        INTO v_dlq, v_dlq_is
        FROM (SELECT x.off, x.i, row_number() OVER (ORDER BY x.off) AS n,
                     count(*) OVER () AS total
                FROM (SELECT v_sig_off AS off, v_sig_i AS i
                      UNION ALL
                      SELECT (e->>'off')::bigint, (e->>'i')::int
                        FROM jsonb_array_elements(v_files) e) x) f;
      v_released := true;
    ELSIF v_sig_st IS NOT NULL THEN
      -- failed (charged, or dropped when exhausted without DLQ) or retry (free): release.
      UPDATE queen.log_consumers k
         SET committed = v_commit,
             batch_retry_count = CASE WHEN v_dropped THEN 0
                                      WHEN v_sig_st = 'failed' THEN v_retry + 1
                                      ELSE v_retry END,
             total_consumed = k.total_consumed + (v_commit - v_c.committed),
             -- everything from the new cursor on was delivered as often as this batch was,
             -- so the next pop (which starts there) counts one more attempt
             attempt_offset = CASE WHEN v_commit >= v_c.batch_end THEN NULL
                                   ELSE v_commit + 1 END,
             attempt_count = CASE WHEN v_commit >= v_c.batch_end THEN 0
                                  ELSE k.attempt_count END,
             batch_end = NULL, worker_id = NULL, lease_expires_at = NULL
       WHERE k.partition_id = u.pid AND k.consumer_group = u.grp;
      v_released := true;
    ELSIF v_has_lease AND v_commit >= v_c.batch_end THEN
      -- The whole batch is done: release and reset the redelivery state.
      UPDATE queen.log_consumers k
         SET committed = v_commit, batch_retry_count = 0, attempt_count = 0, attempt_offset = NULL,
             total_consumed = k.total_consumed + (v_commit - v_c.committed),
             batch_end = NULL, worker_id = NULL, lease_expires_at = NULL
       WHERE k.partition_id = u.pid AND k.consumer_group = u.grp;
      v_released := true;
    ELSIF v_commit > v_c.committed THEN
      UPDATE queen.log_consumers k
         SET committed = v_commit, batch_retry_count = v_retry,
             total_consumed = k.total_consumed + (v_commit - v_c.committed),
             attempt_offset = v_commit + 1  -- an expiry redelivers from here: one more attempt
       WHERE k.partition_id = u.pid AND k.consumer_group = u.grp;
    END IF;
    IF v_released AND v_commit < v_q.last_offset THEN
      v_wake := array_append(v_wake, v_q.name);
    END IF;

    v_units := v_units || jsonb_build_object(
      'i', (SELECT jsonb_agg(o - 1) FROM unnest(u.ords) o), 'released', v_released);
    SELECT v_exc || coalesce(jsonb_agg(CASE
             WHEN r.eff IS NULL AND r.below AND r.st = 'ok'
               THEN jsonb_build_object('i', r.i - 1, 'ok', true, 'noop', true)
             WHEN r.eff IS NULL AND r.below
               THEN jsonb_build_object('i', r.i - 1, 'ok', false, 'error', 'already committed')
             WHEN r.eff IS NULL
               THEN jsonb_build_object('i', r.i - 1, 'ok', false, 'error',
                      CASE WHEN v_has_lease THEN 'transaction not found in the leased batch'
                           ELSE 'transaction not found' END)
             WHEN r.st <> 'ok' AND NOT v_has_lease
               THEN jsonb_build_object('i', r.i - 1, 'ok', false, 'error', 'no live lease')
             ELSE jsonb_build_object('i', r.i - 1, 'ok', true, 'dlq', r.i = ANY(v_dlq_is),
                                     'dropped', v_dropped AND r.i = v_sig_i) END), '[]'::jsonb)
      INTO v_exc
      FROM unnest(v_is, v_sts, v_effs, v_belows) AS r(i, st, eff, below)
     WHERE r.eff IS NULL OR (r.st <> 'ok' AND NOT v_has_lease)
        OR r.i = ANY(v_dlq_is) OR (v_dropped AND r.i = v_sig_i);
  END LOOP;

  RETURN jsonb_build_object('units', v_units, 'exceptions', v_exc, 'dlq', v_dlq,
                            'wake', (SELECT coalesce(jsonb_agg(DISTINCT w), '[]'::jsonb)
                                       FROM unnest(v_wake) w));
END $$;

-- The previous release's ack, for its brokers during an upgrade: they dead-letter one message
-- per unit through queen.log_dlq_head_v1, which settles nothing above it.
CREATE OR REPLACE FUNCTION queen.log_ack_v1(p_tenant uuid, p_pids uuid[], p_groups text[],
                                            p_workers text[], p_hashes uuid[], p_statuses text[],
                                            p_errors text[], p_now timestamptz)
RETURNS jsonb LANGUAGE sql AS $$
  SELECT r || jsonb_build_object('dlq', coalesce((SELECT jsonb_agg(d - 'settle' - 'release')
                                                    FROM jsonb_array_elements(r->'dlq') d),
                                                   '[]'::jsonb))
    FROM queen.log_ack_v2(p_tenant, p_pids, p_groups, p_workers, p_hashes, p_statuses,
                          p_errors, p_now, false) r
$$;

-- Dead-letter the message at p_off under the lease that queen.log_ack_v2 kept: insert the
-- snapshot; with p_release (the last dead letter of the ack), also move the cursor to p_settle
-- (the poison message and what the ack settled above it), release the lease and reset the
-- redelivery state (all of it when the batch is done).
-- Returns the dead letter's id, or NULL when the lease is no longer ours (nothing written).
CREATE OR REPLACE FUNCTION queen.log_dlq_head_v2(p_pid uuid, p_group text, p_worker text,
                                                 p_off bigint, p_settle bigint, p_release boolean,
                                                 p_message_id uuid, p_txn text,
                                                 p_payload jsonb, p_error text,
                                                 p_created_at timestamptz, p_now timestamptz)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
  v_c record;
  v_id uuid;
  v_to bigint;
BEGIN
  SELECT k.committed, k.batch_retry_count, k.batch_end INTO v_c
    FROM queen.log_consumers k
   WHERE k.partition_id = p_pid AND k.consumer_group = p_group
     AND k.worker_id IS NOT DISTINCT FROM p_worker AND k.batch_end IS NOT NULL
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset", message_id, transaction_id,
                             payload, error, retry_count, failed_at, created_at)
  VALUES (p_pid, p_group, p_off, p_message_id, p_txn, p_payload, p_error,
          v_c.batch_retry_count, p_now, p_created_at)
  RETURNING id INTO v_id;
  IF NOT p_release THEN
    RETURN v_id;                      -- another dead letter of the same ack follows
  END IF;
  v_to := greatest(v_c.committed, p_off, least(coalesce(p_settle, p_off), v_c.batch_end));
  UPDATE queen.log_consumers k
     SET committed = v_to,
         total_consumed = k.total_consumed + (v_to - v_c.committed),
         batch_end = NULL, worker_id = NULL, lease_expires_at = NULL,
         batch_retry_count = 0,
         -- the rest of the batch was delivered as often as the batch: the next pop counts on;
         -- past the batch nothing was delivered yet
         attempt_offset = CASE WHEN v_to >= v_c.batch_end THEN NULL ELSE v_to + 1 END,
         attempt_count = CASE WHEN v_to >= v_c.batch_end THEN 0 ELSE k.attempt_count END
   WHERE k.partition_id = p_pid AND k.consumer_group = p_group;
  RETURN v_id;
END $$;

-- The previous release's dead letter (no settling): what its brokers call during an upgrade.
-- Dead-letter the poison message at p_off under the lease that queen.log_ack_v1 kept: insert
-- the snapshot, move the cursor past it, release the lease, reset the redelivery state.
-- Returns the dead letter's id, or NULL when the lease is no longer ours (nothing written).
CREATE OR REPLACE FUNCTION queen.log_dlq_head_v1(p_pid uuid, p_group text, p_worker text,
                                                 p_off bigint, p_message_id uuid, p_txn text,
                                                 p_payload jsonb, p_error text,
                                                 p_created_at timestamptz, p_now timestamptz)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
  v_c record;
  v_id uuid;
BEGIN
  SELECT k.committed, k.batch_retry_count INTO v_c
    FROM queen.log_consumers k
   WHERE k.partition_id = p_pid AND k.consumer_group = p_group
     AND k.worker_id IS NOT DISTINCT FROM p_worker AND k.batch_end IS NOT NULL
     FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset", message_id, transaction_id,
                             payload, error, retry_count, failed_at, created_at)
  VALUES (p_pid, p_group, p_off, p_message_id, p_txn, p_payload, p_error,
          v_c.batch_retry_count, p_now, p_created_at)
  RETURNING id INTO v_id;
  UPDATE queen.log_consumers k
     SET committed = greatest(k.committed, p_off),
         total_consumed = k.total_consumed + greatest(p_off - k.committed, 0),
         batch_end = NULL, worker_id = NULL, lease_expires_at = NULL,
         -- the rest of the batch was delivered as often as the batch: the next pop counts on
         batch_retry_count = 0, attempt_offset = greatest(k.committed, p_off) + 1
   WHERE k.partition_id = p_pid AND k.consumer_group = p_group;
  RETURN v_id;
END $$;

-- Extend every lease held by p_worker (one pop's lease id spans all the partitions it
-- claimed) to at least p_now + the queue's lease time (p_seconds when given). Never shortens.
-- A lease that ran out but that no pop took over since is still the worker's (as for acks):
-- renewing it cannot give a message to two consumers.
-- No index on worker_id, deliberately: every pop rewrites it, and an index would make those
-- updates non-HOT; a renewal scans the tenant's consumer rows instead.
CREATE OR REPLACE FUNCTION queen.log_renew_lease_v1(p_tenant uuid, p_worker text, p_seconds int,
                                                    p_now timestamptz)
RETURNS jsonb LANGUAGE sql AS $$
  WITH r AS (
    UPDATE queen.log_consumers k
       SET lease_expires_at = greatest(k.lease_expires_at,
                                       p_now + make_interval(secs => coalesce(p_seconds, q.lease_time)))
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = k.partition_id AND q.tenant_id = p_tenant
       AND k.worker_id = p_worker AND k.batch_end IS NOT NULL
    RETURNING k.lease_expires_at)
  SELECT jsonb_build_object('renewed', count(*),
                            'expiresAt', CASE WHEN count(*) > 0
                                              THEN queen.ts_v1(min(r.lease_expires_at)) END)
    FROM r
$$;

-- Dead letters of one queue (optionally one partition, one group, a window on failed_at with
-- both ends inclusive, NULL = open), newest first, as the DLQ listing shows them
-- (client-wire §9); the broker decodes/decrypts "data". total ignores the page, not the window.
CREATE OR REPLACE FUNCTION queen.log_dlq_list_v2(p_tenant uuid, p_queue text, p_partition text,
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
               'failedAt', queen.ts_v1(x.failed_at))
             ORDER BY x.failed_at DESC, x.id)
        FROM (SELECT * FROM m ORDER BY m.failed_at DESC, m.id
               LIMIT p_limit OFFSET p_offset) x), '[]'::jsonb))
$$;

-- The listing without a window: what brokers of the previous release call during an upgrade.
CREATE OR REPLACE FUNCTION queen.log_dlq_list_v1(p_tenant uuid, p_queue text, p_partition text,
                                                 p_group text, p_limit int, p_offset int)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT queen.log_dlq_list_v2(p_tenant, p_queue, p_partition, p_group, NULL, NULL, p_limit,
                               p_offset)
$$;
