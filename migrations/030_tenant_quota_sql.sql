-- 030_tenant_quota_sql.sql: the SQL API keeps a tenant's cap exactly, and refuses a producer
-- role that no administrator bound to a tenant (docs/guides/tenants.md, docs/guides/sql-api.md).
--
-- The cap. queen._timer_sql_schedule_v1 (026) calls _tenant_quota_enter_v1 before it writes and
-- _tenant_quota_hold_v1 after, when the write made a new row:
--   * enter resolves the tenant's cap (its override in queen.tenant_quotas, else the brokers'
--     published QUEEN_TIMERS_TENANT_MAX_PENDING). An uncapped tenant stops there: one
--     primary-key read, nothing written, nothing locked.
--   * a capped tenant is refused while the brokers' sticky flag is set (027), then takes its
--     row of queen.tenant_quota_gate (an UPDATE: a row lock held to the end of the caller's
--     transaction). The capped tenant's SQL schedules therefore run one transaction at a time,
--     and each one's next statement sees every row the previous ones committed.
--   * hold counts the tenant's timers (committed, plus this transaction's own) on the primary
--     key's prefix, stopping at cap + 1, and refuses when the count is past the cap. The raise
--     undoes the statement: the timer, the gate's bump and the wake-up go with it.
-- So, under READ COMMITTED, SQL schedules alone never take a tenant past its cap. Under
-- REPEATABLE READ or SERIALIZABLE a transaction's snapshot may predate another one's commit:
-- the gate's UPDATE then fails with 40001 (could not serialize), which the caller retries.
-- The brokers do not take the gate (a tenant's open transaction would hold the brokers'
-- pooled connections); their admissions count against the cap through their measurement
-- (queen_timers/quotas.py), and the SQL API counts theirs once committed.
-- Cost: a capped tenant's call reads at most min(pending, cap) + 1 index entries and updates
-- one row; its SQL schedules wait on each other's transactions (the caller's lock_timeout
-- bounds that wait), never on another tenant's or on the brokers'.
--
-- The unbound role. A role with no row in queen.timer_producer_roles used to act as the
-- default tenant, able to overwrite or cancel that tenant's timers. Where tenancy is on (a
-- role is bound to a tenant, or a broker of this database authenticates tokens) it is refused,
-- unless the brokers run with QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES=true.
--
-- The brokers publish, at boot, into the `timers_sql_limits` row of queen.system_state
-- (queen_timers/sqlapi.py publish_limits): tenantMaxPending (null: no default cap), tenancy
-- (whether they authenticate tokens) and allowUnboundRoles.

-- One row per capped tenant that schedules through SQL: the row its transactions lock.
-- `entries` counts the calls that went through (a statistic; the lock is the point).
CREATE TABLE IF NOT EXISTS queen.tenant_quota_gate (
  tenant_id UUID PRIMARY KEY,
  entries   BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 50);  -- room for HOT updates: a call's bump writes no index entry

-- A tenant's cap: its override (-1: no cap; NULL: the default), else the published default.
CREATE OR REPLACE FUNCTION queen._tenant_quota_cap_v1(p_tenant uuid, p_limits jsonb)
RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN o.max_pending = -1 THEN NULL
              ELSE coalesce(o.max_pending, (p_limits ->> 'tenantMaxPending')::bigint) END
    FROM (SELECT 1) AS one
    LEFT JOIN queen.tenant_quotas o ON o.tenant_id = p_tenant
$$;

-- Before the write: the cap (NULL: none, and nothing else was done), the sticky flag, the gate.
CREATE OR REPLACE FUNCTION queen._tenant_quota_enter_v1(p_tenant uuid, p_limits jsonb)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_cap bigint := queen._tenant_quota_cap_v1(p_tenant, p_limits);
BEGIN
  IF v_cap IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM queen._tenant_quota_check_v1(p_tenant);  -- 027: the brokers' sticky flag
  INSERT INTO queen.tenant_quota_gate AS g (tenant_id) VALUES (p_tenant)
    ON CONFLICT ON CONSTRAINT tenant_quota_gate_pkey DO NOTHING;
  UPDATE queen.tenant_quota_gate g SET entries = g.entries + 1 WHERE g.tenant_id = p_tenant;
  RETURN v_cap;
END $$;

-- After a write that made a new row, under the gate: refused when it took the tenant past
-- its cap. A fresh statement, so (READ COMMITTED) it sees what the gate's previous holders
-- committed.
CREATE OR REPLACE FUNCTION queen._tenant_quota_hold_v1(p_tenant uuid, p_cap bigint)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_n bigint;
BEGIN
  SELECT count(*) INTO v_n
    FROM (SELECT 1 FROM queen.log_timers l WHERE l.tenant_id = p_tenant LIMIT p_cap + 1) s;
  IF v_n > p_cap THEN
    RAISE EXCEPTION USING ERRCODE = '54000',
      MESSAGE = format('QTIMER timers_quota_exceeded: the tenant''s cap of %s pending timers '
                       'is reached; cancels and reads still work', p_cap),
      HINT = 'cancel timers or ask an administrator to raise the cap (queen tenants set)';
  END IF;
END $$;

-- Whether tenancy is on: a role is bound to a tenant, or a broker authenticates tokens.
CREATE OR REPLACE FUNCTION queen.timer_sql_tenancy_v1(p_limits jsonb)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT coalesce((p_limits ->> 'tenancy')::boolean, false)
         OR EXISTS (SELECT 1 FROM queen.timer_producer_roles)
$$;

-- Whether a role with no binding is refused: tenancy is on and the brokers do not allow
-- unbound roles.
CREATE OR REPLACE FUNCTION queen.timer_sql_refuses_unbound_v1(p_limits jsonb)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT NOT coalesce((p_limits ->> 'allowUnboundRoles')::boolean, false)
         AND queen.timer_sql_tenancy_v1(p_limits)
$$;

-- The tenant of a role with no binding: the default tenant, or refused (42501,
-- timers_role_unbound).
CREATE OR REPLACE FUNCTION queen._timer_sql_unbound_v1(p_limits jsonb)
RETURNS uuid LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF NOT queen.timer_sql_refuses_unbound_v1(p_limits) THEN
    RETURN '00000000-0000-0000-0000-000000000001'::uuid;
  END IF;
  PERFORM queen._timer_sql_refuse_v1('42501', 'timers_role_unbound',
    format('role %s has no tenant binding, and tenancy is on: an unbound role may not act as '
           'the default tenant', session_user),
    format('an administrator binds it: INSERT INTO queen.timer_producer_roles (role_name, '
           'tenant_id) VALUES (%L, ''<tenant uuid>''); or set '
           'QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES=true on the brokers', session_user::text));
  RETURN NULL;  -- not reached: the refusal raises
END $$;

-- The login roles that hold queen_producer (directly or through other roles) and have no
-- binding: the boot's warning lists them (queen_timers/sqlapi.py).
CREATE OR REPLACE FUNCTION queen.timer_unbound_producers_v1()
RETURNS SETOF text LANGUAGE sql STABLE AS $$
  WITH RECURSIVE members(oid) AS (
    SELECT m.member FROM pg_catalog.pg_auth_members m
      JOIN pg_catalog.pg_roles p ON p.oid = m.roleid AND p.rolname = 'queen_producer'
    UNION
    SELECT m.member FROM pg_catalog.pg_auth_members m JOIN members ON m.roleid = members.oid
  )
  SELECT r.rolname::text FROM members JOIN pg_catalog.pg_roles r ON r.oid = members.oid
   WHERE r.rolcanlogin
     AND NOT EXISTS (SELECT 1 FROM queen.timer_producer_roles b WHERE b.role_name = r.rolname)
   ORDER BY 1
$$;

REVOKE ALL ON FUNCTION
  queen._tenant_quota_enter_v1(uuid, jsonb),
  queen._tenant_quota_hold_v1(uuid, bigint),
  queen._timer_sql_unbound_v1(jsonb),
  queen.timer_unbound_producers_v1()
FROM PUBLIC;
