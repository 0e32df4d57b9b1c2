-- 026_timer_sql_api.sql: the public SQL API. An application schedules and cancels timers
-- inside its OWN transaction, from any driver, so its row and its timer commit together or
-- not at all (docs/guides/sql-api.md is the user's page).
--
--   queen.timer_schedule_v1(queue, timer_key, delay_ms, payload, txn, partition, tenant,
--                           payload_zstd, encrypted, wake) -> jsonb
--   queen.timer_schedule_v2(... the same ..., traceparent, tracestate) -> jsonb
--   queen.timer_cancel_v1(queue, timer_key, txn, tenant) -> jsonb
--
-- Stable: a `_v1` keeps its name, parameters and answers for ever; a change of shape is a
-- new `_v2` beside it, so a caller of `_v1` never breaks. (The boot would refuse a renamed
-- parameter or another return type, and another argument list would be an overload beside
-- `_v1`, ambiguous for callers that rely on the defaults.)
--
-- One implementation: both functions end in queen.log_timers_apply_v2 (025), the procedure the
-- broker's schedule calls, so the value rules (name lengths, key bytes, horizon, payload size,
-- txn; queen._log_timers_refusal_v1), the upsert, the claim guard (`too_late`), the cancel
-- probe and the closed status taxonomy are the service's own, with the same reason codes
-- (tests/sqlapi/test_same_refusals.py runs every refusal through both paths). What the broker
-- checks in Python is the wire's spelling only (JSON types, base64, zstd frames, field
-- names), which typed parameters cannot get wrong. The limits are the ones the brokers
-- published at boot (queen.log_timers_limits_v1).
--
-- A refusal raises: SQLSTATE by class (22023 bad request, 22008 beyond the horizon, 22001 too
-- large, 42501 forbidden tenant, 55000 scheduling paused) and the message
-- 'QTIMER <reason>: <text>', where <reason> is the wire's reason code. Verdicts (too_late,
-- absent) are answers, never errors, as on the wire.
--
-- Identity, as on the wire: the producer subject is session_user (the role that logged in),
-- never a parameter; the tenant is the one queen.timer_producer_roles binds to that role. An
-- unbound role is refused where tenancy is on, else the default tenant (030). Naming another
-- tenant is refused (42501).
--
-- Privileges: the two public functions are SECURITY DEFINER with a fixed search_path (every
-- name below is schema-qualified) and EXECUTE only for queen_producer, a NOLOGIN role an
-- application role is granted. The functions behind them that write or take an identity are
-- revoked from PUBLIC; the broker's other procedures run with the caller's rights. The
-- producer holds no privilege on any table, so it can schedule and cancel and cannot read
-- queen.log_timers or write the log.
--
-- Wake-up: a NOTIFY on the broker's timers channel (queen_timers/notify.py: channel
-- `queen_timers`, payload [sender, nonce, at_ms, tag], signed as 031 says), sent by
-- PostgreSQL at the caller's COMMIT and not at all on ROLLBACK. A NOTIFY into a full notification queue fails the commit, so it is
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


-- Functions of an earlier shape of this file, now in 025 (the limits and the value rules).
DROP FUNCTION IF EXISTS queen._timer_sql_check_v1(text, text, text, boolean, float8, int, text,
                                                  boolean, boolean, jsonb);
DROP FUNCTION IF EXISTS queen._timer_sql_name_v1(text, text, text, text);
DROP FUNCTION IF EXISTS queen._timer_sql_limits_v1();

CREATE OR REPLACE FUNCTION queen._timer_sql_refuse_v1(p_state text, p_reason text,
                                                      p_text text, p_hint text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = 'QTIMER ' || p_reason || ': ' || p_text,
                        HINT = coalesce(p_hint, '');
END $$;

-- The tenant of the calling role (session_user): the bound one, or for an unbound role the
-- default tenant or a refusal (030). Naming any other is refused.
CREATE OR REPLACE FUNCTION queen._timer_sql_tenant_v1(p_asked uuid)
RETURNS uuid LANGUAGE plpgsql STABLE AS $$
DECLARE
  v uuid;
BEGIN
  SELECT r.tenant_id INTO v FROM queen.timer_producer_roles r WHERE r.role_name = session_user;
  IF v IS NULL THEN
    v := queen._timer_sql_unbound_v1(queen.log_timers_limits_v1());  -- 030: refused or default
  END IF;
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
  -- signed, with a nonce (031): a forged or replayed wake is dropped by the listeners, and so
  -- is an instant far from their clocks, so a negative delay's is sent as now
  PERFORM pg_notify('queen_timers', queen._notify_timer_payload_v1('sql', greatest(p_at, p_now)));
  RETURN true;
END $$;

-- Schedule for an identity already resolved (the public functions resolve it). p_now is the
-- instant the delay counts from (the call's clock_timestamp(); tests pass instants).
-- p_traceparent / p_tracestate: the W3C trace context stored with the timer (036; NULL: none).
-- A traceparent is version 00 of W3C Trace Context, lower-case hex, with a non-zero
-- trace id and span id; a tracestate goes with a traceparent only and holds at most 32 list
-- members of 256 characters (W3C's bound). Anything else is refused (22023
-- timers_bad_traceparent): an argument the caller spelt, unlike a header, is not ignored.
CREATE OR REPLACE FUNCTION queen._timer_sql_schedule_v2(
  p_tenant uuid, p_producer text, p_queue text, p_key text, p_delay_ms float8, p_payload bytea,
  p_txn text, p_partition text, p_zstd boolean, p_encrypted boolean, p_wake boolean,
  p_now timestamptz, p_traceparent text, p_tracestate text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_limits jsonb := queen.log_timers_limits_v1();
  v_op jsonb;
  v_res jsonb;
  v_cap bigint;
BEGIN
  IF p_traceparent IS NOT NULL
     AND (p_traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
          OR substr(p_traceparent, 4, 32) = repeat('0', 32)
          OR substr(p_traceparent, 37, 16) = repeat('0', 16)) THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_bad_traceparent',
      format('traceparent %L is not a W3C traceparent (version 00)', left(p_traceparent, 64)),
      '00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lower case, ids not all zero');
  END IF;
  IF p_tracestate IS NOT NULL
     AND (p_traceparent IS NULL OR char_length(p_tracestate) > 32 * 257
          OR p_tracestate ~ '[\x00-\x1f\x7f]') THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_bad_traceparent',
      'tracestate goes with a traceparent, as at most 32 list members without control characters');
  END IF;
  IF (SELECT s.value FROM queen.system_state s WHERE s.key = 'timers_schedule_enabled')
     = 'false'::jsonb THEN
    PERFORM queen._timer_sql_refuse_v1('55000', 'timers_disabled',
      'scheduling timers is paused by an operator (kill switch); cancel still works');
  END IF;
  v_cap := queen._tenant_quota_enter_v1(p_tenant, v_limits);  -- 030: the cap, kept exactly
  IF NOT p_encrypted AND queen._encrypt_first_v1(p_tenant, ARRAY[p_queue]) IS NOT NULL THEN
    PERFORM queen._timer_sql_refuse_v1('22023', 'timers_encryption_required',
      format('queue %s encrypts at rest and SQL cannot hold the key', p_queue),
      'encrypt with the Python helper (queen_timers.sqlapi) and pass encrypted => true');
  END IF;
  -- NULL arguments become JSON nulls, which the value rules refuse as missing
  v_op := jsonb_build_object(
            'op', 'schedule', 'queue', p_queue, 'timerKey', p_key, 'delayMs', p_delay_ms,
            'txn', coalesce(p_txn, gen_random_uuid()::text),
            'payload', translate(encode(p_payload, 'base64'), E'\n', ''),
            'payloadZstd', p_zstd, 'encrypted', p_encrypted,
            '_messageId', queen._uuid7_v1(p_now))
          || CASE WHEN p_partition IS NULL THEN '{}'::jsonb
                  ELSE jsonb_build_object('partition', p_partition) END
          || jsonb_strip_nulls(jsonb_build_object('_traceparent', p_traceparent,
                                                  '_tracestate', p_tracestate));
  v_res := queen.log_timers_apply_v2(jsonb_build_array(v_op), p_tenant, p_producer, p_now,
                                     v_limits) -> 0;
  IF v_cap IS NOT NULL AND v_res ->> 'status' = 'scheduled' THEN
    PERFORM queen._tenant_quota_hold_v1(p_tenant, v_cap);  -- a new row: still within the cap?
  END IF;
  IF p_wake AND v_res ->> 'status' IN ('scheduled', 'rescheduled') THEN
    PERFORM queen._timer_sql_wake_v1((v_res ->> 'deliverAt')::timestamptz, p_now, v_limits);
  END IF;
  RETURN v_res;
END $$;

-- _v1 is _v2 without a trace context: one implementation.
CREATE OR REPLACE FUNCTION queen._timer_sql_schedule_v1(
  p_tenant uuid, p_producer text, p_queue text, p_key text, p_delay_ms float8, p_payload bytea,
  p_txn text, p_partition text, p_zstd boolean, p_encrypted boolean, p_wake boolean,
  p_now timestamptz)
RETURNS jsonb LANGUAGE sql AS $$
  SELECT queen._timer_sql_schedule_v2(p_tenant, p_producer, p_queue, p_key, p_delay_ms,
                                      p_payload, p_txn, p_partition, p_zstd, p_encrypted,
                                      p_wake, p_now, NULL, NULL)
$$;

CREATE OR REPLACE FUNCTION queen._timer_sql_cancel_v1(p_tenant uuid, p_queue text, p_key text,
                                                      p_txn text, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  RETURN queen.log_timers_apply_v2(
           jsonb_build_array(jsonb_build_object('op', 'cancel', 'queue', p_queue,
                                                'timerKey', p_key)
                             || CASE WHEN p_txn IS NULL THEN '{}'::jsonb
                                     ELSE jsonb_build_object('txn', p_txn) END),
           p_tenant, NULL, p_now, queen.log_timers_limits_v1()) -> 0;
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

-- timer_schedule_v1's parameters, then the trace context (036; docs/guides/tracing.md).
CREATE OR REPLACE FUNCTION queen.timer_schedule_v2(
  queue text, timer_key text, delay_ms bigint, payload bytea,
  txn text DEFAULT NULL, "partition" text DEFAULT NULL, tenant uuid DEFAULT NULL,
  payload_zstd boolean DEFAULT false, encrypted boolean DEFAULT false,
  wake boolean DEFAULT true, traceparent text DEFAULT NULL, tracestate text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN queen._timer_sql_schedule_v2(
           queen._timer_sql_tenant_v1(tenant), session_user::text, queue, timer_key,
           delay_ms::float8, payload, txn, "partition", coalesce(payload_zstd, false),
           coalesce(encrypted, false), coalesce(wake, true), clock_timestamp(), traceparent,
           tracestate);
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
  queen.timer_schedule_v2(text, text, bigint, bytea, text, text, uuid, boolean, boolean, boolean,
                          text, text),
  queen.timer_cancel_v1(text, text, text, uuid),
  queen._timer_sql_schedule_v1(uuid, text, text, text, float8, bytea, text, text, boolean,
                               boolean, boolean, timestamptz),
  queen._timer_sql_schedule_v2(uuid, text, text, text, float8, bytea, text, text, boolean,
                               boolean, boolean, timestamptz, text, text),
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
      queen.timer_schedule_v2(text, text, bigint, bytea, text, text, uuid, boolean, boolean,
                              boolean, text, text),
      queen.timer_cancel_v1(text, text, text, uuid)
    TO queen_producer;
  END IF;
END $$;
