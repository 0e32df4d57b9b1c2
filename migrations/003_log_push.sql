-- 003_log_push.sql: provisioning and the single offset allocator.
--
-- Every write into the log goes through queen.log_push_one_v1: ordinary pushes
-- (queen.log_push_v1), the transaction wire and the timer fire. Offsets are contiguous per
-- partition: the allocator bump, the segment and its txn rows are one transaction, so a
-- rolled-back push rolls the bump back with it and leaves no gap.
--
-- Lock order (the whole product): queen.log_timers -> queen.queues -> queen.log_partitions
-- (ascending id) -> queen.log_consumers -> leaves (segments, txns, dlq).

-- UTC, microseconds, 'Z': the one timestamp format of every result.
CREATE OR REPLACE FUNCTION queen.ts_v1(ts timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- Resolve (queue, partition) names of one tenant to partition ids, creating what is missing.
-- Input-aligned output. Steady state is one read and no write; the INSERTs run only when
-- something is missing, each ordered by its unique key (speculative-insertion locks are taken
-- in row order, so two provisioners cannot wait on each other in a cycle). Not measured here:
-- the reference's 2026-07-23 block (mass creation convoyed on unordered inserts).
CREATE OR REPLACE FUNCTION queen.log_provision_v1(p_tenant uuid, p_queues text[], p_partitions text[])
RETURNS uuid[] LANGUAGE plpgsql AS $$
DECLARE
  v_out uuid[];
  v_missing int;
BEGIN
  IF cardinality(p_queues) IS DISTINCT FROM cardinality(p_partitions) THEN
    RAISE EXCEPTION 'QPROV misaligned: % queues, % partitions',
      cardinality(p_queues), cardinality(p_partitions) USING ERRCODE = '22023';
  END IF;
  IF cardinality(p_queues) = 0 THEN
    RETURN '{}'::uuid[];
  END IF;
  SELECT array_agg(p.id ORDER BY i.ord), count(*) FILTER (WHERE p.id IS NULL)
    INTO v_out, v_missing
    FROM unnest(p_queues, p_partitions) WITH ORDINALITY AS i(q, pn, ord)
    LEFT JOIN queen.queues qu ON qu.tenant_id = p_tenant AND qu.name = i.q COLLATE "C"
    LEFT JOIN queen.log_partitions p ON p.queue_id = qu.id AND p.name = i.pn COLLATE "C";
  IF v_missing = 0 THEN
    RETURN v_out;
  END IF;

  INSERT INTO queen.queues (tenant_id, name, namespace, task)
  SELECT p_tenant, q,
         CASE WHEN position('.' IN q) > 0 THEN split_part(q, '.', 1) ELSE '' END,
         CASE WHEN position('.' IN q) > 0 THEN split_part(q, '.', 2) ELSE '' END
    FROM (SELECT DISTINCT q COLLATE "C" AS q FROM unnest(p_queues) AS u(q)) d
   ORDER BY q
  ON CONFLICT (tenant_id, name) DO NOTHING;

  INSERT INTO queen.log_partitions (queue_id, name)
  SELECT DISTINCT qu.id, i.pn COLLATE "C"
    FROM unnest(p_queues, p_partitions) AS i(q, pn)
    JOIN queen.queues qu ON qu.tenant_id = p_tenant AND qu.name = i.q COLLATE "C"
   ORDER BY 1, 2
  ON CONFLICT (queue_id, name) DO NOTHING;

  SELECT array_agg(p.id ORDER BY i.ord), count(*) FILTER (WHERE p.id IS NULL)
    INTO v_out, v_missing
    FROM unnest(p_queues, p_partitions) WITH ORDINALITY AS i(q, pn, ord)
    LEFT JOIN queen.queues qu ON qu.tenant_id = p_tenant AND qu.name = i.q COLLATE "C"
    LEFT JOIN queen.log_partitions p ON p.queue_id = qu.id AND p.name = i.pn COLLATE "C";
  IF v_missing > 0 THEN
    RAISE EXCEPTION 'QPROV % of % partitions did not resolve', v_missing, cardinality(p_queues)
      USING ERRCODE = 'P0001';
  END IF;
  RETURN v_out;
END $$;

-- The single allocator. Appends one segment of cardinality(p_hashes) frames to partition
-- p_pid. Locks the partition row (a no-op when the caller pre-locked it), stamps created_at
-- AFTER the lock, so created_at is monotone per partition in commit order.
--
-- Dedup: with p_window > 0, every incoming txn hash is looked up in the partition's log_txns
-- (an index probe on (partition_id, txn_hash)) among rows younger than the window and above
-- max(p_verified, txns_start - 1). A hit writes nothing and answers
-- {"status":"duplicate","dups":[{"i":frame index,"off":original offset}]}: the caller repacks
-- the segment without those frames. p_verified = -1 means "probe everything in the window".
CREATE OR REPLACE FUNCTION queen.log_push_one_v1(p_pid uuid, p_hashes uuid[], p_blob bytea,
                                                 p_window int, p_verified bigint DEFAULT -1)
RETURNS jsonb LANGUAGE plpgsql
-- Generic plans: every statement here is a key lookup or a per-hash index probe whatever the
-- arguments, and re-planning them per call costs more than running them (a one-frame call
-- 0.33 ms generic against 0.66 custom, 2026-11-29; bench/RESULTS.md, "Measurements the code
-- cites").
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_n int := cardinality(p_hashes);
  v_last bigint;
  v_txns_start bigint;
  v_now timestamptz;
  v_base bigint;
  v_dups jsonb;
  v_floor bigint;
BEGIN
  IF v_n IS NULL OR v_n < 1 THEN
    RAISE EXCEPTION 'QPUSH bad segment: no frames' USING ERRCODE = '22023';
  END IF;
  SELECT last_offset, txns_start INTO v_last, v_txns_start
    FROM queen.log_partitions WHERE id = p_pid FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'QPUSH partition % not found', p_pid USING ERRCODE = 'P0001';
  END IF;
  v_now := clock_timestamp();

  IF p_window > 0 THEN
    v_floor := greatest(coalesce(p_verified, -1), v_txns_start - 1);
    IF v_last > v_floor THEN
      -- One index probe per incoming hash (LATERAL + aggregate cannot be flattened into a
      -- join), not a plain join: with a join the planner hashes the partition's whole txn
      -- history on every push, quadratic in the partition's size (a 500-frame push 250 ms at
      -- 20k txns against 34 ms, 2026-11-29; bench/RESULTS.md, "Measurements the code cites").
      SELECT jsonb_agg(jsonb_build_object('i', h.i - 1, 'off', x.off) ORDER BY h.i)
        INTO v_dups
        FROM unnest(p_hashes) WITH ORDINALITY AS h(hash, i)
        CROSS JOIN LATERAL (
          SELECT min(t."offset") AS off FROM queen.log_txns t
           WHERE t.partition_id = p_pid AND t.txn_hash = h.hash
             AND t."offset" > v_floor
             AND t.created_at >= v_now - make_interval(secs => p_window)) x
       WHERE x.off IS NOT NULL;
      IF v_dups IS NOT NULL THEN
        RETURN jsonb_build_object('status', 'duplicate', 'partitionId', p_pid, 'dups', v_dups);
      END IF;
    END IF;
  END IF;

  -- last_write_at is quantized to one second, so the allocator update is cheap to reason about
  -- and idle-partition logic (cleanup) has a coarse clock without a write per push.
  UPDATE queen.log_partitions
     SET last_offset = last_offset + v_n,
         last_write_at = CASE WHEN last_write_at < v_now - interval '1 second'
                              THEN v_now ELSE last_write_at END
   WHERE id = p_pid
  RETURNING last_offset - v_n + 1 INTO v_base;

  INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, blob)
  VALUES (p_pid, v_base, v_base + v_n - 1, v_now, p_blob);
  INSERT INTO queen.log_txns (partition_id, txn_hash, "offset", created_at)
  SELECT p_pid, h.hash, v_base + h.i - 1, v_now
    FROM unnest(p_hashes) WITH ORDINALITY AS h(hash, i);

  RETURN jsonb_build_object('status', 'queued', 'partitionId', p_pid, 'baseOffset', v_base,
                            'createdAt', queen.ts_v1(v_now));
END $$;

-- An ordinary push: one segment per (queue, partition) of one tenant. p_hashes is flat:
-- segment k owns the next p_counts[k] hashes. Provisions lazily, pre-locks every partition in
-- ascending id order (so two multi-partition pushes cannot deadlock), then appends each
-- segment. Results are input-aligned; a duplicate segment coexists with committed siblings.
CREATE OR REPLACE FUNCTION queen.log_push_v1(p_tenant uuid, p_queues text[], p_partitions text[],
                                             p_counts int[], p_hashes uuid[], p_blobs bytea[])
RETURNS jsonb LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$  -- as log_push_one_v1: key lookups only
DECLARE
  v_n int := coalesce(cardinality(p_queues), 0);
  v_pids uuid[];
  v_windows int[];
  v_starts int[];
  v_out jsonb[];
  v_k int;
  v_pos int := 1;
BEGIN
  IF v_n = 0 THEN
    RETURN '[]'::jsonb;
  END IF;
  IF cardinality(p_partitions) <> v_n OR cardinality(p_counts) <> v_n
     OR cardinality(p_blobs) <> v_n THEN
    RAISE EXCEPTION 'QPUSH misaligned arrays' USING ERRCODE = '22023';
  END IF;
  IF (SELECT sum(c) FROM unnest(p_counts) c) <> coalesce(cardinality(p_hashes), 0) THEN
    RAISE EXCEPTION 'QPUSH % hashes for % frames', cardinality(p_hashes),
      (SELECT sum(c) FROM unnest(p_counts) c) USING ERRCODE = '22023';
  END IF;

  v_pids := queen.log_provision_v1(p_tenant, p_queues, p_partitions);
  IF (SELECT count(DISTINCT x) FROM unnest(v_pids) x) <> v_n THEN
    RAISE EXCEPTION 'QPUSH two segments target the same partition' USING ERRCODE = '22023';
  END IF;

  -- FOR NO KEY UPDATE (the strength the allocator UPDATE takes anyway): it does not conflict
  -- with the FOR KEY SHARE that inserting a consumer row or a segment takes, so a first pop
  -- never queues behind a push.
  PERFORM 1 FROM queen.log_partitions WHERE id = ANY (v_pids) ORDER BY id FOR NO KEY UPDATE;

  SELECT array_agg(q.dedup_window_seconds ORDER BY i.ord) INTO v_windows
    FROM unnest(v_pids) WITH ORDINALITY AS i(pid, ord)
    JOIN queen.log_partitions p ON p.id = i.pid
    JOIN queen.queues q ON q.id = p.queue_id;

  v_starts := array_fill(0, ARRAY[v_n]);
  FOR v_k IN 1..v_n LOOP
    v_starts[v_k] := v_pos;
    v_pos := v_pos + p_counts[v_k];
  END LOOP;
  v_out := array_fill(NULL::jsonb, ARRAY[v_n]);
  FOR v_k IN SELECT i.ord FROM unnest(v_pids) WITH ORDINALITY AS i(pid, ord) ORDER BY i.pid LOOP
    v_out[v_k] := queen.log_push_one_v1(
      v_pids[v_k], p_hashes[v_starts[v_k] : v_starts[v_k] + p_counts[v_k] - 1],
      p_blobs[v_k], v_windows[v_k], -1);
  END LOOP;
  RETURN to_jsonb(v_out);
END $$;

-- The refusal of a write sent in clear to queues that encrypt at rest: {"encrypt": [names]},
-- or NULL when none of `p_queues` encrypts. Shared by the checked push and the checked timer
-- apply (025).
CREATE OR REPLACE FUNCTION queen._encrypt_first_v1(p_tenant uuid, p_queues text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('encrypt', jsonb_agg(q.name ORDER BY q.name))
    FROM queen.queues q
   WHERE q.tenant_id = p_tenant AND q.name = ANY (p_queues) AND q.encryption_enabled
  HAVING count(*) > 0
$$;

-- An ordinary push in one round trip, encryption check included. p_plain = the payloads are
-- not encrypted: if any target queue has encryption on, nothing is written and the answer is
-- {"encrypt": [queue names]}; the broker encrypts those payloads and calls again with
-- p_plain = false. Saves the separate flag lookup (a round trip per push) of the common case.
CREATE OR REPLACE FUNCTION queen.log_push_checked_v1(p_tenant uuid, p_queues text[],
                                                     p_partitions text[], p_counts int[],
                                                     p_hashes uuid[], p_blobs bytea[],
                                                     p_plain boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_enc jsonb := CASE WHEN p_plain THEN queen._encrypt_first_v1(p_tenant, p_queues) END;
BEGIN
  IF v_enc IS NOT NULL THEN
    RETURN v_enc;
  END IF;
  RETURN queen.log_push_v1(p_tenant, p_queues, p_partitions, p_counts, p_hashes, p_blobs);
END $$;
