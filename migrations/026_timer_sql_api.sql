-- 026_timer_sql_api.sql: the public SQL API. An application schedules and cancels timers
-- inside its OWN transaction, from any driver, so its row and its timer commit together or
-- not at all (docs/guides/sql-api.md is the user's page).
--
--   queen.timer_schedule_v1(queue, timer_key, delay_ms, payload, txn, partition, tenant,
--                           payload_zstd, encrypted, wake) -> jsonb
--   queen.timer_cancel_v1(queue, timer_key, txn, tenant) -> jsonb
--
-- Stable: a `_v1` keeps its name, parameters and answers for ever; a change of shape is a
-- new `_v2` beside it, so a caller of `_v1` never breaks. (The boot would refuse a renamed
-- parameter or another return type, and another argument list would be an overload beside
-- `_v1`, ambiguous for callers that rely on the defaults.)
--
-- One implementation of the writes: both functions end in queen.log_timers_apply_v1 (025),
-- the procedure the broker's schedule calls, so the upsert, the claim guard (`too_late`), the
-- cancel probe and the closed status taxonomy are the service's own. The shape rules the
-- broker checks in Python before the database (queen_timers/timers/ops.py validate: name
-- lengths, key bytes, horizon, payload size, txn) are checked here by _timer_sql_check_v1 with
-- the same reason codes; tests/sqlapi/test_same_refusals.py runs every refusal through both
-- and fails when they drift. The broker keeps its own checks because it validates each
-- caller's ops before the schedule batcher merges several callers into one statement: a
-- refusal raised inside that statement would fail the other callers' schedules too.
--
-- A refusal raises: SQLSTATE by class (22023 bad request, 22008 beyond the horizon, 22001 too
-- large, 42501 forbidden tenant, 55000 scheduling paused) and the message
-- 'QTIMER <reason>: <text>', where <reason> is the wire's reason code. Verdicts (too_late,
-- absent) are answers, never errors, as on the wire.
--
-- Identity, as on the wire: the producer subject is session_user (the role that logged in),
-- never a parameter; the tenant is the one queen.timer_producer_roles binds to that role, or
-- the default tenant for an unbound role. Naming another tenant is refused (42501).
--
-- Privileges: the two public functions are SECURITY DEFINER with a fixed search_path (every
-- name below is schema-qualified) and EXECUTE only for queen_producer, a NOLOGIN role an
-- application role is granted. The functions behind them that write or take an identity are
-- revoked from PUBLIC; the broker's other procedures run with the caller's rights. The
-- producer holds no privilege on any table, so it can schedule and cancel and cannot read
-- queen.log_timers or write the log.
--
-- Wake-up: a NOTIFY on the broker's timers channel (queen_timers/notify.py: channel
-- `queen_timers`, payload [broker, at_ms]), sent by PostgreSQL at the caller's COMMIT and not
-- at all on ROLLBACK. A NOTIFY into a full notification queue fails the commit, so it is
-- skipped when pg_notification_queue_usage() is above the limits' notifyMaxQueueUsage, and
-- when the timer is due after the listeners' next poll (their poll finds it). `wake => false`
-- skips it too, for callers that PREPARE TRANSACTION (two-phase commit refuses a transaction
-- that has sent a NOTIFY).
--
-- Encryption: SQL cannot hold the key. A queue that encrypts at rest refuses a clear payload
-- (timers_encryption_required); the Python helper (queen_timers.sqlapi) encrypts with the
-- broker's key and passes encrypted => true.

-- The role. Roles are cluster-wide: the first database to boot creates it; a broker user
-- without CREATEROLE boots anyway (an administrator creates the role once, by hand).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'queen_producer') THEN
    BEGIN
      CREATE ROLE queen_producer NOLOGIN;
    EXCEPTION
      WHEN duplicate_object OR unique_violation THEN
        NULL;  -- another database's boot created it meanwhile
      WHEN insufficient_privilege THEN
        RAISE NOTICE 'queen_producer was not created (this user lacks CREATEROLE): run '
                     '"CREATE ROLE queen_producer NOLOGIN" as an administrator and reboot';
    END;
  END IF;
END $$;

-- Which tenant a producing role schedules in. Written by administrators only: no privilege on
-- it is granted to anyone, and the SECURITY DEFINER functions only read it.
CREATE TABLE IF NOT EXISTS queen.timer_producer_roles (
  role_name  TEXT PRIMARY KEY,
  tenant_id  UUID NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);


-- The broker's limits as the SQL API applies them: each broker publishes its settings at boot
-- into queen.system_state ('timers_sql_limits'); without that row, the settings' defaults
-- (queen_timers/settings.py; a test keeps the two equal). Brokers of one cluster are meant to
-- share their settings: the last one to boot wins.
-- notifyMaxQueueUsage is the one value no broker setting carries: above this share of the
-- notification queue the wake is skipped, so a NOTIFY can never fail the caller's commit. A
-- choice, not a measurement: half the queue leaves a margin no transaction between the check
-- and the commit can plausibly fill (8 GB by default), and a skipped wake costs at most the
-- listeners' poll. An operator may set it in the row.
CREATE OR REPLACE FUNCTION queen._timer_sql_limits_v1()
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('maxHorizonS', 7776000, 'maxPayloadBytes', 1048576,
                            'notifyWithinMs', 1000, 'notifyMaxQueueUsage', 0.5)
         || coalesce((SELECT s.value FROM queen.system_state s
                       WHERE s.key = 'timers_sql_limits' AND jsonb_typeof(s.value) = 'object'),
                     '{}'::jsonb)
$$;

CREATE OR REPLACE FUNCTION queen._timer_sql_refuse_v1(p_state text, p_reason text,
                                                      p_text text, p_hint text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = 'QTIMER ' || p_reason || ': ' || p_text,
                        HINT = coalesce(p_hint, '');
END $$;

-- A queue or partition name (queen_timers/validate.py check_name): non-empty, at most 255
-- characters, no control character. NUL cannot reach a text value.
CREATE OR REPLACE FUNCTION queen._timer_sql_name_v1(p_value text, p_what text,
                                                    p_required text, p_bad text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR p_value = '' THEN
    PERFORM queen._timer_sql_refuse_v1('22023', p_required,
                                       p_what || ' is required (a non-empty string)');
  ELSIF char_length(p_value) > 255 THEN
    PERFORM queen._timer_sql_refuse_v1('22023', p_bad,
                                       p_what || ' is longer than 255 characters');
  ELSIF p_value ~ '[\x01-\x1f\x7f]' THEN
    PERFORM queen._timer_sql_refuse_v1('22023', p_bad, p_what || ' contains a control character');
  END IF;
END $$;

-- The shape rules of one op, in the order the broker checks them (ops.validate), first failure
-- wins. The payload's length is passed rather than the payload: a zstd payload cannot be
-- checked here (SQL has no zstd), so an invalid one is found at the fire and dead-lettered
-- after its attempts, where the broker refuses it at schedule (declared in
-- docs/guides/sql-api.md).
CREATE OR REPLACE FUNCTION queen._timer_sql_check_v1(
  p_queue text, p_key text, p_partition text, p_schedules boolean, p_delay_ms float8,
  p_payload_bytes int, p_txn text, p_zstd boolean, p_encrypted boolean, p_limits jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_horizon_ms float8 := 1000.0 * (p_limits ->> 'maxHorizonS')::float8;
  v_max_payload bigint := (p_limits ->> 'maxPayloadBytes')::bigint;
BEGIN
  PERFORM queen._timer_sql_name_v1(p_queue, 'queue', 'timers_queue_required',
                                   'timers_bad_queue');
  IF p_key IS NULL OR p_key = '' THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_timer_key_required',
                                       'timerKey is required');
  ELSIF octet_length(p_key) > 1024 THEN
    -- the primary key entry must fit a btree page third (ops.MAX_KEY_BYTES)
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_bad_timer_key',
                                       'timerKey must be at most 1024 bytes, without NUL');
  END IF;
  IF p_partition IS NOT NULL THEN
    PERFORM queen._timer_sql_name_v1(p_partition, 'partition', 'timers_bad_partition',
                                     'timers_bad_partition');
  END IF;
  IF NOT p_schedules THEN
    RETURN;
  END IF;
  IF p_delay_ms IS NULL OR p_delay_ms = 'NaN'::float8 OR p_delay_ms IN ('Infinity', '-Infinity') THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_delay_required',
                                       'delay_ms is required (milliseconds from now)');
  ELSIF p_delay_ms > v_horizon_ms THEN
    PERFORM queen._timer_sql_refuse_v1('22008', 'timers_horizon',
      format('delay_ms %s is beyond the horizon of %s ms', p_delay_ms, v_horizon_ms::bigint));
  END IF;
  IF p_payload_bytes IS NULL THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_payload_required',
                                       'payload is required (bytea)');
  ELSIF p_payload_bytes > v_max_payload THEN
    PERFORM queen._timer_sql_refuse_v1('22001', 'timers_payload_too_large',
      format('payload is %s bytes; the limit is %s', p_payload_bytes, v_max_payload));
  END IF;
  IF p_txn = '' THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_txn_required',
                                       'txn is a non-empty string (or NULL: one is minted)');
  ELSIF octet_length(p_txn) > 65535 THEN  -- the frame stores its length as a u16
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_bad_txn', 'txn is over 65535 bytes');
  END IF;
  IF p_zstd AND p_encrypted THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_zstd_encrypted_conflict',
      'an encrypted payload cannot also be zstd (the fire must decompress it without the key)',
      'compress before encrypting and pass payload_zstd => false');
  END IF;
END $$;

-- The tenant of the calling role (session_user): the bound one, or the default tenant. Naming
-- any other is refused.
CREATE OR REPLACE FUNCTION queen._timer_sql_tenant_v1(p_asked uuid)
RETURNS uuid LANGUAGE plpgsql STABLE AS $$
DECLARE
  v uuid;
BEGIN
  SELECT r.tenant_id INTO v FROM queen.timer_producer_roles r WHERE r.role_name = session_user;
  v := coalesce(v, '00000000-0000-0000-0000-000000000001'::uuid);
  IF p_asked IS NOT NULL AND p_asked <> v THEN
    PERFORM queen._timer_sql_refuse_v1('42501', 'timers_tenant_forbidden',
      format('role %s schedules in its own tenant only', session_user),
      'an administrator binds a role to a tenant in queen.timer_producer_roles');
  END IF;
  RETURN v;
END $$;

-- A uuid version 7 (time-ordered, like the broker's message ids) from PostgreSQL 14 on, which
-- has no uuidv7(): the millisecond timestamp over the first 48 bits of a random uuid, and the
-- version nibble turned from 4 into 7.
CREATE OR REPLACE FUNCTION queen._uuid7_v1(p_at timestamptz)
RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                  PLACING substring(int8send(floor(extract(epoch FROM p_at) * 1000)::bigint)
                                    FROM 3)
                  FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;

-- The wake: returns whether a NOTIFY was queued (PostgreSQL sends it at COMMIT).
CREATE OR REPLACE FUNCTION queen._timer_sql_wake_v1(p_at timestamptz, p_now timestamptz,
                                                    p_limits jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF p_at > p_now + make_interval(secs => (p_limits ->> 'notifyWithinMs')::float8 / 1000.0) THEN
    RETURN false;  -- due after the listeners' next poll, which finds it
  END IF;
  IF pg_notification_queue_usage() > (p_limits ->> 'notifyMaxQueueUsage')::float8 THEN
    RETURN false;
  END IF;
  PERFORM pg_notify('queen_timers',
                    jsonb_build_array('sql', floor(extract(epoch FROM p_at) * 1000)::bigint)::text);
  RETURN true;
END $$;

-- Schedule for an identity already resolved (the public function resolves it). p_now is the
-- instant the delay counts from (the call's clock_timestamp(); tests pass instants).
CREATE OR REPLACE FUNCTION queen._timer_sql_schedule_v1(
  p_tenant uuid, p_producer text, p_queue text, p_key text, p_delay_ms float8, p_payload bytea,
  p_txn text, p_partition text, p_zstd boolean, p_encrypted boolean, p_wake boolean,
  p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_limits jsonb := queen._timer_sql_limits_v1();
  v_delay float8;
  v_op jsonb;
  v_res jsonb;
BEGIN
  PERFORM queen._timer_sql_check_v1(p_queue, p_key, p_partition, true, p_delay_ms,
                                    octet_length(p_payload), p_txn, p_zstd, p_encrypted,
                                    v_limits);
  IF (SELECT s.value FROM queen.system_state s WHERE s.key = 'timers_schedule_enabled')
     = 'false'::jsonb THEN
    PERFORM queen._timer_sql_refuse_v1('55000', 'timers_disabled',
      'scheduling timers is paused by an operator (kill switch); cancel still works');
  END IF;
  PERFORM queen._tenant_quota_check_v1(p_tenant);  -- 027: the brokers' measured cap
  IF NOT p_encrypted AND queen._encrypt_first_v1(p_tenant, ARRAY[p_queue]) IS NOT NULL THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_encryption_required',
      format('queue %s encrypts at rest and SQL cannot hold the key', p_queue),
      'encrypt with the Python helper (queen_timers.sqlapi) and pass encrypted => true');
  END IF;
  -- a delay further back than 100 years would overflow the timestamp (ops.MIN_DELAY_MS)
  v_delay := greatest(p_delay_ms, -3155760000000.0);
  v_op := jsonb_build_object(
            'op', 'schedule', 'queue', p_queue, 'timerKey', p_key, 'delayMs', v_delay,
            'txn', coalesce(p_txn, gen_random_uuid()::text),
            'payload', encode(p_payload, 'base64'), 'payloadZstd', p_zstd,
            'encrypted', p_encrypted, '_messageId', queen._uuid7_v1(p_now))
          || CASE WHEN p_partition IS NULL THEN '{}'::jsonb
                  ELSE jsonb_build_object('partition', p_partition) END;
  v_res := queen.log_timers_apply_v1(jsonb_build_array(v_op), p_tenant, p_producer, p_now) -> 0;
  IF p_wake AND v_res ->> 'status' IN ('scheduled', 'rescheduled') THEN
    PERFORM queen._timer_sql_wake_v1(
      p_now + make_interval(secs => v_delay / 1000.0), p_now, v_limits);
  END IF;
  RETURN v_res;
END $$;

CREATE OR REPLACE FUNCTION queen._timer_sql_cancel_v1(p_tenant uuid, p_queue text, p_key text,
                                                      p_txn text, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  PERFORM queen._timer_sql_check_v1(p_queue, p_key, NULL, false, NULL, NULL, NULL, false,
                                    false, queen._timer_sql_limits_v1());
  RETURN queen.log_timers_apply_v1(
           jsonb_build_array(jsonb_build_object('op', 'cancel', 'queue', p_queue,
                                                'timerKey', p_key)
                             || CASE WHEN p_txn IS NULL THEN '{}'::jsonb
                                     ELSE jsonb_build_object('txn', p_txn) END),
           p_tenant, NULL, p_now) -> 0;
END $$;


-- ---------------------------------------------------------------------------------------------
-- The public functions. Parameter names are part of the API (callers may pass them by name).
CREATE OR REPLACE FUNCTION queen.timer_schedule_v1(
  queue text, timer_key text, delay_ms bigint, payload bytea,
  txn text DEFAULT NULL, "partition" text DEFAULT NULL, tenant uuid DEFAULT NULL,
  payload_zstd boolean DEFAULT false, encrypted boolean DEFAULT false,
  wake boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN queen._timer_sql_schedule_v1(
           queen._timer_sql_tenant_v1(tenant), session_user::text, queue, timer_key,
           delay_ms::float8, payload, txn, "partition", coalesce(payload_zstd, false),
           coalesce(encrypted, false), coalesce(wake, true), clock_timestamp());
END $$;

CREATE OR REPLACE FUNCTION queen.timer_cancel_v1(
  queue text, timer_key text, txn text DEFAULT NULL, tenant uuid DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN queen._timer_sql_cancel_v1(queen._timer_sql_tenant_v1(tenant), queue, timer_key, txn,
                                    clock_timestamp());
END $$;

REVOKE ALL ON FUNCTION
  queen.timer_schedule_v1(text, text, bigint, bytea, text, text, uuid, boolean, boolean, boolean),
  queen.timer_cancel_v1(text, text, text, uuid),
  queen._timer_sql_schedule_v1(uuid, text, text, text, float8, bytea, text, text, boolean,
                               boolean, boolean, timestamptz),
  queen._timer_sql_cancel_v1(uuid, text, text, text, timestamptz),
  queen._timer_sql_tenant_v1(uuid),
  queen._timer_sql_wake_v1(timestamptz, timestamptz, jsonb)
FROM PUBLIC;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'queen_producer') THEN
    GRANT USAGE ON SCHEMA queen TO queen_producer;
    GRANT EXECUTE ON FUNCTION
      queen.timer_schedule_v1(text, text, bigint, bytea, text, text, uuid, boolean, boolean,
                              boolean),
      queen.timer_cancel_v1(text, text, text, uuid)
    TO queen_producer;
  END IF;
END $$;
