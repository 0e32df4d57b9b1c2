-- Variant B of the amplification bench: the design's index, fillfactor 100 instead of 70.
-- BENCH DATABASE ONLY (run on an empty table: VACUUM FULL rewrites it at the new fillfactor).
ALTER TABLE queen.log_timers SET (fillfactor = 100);
