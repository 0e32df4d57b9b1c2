"""Every setting of the broker, in one place: name, type, environment variable, default, meaning.

`Settings` is a frozen dataclass whose every field is declared with `setting(...)`: the field's
name is the setting's name (and its CLI flag, `--name-with-dashes`), its annotation is its type
(the environment's text is parsed by it), and `setting` carries the environment variable, the
default, the group, the help and what the setting may be (`check=`, a rule of
queen_timers.setting_rules; `cross_rules` tie several together). A value comes from (in order
of precedence) an explicit override (a CLI flag), the environment, then the default, and is
checked as it is resolved: a value its rule refuses raises SettingRefused, one line naming
the flag, the environment variable, the value and what is allowed, before anything starts.
`queen serve --help` and `queen settings` and the docs' settings page
(docs/reference/settings.md, written by tools/docgen.py) are generated from these
declarations, so this module is the documentation too.

Transports declare their own settings the same way, in a small frozen dataclass of their own
(see `queen_timers.transport.own_settings`), resolved from the same overrides and environment.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar, overload

from .pgurl import parse_database_url, redacted
from .setting_rules import (
    BOOLEAN,
    PG_INT4_MAX,
    Cross,
    Range,
    Rule,
    SettingRefused,
    above,
    at_least,
    at_most_setting,
    between,
    host_name,
    ip_networks,
    one_of,
    text_format,
)

__all__ = [
    "MAX_DATA_DIR_CHARS",
    "Cross",
    "Rule",
    "Setting",
    "SettingRefused",
    "Settings",
    "above",
    "at_least",
    "at_most_setting",
    "between",
    "check_cross",
    "cross_rules",
    "declared",
    "default_data_dir",
    "host_name",
    "one_of",
    "parse_bool",
    "resolve",
    "setting",
    "text_format",
]

T = TypeVar("T")
S = TypeVar("S")

_KEY = "queen_timers.setting"


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


# The longest data directory of the embedded PostgreSQL: its Unix socket,
# <data_dir>/.s.PGSQL.5432, must fit a socket path (about 107 bytes).
MAX_DATA_DIR_CHARS = 90


@dataclasses.dataclass(frozen=True)
class _Declaration:
    env: str
    help: str
    group: str
    parse: Callable[[str], Any] | None
    default_doc: str | None
    check: Rule | None
    secret: bool


@overload
def setting(
    env: str,
    default: T,
    help: str,
    *,
    group: str,
    check: Rule | None = None,
    parse: Callable[[str], T] | None = None,
    default_doc: str | None = None,
    secret: bool = False,
) -> T: ...


@overload
def setting(
    env: str,
    *,
    factory: Callable[[], T],
    help: str,
    group: str,
    check: Rule | None = None,
    parse: Callable[[str], T] | None = None,
    default_doc: str,
    secret: bool = False,
) -> T: ...


def setting(
    env: str,
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    factory: Callable[[], Any] | None = None,
    group: str,
    check: Rule | None = None,
    parse: Callable[[str], Any] | None = None,
    default_doc: str | None = None,
    secret: bool = False,
) -> Any:
    """Declare one field of a settings dataclass. `check` is what the setting may be (a
    `between`, `at_least`, `one_of`, `text_format`... of queen_timers.setting_rules; a bool
    needs none, its type is its rule), checked before anything starts. `factory` computes a
    default at resolution (`default_doc` then says how it reads in help); `parse` replaces the
    annotation's parser; `secret` keeps the value out of repr() and out of refusals."""
    decl = _Declaration(env, help, group, parse, default_doc, check, secret)
    if factory is not None:
        return dataclasses.field(default_factory=factory, repr=not secret, metadata={_KEY: decl})
    return dataclasses.field(default=default, repr=not secret, metadata={_KEY: decl})


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    # An empty text is "unset" for an optional setting, whatever its type.
    return lambda v: None if v == "" else parse(v)


def _parser_for(annotation: Any) -> Callable[[str], Any]:
    """The parser of a setting's text, by the field's annotation."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return _optional(_parser_for(args[0]))
    if annotation is bool:
        return parse_bool
    if annotation in (int, float, str):
        return typing.cast(Callable[[str], Any], annotation)
    raise TypeError(f"no parser for a setting of type {annotation!r}; give setting(parse=...)")


def _kind_of(annotation: Any) -> tuple[type, bool]:
    """(the type of a setting's values, whether it may be unset) by its annotation."""
    optional = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        annotation = args[0] if len(args) == 1 else object
    origin = typing.get_origin(annotation)
    kind = origin if isinstance(origin, type) else annotation
    return (kind if isinstance(kind, type) else object), optional


@dataclasses.dataclass(frozen=True)
class Setting:
    """One declared setting, as help, docs and resolution see it."""

    name: str  # the field's name, also the CLI flag (--name-with-dashes)
    env: str
    default: Any  # the value, or a callable computing it (a field's default_factory)
    help: str
    parse: Callable[[str], Any]
    group: str
    default_doc: str | None = None  # how a computed default reads in help and docs
    rule: Rule | None = None  # what it may be (None: undeclared, which the suite refuses)
    kind: type = object  # the type of its values, unset aside
    optional: bool = False  # may be unset (None)
    secret: bool = False
    custom_parse: bool = False  # parsed by its declaration's `parse`, not by its type

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default

    def default_text(self) -> str:
        if self.default_doc is not None:
            return self.default_doc
        d = self.default_value()
        return "(unset)" if d is None else str(d)

    def allowed_text(self) -> str:
        """What the setting may be, in words, with why when the limit is a real one."""
        if self.rule is None:
            return "(no rule declared)"
        text = self.rule.allowed(self.kind)
        if self.optional:
            text += ", or unset"
        return f"{text} ({self.rule.why})" if self.rule.why else text

    def refused(self, value: Any, reason: str = "") -> SettingRefused:
        """The one-line refusal of `value` (as given: text or a value)."""
        if self.secret:
            shown = "(hidden)"
        elif self.rule is not None:
            shown = self.rule.shown(value)
        else:
            shown = str(value)
        line = f"{self.flag} / {self.env} = {shown}: must be {self.allowed_text()}"
        return SettingRefused(f"{line}; {reason}" if reason else line)

    def check(self, value: Any, given: Any = None) -> Any:
        """`value` when its rule allows it, else SettingRefused showing `given` (the text it
        was parsed from; default: the value)."""
        if value is None and self.optional:
            return value
        if self.rule is not None:
            reason = self.rule.refusal(value, self.kind)
            if reason is not None:
                raise self.refused(value if given is None else given, reason)
        return value

    def resolve(self, overrides: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
        if overrides.get(self.name) is not None:
            raw = overrides[self.name]
        elif environ.get(self.env, "") != "":
            raw = environ[self.env]
        else:
            return self.check(self.default_value())
        if not isinstance(raw, str):
            return self.check(raw)
        try:
            value = self.parse(raw)
        except ValueError as exc:
            # A declaration's own parser says what is wrong; int("abc")'s words do not help.
            raise self.refused(raw, str(exc) if self.custom_parse else "") from None
        return self.check(value, given=raw)


@functools.cache
def declared(cls: type) -> tuple[Setting, ...]:
    """The settings a settings dataclass declares, in field order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        decl = f.metadata.get(_KEY)
        if decl is None:
            continue
        default: Any = f.default if f.default_factory is dataclasses.MISSING else f.default_factory
        parse = decl.parse or _parser_for(hints[f.name])
        kind, optional = _kind_of(hints[f.name])
        rule = decl.check if decl.check is not None or kind is not bool else BOOLEAN
        out.append(
            Setting(
                f.name,
                decl.env,
                default,
                decl.help,
                parse,
                decl.group,
                decl.default_doc,
                rule,
                kind,
                optional,
                decl.secret,
                decl.parse is not None,
            )
        )
    return tuple(out)


def cross_rules(cls: type) -> tuple[Cross, ...]:
    """The rules a settings dataclass declares over several of its settings."""
    return tuple(getattr(cls, "cross_rules", ()))


def check_cross(cls: type, obj: object) -> None:
    """Refuse (SettingRefused) a combination of `obj`'s settings its class's cross rules
    forbid; the line names the first setting of the rule and shows the others."""
    by_name = {s.name: s for s in declared(cls)}
    for rule in cross_rules(cls):
        values = [getattr(obj, n) for n in rule.names]
        if rule.holds(*values):
            continue
        first = by_name[rule.first]
        others = ", ".join(
            f"{by_name[n].env} = {'(hidden)' if by_name[n].secret else v}"
            for n, v in zip(rule.names[1:], values[1:], strict=True)
            if rule.show_others
        )
        shown = "(hidden)" if first.secret else str(values[0])
        line = f"{first.flag} / {first.env} = {shown}: must be {rule.describe}"
        raise SettingRefused(f"{line} ({others})" if others else line)


def _fill(cls: type, obj: object, overrides: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    for s in declared(cls):
        object.__setattr__(obj, s.name, s.resolve(overrides, environ))
    check_cross(cls, obj)


def resolve(cls: type[S], overrides: Mapping[str, Any], environ: Mapping[str, str]) -> S:
    """An instance of the settings dataclass `cls`, every field resolved (override >
    environment > default) and checked against its rule; overrides naming none of its fields
    are ignored here."""
    obj = object.__new__(cls)
    _fill(cls, obj, overrides, environ)
    return obj


# PostgreSQL's largest field value (bytea, text, jsonb): 1 GB.
_PG_FIELD_MAX = 2**30 - 1


def _check_path(value: str) -> None:
    if not value.strip():
        raise ValueError("an empty path")


_POSTGRES_URL = text_format(
    "a PostgreSQL URL (postgresql://user:password@host:5432/dbname)",
    parse_database_url,
    show=redacted,
)


def _check_networks(value: str) -> None:
    ip_networks(value)


def _check_aes_key(value: str) -> None:
    try:
        key = bytes.fromhex(value.strip())
    except ValueError:
        raise ValueError("not hexadecimal") from None
    if len(key) != 32:
        raise ValueError(f"{len(key)} bytes")


def _check_hs256_secret(value: str) -> None:
    if len(value.encode()) < 32:
        raise ValueError("too short")


def _check_public_key(value: str) -> None:
    # Imported only when a key is given: most brokers never load cryptography's PEM reader.
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    pem = value
    if value.startswith("@"):
        try:
            pem = Path(value[1:]).read_text()
        except OSError as exc:
            raise ValueError(f"cannot read {value[1:]}: {exc.strerror or exc}") from None
    try:
        load_pem_public_key(pem.encode())
    except (ValueError, TypeError):
        raise ValueError("not a PEM public key") from None


def _check_claim(value: str) -> None:
    if not value or value != value.strip():
        raise ValueError("an empty name, or spaces around it")


_CLAIM_NAME = text_format("a JWT claim name (not empty)", _check_claim)


def _data_dir_fits(data_dir: str, database_url: str | None) -> bool:
    if database_url:
        return True  # no embedded server, no socket in the data directory
    return len(str(Path(data_dir).expanduser().absolute())) <= MAX_DATA_DIR_CHARS


@dataclasses.dataclass(frozen=True, init=False)
class Settings:
    """The broker's resolved settings: typed, immutable after construction.

    `Settings(overrides, environ=..., extra=(HttpSettings, ...))`: `overrides` maps setting
    names to values (text is parsed, anything else is taken as it is); `environ` defaults to
    os.environ; `extra` names the settings dataclasses of transports, whose names an override
    may then use too (an override naming no declared setting is refused). Transports read their
    own with `queen_timers.transport.own_settings`.
    """

    # What transports resolve their own settings from, and what they resolved to.
    _overrides: Mapping[str, Any] = dataclasses.field(init=False, repr=False, compare=False)
    _environ: Mapping[str, str] = dataclasses.field(init=False, repr=False, compare=False)
    _sections: dict[type, Any] = dataclasses.field(init=False, repr=False, compare=False)

    # Rules over several settings, checked with the settings' own rules.
    cross_rules: ClassVar[tuple[Cross, ...]] = (
        at_most_setting("pool_min", "pool_max"),
        at_most_setting("pop_default_batch", "pop_max_batch"),
        at_most_setting("pop_poll_min_ms", "pop_poll_max_ms"),
        at_most_setting("sweeper_min_sleep_ms", "sweeper_max_sleep_ms"),
        at_most_setting("sweeper_empty_claim_min_ms", "sweeper_empty_claim_max_ms"),
        at_most_setting("sweeper_backoff_min_ms", "sweeper_backoff_max_ms"),
        Cross(
            ("data_dir", "database_url"),
            f"at most {MAX_DATA_DIR_CHARS} characters long (as an absolute path) when "
            "--database-url is unset: PostgreSQL's Unix socket lives inside it, and a socket "
            "path is limited to about 107 bytes",
            _data_dir_fits,
            show_others=False,
        ),
    )

    # -- database -----------------------------------------------------------------------------
    database_url: str | None = setting(
        "QUEEN_DATABASE_URL",
        None,
        "PostgreSQL URL (>= 14). Unset: start the embedded PostgreSQL in --data-dir.",
        group="database",
        check=_POSTGRES_URL,
    )
    data_dir: str = setting(
        "QUEEN_DATA_DIR",
        factory=default_data_dir,
        help="Data directory of the embedded PostgreSQL (persistent; keep the path short).",
        group="database",
        check=text_format("a directory path", _check_path),
        default_doc="$XDG_DATA_HOME/queen/pg or ~/.local/share/queen/pg",
    )
    pool_min: int = setting(
        "QUEEN_POOL_MIN",
        2,
        "Minimum connections in the pool.",
        group="database",
        check=at_least(0, "0: connections open on demand"),
    )
    pool_max: int = setting(
        "QUEEN_POOL_MAX",
        20,
        "Maximum connections in the pool.",
        group="database",
        check=at_least(1, "a pool serves nothing without a connection"),
    )
    statement_timeout_ms: int = setting(
        "QUEEN_STATEMENT_TIMEOUT_MS",
        30000,
        "statement_timeout of every pooled connection (ms, 0 = none).",
        group="database",
        check=between(0, PG_INT4_MAX, "PostgreSQL's statement_timeout is a 32-bit count of ms"),
    )
    listen_database_url: str | None = setting(
        "QUEEN_LISTEN_DATABASE_URL",
        None,
        "Direct PostgreSQL URL of the LISTEN connection (cross-broker wake-ups), for a "
        "QUEEN_DATABASE_URL that goes through a transaction pooler. Unset: QUEEN_DATABASE_URL.",
        group="database",
        check=_POSTGRES_URL,
    )
    read_database_url: str | None = setting(
        "QUEEN_READ_DATABASE_URL",
        None,
        "PostgreSQL URL of a replica (hosts with target_session_attrs=standby or "
        "prefer-standby) for the operator's reads: peek, list, count, the queue overviews and "
        "the histogram; each answer says how stale it may be (replicaLagMs). Writes, the fire "
        "and pops stay on QUEEN_DATABASE_URL. Unset: every read goes to QUEEN_DATABASE_URL.",
        group="database",
        check=_POSTGRES_URL,
    )
    pooler_prepared_statements: bool = setting(
        "QUEEN_POOLER_PREPARED_STATEMENTS",
        False,
        "The pooler in front of PostgreSQL keeps prepared statements (PgBouncer >= 1.21 with "
        "max_prepared_statements > 0): keep asyncpg's statement cache on behind it. False: "
        "off behind a detected pooler (each statement is parsed every time).",
        group="database",
    )
    pooler_command_timeout_ms: int = setting(
        "QUEEN_POOLER_COMMAND_TIMEOUT_MS",
        35000,
        "Behind a detected pooler, how long the broker waits for the answer to a statement, "
        "the pooler's queue included, before it gives up (503 unavailable; ms, 0 = no bound). "
        "Keep it above the role's statement_timeout, which is not sent through a pooler.",
        group="database",
        check=at_least(0),
    )
    # -- log ----------------------------------------------------------------------------------
    encryption_key: str | None = setting(
        "QUEEN_ENCRYPTION_KEY",
        None,
        "AES-256-GCM key, 64 hex characters. Required before a queue may enable encryption.",
        group="log",
        check=text_format("64 hex characters", _check_aes_key, why="an AES-256 key is 32 bytes"),
        secret=True,
    )
    zstd_level: int = setting(
        "QUEEN_ZSTD_LEVEL",
        3,
        "zstd level of log segments (3: the reference's recipe level; any level decodes).",
        group="log",
        check=between(1, 22, "zstd's compression levels"),
    )
    max_payload_bytes: int = setting(
        "QUEEN_MAX_PAYLOAD_BYTES",
        1048576,
        "Largest payload of one pushed message, in bytes.",
        group="log",
        check=between(1, _PG_FIELD_MAX, "PostgreSQL's largest value is 1 GB"),
    )
    pop_lease_seconds: int | None = setting(
        "QUEEN_POP_LEASE_SECONDS",
        None,
        "Lease of a pop when the queue has none configured (unset: the queue's lease_time).",
        group="log",
        check=between(1, PG_INT4_MAX, "a PostgreSQL integer"),
    )
    pop_default_batch: int = setting(
        "QUEEN_POP_DEFAULT_BATCH",
        200,
        "Batch size of a pop that names none (the reference's autopilot default).",
        group="log",
        check=at_least(1),
    )
    retention_interval_ms: int = setting(
        "QUEEN_RETENTION_INTERVAL_MS",
        5000,
        "Period of the retention/maintenance loop (ms, 0 = off).",
        group="log",
        check=at_least(0),
    )
    partition_cleanup_days: int = setting(
        "QUEEN_PARTITION_CLEANUP_DAYS",
        7,
        "Idle days after which an empty, unleased partition is removed.",
        group="log",
        check=at_least(1, "a partition idle for less than a day may be in use"),
    )
    pop_max_batch: int = setting(
        "QUEEN_POP_MAX_BATCH",
        10000,
        "Largest batch one pop may ask for.",
        group="log",
        check=at_least(1),
    )
    pop_max_partitions: int = setting(
        "QUEEN_POP_MAX_PARTITIONS",
        64,
        "Most partitions one pop may claim (one lease id over all of them).",
        group="log",
        check=at_least(1),
    )
    pop_poll_min_ms: int = setting(
        "QUEEN_POP_POLL_MIN_MS",
        50,
        "First re-check interval of a parked long-poll pop (ms); doubles up to the max. "
        "Covers lease expiries and lost wake-ups.",
        group="log",
        check=at_least(1, "0 would re-check without pause"),
    )
    pop_poll_max_ms: int = setting(
        "QUEEN_POP_POLL_MAX_MS",
        1000,
        "Longest re-check interval of a parked long-poll pop (ms).",
        group="log",
        check=at_least(1),
    )
    dlq_max_limit: int = setting(
        "QUEEN_DLQ_MAX_LIMIT",
        1000,
        "Largest page of a dead-letter listing.",
        group="log",
        check=at_least(1),
    )
    retention_batch_rows: int = setting(
        "QUEEN_RETENTION_BATCH_ROWS",
        500,
        "Rows one retention/purge/cleanup step deletes before it commits and loops.",
        group="log",
        check=at_least(1),
    )
    txns_min_retention_s: int = setting(
        "QUEEN_TXNS_MIN_RETENTION_S",
        900,
        "Floor of how long txn hashes are kept (s): the purge keeps max(dedup window, "
        "completed retention, this).",
        group="log",
        check=at_least(0),
    )
    # -- timers -------------------------------------------------------------------------------
    timers_max_ops_per_call: int = setting(
        "QUEEN_TIMERS_MAX_OPS_PER_CALL",
        256,
        "Most timer ops in one call.",
        group="timers",
        check=at_least(1),
    )
    timers_max_payload_bytes: int = setting(
        "QUEEN_TIMERS_MAX_PAYLOAD_BYTES",
        1048576,
        "Largest decoded timer payload, in bytes.",
        group="timers",
        check=between(1, _PG_FIELD_MAX, "PostgreSQL's largest value is 1 GB"),
    )
    timers_max_horizon_s: int = setting(
        "QUEEN_TIMERS_MAX_HORIZON_S",
        7776000,
        "Longest delayMs accepted, in seconds (90 days).",
        group="timers",
        check=at_least(1),
    )
    timers_schedule_inflight: int = setting(
        "QUEEN_TIMERS_SCHEDULE_INFLIGHT",
        4,
        "Schedule statements one tenant has in flight at once; that tenant's calls arriving "
        "while all are busy share the next one (group commit). Per tenant, so a tenant whose "
        "statements wait holds back only its own calls. 0: every call is its own statement.",
        group="timers",
        check=at_least(0),
    )
    timers_schedule_batch_ops: int = setting(
        "QUEEN_TIMERS_SCHEDULE_BATCH_OPS",
        256,
        "Most ops of merged schedule calls in one statement.",
        group="timers",
        check=at_least(1),
    )
    # The lock bound: an application may hold its timer rows in an open SQL API transaction
    # for as long as it likes; a broker call on those keys gives up after this long instead
    # of pinning a pooled connection until the statement timeout (migrations/029). 200 ms is
    # far above any statement of the broker's own that holds those rows (a 256-op write
    # takes ~13 ms, a fire batch tens) and far below the 30 s statement timeout.
    timers_lock_wait_ms: int = setting(
        "QUEEN_TIMERS_LOCK_WAIT_MS",
        200,
        "Longest a timer schedule or cancel waits on a timer row another transaction holds "
        "(ms); past it the call is refused 503 timers_busy (reason timer_locked, "
        "Retry-After) and changes nothing. 0: wait up to the statement timeout.",
        group="timers",
        check=between(0, PG_INT4_MAX, "PostgreSQL's lock_timeout is a 32-bit count of ms"),
    )
    # Recurring schedules (docs/guides/schedules.md). The floor stops an `everyMs: 1` from
    # turning one upsert into a thousand fires a second; a second is the finest cadence the
    # sweeper's one-second fallback poll keeps on time without a wake-up.
    schedules_min_interval_ms: int = setting(
        "QUEEN_SCHEDULES_MIN_INTERVAL_MS",
        1000,
        "Shortest gap between two occurrences of one schedule (ms); a schedule whose cadence "
        "is shorter is refused 400 schedule_too_frequent. Applies to every tenant.",
        group="schedules",
        check=at_least(1),
    )
    # Quartz's misfire threshold and APScheduler's grace time are both measured in seconds to
    # a minute; a minute rides out a broker restart without calling an occurrence missed.
    schedules_misfire_grace_ms: int = setting(
        "QUEEN_SCHEDULES_MISFIRE_GRACE_MS",
        60000,
        "An occurrence fired later than this after its due time is missed, and the "
        "schedule's catch-up policy (skip, once, all) decides whether it is delivered (ms).",
        group="schedules",
        check=at_least(0),
    )
    # -- webhooks -------------------------------------------------------------------------------
    webhook_allow_networks: str = setting(
        "QUEEN_WEBHOOK_ALLOW_NETWORKS",
        "",
        "Networks a webhook target may reach beyond the public internet: CIDRs separated by "
        "commas (e.g. 127.0.0.1/32,10.1.0.0/16). Empty: loopback, private, link-local and "
        "reserved addresses are refused (docs/guides/webhooks.md).",
        group="webhooks",
        check=text_format(
            "CIDRs separated by commas", _check_networks, why="it is parsed as IP networks"
        ),
    )
    # The fair share: one tenant's timer writes and cancels hold at most this share of the
    # pool, so a tenant whose calls wait (on its own locks, or on anything) exhausts only its
    # share and the other tenants keep the rest. Half the pool: a single tenant keeps more
    # connections than two cores can use for writes, and another tenant keeps as many.
    timers_tenant_pool_share: float = setting(
        "QUEEN_TIMERS_TENANT_POOL_SHARE",
        0.5,
        "Share of the pool (QUEEN_POOL_MAX) one tenant's timer schedules and cancels may hold "
        "at once, at least one connection; its further calls wait for its own connections, "
        "never for another tenant's. 1: no per-tenant cap.",
        group="timers",
        check=Range(0, 1, above=True, why="a share of the pool: above 0, 1 is all of it"),
    )
    # -- per-tenant quotas (docs/guides/tenants.md) -------------------------------------------
    timers_tenant_max_pending: int | None = setting(
        "QUEEN_TIMERS_TENANT_MAX_PENDING",
        None,
        "Cap on one tenant's pending timers (unset: no cap); a schedule past it is refused "
        "403 timers_quota_exceeded until the measured count is under 90 % of the cap. "
        "`queen tenants set` overrides it per tenant.",
        group="quotas",
        check=at_least(0, "0: every schedule is refused"),
    )
    timers_tenant_writes_per_sec: float | None = setting(
        "QUEEN_TIMERS_TENANT_WRITES_PER_SEC",
        None,
        "Schedule calls per second one tenant may make on one broker, a token bucket of one "
        "token per call (unset: no limit); past it 429 rate_limited with Retry-After.",
        group="quotas",
        check=above(0, "a rate of 0 would refuse every call forever"),
    )
    timers_tenant_write_burst: int | None = setting(
        "QUEEN_TIMERS_TENANT_WRITE_BURST",
        None,
        "Size of a tenant's token bucket, in calls (unset: one second of "
        "QUEEN_TIMERS_TENANT_WRITES_PER_SEC, at least 1).",
        group="quotas",
        check=at_least(1, "a bucket holds at least one call"),
    )
    timers_tenant_quota_refresh_ms: int = setting(
        "QUEEN_TIMERS_TENANT_QUOTA_REFRESH_MS",
        5000,
        "How often a broker re-measures the pending timers of the capped tenants it serves "
        "and re-reads the overrides (ms); a tenant's first call is measured at once. 0: only "
        "then and on demand (tests).",
        group="quotas",
        check=at_least(0),
    )
    timers_tenant_quota_census_ms: int = setting(
        "QUEEN_TIMERS_TENANT_QUOTA_CENSUS_MS",
        60000,
        "How often a broker measures every capped tenant that has pending timers, also those "
        "scheduling only through the SQL API (ms); 0: never.",
        group="quotas",
        check=at_least(0),
    )
    timers_sql_allow_unbound_roles: bool = setting(
        "QUEEN_TIMERS_SQL_ALLOW_UNBOUND_ROLES",
        False,
        "Let a SQL API role with no tenant binding act as the default tenant even where "
        "tenancy is on (a role is bound, or the broker authenticates tokens); false: such a "
        "role is refused 42501 timers_role_unbound. Published to the database at boot.",
        group="quotas",
    )
    metrics_tenant_labels: int = setting(
        "QUEEN_METRICS_TENANT_LABELS",
        100,
        "Distinct tenants a broker names in the `tenant` label of its per-tenant metrics; "
        'later ones are counted under tenant="other" (bounds the series).',
        group="quotas",
        check=at_least(0),
    )
    # -- sweeper ------------------------------------------------------------------------------
    sweeper: bool = setting(
        "QUEEN_SWEEPER",
        True,
        "Run the sweeper on this broker (false: this broker never fires timers).",
        group="sweeper",
    )
    sweeper_notify: bool = setting(
        "QUEEN_SWEEPER_NOTIFY",
        True,
        "Cross-broker wake-ups by LISTEN/NOTIFY (false: poll-only, for transaction poolers).",
        group="sweeper",
    )
    sweeper_min_sleep_ms: int = setting(
        "QUEEN_SWEEPER_MIN_SLEEP_MS",
        2,
        "Floor of the sweeper's sleep (ms).",
        group="sweeper",
        check=at_least(1, "the sweeper never sleeps less than 1 ms"),
    )
    sweeper_max_sleep_ms: int = setting(
        "QUEEN_SWEEPER_MAX_SLEEP_MS",
        1000,
        "The fallback poll: longest sleep, bounds lateness when a wake-up is lost (ms).",
        group="sweeper",
        check=at_least(1, "0 would poll without pause"),
    )
    sweeper_empty_claim_min_ms: int = setting(
        "QUEEN_SWEEPER_EMPTY_CLAIM_MIN_MS",
        25,
        "Low end of the jittered sleep after an empty claim while work is due (ms).",
        group="sweeper",
        check=at_least(0),
    )
    sweeper_empty_claim_max_ms: int = setting(
        "QUEEN_SWEEPER_EMPTY_CLAIM_MAX_MS",
        200,
        "High end of the jittered sleep after an empty claim while work is due (ms).",
        group="sweeper",
        check=at_least(0),
    )
    sweeper_lease_ms: int = setting(
        "QUEEN_SWEEPER_LEASE_MS",
        30000,
        "Claim lease (ms); a cycle stops claiming at half of it.",
        group="sweeper",
        check=between(2, PG_INT4_MAX, "a cycle claims for half of it; a PostgreSQL integer"),
    )
    sweeper_claim_batch: int = setting(
        "QUEEN_SWEEPER_CLAIM_BATCH",
        1000,
        "Rows per claim.",
        group="sweeper",
        check=at_least(1),
    )
    sweeper_cycle_max_rows: int = setting(
        "QUEEN_SWEEPER_CYCLE_MAX_ROWS",
        5000,
        "Row budget of one sweeper cycle.",
        group="sweeper",
        check=at_least(1),
    )
    sweeper_due_cap: int = setting(
        "QUEEN_SWEEPER_DUE_CAP",
        2000,
        "Cap of the due count in the probe.",
        group="sweeper",
        check=at_least(1),
    )
    sweeper_max_fire_bytes: int = setting(
        "QUEEN_SWEEPER_MAX_FIRE_BYTES",
        8 * 1024 * 1024,
        "Largest estimated size of one fire transaction (bytes).",
        group="sweeper",
        check=at_least(1),
    )
    sweeper_max_attempts: int = setting(
        "QUEEN_SWEEPER_MAX_ATTEMPTS",
        5,
        "Permanent failures before a timer goes to the dead-letter queue.",
        group="sweeper",
        check=at_least(1, "the first failure is an attempt"),
    )
    sweeper_parallelism: int = setting(
        "QUEEN_SWEEPER_PARALLELISM",
        1,
        "Parallel drain workers of one sweeper.",
        group="sweeper",
        check=between(1, 8, "the drain workers one sweeper runs"),
    )
    sweeper_fire_rate_per_tenant: int = setting(
        "QUEEN_SWEEPER_FIRE_RATE_PER_TENANT",
        50,
        "Rows per tenant per shard in one claim (capped by the per-shard share).",
        group="sweeper",
        check=at_least(1),
    )
    sweeper_backoff_min_ms: int = setting(
        "QUEEN_SWEEPER_BACKOFF_MIN_MS",
        1000,
        "First backoff after a permanent failure (ms), doubled per attempt.",
        group="sweeper",
        check=at_least(0),
    )
    sweeper_backoff_max_ms: int = setting(
        "QUEEN_SWEEPER_BACKOFF_MAX_MS",
        60000,
        "Longest backoff after a permanent failure (ms).",
        group="sweeper",
        check=at_least(0),
    )
    sweeper_transient_backoff_ms: int = setting(
        "QUEEN_SWEEPER_TRANSIENT_BACKOFF_MS",
        1000,
        "Backoff after a transient failure (ms, no attempt spent).",
        group="sweeper",
        check=at_least(0),
    )
    sweeper_isolate_on_permanent: bool = setting(
        "QUEEN_SWEEPER_ISOLATE_ON_PERMANENT",
        True,
        "Replay a failed multi-segment fire one segment per call.",
        group="sweeper",
    )
    sweeper_listen_keepalive_ms: int = setting(
        "QUEEN_SWEEPER_LISTEN_KEEPALIVE_MS",
        5000,
        "Keepalive period of the LISTEN connection (ms).",
        group="sweeper",
        check=at_least(1),
    )
    notify_queue_interval_ms: int = setting(
        "QUEEN_NOTIFY_QUEUE_INTERVAL_MS",
        10,
        "Least time between two cross-broker 'queue has messages' NOTIFYs of one broker "
        "(ms); the queues pushed meanwhile travel together.",
        group="sweeper",
        check=at_least(0),
    )
    switches_refresh_ms: int = setting(
        "QUEEN_SWITCHES_REFRESH_MS",
        500,
        "How often a broker re-reads the kill switches (ms).",
        group="sweeper",
        check=at_least(1, "0 would re-read without pause"),
    )
    # -- identity -----------------------------------------------------------------------------
    jwt_secret: str | None = setting(
        "QUEEN_JWT_SECRET",
        None,
        "HS256 secret for bearer tokens (unset with no public key: no authentication).",
        group="identity",
        check=text_format(
            "a text of at least 32 bytes",
            _check_hs256_secret,
            why="RFC 7518 3.2: an HS256 key is at least the hash's 256 bits",
        ),
        secret=True,
    )
    jwt_public_key: str | None = setting(
        "QUEEN_JWT_PUBLIC_KEY",
        None,
        "PEM public key (or @path) for RS256/EdDSA bearer tokens.",
        group="identity",
        check=text_format("a PEM public key, or @path of a file holding one", _check_public_key),
    )
    jwt_tenant_claim: str = setting(
        "QUEEN_JWT_TENANT_CLAIM",
        "tenant",
        "JWT claim carrying the tenant UUID (absent: the default tenant).",
        group="identity",
        check=_CLAIM_NAME,
    )
    jwt_admin_claim: str = setting(
        "QUEEN_JWT_ADMIN_CLAIM",
        "admin",
        "JWT claim that must be true to flip the kill switches.",
        group="identity",
        check=_CLAIM_NAME,
    )

    def __init__(
        self,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        extra: Iterable[type] = (),
    ):
        overrides = dict(overrides or {})
        env = os.environ if environ is None else environ
        sections = tuple(dict.fromkeys(extra))
        known = {s.name for cls in (Settings, *sections) for s in declared(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        _fill(Settings, self, overrides, env)
        object.__setattr__(self, "_overrides", overrides)
        object.__setattr__(self, "_environ", env)
        # A transport's bad value fails here, at construction, like a core one.
        object.__setattr__(
            self, "_sections", {cls: resolve(cls, overrides, env) for cls in sections}
        )

    def section(self, cls: type[S]) -> S:
        """The settings dataclass `cls` resolved from the same overrides and environment (a
        class not named in `extra` sees the environment and its defaults only)."""
        found = self._sections.get(cls)
        if found is None:
            found = resolve(cls, self._overrides, self._environ)
            self._sections[cls] = found
        return typing.cast(S, found)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some settings changed (values, not text); a transport's setting named
        in `extra` may be changed too."""
        own = {s.name for s in declared(Settings)}
        sections = {s.name for cls in self._sections for s in declared(cls)}
        unknown = set(changes) - own - sections
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        new = object.__new__(Settings)
        for s in declared(Settings):
            value = s.check(changes[s.name]) if s.name in changes else getattr(self, s.name)
            object.__setattr__(new, s.name, value)
        check_cross(Settings, new)
        overrides = {**self._overrides, **{k: v for k, v in changes.items() if k in sections}}
        object.__setattr__(new, "_overrides", overrides)
        object.__setattr__(new, "_environ", self._environ)
        object.__setattr__(
            new,
            "_sections",
            {cls: resolve(cls, overrides, self._environ) for cls in self._sections},
        )
        return new

    def as_dict(self) -> dict[str, Any]:
        return {s.name: getattr(self, s.name) for s in declared(Settings)}
