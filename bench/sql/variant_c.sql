-- Variant C of the amplification bench: the alternative the design document rejected.
-- BENCH DATABASE ONLY: applied by `queen bench amplification` to a database it created, after
-- every broker on it has booted (a boot re-applies migrations/025 and would undo it).
--
-- The scan index is (shard, deliver_at) instead of (shard, visible_at). The claim's UPDATE then
-- writes no indexed column and can be HOT, and the claim has to filter leased rows itself:
-- visible  <=>  deliver_at <= now AND (claimed_until IS NULL OR claimed_until <= now), which is
-- exactly visible_at <= now. A row backing off after a failed fire keeps its old deliver_at, so
-- it sits at the head of its shard's index and every probe and claim steps over it.
-- Same signatures and result shapes as 025's functions, so the broker runs unchanged (the
-- claim is 025's log_timers_claim_v3, which its log_timers_claim_v2 and _v1 wrap).
-- Not a copy of the migration's probe and claim: a deliberate alternative, measured against
-- them by `queen bench amplification` (variant C, docs/guides/benchmarks.md). Every other
-- scenario calls the migration's own procedures; tests/bench/test_bench_variant_c.py keeps
-- the signatures in step with 025's.

DROP INDEX IF EXISTS queen.idx_log_timers_visible;
CREATE INDEX IF NOT EXISTS idx_log_timers_deliver ON queen.log_timers (shard, deliver_at);

CREATE OR REPLACE FUNCTION queen.log_timers_due_v1(p_shards int[], p_now timestamptz,
                                                   p_cap int)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_shards int[] := coalesce(p_shards, ARRAY(SELECT generate_series(0, 63)));
  v_cap int := greatest(coalesce(p_cap, 2000), 0);
  v_min timestamptz;
  v_due bigint;
BEGIN
  -- the earliest unleased row per shard: one descent, then a walk over every leased row at the
  -- head (rows in backoff are visible again only at claimed_until, found by the 1 s poll)
  SELECT min(m.deliver_at) INTO v_min
    FROM unnest(v_shards) AS s(shard)
    CROSS JOIN LATERAL (SELECT t.deliver_at FROM queen.log_timers t
                         WHERE t.shard = s.shard::smallint
                           AND (t.claimed_until IS NULL OR t.claimed_until <= v_now)
                         ORDER BY t.deliver_at LIMIT 1) m;
  SELECT count(*) INTO v_due
    FROM (SELECT 1 FROM queen.log_timers t
           WHERE t.shard = ANY (v_shards::smallint[]) AND t.deliver_at <= v_now
             AND (t.claimed_until IS NULL OR t.claimed_until <= v_now)
           LIMIT v_cap + 1) d;
  RETURN jsonb_build_object(
    'now', queen.ts_v1(v_now),
    'nextInMs', CASE WHEN v_min IS NULL THEN NULL
                     ELSE extract(epoch FROM v_min - v_now) * 1000 END,
    'due', least(v_due, v_cap),
    'dueCapped', v_due > v_cap,
    'lateMs', CASE WHEN v_min IS NOT NULL AND v_min < v_now
                   THEN extract(epoch FROM v_now - v_min) * 1000 ELSE 0 END);
END $$;

CREATE OR REPLACE FUNCTION queen.log_timers_claim_v3(p_shards int[], p_now timestamptz,
                                                     p_lease_ms int, p_max_rows int,
                                                     p_per_tenant int)
RETURNS TABLE (tenant_id uuid, queue text, timer_key text, "partition" text, txn text,
               message_id uuid, payload bytea, payload_zstd boolean, encrypted boolean,
               producer_sub text, attempts int, deliver_at timestamptz, late_ms float8,
               claim_token uuid, visible_at timestamptz, tid tid, trace_parent text,
               trace_state text)
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_shards int[] := coalesce(p_shards, ARRAY(SELECT generate_series(0, 63)));
  v_max int := greatest(coalesce(p_max_rows, 200), 1);
  v_per int;
  v_pt int;
  v_scan int;
  v_lease interval := make_interval(secs => greatest(coalesce(p_lease_ms, 30000), 1) / 1000.0);
BEGIN
  IF cardinality(v_shards) = 0 THEN
    RETURN;
  END IF;
  v_per := greatest(ceil(v_max::numeric / cardinality(v_shards))::int, 8);
  v_pt := least(greatest(coalesce(p_per_tenant, v_per), 1), v_per);
  v_scan := 16 * v_per;
  RETURN QUERY
  WITH pick AS MATERIALIZED (
    SELECT c.tenant_id, c.queue, c.timer_key
      FROM unnest(v_shards) WITH ORDINALITY AS ring(shard, pos)
      CROSS JOIN LATERAL (
        SELECT w.tenant_id, w.queue, w.timer_key, w.deliver_at, w.rn
          FROM (SELECT h.tenant_id, h.queue, h.timer_key, h.deliver_at,
                       row_number() OVER (PARTITION BY h.tenant_id ORDER BY h.deliver_at) AS rn
                  FROM (SELECT t.tenant_id, t.queue, t.timer_key, t.deliver_at
                          FROM queen.log_timers t
                         WHERE t.shard = ring.shard::smallint AND t.deliver_at <= v_now
                           AND (t.claimed_until IS NULL OR t.claimed_until <= v_now)
                         ORDER BY t.deliver_at
                         LIMIT v_scan) h) w
         WHERE w.rn <= v_pt
         ORDER BY w.rn, w.deliver_at
         LIMIT v_per) c
     ORDER BY ring.pos, c.rn, c.deliver_at
     LIMIT v_max
  ), locked AS MATERIALIZED (
    SELECT t.tenant_id, t.queue, t.timer_key, t.visible_at AS pre_visible
      FROM queen.log_timers t
      JOIN pick p ON t.tenant_id = p.tenant_id AND t.queue = p.queue
                 AND t.timer_key = p.timer_key
     WHERE t.deliver_at <= v_now AND (t.claimed_until IS NULL OR t.claimed_until <= v_now)
       FOR UPDATE OF t SKIP LOCKED
  ), upd AS (
    UPDATE queen.log_timers t
       SET claimed_until = v_now + v_lease, claim_token = gen_random_uuid(), updated_at = v_now
      FROM locked l
     WHERE t.tenant_id = l.tenant_id AND t.queue = l.queue AND t.timer_key = l.timer_key
    RETURNING t.tenant_id, t.queue, t.timer_key, t."partition", t.txn, t.message_id,
              t.payload, t.payload_zstd, t.encrypted, t.producer_sub, t.attempts,
              t.deliver_at, t.claim_token, l.pre_visible, t.ctid, t.trace_parent,
              t.trace_state
  )
  SELECT u.tenant_id, u.queue::text, u.timer_key::text, u."partition", u.txn, u.message_id,
         u.payload, u.payload_zstd, u.encrypted, u.producer_sub, u.attempts, u.deliver_at,
         greatest(extract(epoch FROM v_now - u.deliver_at) * 1000, 0)::float8,
         u.claim_token, u.pre_visible, u.ctid, u.trace_parent, u.trace_state
    FROM upd u
   ORDER BY u.pre_visible, u.tenant_id, u.queue, u.timer_key;
END $$;
