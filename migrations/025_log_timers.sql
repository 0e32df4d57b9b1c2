-- 025_log_timers.sql: the timer staging table and its stored procedures.
--
-- A timer is a message that is not in the log yet. It waits here, in an ordinary row with an
-- ordinary DELETE, and enters the log only at the fire, in ONE transaction that pushes its frame
-- through the single allocator (queen.log_push_one_v1) and deletes this row. There is no
-- "fired" state and no tombstone: "was it sent?" is answered by the log (the timer's fixed txn
-- in queen.log_txns of the destination partition).
--
-- Decisions, and the price of each (spec: timer-internals.md, the design document):
--
-- * Keyed by names, (tenant_id, queue, timer_key); no queue id and no partition id anywhere.
--   The destination may not exist at schedule time: it is provisioned at the fire, through the
--   code path a push uses. Because no column names a partition, this table adds no leg to the
--   per-partition cleanup predicate (queen.log_partition_dead_v1, file 006, LANGUAGE sql: a leg
--   naming this table would kill the boot, since 006 is applied before 025). And the schedule
--   NEVER writes queen.queues: two wire transactions writing queen.queues with different row sets
--   would wait on each other on the unique index. Price: a schedule to a queue name that will
--   never be valid is only discovered at the fire.
-- * COLLATE "C" on queue and timer_key: the lock order (byte order, whatever lc_collate a pod
--   has) first, keyset stability of the list second.
-- * shard = hashtextextended(timer_key, 0) & 63: a contention spreader, not ownership. 64,
--   generated, fixed permanently; no setting changes it (ownership would orphan the timers of a
--   dead broker).
-- * visible_at, generated and stored: deliver_at, or the lease expiry when a lease reaches
--   further. The ONE secondary index is (shard, visible_at), so a claim is a range scan per shard
--   with zero rows filtered. Price, paid at every claim: the claim UPDATE writes an indexed
--   column, so it is never HOT. Bought deliberately: with (shard, deliver_at) instead, a
--   poisoned timer serving out its backoff would sit at the index head and be re-read by every
--   pass of every broker; that cost grows with the number of broken timers, the one direction
--   that must not degrade.
-- * Deliberately NOT created: an index on deliver_at (no reader: the sweeper orders by
--   visible_at); one on (tenant_id, queue) (the leading columns of the primary key serve peek,
--   list and count); one on claim_token (the fire addresses rows by the version the claim
--   wrote, its ctid, and by primary key where that version has moved; never by token).
-- * Two lease columns. "Claimed" is exactly `claim_token IS NOT NULL AND claimed_until > now`,
--   everywhere in this file. A row backing off after a failed fire has claimed_until in the
--   future and claim_token NULL: not claimed, merely not due, and therefore cancellable. One
--   column would make a poisoned timer uncancellable for its whole backoff.
-- * Delete, not "mark done": the push and the disappearance of the row are one commit, so the
--   fire is exactly-once with nothing to reconcile after a crash, and the table is bounded by
--   pending work. Price: a late cancel answers `absent`, which means "no longer pending", never
--   "not delivered".
-- * attempts / last_error count PERMANENT failures only; a transient one (serialization,
--   deadlock, connection, resources) spends nothing, or five minutes of database trouble would
--   dead-letter every timer in the system.
-- * Encryption happens at schedule (in the broker, before the row is written) and the flag
--   travels with the frame; a queue that turns encryption on after a timer was scheduled
--   delivers that frame in clear (declared).
--
-- The fire never waits in the timer lock space. It verifies its claimed rows with
-- FOR UPDATE SKIP LOCKED, provisions, pre-locks partitions in ascending id order, pushes, and
-- deletes the rows it already holds. No plain FOR UPDATE precedes that final DELETE, and it
-- would fail in two ways: a lock by `id` names a column this table does not have (it is keyed
-- by names), so the boot would die; and a FOR UPDATE without SKIP LOCKED would make the fire a
-- waiter here, so one slow cancel inside a long transaction wire could stop the fire of the
-- whole broker while it holds the lease of every other timer in its batch.
--
-- Beyond the reference: before appending, the fire looks up each timer's txn hash in the
-- destination partition's queen.log_txns (a primary-key probe on (partition_id, txn_hash), not
-- a window scan). A txn already in the log is not appended again: the timer is deleted and
-- reported `duplicate`. So re-using a txn, or rescheduling after the fire with the same txn,
-- never makes a second message while the first one's txn row is retained (log_txns is purged
-- after max(dedup window, completed retention, 900 s); past that, the txn is new again, as for
-- a push). The allocator is called with window 0: the fire never pays the window probe.
--
-- Lock order (whole product): queen.log_timers -> queen.queues -> queen.log_partitions (ascending
-- id) -> queen.log_consumers -> leaves. Inside this table: (queue, timer_key) byte order per
-- tenant; callers touching several tenants sort by (tenant_id, queue, timer_key).
--
-- Measured on this table (2-core VM, embedded PostgreSQL 18.4; how: bench/RESULTS.md,
-- "Measurements the code cites"):
--   * fillfactor = 70 -- measured 2026-11-29: at 100, 22.8% of claimed rows leave their page
--     (70: 0%); bench/RESULTS.md "The three numbers the design document left open".
--   * autovacuum on this table never entered the profile below 6,000 timers/s (0.74% busy)
--     -- measured 2026-11-29; bench/RESULTS.md "The three numbers the design document left open".
--   * autovacuum workers it occupies: 0.0037 at 4,000 timers/s -- measured 2026-11-29;
--     bench/RESULTS.md "The three numbers the design document left open".
--   * autovacuum scale 0 / threshold 500 / cost_delay 0, vacuum_truncate off (as 001's
--     queen.log_partitions) -- measured 2026-12-02: no growth at 10^6 pending against 2.8%
--     with the defaults; bench/RESULTS.md "2026-12-02, cost as the pending set grows".

CREATE TABLE IF NOT EXISTS queen.log_timers (
  tenant_id     UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
  queue         TEXT COLLATE "C" NOT NULL,
  timer_key     TEXT COLLATE "C" NOT NULL,
  "partition"   TEXT NOT NULL DEFAULT 'Default',
  deliver_at    TIMESTAMPTZ NOT NULL,
  txn           TEXT NOT NULL,
  message_id    UUID NOT NULL,
  payload       BYTEA NOT NULL,
  payload_zstd  BOOLEAN NOT NULL DEFAULT FALSE,
  encrypted     BOOLEAN NOT NULL DEFAULT FALSE,
  producer_sub  TEXT,
  attempts      INT NOT NULL DEFAULT 0,
  last_error    TEXT,
  claimed_until TIMESTAMPTZ,
  claim_token   UUID,
  shard         SMALLINT NOT NULL
                GENERATED ALWAYS AS ((hashtextextended(timer_key, 0) & 63)::smallint) STORED,
  visible_at    TIMESTAMPTZ NOT NULL GENERATED ALWAYS AS (
                  CASE WHEN claimed_until IS NULL OR claimed_until < deliver_at
                       THEN deliver_at ELSE claimed_until END) STORED,
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, queue, timer_key)
) WITH (fillfactor = 70,
        autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 500,
        autovacuum_vacuum_cost_delay = 0,
        vacuum_truncate = off);

-- The one scan key. Behind the catalogue check: CREATE INDEX IF NOT EXISTS would still take a
-- ShareLock on a busy table at every boot.
SELECT queen._ensure_relation_v1('queen.idx_log_timers_visible',
  'CREATE INDEX idx_log_timers_visible ON queen.log_timers (shard, visible_at)');


-- The upsert of schedule/reschedule ops (validated by the caller), rows visited in byte order
-- of (queue, timer_key); returns each op's result by its position in p_ops (1-based). Rows it
-- did not return were claimed: too_late. Shared by the set-based path of apply and its loop.
CREATE OR REPLACE FUNCTION queen._log_timers_upsert_v1(p_ops jsonb, p_tenant uuid,
                                                       p_producer_sub text, p_now timestamptz)
RETURNS TABLE (ord int, result jsonb) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH src AS MATERIALIZED (
    SELECT o.ord, (o.v ->> 'queue') COLLATE "C" AS queue,
           (o.v ->> 'timerKey') COLLATE "C" AS timer_key, o.v
      FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS o(v, ord)
  ), up AS (
    INSERT INTO queen.log_timers AS t
           (tenant_id, queue, timer_key, "partition", deliver_at, txn, message_id, payload,
            payload_zstd, encrypted, producer_sub, created_at, updated_at, trace_parent,
            trace_state)
    SELECT p_tenant, s.queue, s.timer_key, coalesce(s.v ->> 'partition', 'Default'),
           -- a delay further back than 100 years would overflow the timestamp: due at once
           p_now + make_interval(
             secs => greatest((s.v -> 'delayMs')::numeric, -3155760000000)::float8 / 1000.0),
           s.v ->> 'txn',
           -- a uuid7 of the schedule instant: the fire measures lateness from it (fire.py)
           coalesce((s.v ->> '_messageId')::uuid, queen._uuid7_v1(p_now)),
           decode(s.v ->> 'payload', 'base64'),
           coalesce((s.v ->> 'payloadZstd')::boolean, false),
           coalesce((s.v ->> 'encrypted')::boolean, false),
           nullif(p_producer_sub, ''), p_now, p_now,
           -- the schedule's W3C trace context (036; queen_timers/tracing.py)
           s.v ->> '_traceparent', s.v ->> '_tracestate'
      FROM src s
     ORDER BY s.queue, s.timer_key
    ON CONFLICT (tenant_id, queue, timer_key) DO UPDATE
       SET "partition" = excluded."partition", deliver_at = excluded.deliver_at,
           txn = excluded.txn, message_id = excluded.message_id, payload = excluded.payload,
           payload_zstd = excluded.payload_zstd, encrypted = excluded.encrypted,
           producer_sub = excluded.producer_sub, attempts = 0, last_error = NULL,
           claimed_until = NULL, claim_token = NULL, updated_at = excluded.updated_at,
           trace_parent = excluded.trace_parent, trace_state = excluded.trace_state
     WHERE t.claim_token IS NULL OR t.claimed_until <= p_now
    RETURNING t.queue, t.timer_key, (t.xmax = 0) AS inserted, t.txn, t.message_id,
              t.deliver_at
  )
  SELECT s.ord::int, (
           CASE WHEN u.queue IS NULL THEN
                  jsonb_build_object('ok', false, 'status', 'too_late', 'queue', s.queue,
                                     'timerKey', s.timer_key)
                ELSE
                  jsonb_build_object(
                    'ok', true,
                    'status', CASE WHEN u.inserted THEN 'scheduled' ELSE 'rescheduled' END,
                    'queue', s.queue, 'timerKey', s.timer_key, 'txn', u.txn,
                    'messageId', u.message_id, 'deliverAt', queen.ts_v1(u.deliver_at))
           END)
      FROM src s
    LEFT JOIN up u ON u.queue = s.queue AND u.timer_key = s.timer_key;
END $$;

-- The limits the value rules apply ({maxHorizonS, maxPayloadBytes, ...}). A broker passes its
-- own settings; a caller without them (the SQL API, 026) gets the ones the brokers published at
-- boot into queen.system_state ('timers_sql_limits'), over the settings' defaults
-- (queen_timers/settings.py; a test keeps the two equal). Brokers of one cluster are meant to
-- share their settings: the last one to boot publishes.
-- notifyMaxQueueUsage is the one value no broker setting carries (026's wake): above this share
-- of the notification queue the wake is skipped, so a NOTIFY can never fail the caller's
-- commit. A choice, not a measurement: half the queue leaves a margin no transaction between
-- the check and the commit can plausibly fill (8 GB by default), and a skipped wake costs at
-- most the listeners' poll. An operator may set it in the row.
CREATE OR REPLACE FUNCTION queen.log_timers_limits_v1()
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('maxHorizonS', 7776000, 'maxPayloadBytes', 1048576,
                            'notifyWithinMs', 1000, 'notifyMaxQueueUsage', 0.5)
         || coalesce((SELECT s.value FROM queen.system_state s
                       WHERE s.key = 'timers_sql_limits' AND jsonb_typeof(s.value) = 'object'),
                     '{}'::jsonb)
$$;

-- The value rules of timer ops: the ONE implementation, for the wire (the broker decodes the
-- wire's spelling first: JSON types, text encodability, base64, zstd frames, field names; see
-- queen_timers/timers/ops.py) and for the SQL API (026), which has typed parameters and no
-- spelling to decode. Every op is checked, in input order, first failure wins; then the
-- (queue, timerKey) repeats. Returns the refusal, or no row:
--   reason: the wire's reason code; state: its SQLSTATE class (22023 bad request, 22008 beyond
--   the horizon, 22001 too large); detail: 'op <i>: <text>'.
-- Set-based, one pass over the array, not a loop per op: a 256-op schedule takes 13.3 ms here
-- against 15.8 (2026-11-29; bench/RESULTS.md, "Measurements the code cites"). Every rule is
-- evaluated for every op (a VALUES list does not short-circuit), so each guards its own casts.
-- Names follow the log's rules (queen_timers/validate.py check_name): non-empty, at most 255
-- characters, no C0 control character or DEL. A key is at most 1024 bytes: the primary key entry
-- (tenant, queue, key) must fit a btree page third (2704 bytes), and with a queue name of at
-- most 255 characters (1020 bytes) a 1024-byte key always fits (derived, not measured; the
-- reference has no cap, and an oversize key fails there as a database error). A txn's length
-- is a u16 in the frame. The payload's size is its decoded length, read from the base64 text
-- without decoding it.
CREATE OR REPLACE FUNCTION queen._log_timers_refusal_v1(p_ops jsonb, p_limits jsonb)
RETURNS TABLE (i int, reason text, state text, detail text) LANGUAGE sql STABLE AS $$
  WITH lim AS (
    SELECT 1000.0 * (p_limits ->> 'maxHorizonS')::numeric AS horizon_ms,
           (p_limits ->> 'maxPayloadBytes')::bigint AS max_payload
  ), ops AS (
    SELECT (o.ord - 1)::int AS i, o.v,
           jsonb_typeof(o.v) = 'object' AS obj,
           coalesce(o.v ->> 'op', '') <> 'cancel' AS sched,
           CASE WHEN jsonb_typeof(o.v -> 'queue') = 'string' THEN o.v ->> 'queue' END AS queue,
           CASE WHEN jsonb_typeof(o.v -> 'timerKey') = 'string' THEN o.v ->> 'timerKey' END
             AS timer_key,
           CASE WHEN jsonb_typeof(o.v -> 'partition') = 'string' THEN o.v ->> 'partition' END
             AS part,
           CASE WHEN jsonb_typeof(o.v -> 'txn') = 'string' THEN o.v ->> 'txn' END AS txn,
           CASE WHEN jsonb_typeof(o.v -> 'delayMs') = 'number'
                THEN (o.v -> 'delayMs')::numeric END AS delay_ms,
           -- _payloadBytes: the client's size of a payload the broker encrypted for a queue
           -- that encrypts at rest (the envelope is larger than what the client sent)
           CASE WHEN jsonb_typeof(o.v -> '_payloadBytes') = 'number'
                THEN (o.v -> '_payloadBytes')::numeric
                WHEN jsonb_typeof(o.v -> 'payload') = 'string'
                THEN length(o.v ->> 'payload') / 4 * 3
                     - coalesce(length(substring(o.v ->> 'payload' FROM '={1,2}$')), 0)
           END AS payload_bytes
      FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS o(v, ord)
  ), verdict AS (
    SELECT x.i, r.reason, r.detail
      FROM ops x
      CROSS JOIN lim
      LEFT JOIN LATERAL (
        SELECT k FROM jsonb_object_keys(CASE WHEN x.obj THEN x.v ELSE '{}'::jsonb END) k
         WHERE k = ANY (ARRAY['producerSub', 'producer_sub', 'messageId', 'message_id',
                  'tenant', 'tenantId', '_tenant', 'tenant_id', 'deliverAt', 'deliver_at',
                  'delaySeconds', 'delay_seconds', 'attempts', 'claimToken', 'claim_token',
                  'claimedUntil', 'claimed_until', 'shard', 'visibleAt', 'visible_at',
                  'lastError', 'last_error', 'createdAt', 'created_at', 'updatedAt',
                  'updated_at'])
            OR (k LIKE '\_%' AND k NOT IN ('_messageId', '_payloadBytes', '_traceparent',
                                           '_tracestate'))  -- broker's own
         LIMIT 1) owned ON true
      CROSS JOIN LATERAL (
        SELECT c.reason, c.detail
          FROM (VALUES
            (1, NOT x.obj, 'timers_bad_op', 'is not an object'),
            (2, owned.k IS NOT NULL, 'timers_server_owned_field',
                format('field %s is server-owned (tenant and producer come from '
                       'authentication, the message id is minted by the broker, and only a '
                       'relative delayMs is expressible)', owned.k)),
            (3, x.obj AND coalesce(x.v ->> 'op', '') NOT IN ('schedule', 'reschedule', 'cancel'),
                'timers_unknown_op',
                format('unknown operation %s (schedule, reschedule or cancel)',
                       coalesce((x.v -> 'op')::text, 'null'))),
            (4, coalesce(x.queue, '') = '', 'timers_queue_required',
                'queue is required (a non-empty string)'),
            (5, char_length(x.queue) > 255, 'timers_bad_queue',
                'queue is longer than 255 characters'),
            (6, x.queue ~ '[\x01-\x1f\x7f]', 'timers_bad_queue',
                'queue contains a control character'),
            (7, coalesce(x.timer_key, '') = '', 'timers_timer_key_required',
                'timerKey is required'),
            (8, octet_length(x.timer_key) > 1024, 'timers_bad_timer_key',
                'timerKey must be Unicode text of at most 1024 bytes (UTF-8), without NUL'),
            (9, x.v ? 'partition' AND coalesce(x.part, '') = '', 'timers_bad_partition',
                'partition is required (a non-empty string)'),
            (10, char_length(x.part) > 255, 'timers_bad_partition',
                 'partition is longer than 255 characters'),
            (11, x.part ~ '[\x01-\x1f\x7f]', 'timers_bad_partition',
                 'partition contains a control character'),
            (12, NOT x.sched AND x.v ? 'txn' AND jsonb_typeof(x.v -> 'txn') <> 'string'
                 AND jsonb_typeof(x.v -> 'txn') <> 'null', 'timers_bad_txn',
                 'txn must be Unicode text without NUL'),
            (13, x.sched AND x.delay_ms IS NULL, 'timers_delay_required',
                 'delayMs is required (a number of milliseconds from now)'),
            (14, x.sched AND x.delay_ms > lim.horizon_ms, 'timers_horizon',
                 format('delayMs %s is beyond the horizon of %s ms', x.delay_ms,
                        trunc(lim.horizon_ms))),
            (15, x.sched AND x.payload_bytes IS NULL, 'timers_payload_required',
                 'payload is required (base64)'),
            (16, x.sched AND x.payload_bytes > lim.max_payload, 'timers_payload_too_large',
                 format('payload is %s bytes; the limit is %s', x.payload_bytes,
                        lim.max_payload)),
            (17, x.sched AND coalesce(x.txn, '') = '', 'timers_txn_required',
                 'txn is required (a non-empty string)'),
            (18, x.sched AND octet_length(x.txn) > 65535, 'timers_bad_txn',
                 'txn is over 65535 bytes'),
            (19, x.sched AND (x.v ? 'payloadZstd'
                              AND jsonb_typeof(x.v -> 'payloadZstd') <> 'boolean'
                              OR x.v ? 'encrypted'
                                 AND jsonb_typeof(x.v -> 'encrypted') <> 'boolean'),
                 'timers_bad_flag', 'payloadZstd and encrypted must be booleans'),
            (20, x.sched AND x.v -> 'payloadZstd' = 'true' AND x.v -> 'encrypted' = 'true',
                 'timers_zstd_encrypted_conflict',
                 'a payload encrypted by the client is opaque to the broker, which must '
                 'decompress payloadZstd at the fire; compress before encrypting and send it '
                 'without payloadZstd'))
            AS c(n, bad, reason, detail)
         WHERE c.bad
         ORDER BY c.n
         LIMIT 1) r
    UNION ALL
    SELECT d.i, 'timers_duplicate_key',
           format('(queue, timerKey) (%s, %s) appears more than once in one call',
                  d.queue, d.timer_key)
      FROM (SELECT x.i, x.queue, x.timer_key,
                   row_number() OVER (PARTITION BY x.queue, x.timer_key ORDER BY x.i) AS nth
              FROM ops x) d
     WHERE d.nth = 2
  )
  -- a repeat counts only when every op passed its own rules (the first block wins)
  SELECT v.i, v.reason,
         CASE v.reason WHEN 'timers_horizon' THEN '22008'
                       WHEN 'timers_payload_too_large' THEN '22001' ELSE '22023' END,
         'op ' || v.i || ': ' || v.detail
    FROM verdict v
   ORDER BY v.reason = 'timers_duplicate_key', v.i
   LIMIT 1
$$;

-- ---------------------------------------------------------------------------------------------
-- Apply: schedule / reschedule / cancel, one code path.
--
-- p_ops: a JSON array of ops {op, queue, timerKey, partition?, delayMs, txn, payload (base64),
-- payloadZstd?, encrypted?, _messageId?, _payloadBytes?}. The broker has already decoded the
-- wire, encrypted and minted the message id (_messageId and _payloadBytes, the client's size of a
-- payload the broker encrypted, are the `_` keys accepted here: the broker injects them).
-- Tenant and producer subject are arguments, never op fields. p_limits: the caller's
-- {maxHorizonS, maxPayloadBytes}, or NULL for the published ones (log_timers_limits_v1).
--
-- Validate-then-apply: every op passes the value rules (_log_timers_refusal_v1) before the first
-- write, so a bad op changes nothing and no savepoint is needed (per-element savepoints overflow
-- the subtransaction cache past 64). A refusal raises with the SQLSTATE of its class and the
-- message 'QTIMER <reason>: op <i>: <text>', <reason> being the wire's reason code.
-- A (queue, timerKey) at most once per call: the ops are applied in byte order of
-- (queue, timer_key), the lock order, and a repeat would make that order ambiguous.
-- Results are reported by input position.
--
-- schedule and reschedule are the same upsert; it applies only when the row is not claimed,
-- else `too_late`. `scheduled` vs `rescheduled` = whether a row existed (xmax = 0 on insert),
-- whatever the op name. A cancel deletes under the same guard; zero rows -> an existence probe
-- tells `too_late` (claimed) from `absent` (no row: never existed, cancelled, or already fired).
CREATE OR REPLACE FUNCTION queen.log_timers_apply_v2(p_ops jsonb, p_tenant uuid,
                                                     p_producer_sub text, p_now timestamptz,
                                                     p_limits jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_n int;
  v_op jsonb;
  v_out jsonb[];
  r record;
  v_txn text;
  v_no record;
BEGIN
  IF p_ops IS NULL OR jsonb_typeof(p_ops) <> 'array' THEN
    RAISE EXCEPTION 'QTIMER ops must be a JSON array' USING ERRCODE = '22023';
  END IF;
  v_n := jsonb_array_length(p_ops);
  IF v_n = 0 THEN
    RETURN '[]'::jsonb;
  END IF;
  IF p_tenant IS NULL THEN
    RAISE EXCEPTION 'QTIMER tenant required' USING ERRCODE = '22023';
  END IF;

  -- 1. the value rules, before the first write: a bad op changes nothing.
  SELECT * INTO v_no
    FROM queen._log_timers_refusal_v1(p_ops, coalesce(p_limits, queen.log_timers_limits_v1()));
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = v_no.state,
                          MESSAGE = 'QTIMER ' || v_no.reason || ': ' || v_no.detail;
  END IF;

  -- 2. apply in lock order, report by input position.
  --    A batch of schedules and reschedules only (the common call) is one upsert whose input is
  --    sorted by (queue, timer_key), so rows are locked in byte order exactly as the loop below
  --    would; rows it did not return were claimed (too_late). A batch with cancels takes the
  --    loop, which interleaves deletes and upserts in that same global order.
  IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_ops) o WHERE o ->> 'op' = 'cancel') THEN
    SELECT array_agg(u.result ORDER BY u.ord) INTO v_out
      FROM queen._log_timers_upsert_v1(p_ops, p_tenant, p_producer_sub, v_now) u;
    RETURN to_jsonb(v_out);
  END IF;

  v_out := array_fill(NULL::jsonb, ARRAY[v_n]);
  FOR r IN
    SELECT o.ord, o.v ->> 'op' AS kind, (o.v ->> 'queue') COLLATE "C" AS queue,
           (o.v ->> 'timerKey') COLLATE "C" AS timer_key, o.v
      FROM jsonb_array_elements(p_ops) WITH ORDINALITY AS o(v, ord)
     ORDER BY 3, 4
  LOOP
    IF r.kind = 'cancel' THEN
      DELETE FROM queen.log_timers t
       WHERE t.tenant_id = p_tenant AND t.queue = r.queue AND t.timer_key = r.timer_key
         AND (t.claim_token IS NULL OR t.claimed_until <= v_now)
      RETURNING t.txn INTO v_txn;
      IF FOUND THEN
        v_out[r.ord] := jsonb_build_object('ok', true, 'status', 'cancelled', 'queue', r.queue,
                                           'timerKey', r.timer_key, 'txn', v_txn);
      ELSIF EXISTS (SELECT 1 FROM queen.log_timers t WHERE t.tenant_id = p_tenant
                       AND t.queue = r.queue AND t.timer_key = r.timer_key) THEN
        v_out[r.ord] := jsonb_build_object('ok', false, 'status', 'too_late', 'queue', r.queue,
                                           'timerKey', r.timer_key);
      ELSE
        v_out[r.ord] := jsonb_build_object('ok', false, 'status', 'absent', 'queue', r.queue,
                                           'timerKey', r.timer_key, 'txn', r.v -> 'txn');
      END IF;
      CONTINUE;
    END IF;

    SELECT u.result INTO v_op
      FROM queen._log_timers_upsert_v1(jsonb_build_array(r.v), p_tenant, p_producer_sub, v_now) u;
    v_out[r.ord] := v_op;
  END LOOP;
  RETURN to_jsonb(v_out);
END $$;

-- The `_v1` signature, for callers without limits of their own (and brokers of the previous
-- release during a rolling upgrade): the published limits.
CREATE OR REPLACE FUNCTION queen.log_timers_apply_v1(p_ops jsonb, p_tenant uuid,
                                                     p_producer_sub text, p_now timestamptz)
RETURNS jsonb LANGUAGE sql AS $$
  SELECT queen.log_timers_apply_v2(p_ops, p_tenant, p_producer_sub, p_now, NULL)
$$;


-- ---------------------------------------------------------------------------------------------
-- Apply with the encryption check in the same statement: the broker sends the payloads of
-- p_plain_queues as they will be stored (not encrypted by the broker), on the assumption that
-- none of those queues encrypts at rest. If one does, nothing is written and the answer is
-- {"encrypt": [names]}: the broker encrypts for those queues and calls again. So the common
-- schedule is ONE round trip instead of a read of queen.queues followed by the apply; the
-- verdict and the write see the same snapshot. (A queue that turns encryption on while this
-- statement runs gets this timer in clear: declared in the header.)
CREATE OR REPLACE FUNCTION queen.log_timers_apply_checked_v2(p_ops jsonb, p_tenant uuid,
                                                             p_producer_sub text,
                                                             p_now timestamptz,
                                                             p_plain_queues text[],
                                                             p_limits jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_enc jsonb := CASE WHEN cardinality(p_plain_queues) > 0
                      THEN queen._encrypt_first_v1(p_tenant, p_plain_queues) END;
BEGIN
  IF v_enc IS NOT NULL THEN
    RETURN v_enc;
  END IF;
  RETURN queen.log_timers_apply_v2(p_ops, p_tenant, p_producer_sub, p_now, p_limits);
END $$;

CREATE OR REPLACE FUNCTION queen.log_timers_apply_checked_v1(p_ops jsonb, p_tenant uuid,
                                                             p_producer_sub text,
                                                             p_now timestamptz,
                                                             p_plain_queues text[])
RETURNS jsonb LANGUAGE sql AS $$
  SELECT queen.log_timers_apply_checked_v2(p_ops, p_tenant, p_producer_sub, p_now,
                                           p_plain_queues, NULL)
$$;


-- ---------------------------------------------------------------------------------------------
-- Due probe: what the sweeper sleeps on. nextInMs = min(visible_at) - now (signed, NULL when the
-- table is empty), due = rows with visible_at <= now (capped at p_cap, dueCapped when over),
-- lateMs = how long the due shards' earliest rows have waited since they could first fire
-- (understates for rows pushed forward by a backoff). Per shard the minimum is one index descent, so the probe costs 64 descents plus,
-- when something is due, one more descent per due shard and at most p_cap + 1 index entries.
--
-- Which shards the claim should walk, from the same 64 descents (nothing more is read):
-- dueShards, the shards whose earliest row is due now; soonShards / soonInMs, the shards whose
-- earliest row falls due within the next second (the due ones among them), each with that
-- row's signed ms from now; all in the order of p_shards (ascending when NULL). The sweeper
-- claims only those shards, so a claim costs a descent per shard with work instead of 64 (one
-- buffer per level of the B-tree: 2 levels at 10^4 pending, 4 at 10^7): after a probe,
-- dueShards; at the deadline a sleep was planned for, without a fresh probe, the soon shards
-- due by then. The second is the sweeper's fallback poll (sweeper_max_sleep_ms, default 1 s):
-- a sweeper never sleeps longer by default, and a row further away is left to the next probe.
-- A shard not named waits at most for the next probe, which every drain that comes back short
-- ends with, and every probe of every broker visits all 64 shards. Measured 2026-12-02: a claim
-- of 8 due rows at 10^6 pending reads 136 buffers against 304 walking all 64; bench/RESULTS.md
-- "2026-12-02 04:00-04:30 UTC, the claim walks the due shards".
CREATE OR REPLACE FUNCTION queen.log_timers_due_v1(p_shards int[], p_now timestamptz,
                                                   p_cap int)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_shards int[] := coalesce(p_shards, ARRAY(SELECT generate_series(0, 63)));
  v_cap int := greatest(coalesce(p_cap, 2000), 0);
  v_min timestamptz;
  v_due bigint;
  v_due_shards int[];
  v_soon int[];
  v_soon_ms float8[];
  v_late float8;
BEGIN
  -- One pass over the per-shard minima, unsorted (the aggregates see the rows in the same
  -- order, so soonShards and soonInMs stay aligned); the arrays take only shards with a row
  -- within the second, so the idle probe of a table whose rows are far ahead adds a
  -- comparison per shard and nothing else.
  SELECT min(m.visible_at),
         array_agg(m.shard) FILTER (WHERE m.visible_at <= v_now),
         array_agg(m.shard) FILTER (WHERE m.visible_at <= v_now + interval '1 second'),
         array_agg(extract(epoch FROM m.visible_at - v_now)::float8 * 1000)
           FILTER (WHERE m.visible_at <= v_now + interval '1 second')
    INTO v_min, v_due_shards, v_soon, v_soon_ms
    FROM unnest(v_shards) AS s(shard)
    CROSS JOIN LATERAL (SELECT s.shard, t.visible_at FROM queen.log_timers t
                         WHERE t.shard = s.shard::smallint
                         ORDER BY t.visible_at LIMIT 1) m;
  -- Nothing is due when no shard's earliest row is: the idle probe (the common one) is then
  -- the 64 descents above and nothing more. Otherwise the count visits the due shards only
  -- (a shard whose earliest row is not due holds no due row).
  v_due := 0;
  v_late := 0;
  IF v_min <= v_now THEN
    SELECT count(*) INTO v_due
      FROM (SELECT 1 FROM queen.log_timers t
             WHERE t.shard = ANY (v_due_shards::smallint[]) AND t.visible_at <= v_now
             LIMIT v_cap + 1) d;
    -- lateness from when each due shard's earliest row could first fire, never before it was
    -- scheduled (queen._uuid7_at_v1, 031): a negative delay does not read as days late
    SELECT coalesce(max(extract(epoch FROM v_now - greatest(h.visible_at,
                                                            queen._uuid7_at_v1(h.message_id)))
                        * 1000), 0)
      INTO v_late
      FROM unnest(v_due_shards) AS s(shard)
      CROSS JOIN LATERAL (SELECT t.visible_at, t.message_id FROM queen.log_timers t
                           WHERE t.shard = s.shard::smallint
                           ORDER BY t.visible_at LIMIT 1) h;
  END IF;
  RETURN jsonb_build_object(
    'now', queen.ts_v1(v_now),
    'nextInMs', CASE WHEN v_min IS NULL THEN NULL
                     ELSE extract(epoch FROM v_min - v_now) * 1000 END,
    'due', least(v_due, v_cap),
    'dueCapped', v_due > v_cap,
    'lateMs', greatest(v_late, 0),
    'dueShards', to_jsonb(coalesce(v_due_shards, '{}')),
    'soonShards', to_jsonb(coalesce(v_soon, '{}')),
    'soonInMs', to_jsonb(coalesce(v_soon_ms, '{}')));
END $$;


-- ---------------------------------------------------------------------------------------------
-- Claim: take due rows for one fire pass. Shards are visited in the ring order given (the
-- caller rotates the start); per shard at most v_per = max(ceil(max_rows / shards), 8) rows,
-- overall at most p_max_rows in ring order. Every claimed row gets claimed_until = now + lease
-- and a FRESH token (a reclaim after a lease expiry never reuses the dead holder's token).
--
-- Fairness is inside the claim (a budget applied after it livelocks: rows go back to the index
-- head). Per shard, the tenants present among the oldest v_scan due rows (at most v_per of them,
-- by tenant id) each contribute their oldest p_per_tenant (clamped to 1..v_per) due rows; the
-- shard's share is the oldest v_per of those. Price, declared: a tenant whose due rows all sit
-- behind v_scan older due rows of other tenants in the same shard waits for those to drain; the
-- discovery window is bounded so a burst of a million due rows costs each claim O(v_scan) per
-- shard instead of a scan of the whole backlog. v_scan = 4 * v_per.
--
-- When the per-tenant cap cannot bind (p_per_tenant >= v_per: the defaults, 50 against 8) the
-- tenant pass changes which rows come first and nothing else, so it is skipped: each shard gives
-- its oldest v_per due rows in one index range scan that locks as it goes. Deviation from the
-- reference, declared: with more than v_per tenants due in one shard, the reference takes the
-- smallest tenant ids first, this takes the oldest rows first (what lateness wants). The pass
-- reads v_scan rows per shard to lock v_per: a 200-row claim costs 3.6-4.1 ms without it
-- against 4.6-5.1 with it (2026-11-30; bench/RESULTS.md, "Measurements the code cites").
--
-- The tenant discovery takes no lock; the rows are locked by the per-tenant scan itself with
-- FOR UPDATE SKIP LOCKED (re-checking visibility on the row version it locks), so the claim
-- never waits and concurrent claimers spread over different rows. Not an unlocked pick followed
-- by a SKIP LOCKED lock of the picked keys: every claimer would pick the same oldest rows and
-- all but one would come back empty (three brokers drain 20,000 due timers at ~600/s that way
-- against ~6,000/s, 2026-11-29; bench/RESULTS.md, "Measurements the code cites").
-- Rows are returned in the order of their pre-claim visible_at: the order in which frames enter
-- the log.
-- Each row also carries the W3C trace context its schedule stored (036), for the frame.
CREATE OR REPLACE FUNCTION queen.log_timers_claim_v3(p_shards int[], p_now timestamptz,
                                                     p_lease_ms int, p_max_rows int,
                                                     p_per_tenant int)
RETURNS TABLE (tenant_id uuid, queue text, timer_key text, "partition" text, txn text,
               message_id uuid, payload bytea, payload_zstd boolean, encrypted boolean,
               producer_sub text, attempts int, deliver_at timestamptz, late_ms float8,
               claim_token uuid, visible_at timestamptz, tid tid, trace_parent text,
               trace_state text)
-- The claim is an ordered index range scan per shard by design, so these two settings pin it:
-- without fresh statistics (a burst into a table autovacuum has not analyzed yet) the planner
-- picks bitmap scans that read and sort every due row of a shard (a 200-row claim ~60 ms
-- against ~13 ms pinned, 2026-11-29; bench/RESULTS.md, "Measurements the code cites").
LANGUAGE plpgsql SET enable_bitmapscan = off SET enable_seqscan = off AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_shards int[] := coalesce(p_shards, ARRAY(SELECT generate_series(0, 63)));
  v_max int := greatest(coalesce(p_max_rows, 200), 1);
  v_per int;
  v_pt int;
  v_scan int;
  v_lease interval := make_interval(secs => greatest(coalesce(p_lease_ms, 30000), 1) / 1000.0);
  v_pre timestamptz[];
  v_tids tid[];
  -- one draw of the strong random source per claim, not one per row: see 2
  v_seed text := gen_random_uuid()::text;
BEGIN
  -- The claim's commit does not wait for its WAL flush. Safe by construction: a claim lost in
  -- a crash only means those rows are unclaimed again (nobody fired them: the fire comes
  -- after and commits synchronously, and its flush covers the claim's WAL record, which
  -- precedes it). What it saves is an fsync on the path of every fire's lateness. For this
  -- transaction only (is_local): the caller runs the claim in autocommit.
  PERFORM set_config('synchronous_commit', 'off', true);
  IF cardinality(v_shards) = 0 THEN
    RETURN;
  END IF;
  v_per := greatest(ceil(v_max::numeric / cardinality(v_shards))::int, 8);
  v_pt := least(greatest(coalesce(p_per_tenant, v_per), 1), v_per);
  v_scan := 4 * v_per;
  -- 1. lock: which rows, by one of two passes (see the header); the locked versions' ctids
  --    into an array (a row we hold cannot move, so 2 finds it by ctid)
  IF v_pt >= v_per THEN
    -- the cap cannot bind: each shard's oldest v_per due rows
    SELECT array_agg(c.tid), array_agg(c.visible_at)
      INTO v_tids, v_pre
      FROM (SELECT c.tid, c.visible_at
              FROM unnest(v_shards) AS ring(shard)
              CROSS JOIN LATERAL (
                SELECT t.ctid AS tid, t.visible_at
                  FROM queen.log_timers t
                 WHERE t.shard = ring.shard::smallint AND t.visible_at <= v_now
                 ORDER BY t.visible_at
                 LIMIT v_per
                   FOR UPDATE OF t SKIP LOCKED) c
             LIMIT v_max) c;
  ELSE
    -- The nested loop visits shards in ring order and the outer LIMIT stops it as soon as
    -- v_max rows are locked, so a claim locks what it takes (plus, per shard, the rows of
    -- extra tenants beyond v_per) and never walks shards it does not need. No ORDER BY over
    -- the ring: a sort would force every shard to be scanned (and locked) first.
    SELECT array_agg(c.tid), array_agg(c.visible_at)
      INTO v_tids, v_pre
      FROM (SELECT c.tid, c.visible_at
              FROM unnest(v_shards) AS ring(shard)
              CROSS JOIN LATERAL (
                SELECT k.tid, k.visible_at
                  FROM (SELECT DISTINCT h.tenant_id
                          FROM (SELECT t.tenant_id FROM queen.log_timers t
                                 WHERE t.shard = ring.shard::smallint AND t.visible_at <= v_now
                                 ORDER BY t.visible_at
                                 LIMIT v_scan) h
                         ORDER BY h.tenant_id
                         LIMIT v_per) ten
                  CROSS JOIN LATERAL (
                    -- SKIP LOCKED in the scan itself: a concurrent claimer (another broker)
                    -- takes the next rows of the shard instead of the very rows we hold, and
                    -- does not come back empty-handed because every claimer picked the same
                    -- oldest candidates.
                    SELECT t.ctid AS tid, t.visible_at
                      FROM queen.log_timers t
                     WHERE t.shard = ring.shard::smallint AND t.tenant_id = ten.tenant_id
                       AND t.visible_at <= v_now
                     ORDER BY t.visible_at
                     LIMIT v_pt
                       FOR UPDATE OF t SKIP LOCKED) k
                 ORDER BY k.visible_at
                 LIMIT v_per) c
             LIMIT v_max) c;
  END IF;
  IF v_tids IS NULL THEN
    RETURN;
  END IF;

  -- 2. take them: a fresh token and the lease; rows in pre-claim visible_at order.
  --    Addressed by the ctid step 1 locked (a TID lookup), not by a second primary-key
  --    descent per row. Each row's token is fresh: the first 16 bytes of the SHA-256 of this
  --    claim's random seed and the row's position, so no two rows of a claim share one, and
  --    no claim can guess another's. One seed per claim, not gen_random_uuid() per row: on
  --    the embedded PostgreSQL (built without OpenSSL) every call opens, reads and closes
  --    /dev/urandom. SHA-256, not md5(): md5() fails on a server in FIPS mode. The text is a
  --    uuid, a colon and digits, so its ::bytea cast reads no escapes (cheaper than
  --    convert_to: 1.2 against 1.8 us a row, 2026-11-30; bench/RESULTS.md, "Measurements the
  --    code cites"). A 200-row claim costs 24.7-28.6 us a timer this way against 31.7-34.2 by
  --    primary key with a uuid per row (2026-11-30; bench/RESULTS.md, "2026-11-30 06:10-06:50
  --    UTC").
  RETURN QUERY
  WITH upd AS (
    UPDATE queen.log_timers t
       SET claimed_until = v_now + v_lease,
           claim_token = encode(substr(sha256((v_seed || ':' || l.n::text)::bytea), 1, 16),
                                'hex')::uuid,
           updated_at = v_now
      FROM unnest(v_tids, v_pre) WITH ORDINALITY AS l(tid, pre, n)
     WHERE t.ctid = l.tid
    RETURNING t.tenant_id, t.queue, t.timer_key, t."partition", t.txn, t.message_id,
              t.payload, t.payload_zstd, t.encrypted, t.producer_sub, t.attempts,
              t.deliver_at, t.claim_token, l.pre, t.ctid, t.trace_parent, t.trace_state
  )
  SELECT u.tenant_id, u.queue::text, u.timer_key::text, u."partition", u.txn, u.message_id,
         u.payload, u.payload_zstd, u.encrypted, u.producer_sub, u.attempts, u.deliver_at,
         greatest(extract(epoch FROM v_now - u.deliver_at) * 1000, 0)::float8,
         u.claim_token, u.pre, u.ctid, u.trace_parent, u.trace_state
    FROM upd u
   ORDER BY u.pre, u.tenant_id, u.queue, u.timer_key;
END $$;

-- The claim as brokers of earlier builds call it (the same rows, without the trace context;
-- v1 also without the ctid the fire of log_timers_fire_v2 uses), so a rolling restart mixes
-- builds safely.
CREATE OR REPLACE FUNCTION queen.log_timers_claim_v2(p_shards int[], p_now timestamptz,
                                                     p_lease_ms int, p_max_rows int,
                                                     p_per_tenant int)
RETURNS TABLE (tenant_id uuid, queue text, timer_key text, "partition" text, txn text,
               message_id uuid, payload bytea, payload_zstd boolean, encrypted boolean,
               producer_sub text, attempts int, deliver_at timestamptz, late_ms float8,
               claim_token uuid, visible_at timestamptz, tid tid)
LANGUAGE sql AS $$
  SELECT c.tenant_id, c.queue, c.timer_key, c."partition", c.txn, c.message_id, c.payload,
         c.payload_zstd, c.encrypted, c.producer_sub, c.attempts, c.deliver_at, c.late_ms,
         c.claim_token, c.visible_at, c.tid
    FROM queen.log_timers_claim_v3(p_shards, p_now, p_lease_ms, p_max_rows, p_per_tenant) c
$$;

CREATE OR REPLACE FUNCTION queen.log_timers_claim_v1(p_shards int[], p_now timestamptz,
                                                     p_lease_ms int, p_max_rows int,
                                                     p_per_tenant int)
RETURNS TABLE (tenant_id uuid, queue text, timer_key text, "partition" text, txn text,
               message_id uuid, payload bytea, payload_zstd boolean, encrypted boolean,
               producer_sub text, attempts int, deliver_at timestamptz, late_ms float8,
               claim_token uuid, visible_at timestamptz)
LANGUAGE sql AS $$
  SELECT c.tenant_id, c.queue, c.timer_key, c."partition", c.txn, c.message_id, c.payload,
         c.payload_zstd, c.encrypted, c.producer_sub, c.attempts, c.deliver_at, c.late_ms,
         c.claim_token, c.visible_at
    FROM queen.log_timers_claim_v3(p_shards, p_now, p_lease_ms, p_max_rows, p_per_tenant) c
$$;


-- ---------------------------------------------------------------------------------------------
-- Fire: ONE transaction per batch of packed segments (the broker packed and compressed them
-- outside any transaction).
--
-- Segment i (1-based) targets (p_tenants[i], p_queues[i], p_partitions[i]) and carries
-- p_counts[i] frames in p_blobs[i]. The rows are flat and grouped by segment, in frame order:
-- p_seg_of[j] (1-based), p_keys[j], p_tokens[j], p_hashes[j] (xxh3-128 of the txn), and
-- p_tids[j], the row version the claim returned (NULL, or a NULL array: by primary key).
--
-- 1. alignment guards (P0001 'QFIRE ...');
-- 2. lock every named row FOR UPDATE SKIP LOCKED (never wait in the timer space), first by
--    its claimed version, then by primary key what that did not find. A segment is
--    LIVE iff all its rows are held, each with the matching token, an unexpired lease and the
--    segment's partition. A row of another tenant cannot match: rows are addressed under the
--    segment's own tenant, so a segment declared under A naming B's key is `stale`;
-- 3. two live segments on one (tenant, queue, partition) are refused (they would need two
--    allocator calls whose order nobody chose);
-- 4. provision the live destinations lazily, per tenant in tenant order, through
--    queen.log_provision_v1 (ordered inserts);
-- 5. pre-lock their partitions in ascending id order;
-- 6. beyond the reference: probe queen.log_txns of the destination for every txn (primary-key
--    lookups). A txn already in the log, or repeated earlier in the same segment, is not
--    appended: that timer is deleted and reported in `dups`, the other rows of the segment are
--    released for repacking, the segment is `duplicate`;
-- 7. push each clean live segment through queen.log_push_one_v1 with window 0 (no window probe:
--    step 6 is the exact check), ascending partition id;
-- 8. delete the delivered rows (already held: re-touching, not an acquisition);
-- 9. release every held row with our token that was not delivered (claim_token NULL,
--    claimed_until = now): immediately re-claimable.
-- Returns a JSON array aligned with the segments: {result:"fired", tenant, queue, partition,
-- timers, baseOffset, createdAt} | {result:"stale", ..., released} |
-- {result:"duplicate", ..., dups:[timerKey...], released}.
-- Working state lives in arrays, not temporary tables: a temp table per fire would churn the
-- system catalogues at the fire rate.
CREATE OR REPLACE FUNCTION queen.log_timers_fire_v2(
  p_tenants uuid[], p_queues text[], p_partitions text[], p_counts int[], p_blobs bytea[],
  p_seg_of int[], p_keys text[], p_tokens uuid[], p_hashes uuid[], p_tids tid[],
  p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql
-- Generic plans: every statement here is keyed by primary keys or driven by the argument
-- arrays, so re-planning per call buys nothing and costs a quarter of a small fire (a 5-row
-- fire 1.46 ms generic against 1.94 custom, 2026-11-30; bench/RESULTS.md, "Measurements the
-- code cites").
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_nseg int := coalesce(cardinality(p_tenants), 0);
  v_nrow int := coalesce(cardinality(p_keys), 0);
  v_held boolean[];      -- per row: locked by this transaction
  v_mine boolean[];      -- per row: held, and still carrying our token
  v_ok boolean[];        -- per row: mine, with an unexpired lease and the segment's partition
  v_dup boolean[];       -- per row: txn already in the log (or earlier in the segment)
  v_live boolean[];      -- per segment
  v_isdup boolean[];     -- per segment
  v_pid uuid[];          -- per segment (live ones)
  v_first int[];         -- per segment: position of its first row (rows are grouped by segment)
  v_tid tid[];           -- per row: the version this transaction locked (step 2)
  v_gone tid[];
  v_res jsonb[];
  v_segs int[];
  v_pids uuid[];
  v_bad text;
  v_tenant uuid;
  v_k int;
  v_try int;
  c_retries CONSTANT int := 25;         -- see 2
  c_pause CONSTANT float8 := 0.002;     -- seconds; see 2
  r record;
BEGIN
  -- 1. alignment
  IF v_nseg = 0 THEN
    RETURN '[]'::jsonb;
  END IF;
  IF cardinality(p_queues) IS DISTINCT FROM v_nseg
     OR cardinality(p_partitions) IS DISTINCT FROM v_nseg
     OR cardinality(p_counts) IS DISTINCT FROM v_nseg
     OR cardinality(p_blobs) IS DISTINCT FROM v_nseg THEN
    RAISE EXCEPTION 'QFIRE misaligned segment arrays' USING ERRCODE = 'P0001';
  END IF;
  IF v_nrow = 0 OR cardinality(p_seg_of) IS DISTINCT FROM v_nrow
     OR cardinality(p_tokens) IS DISTINCT FROM v_nrow
     OR cardinality(p_hashes) IS DISTINCT FROM v_nrow
     OR (p_tids IS NOT NULL AND cardinality(p_tids) IS DISTINCT FROM v_nrow) THEN
    RAISE EXCEPTION 'QFIRE misaligned row arrays' USING ERRCODE = 'P0001';
  END IF;
  -- rows come grouped by segment, in segment order: segment i owns positions
  -- v_first[i] .. v_first[i] + p_counts[i] - 1 (checked here: ascending seg_of, and each
  -- segment's first and last position carry its number)
  v_first := array_fill(1, ARRAY[v_nseg]);
  FOR v_k IN 2 .. v_nseg LOOP
    v_first[v_k] := v_first[v_k - 1] + coalesce(p_counts[v_k - 1], 0);
  END LOOP;
  IF EXISTS (SELECT 1 FROM unnest(p_seg_of) WITH ORDINALITY AS a(s, i)
              WHERE a.s IS NULL OR a.s < 1 OR a.s > v_nseg
                 OR (a.i > 1 AND a.s < p_seg_of[a.i - 1]))
     OR EXISTS (SELECT 1 FROM unnest(p_counts, v_first) AS c(n, f)
                 WHERE c.n IS NULL OR c.n < 1)
     OR v_first[v_nseg] + p_counts[v_nseg] - 1 <> v_nrow
     OR EXISTS (SELECT 1 FROM unnest(p_counts, v_first) WITH ORDINALITY AS c(n, f, i)
                 WHERE p_seg_of[c.f] <> c.i OR p_seg_of[c.f + c.n - 1] <> c.i) THEN
    RAISE EXCEPTION 'QFIRE rows do not map onto segments' USING ERRCODE = 'P0001';
  END IF;
  IF EXISTS (SELECT 1 FROM unnest(p_seg_of, p_keys) AS x(seg, k)
              GROUP BY p_tenants[x.seg], p_queues[x.seg], x.k HAVING count(*) > 1) THEN
    RAISE EXCEPTION 'QFIRE a timer appears twice in one fire' USING ERRCODE = 'P0001';
  END IF;
  v_held := array_fill(false, ARRAY[v_nrow]);
  v_mine := array_fill(false, ARRAY[v_nrow]);
  v_ok := array_fill(false, ARRAY[v_nrow]);
  v_tid := array_fill(NULL::tid, ARRAY[v_nrow]);
  v_dup := array_fill(false, ARRAY[v_nrow]);
  v_live := array_fill(true, ARRAY[v_nseg]);
  v_isdup := array_fill(false, ARRAY[v_nseg]);
  v_pid := array_fill(NULL::uuid, ARRAY[v_nseg]);

  -- 2. verify: lock what nobody else holds, in key order, never wait.
  -- A row can be held for a moment by another broker's claim scan: PostgreSQL's FOR UPDATE
  -- follows an old index entry to the newest version of a row, locks it, re-checks the
  -- condition and keeps the lock until its statement ends although the row failed the
  -- re-check. A fire that gives up at once on such a row turns a healthy claim stale, and its
  -- rows are released and claimed again (three brokers drain 20,000 due timers at ~200-600/s
  -- that way against ~6,000/s for one, 2026-11-29; bench/RESULTS.md, "Measurements the code
  -- cites"). So rows that still exist but were skipped get short retries, bounded at
  -- c_retries * c_pause (50 ms, the same entry): a row held longer (a cancel inside a long
  -- transaction wire) still never makes the fire wait, it only makes that segment stale.
  -- 2a. first by the version the claim wrote (p_tids[j], the claim's RETURNING ctid): a TID
  --     lookup instead of a primary-key descent per row (that join is 7% of PostgreSQL's
  --     samples in a drain, 2026-11-30; bench/RESULTS.md, "2026-11-30 06:10-06:50 UTC"). Only
  --     a row whose version there still carries the key (and which no one holds) is taken
  --     here; any other (moved since the claim, or a NULL tid: callers without one) is left to
  --     the primary-key loop below. What is checked is the version locked, either way.
  IF p_tids IS NOT NULL THEN
    WITH got AS (
      SELECT x.pos::int AS pos, t.ctid AS tid, (t.claim_token = x.token) IS TRUE AS mine,
             (t.claim_token = x.token AND t.claimed_until > v_now
              AND t."partition" = p_partitions[x.seg]) IS TRUE AS ok
        FROM unnest(p_seg_of, p_keys, p_tokens, p_tids) WITH ORDINALITY AS x(seg, k, token, tid, pos)
        JOIN queen.log_timers t ON t.ctid = x.tid
       WHERE t.tenant_id = p_tenants[x.seg] AND t.queue = p_queues[x.seg] AND t.timer_key = x.k
       ORDER BY t.tenant_id, t.queue, t.timer_key
         FOR UPDATE OF t SKIP LOCKED)
    SELECT array_agg(g.pos IS NOT NULL ORDER BY h.pos),
           array_agg(coalesce(g.mine, false) ORDER BY h.pos),
           array_agg(coalesce(g.ok, false) ORDER BY h.pos),
           array_agg(g.tid ORDER BY h.pos)
      INTO v_held, v_mine, v_ok, v_tid
      FROM generate_series(1, v_nrow) AS h(pos)
      LEFT JOIN got g ON g.pos = h.pos;
  END IF;
  -- 2b. by primary key, what 2a did not take, with the short retries described under 2
  FOR v_try IN 0 .. c_retries LOOP
    EXIT WHEN NOT (false = ANY (v_held));  -- all held (by 2a, or at an earlier try)
    IF v_try > 0 THEN
      EXIT WHEN NOT EXISTS (
        SELECT 1 FROM unnest(p_seg_of, p_keys, v_held) AS x(seg, k, held)
          JOIN queen.log_timers t
            ON t.tenant_id = p_tenants[x.seg] AND t.queue = p_queues[x.seg] AND t.timer_key = x.k
         WHERE NOT x.held);
      PERFORM pg_sleep(c_pause);
    END IF;
    -- one statement, no per-row PL/pgSQL: lock, then merge into the per-row arrays
    WITH got AS (
      SELECT x.pos::int AS pos, t.ctid AS tid, (t.claim_token = x.token) IS TRUE AS mine,
             (t.claim_token = x.token AND t.claimed_until > v_now
              AND t."partition" = p_partitions[x.seg]) IS TRUE AS ok
        FROM unnest(p_seg_of, p_keys, p_tokens, v_held) WITH ORDINALITY AS x(seg, k, token, held, pos)
        JOIN queen.log_timers t
          ON t.tenant_id = p_tenants[x.seg] AND t.queue = p_queues[x.seg] AND t.timer_key = x.k
       WHERE NOT x.held
       ORDER BY t.tenant_id, t.queue, t.timer_key
         FOR UPDATE OF t SKIP LOCKED)
    SELECT array_agg(h.held OR g.pos IS NOT NULL ORDER BY h.pos),
           array_agg(CASE WHEN g.pos IS NULL THEN h.mine ELSE g.mine END ORDER BY h.pos),
           array_agg(CASE WHEN g.pos IS NULL THEN h.ok ELSE g.ok END ORDER BY h.pos),
           array_agg(CASE WHEN g.pos IS NULL THEN h.tid ELSE g.tid END ORDER BY h.pos)
      INTO v_held, v_mine, v_ok, v_tid
      FROM unnest(v_held, v_mine, v_ok, v_tid) WITH ORDINALITY AS h(held, mine, ok, tid, pos)
      LEFT JOIN got g ON g.pos = h.pos;
  END LOOP;
  FOR v_k IN 1 .. v_nrow LOOP
    IF NOT v_ok[v_k] THEN
      v_live[p_seg_of[v_k]] := false;
    END IF;
  END LOOP;

  -- 3. one live segment per (tenant, queue, partition)
  SELECT s.q || ' / ' || s.p INTO v_bad
    FROM unnest(p_tenants, p_queues, p_partitions, v_live) AS s(t, q, p, live)
   WHERE s.live GROUP BY s.t, s.q, s.p HAVING count(*) > 1 LIMIT 1;
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION 'QFIRE two live segments target the same (tenant, queue, partition): %',
      v_bad USING ERRCODE = 'P0001';
  END IF;

  -- 4. provision under each segment's own tenant, tenants in order (every queues insert is
  --    then ordered by (tenant_id, name) across the whole fire)
  FOR v_tenant IN SELECT DISTINCT s.t FROM unnest(p_tenants, v_live) AS s(t, live)
                   WHERE s.live ORDER BY 1 LOOP
    SELECT array_agg(s.i::int ORDER BY s.i) INTO v_segs
      FROM unnest(p_tenants, v_live) WITH ORDINALITY AS s(t, live, i)
     WHERE s.live AND s.t = v_tenant;
    v_pids := queen.log_provision_v1(v_tenant,
                ARRAY(SELECT p_queues[i] FROM unnest(v_segs) WITH ORDINALITY AS u(i, o) ORDER BY o),
                ARRAY(SELECT p_partitions[i] FROM unnest(v_segs) WITH ORDINALITY AS u(i, o) ORDER BY o));
    FOR v_k IN 1 .. cardinality(v_segs) LOOP
      v_pid[v_segs[v_k]] := v_pids[v_k];
    END LOOP;
  END LOOP;

  -- 5. pre-lock, ascending id
  PERFORM 1 FROM queen.log_partitions p
   WHERE p.id = ANY (v_pid) ORDER BY p.id FOR UPDATE;

  -- 6. already in the log? One primary-key probe per timer on (partition_id, txn_hash), under
  --    the partition lock, so no push can slip in between the probe and the append.
  --    A scalar subquery with LIMIT 1, not EXISTS: the planner turns EXISTS into a hashed
  --    semi-join over the partition's whole txn history once log_txns grows (this step 0.47
  --    against 3.2 ms a 200-row fire, 2026-11-30; bench/RESULTS.md, "Measurements the code
  --    cites").
  FOR r IN
    SELECT x.pos::int AS pos, x.seg
      FROM (SELECT u.seg, u.h, u.pos,
                   row_number() OVER (PARTITION BY u.seg, u.h ORDER BY u.pos) AS nth
              FROM unnest(p_seg_of, p_hashes) WITH ORDINALITY AS u(seg, h, pos)) x
     WHERE v_live[x.seg]
       AND (x.nth > 1 OR coalesce((SELECT true FROM queen.log_txns lt
                                    WHERE lt.partition_id = v_pid[x.seg] AND lt.txn_hash = x.h
                                    LIMIT 1), false))
  LOOP
    v_dup[r.pos] := true;
    v_isdup[r.seg] := true;
  END LOOP;
  FOR v_k IN 1 .. v_nseg LOOP
    IF v_isdup[v_k] THEN
      v_live[v_k] := false;
    END IF;
  END LOOP;

  -- 7. append each clean live segment, ascending partition id, window 0 (step 6 was exact)
  v_res := array_fill(NULL::jsonb, ARRAY[v_nseg]);
  FOR r IN SELECT s.i::int AS seg, s.pid FROM unnest(v_pid) WITH ORDINALITY AS s(pid, i)
            WHERE v_live[s.i] ORDER BY s.pid LOOP
    v_res[r.seg] := queen.log_push_one_v1(
      r.pid,
      p_hashes[v_first[r.seg] : v_first[r.seg] + p_counts[r.seg] - 1],
      p_blobs[r.seg], 0, -1);
    IF v_res[r.seg] ->> 'status' IS DISTINCT FROM 'queued' THEN
      RAISE EXCEPTION 'QFIRE allocator answered %', v_res[r.seg] USING ERRCODE = 'P0001';
    END IF;
  END LOOP;

  -- 8. delete what was delivered, and the duplicates (their txn is already in the log); these
  --    rows are held since step 2, so this re-touches and never waits. Addressed by the
  --    version step 2 locked (a held row cannot move), not by a second primary-key descent.
  DELETE FROM queen.log_timers t
   WHERE t.ctid = ANY (ARRAY(SELECT v_tid[x.pos]
                               FROM unnest(p_seg_of) WITH ORDINALITY AS x(seg, pos)
                              WHERE v_ok[x.pos] AND (v_live[x.seg] OR v_dup[x.pos])));

  -- 9. release what we hold with our token but did not deliver: re-claimable at once
  v_gone := ARRAY(SELECT v_tid[x.pos] FROM unnest(p_seg_of) WITH ORDINALITY AS x(seg, pos)
                   WHERE v_mine[x.pos] AND NOT v_live[x.seg] AND NOT v_dup[x.pos]);
  IF cardinality(v_gone) > 0 THEN
    UPDATE queen.log_timers t
       SET claim_token = NULL, claimed_until = v_now, updated_at = v_now
     WHERE t.ctid = ANY (v_gone);
  END IF;

  RETURN (
    SELECT jsonb_agg(
             CASE WHEN v_live[s.i] THEN
                    jsonb_build_object('result', 'fired', 'tenant', s.t, 'queue', s.q,
                                       'partition', s.p, 'timers', p_counts[s.i],
                                       'baseOffset', (v_res[s.i] ->> 'baseOffset')::bigint,
                                       'createdAt', v_res[s.i] ->> 'createdAt')
                  WHEN v_isdup[s.i] THEN
                    jsonb_build_object('result', 'duplicate', 'tenant', s.t, 'queue', s.q,
                                       'partition', s.p,
                                       'dups', (SELECT jsonb_agg(u.k ORDER BY u.pos)
                                                  FROM unnest(p_seg_of, p_keys)
                                                       WITH ORDINALITY AS u(seg, k, pos)
                                                 WHERE u.seg = s.i AND v_dup[u.pos]),
                                       'released', p_counts[s.i]
                                                   - (SELECT count(*) FROM unnest(p_seg_of, v_dup) AS u(seg, d)
                                                       WHERE u.seg = s.i AND u.d))
                  ELSE
                    jsonb_build_object('result', 'stale', 'tenant', s.t, 'queue', s.q,
                                       'partition', s.p,
                                       'released', (SELECT count(*)
                                                      FROM unnest(p_seg_of, v_mine) AS u(seg, m)
                                                     WHERE u.seg = s.i AND u.m))
             END ORDER BY s.i)
      FROM unnest(p_tenants, p_queues, p_partitions) WITH ORDINALITY AS s(t, q, p, i));
END $$;

-- The fire as brokers of the previous build call it (no ctids: every row by primary key).
CREATE OR REPLACE FUNCTION queen.log_timers_fire_v1(
  p_tenants uuid[], p_queues text[], p_partitions text[], p_counts int[], p_blobs bytea[],
  p_seg_of int[], p_keys text[], p_tokens uuid[], p_hashes uuid[], p_now timestamptz)
RETURNS jsonb LANGUAGE sql AS $$
  SELECT queen.log_timers_fire_v2(p_tenants, p_queues, p_partitions, p_counts, p_blobs,
                                  p_seg_of, p_keys, p_tokens, p_hashes, NULL, p_now)
$$;


-- ---------------------------------------------------------------------------------------------
-- Fail: a fire attempt failed. Only rows whose claim_token still matches are touched (a row
-- rescheduled or reclaimed meanwhile belongs to someone else now). Sets the backoff
-- (claimed_until = now + backoff, token NULL: backing off, cancellable), counts an attempt only
-- for permanent failures, records the error. Rows are addressed by primary key and locked with
-- a plain FOR UPDATE in key order (the one place besides dlq where a timer path may wait: it
-- addresses few rows it just tried to fire). Returns {failed, exhausted:[{tenant, queue,
-- timerKey, attempts}]} where exhausted = attempts >= p_max_attempts after this failure.
CREATE OR REPLACE FUNCTION queen.log_timers_fail_v1(
  p_tenants uuid[], p_queues text[], p_keys text[], p_tokens uuid[], p_backoff_ms int[],
  p_error text, p_count_attempt boolean, p_max_attempts int, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_failed int;
  v_exhausted jsonb;
BEGIN
  IF coalesce(cardinality(p_keys), 0) = 0 THEN
    RETURN jsonb_build_object('failed', 0, 'exhausted', '[]'::jsonb);
  END IF;
  IF cardinality(p_tenants) IS DISTINCT FROM cardinality(p_keys)
     OR cardinality(p_queues) IS DISTINCT FROM cardinality(p_keys)
     OR cardinality(p_tokens) IS DISTINCT FROM cardinality(p_keys)
     OR cardinality(p_backoff_ms) IS DISTINCT FROM cardinality(p_keys) THEN
    RAISE EXCEPTION 'QFAIL misaligned arrays' USING ERRCODE = 'P0001';
  END IF;
  WITH x AS (
    SELECT * FROM unnest(p_tenants, p_queues, p_keys, p_tokens, p_backoff_ms)
                  AS x(tenant, queue, k, token, backoff)
  ), held AS MATERIALIZED (
    SELECT t.tenant_id, t.queue, t.timer_key, x.backoff
      FROM queen.log_timers t
      JOIN x ON t.tenant_id = x.tenant AND t.queue = x.queue AND t.timer_key = x.k
     WHERE t.claim_token = x.token
     ORDER BY t.tenant_id, t.queue, t.timer_key
       FOR UPDATE OF t
  ), upd AS (
    UPDATE queen.log_timers t
       SET claimed_until = v_now + make_interval(secs => greatest(h.backoff, 0) / 1000.0),
           claim_token = NULL,
           attempts = t.attempts + CASE WHEN p_count_attempt THEN 1 ELSE 0 END,
           last_error = left(p_error, 4000),
           updated_at = v_now
      FROM held h
     WHERE t.tenant_id = h.tenant_id AND t.queue = h.queue AND t.timer_key = h.timer_key
     RETURNING t.tenant_id, t.queue, t.timer_key, t.attempts
  )
  SELECT count(*),
         coalesce(jsonb_agg(jsonb_build_object('tenant', u.tenant_id, 'queue', u.queue,
                                               'timerKey', u.timer_key, 'attempts', u.attempts)
                            ORDER BY u.tenant_id, u.queue, u.timer_key)
                    FILTER (WHERE u.attempts >= p_max_attempts), '[]'::jsonb)
    INTO v_failed, v_exhausted
    FROM upd u;
  RETURN jsonb_build_object('failed', v_failed, 'exhausted', v_exhausted);
END $$;


-- ---------------------------------------------------------------------------------------------
-- Dead-letter exhausted timers into queen.log_dlq (consumer_group '__timer__', offset -1),
-- under each timer's own tenant, provisioning its destination queue and partition. The payload
-- snapshot is computed by the broker (decompressed JSON, or {"_raw_b64": ...}): SQL cannot
-- read zstd. Guarded by attempts >= p_max_attempts AND claim_token IS NULL under the row lock,
-- so a reschedule landing between the fail and this call (attempts reset to 0) keeps the row.
-- Returns {archived, skipped}.
CREATE OR REPLACE FUNCTION queen.log_timers_dlq_v1(
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
                               transaction_id, payload, error, retry_count, failed_at)
    VALUES (v_pid, '__timer__', -1, v_mid[v_i], v_txn[v_i], v_snap[v_i], v_err[v_i],
            v_att[v_i], v_now);
    DELETE FROM queen.log_timers t
     WHERE t.tenant_id = v_t[v_i] AND t.queue = v_q[v_i] AND t.timer_key = v_k[v_i];
    v_archived := v_archived + 1;
  END LOOP;
  RETURN jsonb_build_object('archived', v_archived, 'skipped', v_n - v_archived);
END $$;


-- ---------------------------------------------------------------------------------------------
-- Release: hand back claims that will not be fired (graceful shutdown, or a caller that claimed
-- more than it will fire): token NULL, claimed_until = now, so they are due again at once
-- instead of after the lease. Only rows still carrying our token; SKIP LOCKED, never waits (a
-- row someone else holds is left to its lease). Returns the number released.
CREATE OR REPLACE FUNCTION queen.log_timers_release_v1(
  p_tenants uuid[], p_queues text[], p_keys text[], p_tokens uuid[], p_now timestamptz)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_n int;
BEGIN
  IF coalesce(cardinality(p_keys), 0) = 0 THEN
    RETURN 0;
  END IF;
  WITH held AS MATERIALIZED (
    SELECT t.tenant_id, t.queue, t.timer_key
      FROM queen.log_timers t
      JOIN unnest(p_tenants, p_queues, p_keys, p_tokens) AS x(tenant, queue, k, token)
        ON t.tenant_id = x.tenant AND t.queue = x.queue AND t.timer_key = x.k
     WHERE t.claim_token = x.token
     ORDER BY t.tenant_id, t.queue, t.timer_key
       FOR UPDATE OF t SKIP LOCKED
  ), upd AS (
    UPDATE queen.log_timers t
       SET claim_token = NULL, claimed_until = v_now, updated_at = v_now
      FROM held h
     WHERE t.tenant_id = h.tenant_id AND t.queue = h.queue AND t.timer_key = h.timer_key
    RETURNING 1
  )
  SELECT count(*) INTO v_n FROM upd;
  RETURN v_n;
END $$;


-- ---------------------------------------------------------------------------------------------
-- Reads. One tenant, one queue: there is no tenant-wide listing. Served by the leading columns
-- of the primary key. The payload is returned as stored (base64 by the broker), never decrypted.
CREATE OR REPLACE FUNCTION queen._log_timer_json_v1(t queen.log_timers, p_now timestamptz,
                                                    p_with_payload boolean)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
           'queue', t.queue, 'timerKey', t.timer_key, 'partition', t."partition",
           'deliverAt', queen.ts_v1(t.deliver_at), 'txn', t.txn, 'messageId', t.message_id,
           'payloadZstd', t.payload_zstd, 'encrypted', t.encrypted,
           'producerSub', t.producer_sub, 'attempts', t.attempts, 'lastError', t.last_error,
           'claimed', (t.claim_token IS NOT NULL AND t.claimed_until > p_now),
           'state', CASE WHEN t.claimed_until IS NULL OR t.claimed_until <= p_now THEN 'waiting'
                         WHEN t.claim_token IS NOT NULL THEN 'claimed'
                         ELSE 'backing_off' END,
           -- Ours, not the reference's: when a backing-off row is retried (a failed fire keeps
           -- deliver_at and parks the row until claimed_until). null in any other state, as an
           -- absent lastError or txn is.
           'retryAt', CASE WHEN t.claim_token IS NULL AND t.claimed_until > p_now
                           THEN queen.ts_v1(t.claimed_until) END,
           'createdAt', queen.ts_v1(t.created_at), 'updatedAt', queen.ts_v1(t.updated_at))
         || CASE WHEN p_with_payload
                 -- encode() wraps base64 at 76 characters (MIME): the wire's is one line
                 THEN jsonb_build_object('payload', translate(encode(t.payload, 'base64'),
                                                              E'\n', ''))
                 ELSE '{}'::jsonb END
$$;

CREATE OR REPLACE FUNCTION queen.log_timers_peek_v1(p_tenant uuid, p_queue text, p_key text,
                                                    p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v jsonb;
BEGIN
  SELECT jsonb_build_object('found', true) || queen._log_timer_json_v1(t, v_now, true) INTO v
    FROM queen.log_timers t
   WHERE t.tenant_id = p_tenant AND t.queue = p_queue AND t.timer_key = p_key;
  RETURN coalesce(v, jsonb_build_object('found', false, 'queue', p_queue, 'timerKey', p_key));
END $$;

-- Keyset list by timerKey (byte order), `after` exclusive; limit clamped to 1..1000, default
-- 100 (clamped, never rejected). The page is read with limit + 1 rows, so `truncated` is exact
-- and nextAfter is the last key returned when there is more.
CREATE OR REPLACE FUNCTION queen.log_timers_list_v1(p_tenant uuid, p_queue text, p_after text,
                                                    p_limit int, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_limit int := least(greatest(coalesce(p_limit, 100), 1), 1000);
  v_rows jsonb[];
  v_more boolean;
BEGIN
  SELECT array_agg(queen._log_timer_json_v1(p, v_now, false) ORDER BY p.timer_key)
    INTO v_rows
    FROM (SELECT t.* FROM queen.log_timers t
           WHERE t.tenant_id = p_tenant AND t.queue = p_queue
             -- one range condition, not `p_after IS NULL OR ...`: a generic plan cannot
             -- turn that OR into an index bound (every key is longer than '')
             AND t.timer_key > coalesce(p_after, '') COLLATE "C"
           ORDER BY t.timer_key
           LIMIT v_limit + 1) p;
  v_rows := coalesce(v_rows, '{}');
  v_more := cardinality(v_rows) > v_limit;
  IF v_more THEN
    v_rows := v_rows[1:v_limit];
  END IF;
  RETURN jsonb_build_object(
    'rows', to_jsonb(v_rows), 'truncated', v_more,
    'nextAfter', CASE WHEN v_more THEN v_rows[v_limit] -> 'timerKey' ELSE 'null'::jsonb END);
END $$;

-- Count the keys of one queue starting with a LITERAL prefix (% and _ mean themselves). The
-- pattern is rendered into the statement (EXECUTE ... %L) so the planner sees a constant and
-- turns LIKE 'prefix%' on the "C"-collated key into a range on the primary key, instead of a
-- generic plan that would filter every key of the queue. The broker checks the prefix (1..128
-- bytes, no NUL); this re-checks the emptiness and the length.
CREATE OR REPLACE FUNCTION queen._log_timers_count_sql_v1(p_prefix text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT format('SELECT count(*) FROM queen.log_timers WHERE tenant_id = $1 AND queue = $2 '
                'AND timer_key LIKE %L',
                replace(replace(replace(p_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%')
$$;

CREATE OR REPLACE FUNCTION queen.log_timers_count_v1(p_tenant uuid, p_queue text, p_prefix text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
  v bigint;
BEGIN
  IF p_prefix IS NULL OR p_prefix = '' OR octet_length(p_prefix) > 128 THEN
    RAISE EXCEPTION 'QTIMER count prefix must be 1..128 bytes' USING ERRCODE = '22023';
  END IF;
  EXECUTE queen._log_timers_count_sql_v1(p_prefix) INTO v USING p_tenant, p_queue;
  RETURN v;
END $$;
