-- Named statements of the floor driver (bench/peers/floor_driver.py). BENCH DATABASE ONLY.

-- name: floor_insert_at
-- schedule: one row per key, due at the epoch instant $2
INSERT INTO bench_floor.timers (queue, timer_key, deliver_at, txn, message_id, payload)
SELECT 'floor', k, to_timestamp($2::float8), k, gen_random_uuid(),
       convert_to('{"bench":true}', 'UTF8')
  FROM unnest($1::text[]) k;

-- name: floor_claim_delete
-- claim + delete + record, one statement, one transaction
WITH c AS (
  SELECT tenant_id, queue, timer_key FROM bench_floor.timers
   WHERE visible_at <= clock_timestamp()
   ORDER BY visible_at LIMIT $1
     FOR UPDATE SKIP LOCKED
), d AS (
  DELETE FROM bench_floor.timers t USING c
   WHERE t.tenant_id = c.tenant_id AND t.queue = c.queue AND t.timer_key = c.timer_key
  RETURNING t.message_id, t.deliver_at
)
INSERT INTO bench_floor.delivered (message_id, deliver_at, delivered_at)
SELECT message_id, deliver_at, clock_timestamp() FROM d
RETURNING extract(epoch FROM deliver_at)::float8 AS due,
          extract(epoch FROM delivered_at)::float8 AS at;
