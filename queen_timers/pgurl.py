"""What a database URL says, checked before anything connects with it (and when the settings
are resolved).

asyncpg parses a URL only when it connects and then answers a malformed one with messages that
name neither the setting nor the form it wants ("invalid literal for int()"); the broker
checks the URL first, so a person reads which setting to fix and what shape it takes.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

__all__ = ["SESSION_ATTRS", "BadDatabaseUrl", "Target", "parse_database_url", "redacted"]

_SCHEMES = ("postgresql", "postgres")
_DEFAULT_PORT = 5432


class BadDatabaseUrl(ValueError):
    """A database URL that is not a PostgreSQL URL; the message says why."""


# libpq's values of target_session_attrs that asyncpg also knows ("any" is the default).
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")

_EXPECTED = "expected postgresql://user:password@host:5432/dbname"


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a URL points: a host (or a Unix socket directory) and a port, and, for a URL that
    names several hosts (libpq's form, a primary and its standbys), the others in the order a
    connection tries them and the kind of server it accepts (`target_session_attrs`)."""

    host: str
    port: int
    others: tuple[tuple[str, int], ...] = ()
    session_attrs: str = "any"

    @property
    def endpoints(self) -> tuple[tuple[str, int], ...]:
        return ((self.host, self.port), *self.others)

    def __str__(self) -> str:
        named = ", ".join(_endpoint(h, p) for h, p in self.endpoints)
        if self.others or self.session_attrs != "any":
            return f"{named} ({self.session_attrs})"
        return named


def _endpoint(host: str, port: int) -> str:
    if host.startswith("/"):
        return f"the Unix socket in {host} (port {port})"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise BadDatabaseUrl(f"port {text!r} is not a number; {_EXPECTED}") from None
    if not 1 <= port <= 65535:
        raise BadDatabaseUrl(f"port {port} is not from 1 to 65535; {_EXPECTED}")
    return port


def _netloc_hosts(hostlist: str) -> list[tuple[str, int | None]]:
    """`h1:p1,[::1]:p2,h3` as libpq reads it: a port per host, or none (the default)."""
    out: list[tuple[str, int | None]] = []
    for item in hostlist.split(","):
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = _port(rest[1:]) if rest.startswith(":") else None
        elif ":" in item:
            host, _, text = item.rpartition(":")
            port = _port(text)
        else:
            host, port = item, None
        out.append((urllib.parse.unquote(host), port))
    return out


def parse_database_url(url: str) -> Target:
    """Where `url` points; raises BadDatabaseUrl when it is not a PostgreSQL URL asyncpg can
    connect with. Several hosts may be named, in the netloc (`h1:5432,h2:5433`) or in the
    query (`host=a,b&port=1,2`), as libpq takes them."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in _SCHEMES:
        got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise BadDatabaseUrl(f"{got}; {_EXPECTED}")
    query = urllib.parse.parse_qs(parts.query)
    hostlist = parts.netloc.rpartition("@")[2]
    if not hostlist and "host" not in query:
        raise BadDatabaseUrl(f"no host; {_EXPECTED}")
    if hostlist:
        hosts = _netloc_hosts(hostlist)
    else:
        hosts = [(h, None) for h in query["host"][0].split(",")]
    if query.get("port"):
        ports = [_port(p) for p in query["port"][0].split(",")]
        if len(ports) not in (1, len(hosts)):
            raise BadDatabaseUrl(f"{len(hosts)} hosts but {len(ports)} ports; {_EXPECTED}")
        given = ports * len(hosts) if len(ports) == 1 else ports
        hosts = [(h, p if p is not None else q) for (h, p), q in zip(hosts, given, strict=True)]
    resolved = [(h or "localhost", p or _DEFAULT_PORT) for h, p in hosts]
    attrs = (query.get("target_session_attrs") or ["any"])[0]
    if attrs not in SESSION_ATTRS:
        raise BadDatabaseUrl(
            f"target_session_attrs={attrs!r} is not one of {', '.join(SESSION_ATTRS)}"
        )
    (host, port), *others = resolved
    return Target(host, port, tuple(others), attrs)


def redacted(url: str) -> str:
    """`url` with its password replaced by `***`, for printing."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    user = urllib.parse.unquote(parts.username or "")
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
