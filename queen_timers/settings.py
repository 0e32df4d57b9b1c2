"""Every setting of the broker, in one place: name, environment variable, default, meaning.

A setting is read from (in order of precedence) an explicit override (a CLI flag), the
environment, then its default. `queen --help` and each subcommand's help print the table
below, so this module is the documentation too. Transports declare their own settings with
the same `Setting` type (see `queen_timers.transport.Transport.settings`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["SETTINGS", "Setting", "Settings", "default_data_dir", "parse_bool"]


def parse_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def default_data_dir() -> str:
    # Per-user and persistent; kept short because PostgreSQL's Unix socket lives inside it
    # and a socket path is limited to about 100 bytes.
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return os.path.join(base, "queen", "pg")


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str  # attribute name on Settings, also the CLI flag (--name-with-dashes)
    env: str
    default: Any
    help: str
    parse: Callable[[str], Any] = str
    group: str = "broker"
    default_doc: str | None = None  # how to show a computed default in help and docs

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_text(self) -> str:
        if self.default_doc is not None:
            return self.default_doc
        d = self.default() if callable(self.default) else self.default
        return "(unset)" if d is None else str(d)

    def resolve(self, overrides: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
        if overrides.get(self.name) is not None:
            v = overrides[self.name]
            return self.parse(v) if isinstance(v, str) else v
        if self.env in environ and environ[self.env] != "":
            return self.parse(environ[self.env])
        return self.default() if callable(self.default) else self.default


def _opt_str(v: str) -> str | None:
    return v or None


SETTINGS: list[Setting] = [
    # -- database -------------------------------------------------------------------------
    Setting(
        "database_url",
        "QUEEN_DATABASE_URL",
        None,
        "PostgreSQL URL (>= 14). Unset: start the embedded PostgreSQL in --data-dir.",
        _opt_str,
        "database",
    ),
    Setting(
        "data_dir",
        "QUEEN_DATA_DIR",
        default_data_dir,
        "Data directory of the embedded PostgreSQL (persistent; keep the path short).",
        str,
        "database",
        "$XDG_DATA_HOME/queen/pg or ~/.local/share/queen/pg",
    ),
    Setting("pool_min", "QUEEN_POOL_MIN", 2, "Minimum connections in the pool.", int, "database"),
    Setting("pool_max", "QUEEN_POOL_MAX", 20, "Maximum connections in the pool.", int, "database"),
    Setting(
        "statement_timeout_ms",
        "QUEEN_STATEMENT_TIMEOUT_MS",
        30000,
        "statement_timeout of every pooled connection (ms, 0 = none).",
        int,
        "database",
    ),
    Setting(
        "listen_database_url",
        "QUEEN_LISTEN_DATABASE_URL",
        None,
        "Direct PostgreSQL URL of the LISTEN connection (cross-broker wake-ups), for a "
        "QUEEN_DATABASE_URL that goes through a transaction pooler. Unset: QUEEN_DATABASE_URL.",
        _opt_str,
        "database",
    ),
    Setting(
        "pooler_prepared_statements",
        "QUEEN_POOLER_PREPARED_STATEMENTS",
        False,
        "The pooler in front of PostgreSQL keeps prepared statements (PgBouncer >= 1.21 with "
        "max_prepared_statements > 0): keep asyncpg's statement cache on behind it. False: "
        "off behind a detected pooler (each statement is parsed every time).",
        parse_bool,
        "database",
    ),
    # -- log ------------------------------------------------------------------------------
    Setting(
        "encryption_key",
        "QUEEN_ENCRYPTION_KEY",
        None,
        "AES-256-GCM key, 64 hex characters. Required before a queue may enable encryption.",
        _opt_str,
        "log",
    ),
    Setting(
        "zstd_level",
        "QUEEN_ZSTD_LEVEL",
        3,
        "zstd level of log segments (3: the reference's recipe level; any level decodes).",
        int,
        "log",
    ),
    Setting(
        "max_payload_bytes",
        "QUEEN_MAX_PAYLOAD_BYTES",
        1048576,
        "Largest payload of one pushed message, in bytes.",
        int,
        "log",
    ),
    Setting(
        "pop_lease_seconds",
        "QUEEN_POP_LEASE_SECONDS",
        None,
        "Lease of a pop when the queue has none configured (unset: the queue's lease_time).",
        lambda v: int(v) if v else None,
        "log",
    ),
    Setting(
        "pop_default_batch",
        "QUEEN_POP_DEFAULT_BATCH",
        200,
        "Batch size of a pop that names none (the reference's autopilot default).",
        int,
        "log",
    ),
    Setting(
        "retention_interval_ms",
        "QUEEN_RETENTION_INTERVAL_MS",
        5000,
        "Period of the retention/maintenance loop (ms, 0 = off).",
        int,
        "log",
    ),
    Setting(
        "partition_cleanup_days",
        "QUEEN_PARTITION_CLEANUP_DAYS",
        7,
        "Idle days after which an empty, unleased partition is removed (floor 1).",
        int,
        "log",
    ),
    Setting(
        "pop_max_batch",
        "QUEEN_POP_MAX_BATCH",
        10000,
        "Largest batch one pop may ask for.",
        int,
        "log",
    ),
    Setting(
        "pop_max_partitions",
        "QUEEN_POP_MAX_PARTITIONS",
        64,
        "Most partitions one pop may claim (one lease id over all of them).",
        int,
        "log",
    ),
    Setting(
        "pop_poll_min_ms",
        "QUEEN_POP_POLL_MIN_MS",
        50,
        "First re-check interval of a parked long-poll pop (ms); doubles up to the max. "
        "Covers lease expiries and lost wake-ups.",
        int,
        "log",
    ),
    Setting(
        "pop_poll_max_ms",
        "QUEEN_POP_POLL_MAX_MS",
        1000,
        "Longest re-check interval of a parked long-poll pop (ms).",
        int,
        "log",
    ),
    Setting(
        "dlq_max_limit",
        "QUEEN_DLQ_MAX_LIMIT",
        1000,
        "Largest page of a dead-letter listing.",
        int,
        "log",
    ),
    Setting(
        "retention_batch_rows",
        "QUEEN_RETENTION_BATCH_ROWS",
        500,
        "Rows one retention/purge/cleanup step deletes before it commits and loops.",
        int,
        "log",
    ),
    Setting(
        "txns_min_retention_s",
        "QUEEN_TXNS_MIN_RETENTION_S",
        900,
        "Floor of how long txn hashes are kept (s): the purge keeps max(dedup window, "
        "completed retention, this).",
        int,
        "log",
    ),
    # -- timers ---------------------------------------------------------------------------
    Setting(
        "timers_max_ops_per_call",
        "QUEEN_TIMERS_MAX_OPS_PER_CALL",
        256,
        "Most timer ops in one call.",
        int,
        "timers",
    ),
    Setting(
        "timers_max_payload_bytes",
        "QUEEN_TIMERS_MAX_PAYLOAD_BYTES",
        1048576,
        "Largest decoded timer payload, in bytes.",
        int,
        "timers",
    ),
    Setting(
        "timers_max_horizon_s",
        "QUEEN_TIMERS_MAX_HORIZON_S",
        7776000,
        "Longest delayMs accepted, in seconds (90 days).",
        int,
        "timers",
    ),
    Setting(
        "timers_schedule_inflight",
        "QUEEN_TIMERS_SCHEDULE_INFLIGHT",
        4,
        "Schedule statements in flight at once; calls arriving while all are busy share "
        "the next one (group commit). 0: every call is its own statement.",
        int,
        "timers",
    ),
    Setting(
        "timers_schedule_batch_ops",
        "QUEEN_TIMERS_SCHEDULE_BATCH_OPS",
        256,
        "Most ops of merged schedule calls in one statement.",
        int,
        "timers",
    ),
    # -- sweeper --------------------------------------------------------------------------
    Setting(
        "sweeper",
        "QUEEN_SWEEPER",
        True,
        "Run the sweeper on this broker (false: this broker never fires timers).",
        parse_bool,
        "sweeper",
    ),
    Setting(
        "sweeper_notify",
        "QUEEN_SWEEPER_NOTIFY",
        True,
        "Cross-broker wake-ups by LISTEN/NOTIFY (false: poll-only, for transaction poolers).",
        parse_bool,
        "sweeper",
    ),
    Setting(
        "sweeper_min_sleep_ms",
        "QUEEN_SWEEPER_MIN_SLEEP_MS",
        5,
        "Floor of the sweeper's sleep (ms).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_max_sleep_ms",
        "QUEEN_SWEEPER_MAX_SLEEP_MS",
        1000,
        "The fallback poll: longest sleep, bounds lateness when a wake-up is lost (ms).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_empty_claim_min_ms",
        "QUEEN_SWEEPER_EMPTY_CLAIM_MIN_MS",
        25,
        "Low end of the jittered sleep after an empty claim while work is due (ms).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_empty_claim_max_ms",
        "QUEEN_SWEEPER_EMPTY_CLAIM_MAX_MS",
        200,
        "High end of the jittered sleep after an empty claim while work is due (ms).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_lease_ms",
        "QUEEN_SWEEPER_LEASE_MS",
        30000,
        "Claim lease (ms); a cycle stops claiming at half of it.",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_claim_batch", "QUEEN_SWEEPER_CLAIM_BATCH", 200, "Rows per claim.", int, "sweeper"
    ),
    Setting(
        "sweeper_cycle_max_rows",
        "QUEEN_SWEEPER_CYCLE_MAX_ROWS",
        5000,
        "Row budget of one sweeper cycle.",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_due_cap",
        "QUEEN_SWEEPER_DUE_CAP",
        2000,
        "Cap of the due count in the probe.",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_max_fire_bytes",
        "QUEEN_SWEEPER_MAX_FIRE_BYTES",
        8 * 1024 * 1024,
        "Largest estimated size of one fire transaction (bytes).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_max_attempts",
        "QUEEN_SWEEPER_MAX_ATTEMPTS",
        5,
        "Permanent failures before a timer goes to the dead-letter queue.",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_parallelism",
        "QUEEN_SWEEPER_PARALLELISM",
        1,
        "Parallel drain workers of one sweeper (1..8).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_fire_rate_per_tenant",
        "QUEEN_SWEEPER_FIRE_RATE_PER_TENANT",
        50,
        "Rows per tenant per shard in one claim (capped by the per-shard share).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_backoff_min_ms",
        "QUEEN_SWEEPER_BACKOFF_MIN_MS",
        1000,
        "First backoff after a permanent failure (ms), doubled per attempt.",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_backoff_max_ms",
        "QUEEN_SWEEPER_BACKOFF_MAX_MS",
        60000,
        "Longest backoff after a permanent failure (ms).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_transient_backoff_ms",
        "QUEEN_SWEEPER_TRANSIENT_BACKOFF_MS",
        1000,
        "Backoff after a transient failure (ms, no attempt spent).",
        int,
        "sweeper",
    ),
    Setting(
        "sweeper_isolate_on_permanent",
        "QUEEN_SWEEPER_ISOLATE_ON_PERMANENT",
        True,
        "Replay a failed multi-segment fire one segment per call.",
        parse_bool,
        "sweeper",
    ),
    Setting(
        "sweeper_listen_keepalive_ms",
        "QUEEN_SWEEPER_LISTEN_KEEPALIVE_MS",
        5000,
        "Keepalive period of the LISTEN connection (ms).",
        int,
        "sweeper",
    ),
    Setting(
        "notify_queue_interval_ms",
        "QUEEN_NOTIFY_QUEUE_INTERVAL_MS",
        10,
        "Least time between two cross-broker 'queue has messages' NOTIFYs of one broker "
        "(ms); the queues pushed meanwhile travel together.",
        int,
        "sweeper",
    ),
    Setting(
        "switches_refresh_ms",
        "QUEEN_SWITCHES_REFRESH_MS",
        500,
        "How often a broker re-reads the kill switches (ms).",
        int,
        "sweeper",
    ),
    # -- identity -------------------------------------------------------------------------
    Setting(
        "jwt_secret",
        "QUEEN_JWT_SECRET",
        None,
        "HS256 secret for bearer tokens (unset with no public key: no authentication).",
        _opt_str,
        "identity",
    ),
    Setting(
        "jwt_public_key",
        "QUEEN_JWT_PUBLIC_KEY",
        None,
        "PEM public key (or @path) for RS256/EdDSA bearer tokens.",
        _opt_str,
        "identity",
    ),
    Setting(
        "jwt_tenant_claim",
        "QUEEN_JWT_TENANT_CLAIM",
        "tenant",
        "JWT claim carrying the tenant UUID (absent: the default tenant).",
        str,
        "identity",
    ),
    Setting(
        "jwt_admin_claim",
        "QUEEN_JWT_ADMIN_CLAIM",
        "admin",
        "JWT claim that must be true to flip the kill switches.",
        str,
        "identity",
    ),
]


class Settings:
    """Resolved settings. Attribute access by setting name; immutable after construction."""

    def __init__(
        self,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        extra: Iterable[Setting] = (),
    ):
        overrides = dict(overrides or {})
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for s in [*SETTINGS, *extra]:
            try:
                values[s.name] = s.resolve(overrides, env)
            except ValueError as exc:
                raise ValueError(f"setting {s.env}: {exc}") from None
        unknown = set(overrides) - set(values)
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are immutable; use replace()")

    def replace(self, **changes: Any) -> Settings:
        new = Settings.__new__(Settings)
        object.__setattr__(new, "_values", {**self._values, **changes})
        return new

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)
