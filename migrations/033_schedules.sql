-- 033_schedules.sql: recurring schedules, built on the timer fire (docs/guides/schedules.md).
--
-- A schedule is a row that describes a cadence; each occurrence is an ordinary timer in
-- queen.log_timers. The fire of occurrence N pushes its message AND stages occurrence N+1 in ONE
-- transaction (queen.schedule_fire_v1 around queen.log_timers_fire_v2): no leader and no second
-- loop, so "exactly once per occurrence" is the fire's exactly-once. The next instant is
-- computed by the broker (cron grammar, IANA zones and the DST policy are Python's: cronsim and
-- zoneinfo, queen_timers/timers/recurrence.py) and passed in; this file keeps the rules that
-- make that safe: the schedule's generation and pending instant must still be the ones the
-- broker computed from, or nothing is staged.
--
-- Decisions, and the price of each:
--
-- * An occurrence's timer key is 'schedule:next:' || schedule_key (one pending cadence
--   occurrence per schedule) and a run-now's is 'schedule:run:' || instant || ':' || key. Its
--   txn is 'sched:' || schedule_id || '@' || instant (ms, UTC), schedule_id being a uuid5 of
--   (tenant, queue, key): the same for a deleted and re-created schedule, so the fire's txn
--   probe (025, step 6) refuses an occurrence that is already in the partition's log. Price:
--   that probe lasts as long as queen.log_txns keeps the txn, and spans one partition.
-- * The staged row's columns are the timer table's, unchanged (the design document fixes
--   them); what a timer row cannot carry (generation, pending instant, its jittered due time)
--   lives here.
-- * Lock order: queen.log_timers -> queen.schedules -> queen.schedule_runs. The fire holds its
--   timer rows before it reads a schedule; an upsert, pause or delete locks the occurrence's
--   timer row (waiting for a fire in flight) before the schedule row.
-- * The ledger keeps the last c_ledger_rows occurrences of each schedule, none older than
--   c_ledger_age: bounded per schedule, trimmed by the fire that writes it.

CREATE TABLE IF NOT EXISTS queen.schedules (
  tenant_id     UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
  queue         TEXT COLLATE "C" NOT NULL,
  schedule_key  TEXT COLLATE "C" NOT NULL,
  schedule_id   UUID NOT NULL,
  cron          TEXT,
  every_ms      BIGINT,
  zone          TEXT NOT NULL DEFAULT 'UTC',
  start_at      TIMESTAMPTZ,
  end_at        TIMESTAMPTZ,
  anchor_at     TIMESTAMPTZ NOT NULL,
  "partition"   TEXT NOT NULL DEFAULT 'Default',
  payload       BYTEA NOT NULL,
  payload_zstd  BOOLEAN NOT NULL DEFAULT FALSE,
  encrypted     BOOLEAN NOT NULL DEFAULT FALSE,
  jitter_ms     INT NOT NULL DEFAULT 0 CHECK (jitter_ms >= 0),
  catch_up      TEXT NOT NULL DEFAULT 'skip' CHECK (catch_up IN ('skip', 'once', 'all')),
  catch_up_cap  INT NOT NULL DEFAULT 1 CHECK (catch_up_cap >= 1),
  paused        BOOLEAN NOT NULL DEFAULT FALSE,
  generation    BIGINT NOT NULL DEFAULT 1,
  next_at       TIMESTAMPTZ,   -- the pending cadence occurrence (kept while paused); NULL: ended
  next_due_at   TIMESTAMPTZ,   -- next_at plus its jitter offset: the timer's deliver_at
  producer_sub  TEXT,
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, queue, schedule_key),
  CHECK ((cron IS NULL) <> (every_ms IS NULL))
);

CREATE TABLE IF NOT EXISTS queen.schedule_runs (
  tenant_id     UUID NOT NULL,
  queue         TEXT COLLATE "C" NOT NULL,
  schedule_key  TEXT COLLATE "C" NOT NULL,
  occurrence_at TIMESTAMPTZ NOT NULL,
  kind          TEXT NOT NULL CHECK (kind IN ('cadence', 'run')),
  outcome       TEXT NOT NULL CHECK (outcome IN ('fired', 'duplicate', 'skipped')),
  due_at        TIMESTAMPTZ NOT NULL,
  fired_at      TIMESTAMPTZ NOT NULL,
  message_id    UUID,
  late_ms       FLOAT8 NOT NULL,
  PRIMARY KEY (tenant_id, queue, schedule_key, occurrence_at, kind)
);


CREATE OR REPLACE FUNCTION queen._schedule_iso_v1(p_at timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- Stage the cadence occurrence p_at (deliver_at p_due) of a schedule whose row the caller
-- holds: replaces whatever row the key has, claimed or not (a fire in flight on the old row
-- then finds its token gone: stale, nothing delivered, nothing staged by it).
CREATE OR REPLACE FUNCTION queen._schedule_stage_v1(s queen.schedules, p_at timestamptz,
                                                    p_due timestamptz, p_now timestamptz)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO queen.log_timers AS t
         (tenant_id, queue, timer_key, "partition", deliver_at, txn, message_id, payload,
          payload_zstd, encrypted, producer_sub, created_at, updated_at)
  VALUES (s.tenant_id, s.queue, 'schedule:next:' || s.schedule_key, s."partition", p_due,
          'sched:' || s.schedule_id || '@' || queen._schedule_iso_v1(p_at),
          queen._uuid7_v1(p_now), s.payload, s.payload_zstd, s.encrypted, s.producer_sub,
          p_now, p_now)
  ON CONFLICT (tenant_id, queue, timer_key) DO UPDATE
     SET "partition" = excluded."partition", deliver_at = excluded.deliver_at,
         txn = excluded.txn, message_id = excluded.message_id, payload = excluded.payload,
         payload_zstd = excluded.payload_zstd, encrypted = excluded.encrypted,
         producer_sub = excluded.producer_sub, attempts = 0, last_error = NULL,
         claimed_until = NULL, claim_token = NULL, updated_at = excluded.updated_at;
  UPDATE queen.schedules x SET next_at = p_at, next_due_at = p_due
   WHERE x.tenant_id = s.tenant_id AND x.queue = s.queue AND x.schedule_key = s.schedule_key;
$$;

-- Lock the pending occurrence row of a schedule (waits for a fire in flight: lock order).
CREATE OR REPLACE FUNCTION queen._schedule_lock_occurrence_v1(p_tenant uuid, p_queue text,
                                                              p_key text)
RETURNS void LANGUAGE sql AS $$
  SELECT NULL::void FROM (
    SELECT 1 FROM queen.log_timers t
     WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
       AND t.timer_key = ('schedule:next:' || p_key) COLLATE "C"
       FOR UPDATE) l
$$;

CREATE OR REPLACE FUNCTION queen._schedule_json_v1(s queen.schedules)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object(
    'queue', s.queue, 'scheduleKey', s.schedule_key, 'scheduleId', s.schedule_id,
    'cron', s.cron, 'everyMs', s.every_ms, 'zone', s.zone,
    'startAt', queen.ts_v1(s.start_at), 'endAt', queen.ts_v1(s.end_at),
    'anchorAt', queen.ts_v1(s.anchor_at),
    'partition', s."partition", 'payload', encode(s.payload, 'base64'),
    'payloadZstd', s.payload_zstd, 'encrypted', s.encrypted,
    'jitterMs', s.jitter_ms, 'catchUp', s.catch_up, 'catchUpCap', s.catch_up_cap,
    'paused', s.paused, 'generation', s.generation,
    'nextAt', queen.ts_v1(s.next_at), 'nextDueAt', queen.ts_v1(s.next_due_at),
    'createdAt', queen.ts_v1(s.created_at), 'updatedAt', queen.ts_v1(s.updated_at)))
$$;

-- Upsert a schedule (validated by the caller, who computed its first occurrence p_first_at /
-- p_first_due from p_def, or NULL when it has none). A new definition is a new generation:
-- the pending occurrence is replaced. Returns {status: created | updated, schedule}.
-- p_def: {cron?, everyMs?, zone, startAt?, endAt?, anchorAt, partition, payload (base64),
-- payloadZstd, encrypted, jitterMs, catchUp, catchUpCap, paused}.
CREATE OR REPLACE FUNCTION queen.schedule_upsert_v1(p_tenant uuid, p_queue text, p_key text,
                                                    p_def jsonb, p_first_at timestamptz,
                                                    p_first_due timestamptz,
                                                    p_producer_sub text, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  s queen.schedules;
  v_new boolean;
BEGIN
  PERFORM queen._schedule_lock_occurrence_v1(p_tenant, p_queue, p_key);
  INSERT INTO queen.schedules AS x
         (tenant_id, queue, schedule_key, schedule_id, cron, every_ms, zone, start_at, end_at,
          anchor_at, "partition", payload, payload_zstd, encrypted, jitter_ms, catch_up,
          catch_up_cap, paused, generation, next_at, next_due_at, producer_sub, created_at,
          updated_at)
  VALUES (p_tenant, p_queue, p_key,
          -- uuid5 is computed by the broker; the SQL API passes it in p_def too
          (p_def ->> 'scheduleId')::uuid,
          p_def ->> 'cron', (p_def ->> 'everyMs')::bigint, coalesce(p_def ->> 'zone', 'UTC'),
          (p_def ->> 'startAt')::timestamptz, (p_def ->> 'endAt')::timestamptz,
          (p_def ->> 'anchorAt')::timestamptz, coalesce(p_def ->> 'partition', 'Default'),
          decode(p_def ->> 'payload', 'base64'),
          coalesce((p_def ->> 'payloadZstd')::boolean, false),
          coalesce((p_def ->> 'encrypted')::boolean, false),
          coalesce((p_def ->> 'jitterMs')::int, 0), coalesce(p_def ->> 'catchUp', 'skip'),
          coalesce((p_def ->> 'catchUpCap')::int, 1),
          coalesce((p_def ->> 'paused')::boolean, false), 1, p_first_at, p_first_due,
          nullif(p_producer_sub, ''), v_now, v_now)
  ON CONFLICT (tenant_id, queue, schedule_key) DO UPDATE
     SET cron = excluded.cron, every_ms = excluded.every_ms, zone = excluded.zone,
         start_at = excluded.start_at, end_at = excluded.end_at,
         anchor_at = excluded.anchor_at, "partition" = excluded."partition",
         payload = excluded.payload, payload_zstd = excluded.payload_zstd,
         encrypted = excluded.encrypted, jitter_ms = excluded.jitter_ms,
         catch_up = excluded.catch_up, catch_up_cap = excluded.catch_up_cap,
         paused = excluded.paused, generation = x.generation + 1,
         next_at = excluded.next_at, next_due_at = excluded.next_due_at,
         producer_sub = excluded.producer_sub, updated_at = excluded.updated_at
  RETURNING (x.xmax = 0) INTO v_new;
  SELECT * INTO s FROM queen.schedules x
   WHERE x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
     AND x.schedule_key = p_key COLLATE "C";
  IF p_first_at IS NULL OR s.paused THEN
    DELETE FROM queen.log_timers t
     WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
       AND t.timer_key = ('schedule:next:' || p_key) COLLATE "C";
  ELSE
    PERFORM queen._schedule_stage_v1(s, p_first_at, p_first_due, v_now);
  END IF;
  SELECT * INTO s FROM queen.schedules x
   WHERE x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
     AND x.schedule_key = p_key COLLATE "C";
  RETURN jsonb_build_object('status', CASE WHEN v_new THEN 'created' ELSE 'updated' END,
                            'schedule', queen._schedule_json_v1(s));
END $$;

-- Pause (p_paused true) or resume. Pause deletes the pending occurrence's timer and keeps its
-- instant in next_at; resume stages that instant again (already past: the fire applies the
-- catch-up policy to it, as after an outage). Returns the schedule, or NULL when absent.
CREATE OR REPLACE FUNCTION queen.schedule_pause_v1(p_tenant uuid, p_queue text, p_key text,
                                                   p_paused boolean, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  s queen.schedules;
BEGIN
  PERFORM queen._schedule_lock_occurrence_v1(p_tenant, p_queue, p_key);
  SELECT * INTO s FROM queen.schedules x
   WHERE x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
     AND x.schedule_key = p_key COLLATE "C" FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF s.paused IS DISTINCT FROM p_paused THEN
    UPDATE queen.schedules x SET paused = p_paused, updated_at = v_now
     WHERE x.tenant_id = s.tenant_id AND x.queue = s.queue AND x.schedule_key = s.schedule_key
    RETURNING * INTO s;
    IF p_paused THEN
      DELETE FROM queen.log_timers t
       WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
         AND t.timer_key = ('schedule:next:' || p_key) COLLATE "C";
    ELSIF s.next_at IS NOT NULL THEN
      PERFORM queen._schedule_stage_v1(s, s.next_at, s.next_due_at, v_now);
      SELECT * INTO s FROM queen.schedules x
       WHERE x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
         AND x.schedule_key = p_key COLLATE "C";
    END IF;
  END IF;
  RETURN queen._schedule_json_v1(s);
END $$;

-- Delete a schedule and its pending occurrence (run-now timers already staged still fire;
-- the ledger goes with the schedule). Returns whether a schedule was deleted.
CREATE OR REPLACE FUNCTION queen.schedule_delete_v1(p_tenant uuid, p_queue text, p_key text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_found boolean;
BEGIN
  DELETE FROM queen.log_timers t
   WHERE t.tenant_id = p_tenant AND t.queue = p_queue COLLATE "C"
     AND t.timer_key = ('schedule:next:' || p_key) COLLATE "C";
  DELETE FROM queen.schedules x
   WHERE x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
     AND x.schedule_key = p_key COLLATE "C";
  v_found := FOUND;
  DELETE FROM queen.schedule_runs r
   WHERE r.tenant_id = p_tenant AND r.queue = p_queue COLLATE "C"
     AND r.schedule_key = p_key COLLATE "C";
  RETURN v_found;
END $$;

-- Run now: one extra occurrence at p_now, a timer of its own key; the cadence does not move.
-- Returns {runAt, txn, messageId} or NULL when the schedule is absent.
CREATE OR REPLACE FUNCTION queen.schedule_run_now_v1(p_tenant uuid, p_queue text, p_key text,
                                                     p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := date_trunc('milliseconds', coalesce(p_now, now()));
  s queen.schedules;
  v_mid uuid := queen._uuid7_v1(v_now);
  v_iso text := queen._schedule_iso_v1(v_now);
BEGIN
  SELECT * INTO s FROM queen.schedules x
   WHERE x.tenant_id = p_tenant AND x.queue = p_queue COLLATE "C"
     AND x.schedule_key = p_key COLLATE "C";
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  INSERT INTO queen.log_timers
         (tenant_id, queue, timer_key, "partition", deliver_at, txn, message_id, payload,
          payload_zstd, encrypted, producer_sub, created_at, updated_at)
  VALUES (s.tenant_id, s.queue, 'schedule:run:' || v_iso || ':' || s.schedule_key,
          s."partition", v_now, 'sched:' || s.schedule_id || '@run:' || v_iso, v_mid,
          s.payload, s.payload_zstd, s.encrypted, s.producer_sub, v_now, v_now)
  ON CONFLICT (tenant_id, queue, timer_key) DO NOTHING;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('runAt', v_iso, 'status', 'already_pending');
  END IF;
  RETURN jsonb_build_object('runAt', v_iso, 'status', 'scheduled',
                            'txn', 'sched:' || s.schedule_id || '@run:' || v_iso,
                            'messageId', v_mid);
END $$;

-- A ledger row, and the trim of that schedule's ledger (size, then age).
CREATE OR REPLACE FUNCTION queen._schedule_ledger_v1(p_tenant uuid, p_queue text, p_key text,
                                                     p_at timestamptz, p_kind text,
                                                     p_outcome text, p_due timestamptz,
                                                     p_fired timestamptz, p_mid uuid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  c_ledger_rows CONSTANT int := 100;           -- a choice: a day of a 15-minute cadence
  c_ledger_age CONSTANT interval := '7 days';  -- a choice: "did last week's run happen?"
  v_cut timestamptz;
BEGIN
  INSERT INTO queen.schedule_runs AS r
         (tenant_id, queue, schedule_key, occurrence_at, kind, outcome, due_at, fired_at,
          message_id, late_ms)
  VALUES (p_tenant, p_queue, p_key, p_at, p_kind, p_outcome, p_due, p_fired, p_mid,
          greatest(extract(epoch FROM p_fired - p_due) * 1000, 0))
  ON CONFLICT (tenant_id, queue, schedule_key, occurrence_at, kind) DO UPDATE
     SET outcome = excluded.outcome, fired_at = excluded.fired_at,
         message_id = excluded.message_id, late_ms = excluded.late_ms;
  SELECT r.occurrence_at INTO v_cut FROM queen.schedule_runs r
   WHERE r.tenant_id = p_tenant AND r.queue = p_queue COLLATE "C"
     AND r.schedule_key = p_key COLLATE "C"
   ORDER BY r.occurrence_at DESC OFFSET c_ledger_rows LIMIT 1;
  DELETE FROM queen.schedule_runs r
   WHERE r.tenant_id = p_tenant AND r.queue = p_queue COLLATE "C"
     AND r.schedule_key = p_key COLLATE "C"
     AND (r.occurrence_at <= v_cut OR r.fired_at < p_fired - c_ledger_age);
END $$;

-- After an occurrence left the timer table (fired, duplicate or skipped): its ledger row and,
-- for a cadence occurrence, the next one -- only if the schedule still has the generation and
-- pending instant the broker computed from, and is not paused. p_item: {tenant, queue,
-- scheduleKey, kind, at, due, messageId, generation, nextAt?, nextDueAt?}.
CREATE OR REPLACE FUNCTION queen._schedule_advance_v1(p_item jsonb, p_outcome text,
                                                      p_fired timestamptz, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_tenant uuid := (p_item ->> 'tenant')::uuid;
  v_queue text := p_item ->> 'queue';
  v_key text := p_item ->> 'scheduleKey';
  v_at timestamptz := (p_item ->> 'at')::timestamptz;
  s queen.schedules;
BEGIN
  SELECT * INTO s FROM queen.schedules x
   WHERE x.tenant_id = v_tenant AND x.queue = v_queue COLLATE "C"
     AND x.schedule_key = v_key COLLATE "C" FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;  -- deleted: no ledger, nothing staged
  END IF;
  IF p_item ->> 'kind' <> 'seed' THEN  -- a seed is no occurrence: no ledger row
    PERFORM queen._schedule_ledger_v1(v_tenant, v_queue, v_key, v_at, p_item ->> 'kind',
                                      p_outcome, (p_item ->> 'due')::timestamptz, p_fired,
                                      (p_item ->> 'messageId')::uuid);
  END IF;
  IF p_item ->> 'kind' NOT IN ('cadence', 'seed') OR s.paused
     OR s.generation <> (p_item ->> 'generation')::bigint
     OR s.next_at IS DISTINCT FROM v_at THEN
    RETURN;
  END IF;
  IF p_item ->> 'nextAt' IS NULL THEN
    UPDATE queen.schedules x SET next_at = NULL, next_due_at = NULL
     WHERE x.tenant_id = s.tenant_id AND x.queue = s.queue AND x.schedule_key = s.schedule_key;
  ELSE
    PERFORM queen._schedule_stage_v1(s, (p_item ->> 'nextAt')::timestamptz,
                                     (p_item ->> 'nextDueAt')::timestamptz, p_now);
  END IF;
END $$;

-- The fire of a batch that holds schedule occurrences: log_timers_fire_v2 (025, unchanged)
-- and, in the same transaction, the ledger and the next occurrence of each one delivered (or
-- found already in the log). p_items: one object per occurrence row of the batch, as
-- _schedule_advance_v1 takes it plus {timerKey, seg}. Returns fire_v2's answer.
CREATE OR REPLACE FUNCTION queen.schedule_fire_v1(
  p_tenants uuid[], p_queues text[], p_partitions text[], p_counts int[], p_blobs bytea[],
  p_seg_of int[], p_keys text[], p_tokens uuid[], p_hashes uuid[], p_tids tid[],
  p_now timestamptz, p_items jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_res jsonb;
  v_seg jsonb;
  r record;
BEGIN
  -- fired_at is this transaction's now (or the test's): the instant the push commits with
  v_res := queen.log_timers_fire_v2(p_tenants, p_queues, p_partitions, p_counts, p_blobs,
                                    p_seg_of, p_keys, p_tokens, p_hashes, p_tids, p_now);
  FOR r IN SELECT i.v FROM jsonb_array_elements(p_items) AS i(v)
            ORDER BY (i.v ->> 'tenant'), (i.v ->> 'queue') COLLATE "C",
                     (i.v ->> 'scheduleKey') COLLATE "C" LOOP
    v_seg := v_res -> ((r.v ->> 'seg')::int - 1);
    IF v_seg ->> 'result' = 'fired' THEN
      PERFORM queen._schedule_advance_v1(r.v, 'fired', v_now, v_now);
    ELSIF v_seg ->> 'result' = 'duplicate'
          AND coalesce(v_seg -> 'dups', '[]'::jsonb) ? (r.v ->> 'timerKey') THEN
      PERFORM queen._schedule_advance_v1(r.v, 'duplicate', v_now, v_now);
    END IF;
  END LOOP;
  RETURN v_res;
END $$;

-- Skip missed occurrences (catch-up policy): delete each claimed row still carrying our token,
-- write its ledger row `skipped` and stage what comes next. One transaction. Returns the
-- number skipped. p_items as schedule_fire_v1's, plus {token}.
CREATE OR REPLACE FUNCTION queen.schedule_skip_v1(p_items jsonb, p_now timestamptz)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_n int := 0;
  r record;
BEGIN
  FOR r IN SELECT i.v FROM jsonb_array_elements(p_items) AS i(v)
            ORDER BY (i.v ->> 'tenant'), (i.v ->> 'queue') COLLATE "C",
                     (i.v ->> 'timerKey') COLLATE "C" LOOP
    DELETE FROM queen.log_timers t
     WHERE t.tenant_id = (r.v ->> 'tenant')::uuid AND t.queue = (r.v ->> 'queue') COLLATE "C"
       AND t.timer_key = (r.v ->> 'timerKey') COLLATE "C"
       AND t.claim_token = (r.v ->> 'token')::uuid AND t.claimed_until > v_now;
    IF FOUND THEN
      v_n := v_n + 1;
      PERFORM queen._schedule_advance_v1(r.v - 'messageId', 'skipped', v_now, v_now);
    END IF;
  END LOOP;
  RETURN v_n;
END $$;

CREATE OR REPLACE FUNCTION queen.schedule_get_v1(p_tenant uuid, p_queue text, p_key text,
                                                 p_runs int)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT queen._schedule_json_v1(s) || jsonb_build_object('runs', coalesce((
           SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                    'occurrenceAt', queen.ts_v1(r.occurrence_at), 'kind', r.kind,
                    'outcome', r.outcome, 'dueAt', queen.ts_v1(r.due_at),
                    'firedAt', queen.ts_v1(r.fired_at), 'messageId', r.message_id,
                    'lateMs', r.late_ms)) ORDER BY r.occurrence_at DESC, r.kind)
             FROM (SELECT * FROM queen.schedule_runs r
                    WHERE r.tenant_id = s.tenant_id AND r.queue = s.queue
                      AND r.schedule_key = s.schedule_key
                    ORDER BY r.occurrence_at DESC LIMIT p_runs) r), '[]'::jsonb))
    FROM queen.schedules s
   WHERE s.tenant_id = p_tenant AND s.queue = p_queue COLLATE "C"
     AND s.schedule_key = p_key COLLATE "C"
$$;

-- Keyset page of a tenant's schedules, by (queue, scheduleKey), filtered by a literal prefix
-- of the queue (and of the key when p_queue is given exactly).
CREATE OR REPLACE FUNCTION queen.schedule_list_v1(p_tenant uuid, p_queue text, p_prefix text,
                                                  p_after_queue text, p_after_key text,
                                                  p_limit int)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  WITH page AS (
    SELECT s.* FROM queen.schedules s
     WHERE s.tenant_id = p_tenant
       AND (p_queue IS NULL OR s.queue = p_queue COLLATE "C")
       AND (p_prefix IS NULL OR p_prefix = ''
            OR left(CASE WHEN p_queue IS NULL THEN s.queue ELSE s.schedule_key END,
                    length(p_prefix)) = p_prefix COLLATE "C")
       AND (p_after_queue IS NULL
            OR (s.queue, s.schedule_key) > (p_after_queue COLLATE "C", coalesce(p_after_key, '') COLLATE "C"))
     ORDER BY s.queue, s.schedule_key
     LIMIT p_limit + 1)
  SELECT jsonb_build_object(
    'schedules', coalesce((SELECT jsonb_agg(queen._schedule_json_v1(p) - 'payload'
                                            ORDER BY p.queue, p.schedule_key)
                             FROM (SELECT * FROM page ORDER BY queue, schedule_key
                                    LIMIT p_limit) p), '[]'::jsonb),
    'truncated', (SELECT count(*) FROM page) > p_limit)
$$;


-- ---------------------------------------------------------------------------------------------
-- The SQL API: upsert or drop a schedule inside the application's own transaction, from any
-- driver. SQL has no cron grammar and no zone rules of its own, so the upsert stages a SEED
-- timer due at once (txn 'sched:<id>@seed:<instant>'); a broker's fire computes the first
-- occurrence from the definition and stages it, delivering nothing for the seed. What SQL can
-- check it checks here (one of cron and every_ms, a 5- or 6-field cron, a zone PostgreSQL
-- knows, the interval floor the brokers published); a cron cronsim then refuses leaves the
-- schedule without a next occurrence (peek shows no nextAt).

-- The schedule id the broker computes (queen_timers/timers/recurrence.py schedule_id).
CREATE OR REPLACE FUNCTION queen._schedule_id_v1(p_tenant uuid, p_queue text, p_key text)
RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
  SELECT substr(encode(sha256(convert_to('queen-timers:schedules' || chr(31) || p_tenant::text
                                         || chr(31) || p_queue || chr(31) || p_key, 'UTF8')),
                       'hex'), 1, 32)::uuid
$$;

CREATE OR REPLACE FUNCTION queen.schedule_set_v1(
  queue text, schedule_key text, payload bytea, cron text DEFAULT NULL,
  every_ms bigint DEFAULT NULL, zone text DEFAULT 'UTC', start_at timestamptz DEFAULT NULL,
  end_at timestamptz DEFAULT NULL, "partition" text DEFAULT NULL, jitter_ms int DEFAULT 0,
  catch_up text DEFAULT 'skip', catch_up_cap int DEFAULT 1, tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
  v_tenant uuid := queen._timer_sql_tenant_v1(tenant);
  v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
  v_limits jsonb := queen.log_timers_limits_v1();
  v_floor bigint := coalesce((v_limits ->> 'schedulesMinIntervalMs')::bigint, 1000);
  v_cap bigint;
  v_res jsonb;
  v_id uuid;
  v_new boolean;
BEGIN
  IF (SELECT s.value FROM queen.system_state s WHERE s.key = 'timers_schedule_enabled')
     = 'false'::jsonb THEN
    PERFORM queen._timer_sql_refuse_v1('55000', 'timers_disabled',
      'scheduling timers is paused by an operator (kill switch)');
  END IF;
  IF coalesce(queue, '') = '' OR coalesce(schedule_key, '') = ''
     OR octet_length(schedule_key) > 960 OR octet_length(queue) > 960 THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_key_required',
      'queue and schedule_key are non-empty, at most 960 bytes');
  END IF;
  IF (cron IS NULL) = (every_ms IS NULL) THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_recurrence_required',
      'a schedule has exactly one of cron and every_ms');
  END IF;
  IF cron IS NOT NULL
     AND cardinality(regexp_split_to_array(btrim(cron), '\s+')) NOT IN (5, 6) THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_bad_cron',
      format('cron %L is not 5 fields, or 6 with seconds first', cron));
  END IF;
  IF every_ms IS NOT NULL AND every_ms < v_floor THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_too_frequent',
      format('every_ms %s is under the floor of %s ms (QUEEN_SCHEDULES_MIN_INTERVAL_MS)',
             every_ms, v_floor));
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z
                  WHERE z.name = coalesce(schedule_set_v1.zone, 'UTC')) THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_bad_zone',
      format('unknown time zone %L (an IANA name)', schedule_set_v1.zone));
  END IF;
  IF start_at IS NOT NULL AND end_at IS NOT NULL AND end_at <= start_at THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_bad_window',
      'end_at must be after start_at');
  END IF;
  IF coalesce(jitter_ms, 0) NOT BETWEEN 0 AND 86400000 THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_bad_jitter',
      'jitter_ms is from 0 to 86400000');
  END IF;
  IF coalesce(catch_up, 'skip') NOT IN ('skip', 'once', 'all')
     OR coalesce(catch_up_cap, 1) NOT BETWEEN 1 AND 1000 THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'schedule_bad_catch_up',
      'catch_up is skip, once or all; catch_up_cap from 1 to 1000');
  END IF;
  IF payload IS NULL THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_payload_required',
      'payload is required');
  END IF;
  IF queen._encrypt_first_v1(v_tenant, ARRAY[queue]) IS NOT NULL THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_encryption_required',
      format('queue %s encrypts at rest and SQL cannot hold the key', queue),
      'create the schedule through a broker (HTTP, TCP or the CLI)');
  END IF;
  v_cap := queen._tenant_quota_enter_v1(v_tenant, v_limits);
  v_id := queen._schedule_id_v1(v_tenant, queue, schedule_key);
  v_new := NOT EXISTS (SELECT 1 FROM queen.log_timers t
                        WHERE t.tenant_id = v_tenant AND t.queue = queue COLLATE "C"
                          AND t.timer_key = ('schedule:next:' || schedule_key) COLLATE "C");
  v_res := queen.schedule_upsert_v1(v_tenant, queue, schedule_key, jsonb_build_object(
             'scheduleId', v_id, 'cron', cron, 'everyMs', every_ms,
             'zone', coalesce(schedule_set_v1.zone, 'UTC'),
             'startAt', start_at, 'endAt', end_at,
             'anchorAt', coalesce(start_at, v_now),
             'partition', coalesce("partition", 'Default'),
             'payload', translate(encode(payload, 'base64'), E'\n', ''),
             'jitterMs', coalesce(jitter_ms, 0), 'catchUp', coalesce(catch_up, 'skip'),
             'catchUpCap', coalesce(catch_up_cap, 1), 'paused', false),
           NULL, NULL, session_user::text, v_now);
  -- the seed: due now, never delivered; the fire stages the first occurrence
  INSERT INTO queen.log_timers
         (tenant_id, queue, timer_key, "partition", deliver_at, txn, message_id, payload,
          producer_sub, created_at, updated_at)
  VALUES (v_tenant, queue, 'schedule:next:' || schedule_key, coalesce("partition", 'Default'),
          v_now, 'sched:' || v_id || '@seed:' || queen._schedule_iso_v1(v_now),
          queen._uuid7_v1(v_now), payload, session_user::text, v_now, v_now);
  IF v_cap IS NOT NULL AND v_new THEN
    PERFORM queen._tenant_quota_hold_v1(v_tenant, v_cap);
  END IF;
  PERFORM queen._timer_sql_wake_v1(v_now, v_now, v_limits);
  RETURN v_res;
END $$;

CREATE OR REPLACE FUNCTION queen.schedule_drop_v1(queue text, schedule_key text,
                                                  tenant uuid DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN queen.schedule_delete_v1(queen._timer_sql_tenant_v1(tenant), queue, schedule_key);
END $$;

REVOKE ALL ON FUNCTION
  queen.schedule_set_v1(text, text, bytea, text, bigint, text, timestamptz, timestamptz, text,
                        int, text, int, uuid),
  queen.schedule_drop_v1(text, text, uuid)
FROM PUBLIC;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'queen_producer') THEN
    GRANT EXECUTE ON FUNCTION
      queen.schedule_set_v1(text, text, bytea, text, bigint, text, timestamptz, timestamptz,
                            text, int, text, int, uuid),
      queen.schedule_drop_v1(text, text, uuid)
    TO queen_producer;
  END IF;
END $$;
