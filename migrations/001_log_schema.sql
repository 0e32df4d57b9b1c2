-- 001_log_schema.sql: the log's tables.
--
-- Always virgin: this file is re-applied at every boot (queen_timers/db/migrate.py), so every
-- statement is idempotent and none may take an ACCESS EXCLUSIVE lock on a table that already
-- exists. Storage parameters are therefore given in CREATE TABLE ... WITH (...) (applied only
-- when the table is born), secondary indexes are created behind a catalogue check, and
-- ALTER ... SET STORAGE is guarded the same way.
--
-- Default tenant everywhere: 00000000-0000-0000-0000-000000000001.
--
-- Storage settings and their provenance (house formula: date, symptom, number, or "not
-- measured here" when the value is taken from the reference's dated block).

CREATE SCHEMA IF NOT EXISTS queen;

-- Guarded DDL helper: run `ddl` only when relation `rel` does not exist yet. CREATE INDEX IF
-- NOT EXISTS would still take a ShareLock on the table before it finds the index, blocking
-- every push for the duration of the boot on a busy table.
CREATE OR REPLACE FUNCTION queen._ensure_relation_v1(rel text, ddl text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF to_regclass(rel) IS NULL THEN
    EXECUTE ddl;
  END IF;
END $$;

-- queen.queues: one row per (tenant, queue name): the queue's identity and configuration.
-- Created lazily by the first push, pop or timer fire with every column at its default; a
-- configured row is never overwritten by lazy provisioning (ON CONFLICT DO NOTHING).
CREATE TABLE IF NOT EXISTS queen.queues (
  id                          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id                   UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
  name                        TEXT COLLATE "C" NOT NULL,
  namespace                   TEXT NOT NULL DEFAULT '',
  task                        TEXT NOT NULL DEFAULT '',
  lease_time                  INT NOT NULL DEFAULT 60,      -- seconds
  retry_limit                 INT NOT NULL DEFAULT 3,       -- failed acks before dead-letter
  retry_delay                 INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  dead_letter_queue           BOOLEAN NOT NULL DEFAULT TRUE,
  dlq_after_max_retries       BOOLEAN NOT NULL DEFAULT TRUE,
  dedup_window_seconds        INT NOT NULL DEFAULT 3600,    -- 0 disables the push probe
  encryption_enabled          BOOLEAN NOT NULL DEFAULT FALSE,
  retention_enabled           BOOLEAN NOT NULL DEFAULT FALSE,
  retention_seconds           INT NOT NULL DEFAULT 0,       -- rule 1: delete older, consumed or not
  completed_retention_seconds INT NOT NULL DEFAULT 0,       -- rule 2: delete older and consumed by all
  delayed_processing          INT NOT NULL DEFAULT 0,       -- seconds a segment stays invisible to pop
  priority                    INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  ttl                         INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  max_size                    INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  window_buffer               INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  max_wait_time_seconds       INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  min_pop_wait_time           INT NOT NULL DEFAULT 0,       -- ms; accepted and stored, not enforced
  retention_sink_hold         INT NOT NULL DEFAULT 0,       -- accepted and stored, not enforced
  retention_sink_hold_max_seconds INT NOT NULL DEFAULT 604800, -- accepted and stored, not enforced
  created_at                  TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at                  TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT queues_tenant_name_uk UNIQUE (tenant_id, name),
  CONSTRAINT queues_name_length CHECK (char_length(name) BETWEEN 1 AND 255)
);

-- queen.log_partitions: the offset allocator, one row per partition.
-- fillfactor 70: every push updates this row; no updated column is indexed, so every
-- allocator update is HOT and the headroom keeps the new version on the same page.
-- Not measured here: taken from the reference's dated block (2026-07-23, "every push updates
-- the row; dead tuples dwarf live rows between vacuums", scale 0 / threshold 500).
-- vacuum_truncate = off: the reference's 2026-07-24 block (truncation's ACCESS EXCLUSIVE lock
-- froze every push and pop for seconds in a 24 h soak). Not measured here.
CREATE TABLE IF NOT EXISTS queen.log_partitions (
  id            UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  queue_id      UUID NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
  name          TEXT COLLATE "C" NOT NULL DEFAULT 'Default',
  last_offset   BIGINT NOT NULL DEFAULT -1,   -- next base offset = last_offset + 1
  log_start     BIGINT NOT NULL DEFAULT 0,    -- every offset below it was deleted by retention
  txns_start    BIGINT NOT NULL DEFAULT 0,    -- every log_txns row below it was purged
  last_write_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT log_partitions_queue_name_uk UNIQUE (queue_id, name),
  CONSTRAINT log_partitions_name_length CHECK (char_length(name) BETWEEN 1 AND 255)
) WITH (fillfactor = 70,
        autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 500,
        autovacuum_vacuum_cost_delay = 0,
        vacuum_truncate = off);

-- queen.log_segments: one zstd blob of packed frames per push per partition.
-- Primary key only: the key is the pop path; no secondary index.
-- Autovacuum 0.1 / insert 0.3: the reference's 2026-07-23 VM-campaign block (0.02/0.05
-- re-fired vacuum every ~13 s at 1M msg/s). Not measured here.
CREATE TABLE IF NOT EXISTS queen.log_segments (
  partition_id UUID NOT NULL REFERENCES queen.log_partitions(id) ON DELETE CASCADE,
  base_offset  BIGINT NOT NULL,
  end_offset   BIGINT NOT NULL,              -- inclusive; frames = end - base + 1
  created_at   TIMESTAMPTZ NOT NULL,         -- one stamp for every frame of the segment
  blob         BYTEA NOT NULL,
  PRIMARY KEY (partition_id, base_offset)
) WITH (autovacuum_vacuum_scale_factor = 0.1,
        autovacuum_vacuum_insert_scale_factor = 0.3,
        autovacuum_vacuum_cost_delay = 0,
        toast.autovacuum_vacuum_scale_factor = 0.1,
        toast.autovacuum_vacuum_insert_scale_factor = 0.3);

-- The blob is already zstd: TOAST must not spend CPU trying to compress it again.
-- SET STORAGE takes an ACCESS EXCLUSIVE lock, so it runs only when the column is not yet
-- EXTERNAL, never unguarded at every boot (which the reference does, and its own timers file
-- calls the precedent not to copy).
DO $$
BEGIN
  IF (SELECT attstorage FROM pg_attribute
       WHERE attrelid = 'queen.log_segments'::regclass AND attname = 'blob') <> 'e' THEN
    ALTER TABLE queen.log_segments ALTER COLUMN blob SET STORAGE EXTERNAL;
  END IF;
END $$;

-- queen.log_txns: the txn of every frame, one row per frame, for the push dedup window, for
-- acks by transaction id and for the timer fire's "already in the log?" probe. The txn is
-- stored as its xxh3-128 digest typed as a UUID (16 bytes, fixed width, fast to compare);
-- SQL never hashes, the broker does (queen_timers/log/frames.py).
-- No foreign key, deliberately: the purge must not pay FK trigger cost.
-- Purged on its own clock: now - max(dedup window, completed retention, 900 s).
CREATE TABLE IF NOT EXISTS queen.log_txns (
  partition_id UUID NOT NULL,
  txn_hash     UUID NOT NULL,
  "offset"     BIGINT NOT NULL,
  created_at   TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (partition_id, txn_hash, "offset")
) WITH (autovacuum_vacuum_scale_factor = 0.1,
        autovacuum_vacuum_insert_scale_factor = 0.3,
        autovacuum_vacuum_cost_delay = 0);

-- queen.log_consumers: one cursor and lease per (partition, consumer group).
-- committed = last acked offset (-1: nothing); the leased span is (committed, batch_end].
-- fillfactor 50, scale 0 / threshold 500, vacuum_truncate off: the reference's dated blocks
-- (2026-07-23/24); every pop and ack updates this row. Not measured here.
CREATE TABLE IF NOT EXISTS queen.log_consumers (
  partition_id      UUID NOT NULL REFERENCES queen.log_partitions(id) ON DELETE CASCADE,
  consumer_group    TEXT COLLATE "C" NOT NULL DEFAULT '__QUEUE_MODE__',
  committed         BIGINT NOT NULL DEFAULT -1,
  batch_end         BIGINT,
  worker_id         TEXT,                   -- the lease id a client sees
  lease_expires_at  TIMESTAMPTZ,
  lease_acquired_at TIMESTAMPTZ,
  batch_retry_count INT NOT NULL DEFAULT 0, -- the retry budget, charged by failed acks only
  attempt_offset    BIGINT,
  attempt_count     INT NOT NULL DEFAULT 0,
  total_consumed    BIGINT NOT NULL DEFAULT 0,
  created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (partition_id, consumer_group)
) WITH (fillfactor = 50,
        autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 500,
        autovacuum_vacuum_cost_delay = 0,
        vacuum_truncate = off);

-- queen.log_dlq: dead letters, as snapshots (no FK into segments: they outlive retention).
-- Timers that exhaust their attempts land here with consumer_group '__timer__', offset -1.
CREATE TABLE IF NOT EXISTS queen.log_dlq (
  id             UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  partition_id   UUID NOT NULL,
  consumer_group TEXT NOT NULL,
  "offset"       BIGINT NOT NULL,
  message_id     UUID,
  transaction_id TEXT,
  payload        JSONB,
  error          TEXT,
  retry_count    INT NOT NULL DEFAULT 0,
  failed_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  created_at     TIMESTAMPTZ                -- the message's createdAt (its segment's stamp)
);
SELECT queen._ensure_relation_v1('queen.idx_log_dlq_partition_failed_at',
  'CREATE INDEX idx_log_dlq_partition_failed_at ON queen.log_dlq (partition_id, failed_at DESC)');

-- queen.log_consumer_groups: one durable subscription per (queue, consumer group), written by
-- the group's first pop. subscribed_at decides where a 'new' group starts in a partition it
-- touches for the first time (only segments created at or after it), so a partition first
-- popped an hour after the subscription still delivers what arrived since. Queue mode
-- ('__QUEUE_MODE__') never registers: it always starts at the beginning of the log.
CREATE TABLE IF NOT EXISTS queen.log_consumer_groups (
  queue_id          UUID NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
  consumer_group    TEXT COLLATE "C" NOT NULL,
  subscription_mode TEXT NOT NULL DEFAULT 'all',   -- 'all' | 'new'
  subscribed_at     TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (queue_id, consumer_group),
  CONSTRAINT log_consumer_groups_mode CHECK (subscription_mode IN ('all', 'new'))
);

-- queen.system_state: runtime switches shared by every broker. A missing row means "on".
CREATE TABLE IF NOT EXISTS queen.system_state (
  key        TEXT PRIMARY KEY,
  value      JSONB NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
