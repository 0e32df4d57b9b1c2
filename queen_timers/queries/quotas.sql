-- Named statements of the per-tenant quotas (queen_timers/quotas.py); the measurement and the
-- census are stored procedures (migrations/027_tenant_quotas.sql).

-- name: quota_overrides
SELECT tenant_id, max_pending, writes_per_sec, write_burst, updated_at
  FROM queen.tenant_quotas
 ORDER BY tenant_id;

-- name: quota_override_write
INSERT INTO queen.tenant_quotas AS q (tenant_id, max_pending, writes_per_sec, write_burst)
VALUES ($1::uuid, $2::bigint, $3::float8, $4::int)
ON CONFLICT (tenant_id) DO UPDATE
   SET max_pending = excluded.max_pending, writes_per_sec = excluded.writes_per_sec,
       write_burst = excluded.write_burst, updated_at = now();

-- name: quota_override_delete
DELETE FROM queen.tenant_quotas WHERE tenant_id = $1::uuid;

-- name: quota_measure
SELECT tenant_id, pending, over FROM queen.tenant_quota_measure_v1($1::uuid[], $2::bigint[]);

-- name: quota_over_tenants
SELECT tenant_id FROM queen.tenant_quota_usage WHERE over ORDER BY tenant_id;

-- name: quota_usage_tenants
SELECT tenant_id FROM queen.tenant_quota_usage ORDER BY tenant_id;

-- name: quota_census
SELECT t FROM queen.timer_tenants_v1($1::uuid, $2::int) AS t;
