-- BENCH DATABASE ONLY: no autovacuum on the tables a timer writes while WAL is attributed to
-- one phase at a time (an autovacuum's WAL would land in whichever phase it overlapped).
ALTER TABLE queen.log_timers SET (autovacuum_enabled = false);
ALTER TABLE queen.log_segments SET (autovacuum_enabled = false);
ALTER TABLE queen.log_txns SET (autovacuum_enabled = false);
ALTER TABLE queen.log_partitions SET (autovacuum_enabled = false);
