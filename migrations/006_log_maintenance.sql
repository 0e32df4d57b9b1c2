-- 006_log_maintenance.sql: retention, the txn-hash purge and dead-partition cleanup.
--
-- Driven by queen_timers/log/retention.py (one broker at a time, under the lease below). Each
-- step is its own short transaction and deletes at most a bounded amount; the loop calls it
-- again until it reports done. Cutoffs are absolute instants computed once per cycle.
--
-- Lock order: a retention or purge step locks one partition row (FOR NO KEY UPDATE: it never
-- blocks pops inserting consumer rows) then deletes leaves; cleanup locks partition rows in
-- ascending id order with SKIP LOCKED, then consumers go by cascade.

-- The maintenance cycle's lease: one broker at a time, behind any pooler. (A session advisory
-- lock stays on whichever server connection a transaction pooler lent for the call, and the
-- unlock lands on another.) The holder renews it while its cycle runs; a dead holder's lapses.
-- Database time (clock_timestamp), never a test's time-travelled `now`.
CREATE TABLE IF NOT EXISTS queen.maintenance_lease (
  id     boolean PRIMARY KEY DEFAULT true CHECK (id),  -- one row
  holder text NOT NULL,
  until  timestamptz NOT NULL
);

-- Take or renew the lease for p_lease_ms; false while another holder's lease runs.
CREATE OR REPLACE FUNCTION queen.maintenance_take_v1(p_holder text, p_lease_ms int)
RETURNS boolean LANGUAGE sql AS $$
  WITH taken AS (
    INSERT INTO queen.maintenance_lease AS l (id, holder, until)
    VALUES (true, p_holder, clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0))
    ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
     WHERE l.holder = EXCLUDED.holder OR l.until < clock_timestamp()
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM taken)
$$;

CREATE OR REPLACE FUNCTION queen.maintenance_release_v1(p_holder text)
RETURNS void LANGUAGE sql AS $$
  UPDATE queen.maintenance_lease SET until = '-infinity' WHERE holder = p_holder
$$;

-- A partition is dead when nothing about it happened since p_cutoff and nothing hangs on it:
-- created and last written before the cutoff, no segment, no dead letter (a DLQ row pins its
-- partition), and no consumer row with a live lease or any lease/creation activity since the
-- cutoff. LANGUAGE sql, as the design document requires, so the planner can inline it.
CREATE OR REPLACE FUNCTION queen.log_partition_dead_v1(p_pid uuid, p_cutoff timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM queen.log_partitions p
                  WHERE p.id = p_pid AND p.created_at < p_cutoff AND p.last_write_at < p_cutoff)
     AND NOT EXISTS (SELECT 1 FROM queen.log_segments s WHERE s.partition_id = p_pid)
     AND NOT EXISTS (SELECT 1 FROM queen.log_dlq d WHERE d.partition_id = p_pid)
     AND NOT EXISTS (SELECT 1 FROM queen.log_consumers k
                      WHERE k.partition_id = p_pid
                        AND ((k.batch_end IS NOT NULL
                              AND (k.lease_expires_at IS NULL OR k.lease_expires_at > now()))
                             OR k.lease_acquired_at >= p_cutoff
                             OR k.created_at >= p_cutoff))
$$;

-- Work list of the retention rules: partitions of queues with retention on and a window, with
-- absolute cutoffs (NULL = that rule is off). Rule 1 (retentionSeconds): delete what is older,
-- consumed or not. Rule 2 (completedRetentionSeconds): delete what is older AND behind every
-- consumer group's cursor.
CREATE OR REPLACE FUNCTION queen.log_retention_work_v1(p_now timestamptz)
RETURNS TABLE (pid uuid, all_cutoff timestamptz, completed_cutoff timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT p.id,
         CASE WHEN q.retention_seconds > 0
              THEN p_now - make_interval(secs => q.retention_seconds) END,
         CASE WHEN q.completed_retention_seconds > 0
              THEN p_now - make_interval(secs => q.completed_retention_seconds) END
    FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
   WHERE q.retention_enabled
     AND (q.retention_seconds > 0 OR q.completed_retention_seconds > 0)
     AND p.last_offset >= p.log_start
   ORDER BY p.id
$$;

-- One retention step on one partition: delete WHOLE segments from log_start while they satisfy
-- rule 1 or rule 2, at most p_max_rows, and move log_start to the end of the last one deleted
-- + 1 (never mid-segment). created_at and offsets are both monotone per partition, so the
-- deletable set is a prefix and the walk looks at a window of p_max_rows segments only.
-- Cursors left below log_start resume at the next live segment (pop skips gaps).
CREATE OR REPLACE FUNCTION queen.log_retention_step_v1(p_pid uuid, p_all_cutoff timestamptz,
                                                       p_completed_cutoff timestamptz,
                                                       p_max_rows int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_start bigint;
  v_slowest bigint;
  v_deleted int;
  v_end bigint;
BEGIN
  SELECT log_start INTO v_start FROM queen.log_partitions WHERE id = p_pid FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('deleted', 0, 'done', true);
  END IF;
  IF p_completed_cutoff IS NOT NULL THEN
    -- The slowest group; no consumer row at all means nothing is completed.
    SELECT min(k.committed) INTO v_slowest FROM queen.log_consumers k WHERE k.partition_id = p_pid;
  END IF;
  WITH win AS (
    SELECT s.base_offset,
           ((p_all_cutoff IS NOT NULL AND s.created_at < p_all_cutoff)
            OR (p_completed_cutoff IS NOT NULL AND s.created_at < p_completed_cutoff
                AND s.end_offset <= v_slowest)) AS del,
           row_number() OVER (ORDER BY s.base_offset) AS rn
      FROM (SELECT base_offset, end_offset, created_at FROM queen.log_segments
             WHERE partition_id = p_pid AND base_offset >= v_start
             ORDER BY base_offset LIMIT p_max_rows) s),
  prefix AS (
    SELECT w.base_offset FROM win w
     WHERE w.rn < coalesce((SELECT min(rn) FROM win WHERE NOT coalesce(del, false)), p_max_rows + 1)),
  d AS (
    DELETE FROM queen.log_segments s USING prefix
     WHERE s.partition_id = p_pid AND s.base_offset = prefix.base_offset
    RETURNING s.end_offset)
  SELECT count(*), max(d.end_offset) INTO v_deleted, v_end FROM d;
  IF v_deleted > 0 THEN
    UPDATE queen.log_partitions SET log_start = v_end + 1 WHERE id = p_pid;
  END IF;
  RETURN jsonb_build_object('deleted', v_deleted,
                            'newLogStart', CASE WHEN v_deleted > 0 THEN v_end + 1 ELSE v_start END,
                            'done', v_deleted < p_max_rows);
END $$;

-- Work list of the txn-hash purge: partitions with something to purge now, with their cutoff
-- now - max(dedup window, completed retention, p_floor_s). "Something" = rows at or under the
-- purge cap (queen.log_txns_purge_step_v1) and either rows below log_start (retained away) or
-- a live segment at txns_start older than the cutoff. Two index probes per partition in one
-- statement, so an idle cycle over many partitions is one round trip.
CREATE OR REPLACE FUNCTION queen.log_txns_purge_work_v1(p_now timestamptz, p_floor_s int)
RETURNS TABLE (pid uuid, cutoff timestamptz) LANGUAGE sql STABLE AS $$
  SELECT w.id, w.cutoff
    FROM (SELECT p.id, p.txns_start, p.log_start,
                 p_now - make_interval(secs => greatest(q.dedup_window_seconds,
                                                        q.completed_retention_seconds,
                                                        p_floor_s)) AS cutoff
            FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
           WHERE p.last_offset >= p.txns_start) w
    LEFT JOIN LATERAL (SELECT min(k.committed) AS slowest FROM queen.log_consumers k
                        WHERE k.partition_id = w.id) c ON true
    LEFT JOIN LATERAL (SELECT s.created_at FROM queen.log_segments s
                        WHERE s.partition_id = w.id AND s.base_offset >= w.txns_start
                        ORDER BY s.base_offset LIMIT 1) o ON true
   WHERE greatest(coalesce(c.slowest, -1), w.log_start - 1) >= w.txns_start
     AND (w.txns_start < w.log_start OR o.created_at < w.cutoff)
   ORDER BY w.id
$$;

-- Purge one partition's txn hashes older than p_cutoff. Never at or above the slowest cursor
-- while the segment is still live: acks resolve through these rows, and a consumer that lags
-- longer than the dedup window must still be able to ack. Below log_start (retained away)
-- they serve nobody. Gated by the created_at of the oldest live segment so an idle pass costs
-- two index probes; when it runs it is one DELETE (the key has no offset prefix to batch on).
CREATE OR REPLACE FUNCTION queen.log_txns_purge_step_v1(p_pid uuid, p_cutoff timestamptz,
                                                        p_max_rows int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_p record;
  v_cap bigint;
  v_oldest timestamptz;
  v_deleted int;
  v_max bigint;
BEGIN
  SELECT log_start, txns_start, last_offset INTO v_p FROM queen.log_partitions WHERE id = p_pid;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('deleted', 0, 'done', true);
  END IF;
  SELECT greatest(coalesce(min(k.committed), -1), v_p.log_start - 1) INTO v_cap
    FROM queen.log_consumers k WHERE k.partition_id = p_pid;
  IF v_cap < v_p.txns_start THEN
    RETURN jsonb_build_object('deleted', 0, 'done', true);
  END IF;
  IF v_p.txns_start >= v_p.log_start THEN
    SELECT s.created_at INTO v_oldest FROM queen.log_segments s
     WHERE s.partition_id = p_pid AND s.base_offset >= v_p.txns_start
     ORDER BY s.base_offset LIMIT 1;
    IF v_oldest IS NULL OR v_oldest >= p_cutoff THEN
      RETURN jsonb_build_object('deleted', 0, 'done', true);
    END IF;
  END IF;
  WITH d AS (
    DELETE FROM queen.log_txns t
     WHERE t.partition_id = p_pid AND t.created_at < p_cutoff AND t."offset" <= v_cap
    RETURNING t."offset")
  SELECT count(*), max(d."offset") INTO v_deleted, v_max FROM d;
  IF v_deleted > 0 THEN
    UPDATE queen.log_partitions SET txns_start = greatest(txns_start, v_max + 1)
     WHERE id = p_pid;
  END IF;
  RETURN jsonb_build_object('deleted', v_deleted, 'done', true);
END $$;

-- Remove up to p_max_rows dead partitions (queen.log_partition_dead_v1 at p_cutoff): lock
-- candidates in ascending id with SKIP LOCKED, re-check under the locks, delete their txn rows
-- (no FK) and the partitions (consumer rows go by cascade). A later push to the same name
-- creates a new partition with offsets from 0. Returns how many were removed.
CREATE OR REPLACE FUNCTION queen.log_partition_cleanup_step_v1(p_cutoff timestamptz,
                                                               p_max_rows int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_ids uuid[];
  v_n int;
BEGIN
  SELECT array_agg(c.id ORDER BY c.id) INTO v_ids FROM (
    SELECT p.id FROM queen.log_partitions p
     WHERE p.last_write_at < p_cutoff AND p.created_at < p_cutoff
       AND queen.log_partition_dead_v1(p.id, p_cutoff)
     ORDER BY p.id
     LIMIT p_max_rows
       FOR UPDATE SKIP LOCKED) c;
  IF v_ids IS NULL THEN
    RETURN 0;
  END IF;
  WITH gone AS (
    DELETE FROM queen.log_partitions p
     WHERE p.id = ANY (v_ids) AND queen.log_partition_dead_v1(p.id, p_cutoff)
    RETURNING p.id),
  t AS (DELETE FROM queen.log_txns x USING gone WHERE x.partition_id = gone.id)
  SELECT count(*) INTO v_n FROM gone;
  RETURN v_n;
END $$;
