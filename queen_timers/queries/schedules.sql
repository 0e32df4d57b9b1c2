-- Named statements of the recurring schedules (queen_timers/timers/schedule_store.py). Each is
-- one call of a stored procedure of migrations/033_schedules.sql, except the fire's read of
-- the definitions it plans from.

-- name: schedules_for_fire
SELECT s.tenant_id, s.queue::text, s.schedule_key::text, s.schedule_id, s.cron, s.every_ms,
       s.zone, s.start_at, s.end_at, s.anchor_at, s.jitter_ms, s.catch_up, s.catch_up_cap,
       s.paused, s.generation, s.next_at
  FROM unnest($1::uuid[], $2::text[], $3::text[]) AS k(tenant, queue, skey)
  JOIN queen.schedules s
    ON s.tenant_id = k.tenant AND s.queue = k.queue COLLATE "C"
   AND s.schedule_key = k.skey COLLATE "C";

-- name: schedules_fire
SELECT queen.schedule_fire_v1($1::uuid[], $2::text[], $3::text[], $4::int[], $5::bytea[],
                              $6::int[], $7::text[], $8::uuid[], $9::uuid[], $10::tid[],
                              $11::timestamptz, $12::jsonb);

-- name: schedules_skip
SELECT queen.schedule_skip_v1($1::jsonb, $2::timestamptz);

-- name: schedules_upsert
SELECT queen.schedule_upsert_v1($1::uuid, $2::text, $3::text, $4::jsonb, $5::timestamptz,
                                $6::timestamptz, $7::text, $8::timestamptz);

-- name: schedules_pause
SELECT queen.schedule_pause_v1($1::uuid, $2::text, $3::text, $4::boolean, $5::timestamptz);

-- name: schedules_delete
SELECT queen.schedule_delete_v1($1::uuid, $2::text, $3::text);

-- name: schedules_run_now
SELECT queen.schedule_run_now_v1($1::uuid, $2::text, $3::text, $4::timestamptz);

-- name: schedules_get
SELECT queen.schedule_get_v1($1::uuid, $2::text, $3::text, $4::int);

-- name: schedules_list
SELECT queen.schedule_list_v1($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::int);

-- name: schedules_pending_count
SELECT count(*) FROM queen.log_timers
 WHERE tenant_id = $1 AND queue = $2 COLLATE "C"
   AND timer_key = ('schedule:next:' || $3) COLLATE "C";
