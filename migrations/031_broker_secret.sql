-- 031_broker_secret.sql: what a reader of the brokers' notification channels learns, and what a
-- writer can make a broker do (queen_timers/notify.py is the other half).
--
-- Any role that can connect may LISTEN on any channel and NOTIFY any payload: PostgreSQL has no
-- privilege on a channel. So every payload the brokers send is signed, and the names in it are
-- hidden, with one secret that only brokers read:
--
--   * a queue is named by its digest, HMAC-SHA256(secret, 'q|' || tenant || '|' || queue)
--     truncated to 128 bits: a listener that is not a broker sees neither the tenant nor the
--     queue (it can tell two hints of one queue apart from two queues, no more);
--   * every payload ends in a tag, the HMAC of the rest, and carries a random nonce: a broker
--     drops a payload without a valid tag (a forgery) and one whose tag it has seen within the
--     replay window (a replay), before it does any work for it.
--
-- The secret is drawn once, by the first boot, and never changes (a broker reads it at start).
-- No privilege on its table is granted to anyone, and the function that signs with it is
-- revoked from PUBLIC: the SQL API's SECURITY DEFINER functions reach it as their owner.

CREATE TABLE IF NOT EXISTS queen.broker_secret (
  id     SMALLINT PRIMARY KEY CHECK (id = 1),
  secret BYTEA NOT NULL CHECK (length(secret) = 32)
);

-- 32 bytes from the strong random source: two version-4 uuids, 244 random bits.
INSERT INTO queen.broker_secret (id, secret)
VALUES (1, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
ON CONFLICT (id) DO NOTHING;

REVOKE ALL ON queen.broker_secret FROM PUBLIC;

-- HMAC-SHA256 (RFC 2104) of p_msg under the secret, the first 16 bytes as hex: what
-- notify.py's _mac computes. Built on sha256() because pgcrypto may not be installed.
CREATE OR REPLACE FUNCTION queen._broker_mac_v1(p_msg text)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_key bytea;
  v_in bytea;
  v_out bytea;
BEGIN
  SELECT s.secret || decode(repeat('00', 32), 'hex') INTO v_key
    FROM queen.broker_secret s WHERE s.id = 1;
  v_in := v_key;
  v_out := v_key;
  FOR i IN 0..63 LOOP
    v_in := set_byte(v_in, i, get_byte(v_key, i) # 54);    -- 0x36
    v_out := set_byte(v_out, i, get_byte(v_key, i) # 92);  -- 0x5c
  END LOOP;
  RETURN encode(substring(sha256(v_out || sha256(v_in || convert_to(p_msg, 'UTF8')))
                          FROM 1 FOR 16), 'hex');
END $$;

-- The timers channel's payload, signed: [sender, nonce, at_ms, tag] as notify.py reads it.
CREATE OR REPLACE FUNCTION queen._notify_timer_payload_v1(p_sender text, p_at timestamptz)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_nonce text := substring(replace(gen_random_uuid()::text, '-', '') FROM 1 FOR 16);
  v_at bigint := floor(extract(epoch FROM p_at) * 1000)::bigint;
BEGIN
  RETURN jsonb_build_array(p_sender, v_nonce, v_at,
           queen._broker_mac_v1(format('t|%s|%s|%s', p_sender, v_nonce, v_at)))::text;
END $$;

REVOKE ALL ON FUNCTION
  queen._broker_mac_v1(text),
  queen._notify_timer_payload_v1(text, timestamptz)
FROM PUBLIC;


-- ---------------------------------------------------------------------------------------------
-- Lateness counts from when a timer could first fire: its deliver_at, but never before it was
-- scheduled (a negative delay is legal and puts deliver_at in the past; measured from there, any
-- tenant could make the fire read as days late). The schedule instant is the message id's, a
-- uuid7 stamped at each (re)schedule; -infinity for an id of another version.
CREATE OR REPLACE FUNCTION queen._uuid7_at_v1(p_id uuid)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN substr(p_id::text, 15, 1) = '7'
              THEN to_timestamp(('x' || substr(replace(p_id::text, '-', ''), 1, 12))::bit(48)
                                  ::bigint / 1000.0)
              ELSE '-infinity'::timestamptz END
$$;


-- A tenant's label in the brokers' metrics (brokersecret.tenant_label): /metrics names no
-- tenant id, and an operator with the broker's database rights maps a label back by asking
-- for the label of each tenant id it knows.
CREATE OR REPLACE FUNCTION queen.tenant_metrics_label_v1(p_tenant uuid)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT 't-' || left(queen._broker_mac_v1('m|' || p_tenant::text), 12)
$$;

REVOKE ALL ON FUNCTION queen.tenant_metrics_label_v1(uuid) FROM PUBLIC;
