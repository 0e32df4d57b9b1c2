-- 035_webhooks.sql: webhook targets, their signing secrets, and the record of delivery attempts
-- (queen_timers/webhooks/, plugins/webhooks, docs/guides/webhooks.md).
--
-- A target names one queue of its tenant: a delivery plugin pops that queue and sends each
-- message to the target's URL. The fire into the log stays exactly once; the delivery is
-- at-least-once with a stable identity (the message's id, as `webhook-id`).
--
-- Decisions, and the price of each:
--
-- * One target per queue (UNIQUE (tenant_id, queue)). The target pops in queue mode and a retry
--   re-enters the same queue as a timer, so a second target on the queue would receive the first
--   one's retries. Price: fan-out to several URLs takes one queue per URL.
-- * Secrets are sealed by the broker (AES-256-GCM with QUEEN_ENCRYPTION_KEY) before they reach
--   this table, which holds only the envelope: a dump of the database does not sign anything.
--   Price: a target needs the key; rotating the key means re-adding the secrets.
-- * Attempts are bounded per target: the delivery plugin trims each target's rows to the newest
--   N (its setting) as it writes them. Price: older attempts are gone; the dead-letter queue
--   keeps the last failure of every message that was given up on.

CREATE TABLE IF NOT EXISTS queen.webhook_targets (
  tenant_id     UUID NOT NULL,
  name          TEXT COLLATE "C" NOT NULL,
  queue         TEXT COLLATE "C" NOT NULL,
  url           TEXT NOT NULL,
  method        TEXT NOT NULL DEFAULT 'POST',
  headers       JSONB NOT NULL DEFAULT '{}',
  timeout_ms    INT NOT NULL,
  max_attempts  INT NOT NULL,
  max_age_ms    BIGINT NOT NULL,
  backoff_ms    INT NOT NULL,
  max_backoff_ms INT NOT NULL,
  concurrency   INT NOT NULL,
  rate_per_s    DOUBLE PRECISION,
  paused        BOOLEAN NOT NULL DEFAULT FALSE,
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, name),
  UNIQUE (tenant_id, queue)
);

CREATE TABLE IF NOT EXISTS queen.webhook_secrets (
  tenant_id     UUID NOT NULL,
  target        TEXT COLLATE "C" NOT NULL,
  secret_id     TEXT COLLATE "C" NOT NULL,
  sealed        BYTEA NOT NULL,
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, target, secret_id),
  FOREIGN KEY (tenant_id, target) REFERENCES queen.webhook_targets (tenant_id, name)
    ON DELETE CASCADE
);

CREATE TABLE IF NOT EXISTS queen.webhook_attempts (
  id            BIGSERIAL PRIMARY KEY,
  tenant_id     UUID NOT NULL,
  target        TEXT COLLATE "C" NOT NULL,
  webhook_id    TEXT NOT NULL,
  attempt       INT NOT NULL,
  at            TIMESTAMPTZ NOT NULL,
  status        INT,
  latency_ms    INT NOT NULL,
  outcome       TEXT NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead')),
  error         TEXT
);
CREATE INDEX IF NOT EXISTS webhook_attempts_by_target
  ON queen.webhook_attempts (tenant_id, target, id);
