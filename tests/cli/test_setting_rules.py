"""Every setting declares what it may be, and a value it may not be is refused at resolution,
from an override (a CLI flag, `Settings(...)` in Python) and from the environment alike, in one
line naming its flag, its environment variable, the value and what is allowed (issue 24, "A bad
setting never starts"). The walk covers the core's settings and every installed transport's,
so a new setting without a rule, or with a rule that refuses nothing, fails here."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from queen_timers.service import Queen
from queen_timers.setting_rules import Format, Range
from queen_timers.settings import Setting, SettingRefused, Settings, cross_rules, declared

from .setting_walk import ALL, CLASSES, bad_values


def cases() -> Iterator[Any]:
    for s in ALL:
        for v in bad_values(s):
            yield pytest.param(s, v, id=f"{s.env}={v}")


def _settings(overrides: dict[str, Any], environ: dict[str, str]) -> Settings:
    return Settings(overrides, environ=environ, extra=CLASSES[1:])


def test_the_walk_covers_the_core_and_the_transports():
    envs = {s.env for s in ALL}
    assert {"QUEEN_ZSTD_LEVEL", "QUEEN_HTTP_PORT", "QUEEN_TCP_PORT", "QUEEN_LINEJSON_PORT"} <= envs


@pytest.mark.parametrize("s", ALL, ids=lambda s: s.env)
def test_every_setting_declares_a_rule_that_refuses_something(s):
    assert s.rule is not None, f"{s.name}: declare setting(..., check=...)"
    assert bad_values(s), f"{s.env}: no value its rule refuses (a format: add to MALFORMED_TEXT)"
    assert "no rule" not in s.allowed_text()
    s.check(s.default_value())  # the default itself is allowed


def _assert_refusal_line(exc: SettingRefused, s: Setting, shown: str) -> None:
    line = str(exc)
    assert "\n" not in line
    assert line.startswith(f"{s.flag} / {s.env} = {shown}: must be {s.allowed_text()}"), line


@pytest.mark.parametrize(("s", "value"), list(cases()))
def test_a_value_out_of_range_is_refused_from_an_override_and_the_environment(s, value):
    # A text with spaces is quoted, so where it begins and ends shows.
    shown = "(hidden)" if s.secret else (repr(value) if " " in value else value)
    if s.env.endswith("DATABASE_URL") and "@" in value:
        shown = value  # no password in these examples: shown as given
    with pytest.raises(SettingRefused) as by_override:
        _settings({s.name: value}, {})
    _assert_refusal_line(by_override.value, s, shown)
    with pytest.raises(SettingRefused) as by_environment:
        _settings({}, {s.env: value})
    _assert_refusal_line(by_environment.value, s, shown)


def _allowed_bounds(s: Setting) -> list[Any]:
    rule = s.rule
    assert isinstance(rule, Range)
    out: list[Any] = []
    if rule.low is not None:
        out.append(rule.low + 0.001 if rule.above else rule.low)
    if rule.high is not None:
        out.append(rule.high)
    return [s.kind(v) for v in out]


def _partners(cls: type, s: Setting, value: Any) -> dict[str, Any]:
    """Values of the settings a cross rule ties to `s` under which `value` is allowed."""
    by_name = {x.name: x for x in declared(cls)}
    out: dict[str, Any] = {}
    for rule in cross_rules(cls):
        if s.name not in rule.names or len(rule.names) != 2:
            continue
        other = by_name[next(n for n in rule.names if n != s.name)]
        if other.kind is not s.kind:
            continue
        for candidate in (other.default_value(), value, *_allowed_bounds(other)):
            pair = {s.name: value, other.name: candidate}
            try:
                other.check(candidate)
            except SettingRefused:
                continue
            if rule.holds(*(pair[n] for n in rule.names)):
                out[other.name] = candidate
                break
    return out


def bound_cases() -> Iterator[Any]:
    for cls in CLASSES:
        for s in declared(cls):
            if isinstance(s.rule, Range):
                for v in _allowed_bounds(s):
                    yield pytest.param(cls, s, v, id=f"{s.env}={v}")


@pytest.mark.parametrize(("cls", "s", "value"), list(bound_cases()))
def test_each_bound_itself_is_allowed(cls, s, value):
    overrides = {s.name: value, **_partners(cls, s, value)}
    text = {k: str(v) for k, v in overrides.items()}
    for given in (overrides, text):  # as a value (Python) and as text (a flag)
        got = _settings(given, {})
        section = got if cls is Settings else got.section(cls)
        assert getattr(section, s.name) == value or math.isclose(getattr(section, s.name), value)


def test_a_minimum_above_its_maximum_is_refused_naming_both():
    with pytest.raises(SettingRefused) as exc:
        Settings({"pool_min": "30"}, environ={"QUEEN_POOL_MAX": "20"})
    assert str(exc.value) == (
        "--pool-min / QUEEN_POOL_MIN = 30: must be at most --pool-max (QUEEN_POOL_MAX = 20)"
    )
    assert Settings({"pool_min": 5, "pool_max": 5}, environ={}).pool_min == 5


def test_a_data_directory_too_long_for_the_socket_matters_only_for_the_embedded_server():
    long_dir = "/tmp/" + "d" * 100
    with pytest.raises(SettingRefused, match=r"^--data-dir / QUEEN_DATA_DIR = /tmp/d+: must be"):
        Settings({"data_dir": long_dir}, environ={})
    url = "postgresql://u@localhost/db"
    assert Settings({"data_dir": long_dir, "database_url": url}, environ={}).data_dir == long_dir


def test_secrets_and_passwords_never_appear_in_a_refusal():
    with pytest.raises(SettingRefused) as key:
        Settings(environ={"QUEEN_ENCRYPTION_KEY": "s3cret-not-hex"})
    assert "s3cret" not in str(key.value) and "(hidden)" in str(key.value)
    with pytest.raises(SettingRefused) as url:
        Settings({"database_url": "postgresql://u:hunter2@h:notaport/db"}, environ={})
    assert "hunter2" not in str(url.value) and "u:***@h" in str(url.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [("pool_max", 1.5), ("pool_max", True), ("sweeper", 1), ("zstd_level", "3x")],
)
def test_a_python_value_of_the_wrong_type_is_refused(name, value):
    with pytest.raises(SettingRefused, match=f"QUEEN_{name.upper()}"):
        Settings({name: value}, environ={})


def test_replace_and_queen_overrides_are_checked_before_anything_starts(tmp_path):
    with pytest.raises(SettingRefused, match="QUEEN_ZSTD_LEVEL = 99"):
        Settings(environ={}).replace(zstd_level=99)
    with pytest.raises(SettingRefused, match="QUEEN_POOL_MIN = 30"):
        Settings(environ={}).replace(pool_min=30)
    with pytest.raises(SettingRefused, match="QUEEN_SWEEPER_PARALLELISM = 9"):
        Queen(data_dir=str(tmp_path / "pg"), sweeper_parallelism=9)
    assert not (tmp_path / "pg").exists()  # refused at construction: no server, no directory


def test_well_formed_texts_are_allowed(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    (tmp_path / "key.pem").write_text(pem)
    good = {
        "QUEEN_DATABASE_URL": "postgresql://app:pw@db.internal:6432/queen?sslmode=require",
        "QUEEN_LISTEN_DATABASE_URL": "postgres:///queen?host=/var/run/postgresql",
        "QUEEN_READ_DATABASE_URL": (
            "postgresql://app:pw@pg1:5432,pg2:5433/queen?target_session_attrs=prefer-standby"
        ),
        "QUEEN_DATA_DIR": "~/q/pg",
        "QUEEN_ENCRYPTION_KEY": "Ab" * 32,
        "QUEEN_JWT_SECRET": "x" * 32,
        "QUEEN_JWT_PUBLIC_KEY": pem,
        "QUEEN_JWT_TENANT_CLAIM": "https://example.com/tenant",
        "QUEEN_JWT_ADMIN_CLAIM": "is_admin",
        "QUEEN_HTTP_HOST": "::1",
        "QUEEN_HTTP_ALLOWED_ORIGINS": "https://app.example, http://localhost:5173",
        "QUEEN_HTTP_ALLOWED_HOSTS": "queen.internal,10.0.0.7",
        "QUEEN_TCP_HOST": "0.0.0.0",
        "QUEEN_LINEJSON_HOST": "broker-1.example.com.",
        "QUEEN_WEBHOOK_ALLOW_NETWORKS": "127.0.0.1/32, 10.1.0.0/16,fd00::/8",
    }
    _settings({}, good)  # every one at once, as a broker reads them
    at_path = _settings({"jwt_public_key": f"@{tmp_path / 'key.pem'}"}, {})
    assert at_path.jwt_public_key == f"@{tmp_path / 'key.pem'}"
    # A new format setting shows a value it allows here too.
    assert {s.env for s in ALL if isinstance(s.rule, Format)} <= set(good)
