-- 029_timer_lock_bound.sql: a broker's timer write never waits long on somebody else's lock.
--
-- A tenant's application can hold its timer rows in an open transaction (the SQL API, 026,
-- writes them inside the application's own transaction). A schedule or cancel of those keys
-- through the broker would wait on the row lock for as long as that transaction stays open,
-- holding a pooled connection; some twenty such calls would fill the pool and stall every
-- other tenant for the statement timeout. So the broker's writes run with a short
-- lock_timeout (QUEEN_TIMERS_LOCK_WAIT_MS; docs/guides/tenants.md): a write that meets a lock
-- held longer fails with 55P03 (lock_not_available), which rolls the statement back (nothing
-- changes) and which the broker answers as 503 timers_busy / timer_locked with Retry-After.
--
-- The bound is set LOCAL inside the statement and put back before it returns, so it covers
-- exactly this apply: inside a transaction wire (queen_timers/transaction.py) the pushes and
-- acks after it keep the session's own lock_timeout. set_config from inside the statement is
-- enough: PostgreSQL reads lock_timeout when a wait begins, not when the statement starts.
-- One round trip, as before (a SET LOCAL before the call would add one, or an explicit
-- transaction, to the hot schedule path).
--
-- Every lock a write can wait on is covered: the row lock of an existing row (UPDATE of the
-- upsert, DELETE of a cancel) and the wait on another transaction's uncommitted insert of the
-- same key (ON CONFLICT waits for that transaction to end); SKIP LOCKED would see neither an
-- uncommitted insert nor tell "locked" from "absent". The fire path is not touched: it never
-- waits in the timer lock space (025, the header). The SQL API keeps waiting on its own
-- tenant's locks as any SQL does: its caller chose its transaction.
--
-- p_plain_queues NULL: no encryption check (log_timers_apply_v2's answer); otherwise
-- log_timers_apply_checked_v2's. p_lock_wait_ms <= 0 or NULL: no bound (the session's).
CREATE OR REPLACE FUNCTION queen.log_timers_apply_bounded_v1(p_ops jsonb, p_tenant uuid,
                                                             p_producer_sub text,
                                                             p_now timestamptz,
                                                             p_plain_queues text[],
                                                             p_limits jsonb,
                                                             p_lock_wait_ms int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_was text;
  v_out jsonb;
BEGIN
  IF p_lock_wait_ms > 0 THEN
    v_was := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
  END IF;
  v_out := queen.log_timers_apply_checked_v2(p_ops, p_tenant, p_producer_sub, p_now,
                                             p_plain_queues, p_limits);
  IF v_was IS NOT NULL THEN
    PERFORM set_config('lock_timeout', v_was, true);
  END IF;
  RETURN v_out;
END $$;
