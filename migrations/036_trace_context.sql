-- 036_trace_context.sql: a timer keeps the W3C trace context of the schedule that made it, so
-- the fire and the consumer continue that trace (docs/guides/tracing.md,
-- queen_timers/tracing.py).
--
-- * queen.log_timers.trace_parent / trace_state: the schedule span's `traceparent` and
--   `tracestate` (NULL: not traced). The broker's schedule passes them as the broker-owned op
--   fields `_traceparent` / `_tracestate` (025's upsert writes them, a reschedule replaces
--   them with its own), the claim returns them (log_timers_claim_v3) and the fire packs them
--   into the frame, from which the pop hands them to the consumer.
-- * The SQL API's queen.timer_schedule_v2 (026) stores a caller's `traceparent` (and
--   `tracestate`) the same way, so an application that schedules inside its own transaction
--   keeps its trace too.
--
-- Price: two nullable text columns at the end of the row, NULL (one bit of the null bitmap)
-- for a timer nobody traced; ~80 bytes for one that is.

-- ADD COLUMN takes an ACCESS EXCLUSIVE lock even with IF NOT EXISTS, so it runs only when the
-- columns are missing, never at every boot. Nullable without a default: a catalogue change
-- only, no rewrite of the table.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute
                  WHERE attrelid = 'queen.log_timers'::regclass AND attname = 'trace_parent'
                    AND NOT attisdropped) THEN
    ALTER TABLE queen.log_timers ADD COLUMN trace_parent text, ADD COLUMN trace_state text;
  END IF;
END $$;
