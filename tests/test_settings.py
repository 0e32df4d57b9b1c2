"""Typed settings: each field's annotation, environment variable, default, group and help live
in one declaration; a value comes from an override, else the environment, else the default."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from queen_timers.settings import Settings, declared, resolve, setting
from queen_timers.transport import own_settings


@dataclasses.dataclass(frozen=True)
class Sample:
    """A transport's settings, declared as transports declare theirs."""

    sample_port: int = setting("QUEEN_SAMPLE_PORT", 7000, "A port.", group="sample")
    sample_ratio: float = setting("QUEEN_SAMPLE_RATIO", 0.5, "A ratio.", group="sample")
    sample_on: bool = setting("QUEEN_SAMPLE_ON", False, "A switch.", group="sample")
    sample_name: str | None = setting("QUEEN_SAMPLE_NAME", None, "A name.", group="sample")
    sample_limit: int | None = setting("QUEEN_SAMPLE_LIMIT", None, "A limit.", group="sample")
    sample_words: tuple[str, ...] = setting(
        "QUEEN_SAMPLE_WORDS",
        (),
        "Words.",
        group="sample",
        parse=lambda v: tuple(v.split(",")),
    )


def test_override_beats_environment_beats_default():
    env = {"QUEEN_POOL_MAX": "7", "QUEEN_POOL_MIN": "3"}
    s = Settings({"pool_max": "9"}, environ=env)
    assert (s.pool_max, s.pool_min, s.statement_timeout_ms) == (9, 3, 30000)
    assert Settings({"pool_max": 11}, environ=env).pool_max == 11  # a value is taken as it is
    assert Settings(environ={"QUEEN_POOL_MAX": ""}).pool_max == 20  # empty is unset


def test_parsing_follows_the_annotation():
    env = {
        "QUEEN_SAMPLE_PORT": "81",
        "QUEEN_SAMPLE_RATIO": "0.25",
        "QUEEN_SAMPLE_ON": "yes",
        "QUEEN_SAMPLE_NAME": "x",
        "QUEEN_SAMPLE_LIMIT": "5",
        "QUEEN_SAMPLE_WORDS": "a,b",
    }
    got = resolve(Sample, {}, env)
    assert got == Sample(81, 0.25, True, "x", 5, ("a", "b"))
    assert resolve(Sample, {}, {}) == Sample()
    assert resolve(Sample, {"sample_name": "", "sample_limit": ""}, {}).sample_limit is None
    core = Settings(environ={"QUEEN_SWEEPER": "off", "QUEEN_POP_LEASE_SECONDS": "12"})
    assert core.sweeper is False and core.pop_lease_seconds == 12


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("QUEEN_POOL_MAX", "many"),
        ("QUEEN_SWEEPER", "maybe"),
        ("QUEEN_POP_LEASE_SECONDS", "soon"),
    ],
)
def test_a_bad_value_names_its_environment_variable(env, value):
    with pytest.raises(ValueError, match=env):
        Settings(environ={env: value})


def test_a_bad_transport_value_fails_at_construction():
    with pytest.raises(ValueError, match="QUEEN_SAMPLE_PORT"):
        Settings(environ={"QUEEN_SAMPLE_PORT": "x"}, extra=(Sample,))


def test_unknown_overrides_are_refused():
    with pytest.raises(ValueError, match="pool_maxx"):
        Settings({"pool_maxx": 1}, environ={})
    with pytest.raises(ValueError, match="sample_port"):
        Settings({"sample_port": 1}, environ={})  # a transport's name, its class not declared
    with pytest.raises(ValueError, match="nope"):
        Settings(environ={}).replace(nope=1)


def test_replace_and_as_dict():
    s = Settings({"sample_port": "81"}, environ={}, extra=(Sample,))
    t = s.replace(pool_max=3, sample_on=True)
    assert (t.pool_max, s.pool_max) == (3, 20)
    assert own_settings(Sample, t) == Sample(sample_port=81, sample_on=True)
    assert own_settings(Sample, s) == Sample(sample_port=81)
    d = t.as_dict()
    assert d["pool_max"] == 3 and set(d) == {x.name for x in declared(Settings)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.pool_max = 1  # type: ignore[misc]


def test_a_transport_reads_its_own_from_the_same_overrides_and_environment():
    env = {"QUEEN_SAMPLE_PORT": "82", "QUEEN_SAMPLE_ON": "1"}
    s = Settings({"sample_ratio": "2"}, environ=env, extra=(Sample,))
    assert own_settings(Sample, s) == Sample(sample_port=82, sample_ratio=2.0, sample_on=True)
    # Built without the declaration (a transport constructed by hand): environment, defaults.
    assert own_settings(Sample, Settings(environ=env)).sample_port == 82


def test_secrets_stay_out_of_repr():
    s = Settings({"jwt_secret": "hunter2" * 5, "encryption_key": "ab" * 32}, environ={})
    assert "hunter2" not in repr(s) and "abab" not in repr(s)
    assert "pool_max=20" in repr(s)


def test_every_default_has_its_fields_type():
    hints = typing.get_type_hints(Settings)
    for s in declared(Settings):
        allowed = typing.get_args(hints[s.name]) or (hints[s.name],)
        assert isinstance(s.default_value(), allowed), s.name
        assert s.env == "QUEEN_" + s.name.upper() and s.help and s.group
