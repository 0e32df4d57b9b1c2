-- BENCH DATABASE ONLY: back to the schema's autovacuum settings.
ALTER TABLE queen.log_timers RESET (autovacuum_enabled);
ALTER TABLE queen.log_segments RESET (autovacuum_enabled);
ALTER TABLE queen.log_txns RESET (autovacuum_enabled);
ALTER TABLE queen.log_partitions RESET (autovacuum_enabled);
