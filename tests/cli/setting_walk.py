"""The walk over every declared setting that tests/cli/test_setting_rules.py and
tests/cli/test_cli_settings_refused.py share: the settings of the core and of each installed
transport, and values each one's rule refuses."""

from __future__ import annotations

from queen_timers.delivery import discover_deliveries
from queen_timers.setting_rules import BOOLEAN, Format, OneOf, Range
from queen_timers.settings import Setting, Settings, declared
from queen_timers.transport import discover, settings_classes

__all__ = ["ALL", "CLASSES", "MALFORMED_TEXT", "bad_values"]

# The core's settings and those of every installed plugin (the dev install has the HTTP and TCP
# transports, the line-JSON example and the webhook delivery).
CLASSES: list[type] = [
    Settings,
    *settings_classes([*discover().values(), *discover_deliveries().values()]),
]
ALL: list[Setting] = [s for cls in CLASSES for s in declared(cls)]

# A malformed value of each setting whose rule is a format (numbers, booleans and named values
# get theirs from their rule). A new format setting must add one here.
MALFORMED_TEXT = {
    "QUEEN_DATABASE_URL": ["http://localhost/db", "postgresql://u@localhost:notaport/db"],
    "QUEEN_LISTEN_DATABASE_URL": ["postgres//nohost/db"],
    "QUEEN_READ_DATABASE_URL": ["postgresql://u@a,b/db?target_session_attrs=leader"],
    "QUEEN_DATA_DIR": ["   "],
    "QUEEN_ENCRYPTION_KEY": ["not-hex", "ab" * 31],
    "QUEEN_JWT_SECRET": ["short-secret"],
    "QUEEN_JWT_PUBLIC_KEY": ["not a pem", "@/nonexistent/queen-key.pem"],
    "QUEEN_JWT_TENANT_CLAIM": [" tenant "],
    "QUEEN_JWT_ADMIN_CLAIM": [" "],
    "QUEEN_HTTP_HOST": ["bad host", "a/b"],
    "QUEEN_HTTP_ALLOWED_ORIGINS": ["*", "ftp://example.com"],
    "QUEEN_HTTP_ALLOWED_HOSTS": ["proxy.example:8080"],
    "QUEEN_TCP_HOST": ["-bad-"],
    "QUEEN_LINEJSON_HOST": ["bad host"],
    "QUEEN_WEBHOOK_ALLOW_NETWORKS": ["10.0.0.0/33", "not-a-network"],
}


def _number_text(kind: type, value: float) -> str:
    return str(int(value)) if kind is int else str(value)


def bad_values(s: Setting) -> list[str]:
    """Text values `s` must refuse: past each bound of its range, not a number, not a boolean,
    or the malformed examples of its format."""
    rule = s.rule
    if isinstance(rule, Range):
        out = ["abc", ""] if s.kind is int else ["abc", "nan", "inf"]
        out = [v for v in out if v]  # an empty text is "unset" (the default)
        if s.kind is int:
            out.append("1.5")
        if rule.low is not None:
            step = 0 if rule.above else (1 if s.kind is int else 0.5)
            out.append(_number_text(s.kind, rule.low - step))
        if rule.high is not None:
            out.append(_number_text(s.kind, rule.high + 1))
        return out
    if rule is BOOLEAN:
        return ["maybe", "2"]
    if isinstance(rule, OneOf):
        return ["none-of-these"]
    if isinstance(rule, Format):
        return MALFORMED_TEXT.get(s.env, [])
    return []
