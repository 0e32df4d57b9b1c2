"""What a setting may be: the rule each `setting(...)` declares with `check=`, and the rules
that tie two settings together (a settings class's `cross_rules`).

A rule answers two questions: what is allowed, in words (`queen serve --help` and the docs'
settings page print it), and whether one value is allowed (None, or why not). Settings are
checked as they are resolved, so a value out of range refuses at construction, before
PostgreSQL, the sweeper or a listener starts, with one line naming the setting's flag, its
environment variable, the value given and what is allowed.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "BOOLEAN",
    "PG_INT4_MAX",
    "Cross",
    "Format",
    "OneOf",
    "Range",
    "Rule",
    "SettingRefused",
    "above",
    "at_least",
    "at_most_setting",
    "between",
    "host_name",
    "one_of",
    "text_format",
]

# PostgreSQL stores a 4-byte integer (int4, and GUCs such as statement_timeout) up to this.
PG_INT4_MAX = 2**31 - 1


class SettingRefused(ValueError):
    """A setting's value breaks its declared rule; the message is the one line a person reads
    (`--flag / ENV = value: must be ...`)."""


class Rule:
    """What one setting may be. `why` says where a real limit comes from."""

    why: str | None = None

    def allowed(self, kind: type) -> str:
        """What is allowed, in words, for a setting whose values are of type `kind`."""
        raise NotImplementedError

    def refusal(self, value: Any, kind: type) -> str | None:
        """None when `value` (already parsed) is allowed, else a few words on why not (an
        empty text: only the rule's own wording applies)."""
        raise NotImplementedError

    def shown(self, value: Any) -> str:
        """How a refused value reads in the refusal line."""
        text = str(value)
        return repr(text) if text == "" or text != text.strip() or " " in text else text


def _number_words(kind: type) -> str:
    return "an integer" if kind is int else "a number"


def _typed(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is int:
        return isinstance(value, int)
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)


@dataclasses.dataclass(frozen=True)
class Range(Rule):
    """A number from `low` to `high` (either bound may be absent); `above` makes `low`
    exclusive (a rate above 0)."""

    low: float | None = None
    high: float | None = None
    above: bool = False
    why: str | None = None

    def allowed(self, kind: type) -> str:
        what = _number_words(kind)
        if self.low is not None and self.high is not None:
            return f"{what} from {self.low} to {self.high}"
        if self.low is not None:
            return f"{what} above {self.low}" if self.above else f"{what} of at least {self.low}"
        if self.high is not None:
            return f"{what} of at most {self.high}"
        return what

    def refusal(self, value: Any, kind: type) -> str | None:
        if not _typed(value, kind):
            return ""
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return ""
        if self.high is not None and value > self.high:
            return ""
        return None


@dataclasses.dataclass(frozen=True)
class OneOf(Rule):
    """One of a few named values."""

    values: tuple[Any, ...]
    why: str | None = None

    def allowed(self, kind: type) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)

    def refusal(self, value: Any, kind: type) -> str | None:
        return None if value in self.values else ""


@dataclasses.dataclass(frozen=True)
class Format(Rule):
    """A text of some shape. `check` raises ValueError (its message says what is wrong) on a
    value of the wrong shape; `show` is how a refused value reads (a URL without its
    password, say)."""

    describe: str
    check: Callable[[Any], object] | None = None
    show: Callable[[str], str] | None = None
    why: str | None = None

    def allowed(self, kind: type) -> str:
        return self.describe

    def refusal(self, value: Any, kind: type) -> str | None:
        if kind is str and not isinstance(value, str):
            return ""
        if self.check is None:
            return None
        try:
            self.check(value)
        except (ValueError, TypeError, OSError) as exc:
            return str(exc)
        return None

    def shown(self, value: Any) -> str:
        if self.show is not None and isinstance(value, str):
            try:
                return self.show(value)
            except ValueError:
                return "(not shown)"
        return super().shown(value)


@dataclasses.dataclass(frozen=True)
class _Boolean(Rule):
    def allowed(self, kind: type) -> str:
        return "true or false (also 1/0, yes/no, on/off)"

    def refusal(self, value: Any, kind: type) -> str | None:
        return None if isinstance(value, bool) else ""


# A boolean setting's rule is its type: every bool declares it without saying so.
BOOLEAN: Rule = _Boolean()


def between(low: float, high: float, why: str | None = None) -> Range:
    """A number from `low` to `high`, both allowed."""
    return Range(low, high, why=why)


def at_least(low: float, why: str | None = None) -> Range:
    return Range(low, None, why=why)


def above(low: float, why: str | None = None) -> Range:
    return Range(low, None, above=True, why=why)


def one_of(*values: Any, why: str | None = None) -> OneOf:
    return OneOf(tuple(values), why=why)


def text_format(
    describe: str,
    check: Callable[[Any], object] | None = None,
    *,
    show: Callable[[str], str] | None = None,
    why: str | None = None,
) -> Format:
    return Format(describe, check, show, why)


_HOST_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?$")


def _check_host(value: str) -> None:
    try:
        ipaddress.ip_address(value.strip("[]"))
        return
    except ValueError:
        pass
    name = value.rstrip(".")
    if not name or len(name) > 253 or not all(_HOST_LABEL.match(p) for p in name.split(".")):
        raise ValueError("")  # the rule's own words say it all


def host_name(why: str | None = None) -> Format:
    """A host name or an IP address (an address to listen on)."""
    return Format("a host name or IP address", _check_host, why=why)


@dataclasses.dataclass(frozen=True)
class Cross:
    """A rule over several settings of one class: `holds(*values)` is False when the
    combination is refused; `first` is the setting the refusal names first, `describe` what
    is allowed."""

    names: tuple[str, ...]
    describe: str
    holds: Callable[..., bool]
    show_others: bool = True  # the refusal shows the other settings' values

    @property
    def first(self) -> str:
        return self.names[0]


def at_most_setting(low: str, high: str) -> Cross:
    """Setting `low` may not exceed setting `high` (a minimum and its maximum)."""
    return Cross(
        (low, high),
        f"at most --{high.replace('_', '-')}",
        lambda lo, hi: lo is None or hi is None or lo <= hi,
    )


def ip_networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """CIDRs (or single addresses) separated by commas; an empty text is none."""
    return tuple(
        ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part.strip()
    )
