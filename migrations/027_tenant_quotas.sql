-- 027_tenant_quotas.sql: per-tenant limits on timers (timers-contract §8; docs/guides/tenants.md).
--
-- Two limits, each a broker setting for every tenant (QUEEN_TIMERS_TENANT_MAX_PENDING,
-- QUEEN_TIMERS_TENANT_WRITES_PER_SEC / _WRITE_BURST; unset: no limit) that a row of
-- queen.tenant_quotas overrides for one tenant:
--   * a cap on pending timers, enforced by each broker from a periodic MEASUREMENT plus the
--     schedules it admitted since (queen_timers/quotas.py); never a counter kept in step by
--     every schedule, which would serialise a tenant's schedules on one row;
--   * a token bucket of schedule calls per second, held in each broker's memory (no SQL).
--
-- The measurement counts a tenant's rows on the primary key's prefix (tenant_id, ...) and
-- stops at cap + 1: its cost is bounded by the tenant's cap, whatever the table holds (10^6
-- pending rows of other tenants are never read). It is published in queen.tenant_quota_usage,
-- whose `over` flag is sticky: set when the count reaches the cap, cleared when a count is under
-- 90 % of it. The SQL API (026) refuses a schedule while the flag is set, and counts a capped
-- tenant's timers itself at each schedule (030).

-- Overrides. NULL in a column: the broker setting applies; -1: no limit for this tenant.
-- Written by the service's admin operation (Queen.tenant_quota_set) and nothing else.
CREATE TABLE IF NOT EXISTS queen.tenant_quotas (
  tenant_id      UUID PRIMARY KEY,
  max_pending    BIGINT CHECK (max_pending >= -1),
  writes_per_sec DOUBLE PRECISION CHECK (writes_per_sec = -1 OR writes_per_sec > 0),
  write_burst    INT CHECK (write_burst >= 1),
  updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The last measurement of each capped tenant, by whichever broker took it. `pending` is exact
-- below cap + 1 and saturates there. A row changes only when one of its values does.
CREATE TABLE IF NOT EXISTS queen.tenant_quota_usage (
  tenant_id   UUID PRIMARY KEY,
  pending     BIGINT NOT NULL,
  max_pending BIGINT NOT NULL,
  over        BOOLEAN NOT NULL,
  changed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Measure the tenants named, each against its cap (NULL: no cap, and its usage row goes, so a
-- flag nobody re-measures cannot refuse the SQL API for ever). Answers every tenant that has a
-- cap: its count (saturated at cap + 1) and the flag after this measurement. Reads
-- queen.log_timers without a lock; writes usage rows in ascending tenant order.
CREATE OR REPLACE FUNCTION queen.tenant_quota_measure_v1(p_tenants uuid[], p_caps bigint[])
RETURNS TABLE (tenant_id uuid, pending bigint, over boolean)
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM queen.tenant_quota_usage u
   USING unnest(p_tenants, p_caps) AS a(tenant, cap)
   WHERE u.tenant_id = a.tenant AND a.cap IS NULL;
  RETURN QUERY
  WITH m AS (
    SELECT a.tenant, a.cap,
           (SELECT count(*) FROM (SELECT 1 FROM queen.log_timers l
                                   WHERE l.tenant_id = a.tenant
                                   LIMIT a.cap + 1) s) AS n
      FROM unnest(p_tenants, p_caps) AS a(tenant, cap)
     WHERE a.cap IS NOT NULL
  ), up AS (
    INSERT INTO queen.tenant_quota_usage AS u (tenant_id, pending, max_pending, over)
    SELECT m.tenant, m.n, m.cap, m.n >= m.cap FROM m ORDER BY m.tenant
    ON CONFLICT ON CONSTRAINT tenant_quota_usage_pkey DO UPDATE
       SET pending = excluded.pending, max_pending = excluded.max_pending,
           over = excluded.pending >= excluded.max_pending
                  OR (u.over AND excluded.pending * 10 >= excluded.max_pending * 9),
           changed_at = now()
     WHERE (u.pending, u.max_pending, u.over) IS DISTINCT FROM
           (excluded.pending, excluded.max_pending,
            excluded.pending >= excluded.max_pending
            OR (u.over AND excluded.pending * 10 >= excluded.max_pending * 9))
    RETURNING u.tenant_id, u.pending, u.over
  )
  SELECT m.tenant, m.n,
         coalesce((SELECT up.over FROM up WHERE up.tenant_id = m.tenant),
                  (SELECT u.over FROM queen.tenant_quota_usage u WHERE u.tenant_id = m.tenant))
    FROM m;
END $$;

-- The tenants that have pending timers, in ascending order after p_after (NULL: from the
-- first), at most p_limit: a skip scan of the primary key, one index descent per tenant, so a
-- census of the brokers costs O(tenants), never O(rows).
CREATE OR REPLACE FUNCTION queen.timer_tenants_v1(p_after uuid, p_limit int)
RETURNS SETOF uuid LANGUAGE plpgsql STABLE AS $$
DECLARE
  v uuid;
  n int := 0;
BEGIN
  IF p_after IS NULL THEN
    SELECT t.tenant_id INTO v FROM queen.log_timers t ORDER BY t.tenant_id LIMIT 1;
  ELSE
    SELECT t.tenant_id INTO v FROM queen.log_timers t WHERE t.tenant_id > p_after
     ORDER BY t.tenant_id LIMIT 1;
  END IF;
  WHILE v IS NOT NULL AND n < p_limit LOOP
    RETURN NEXT v;
    n := n + 1;
    SELECT t.tenant_id INTO v FROM queen.log_timers t WHERE t.tenant_id > v
     ORDER BY t.tenant_id LIMIT 1;
  END LOOP;
END $$;

-- The SQL API's cap (called by queen._timer_sql_schedule_v1, 026): refused while the brokers'
-- last measurement says the tenant is over. One primary-key read; no write, so no row lock in
-- the caller's transaction. SQLSTATE 54000 (program_limit_exceeded): not a transient class, so
-- a retry loop does not hammer it.
CREATE OR REPLACE FUNCTION queen._tenant_quota_check_v1(p_tenant uuid)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
  v queen.tenant_quota_usage%ROWTYPE;
BEGIN
  SELECT * INTO v FROM queen.tenant_quota_usage u WHERE u.tenant_id = p_tenant AND u.over;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '54000',
      MESSAGE = format('QTIMER timers_quota_exceeded: the tenant has %s pending timers; its cap '
                       'is %s (scheduling resumes under 90 %% of it)', v.pending, v.max_pending),
      HINT = 'cancel timers or ask an administrator to raise the cap (queen tenants set)';
  END IF;
END $$;
