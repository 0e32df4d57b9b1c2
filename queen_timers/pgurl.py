"""What a database URL says, checked before anything connects with it (and when the settings
are resolved).

asyncpg parses a URL only when it connects and then answers a malformed one with messages that
name neither the setting nor the form it wants ("invalid literal for int()"); the broker
checks the URL first, so a person reads which setting to fix and what shape it takes.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

__all__ = ["BadDatabaseUrl", "Target", "parse_database_url", "redacted"]

_SCHEMES = ("postgresql", "postgres")
_DEFAULT_PORT = 5432


class BadDatabaseUrl(ValueError):
    """A database URL that is not a PostgreSQL URL; the message says why."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a URL points: a host (or a Unix socket directory) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        if self.host.startswith("/"):
            return f"the Unix socket in {self.host} (port {self.port})"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_database_url(url: str) -> Target:
    """The host and port `url` points at; raises BadDatabaseUrl when it is not a PostgreSQL
    URL asyncpg can connect with."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError on a port that is not a number in range
    except ValueError:
        raise BadDatabaseUrl(
            "its port is not a number from 1 to 65535; expected "
            "postgresql://user:password@host:5432/dbname"
        ) from None
    if parts.scheme not in _SCHEMES:
        got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise BadDatabaseUrl(f"{got}; expected postgresql://user:password@host:5432/dbname")
    if not parts.netloc and "host=" not in parts.query:
        raise BadDatabaseUrl("no host; expected postgresql://user:password@host:5432/dbname")
    query = urllib.parse.parse_qs(parts.query)
    host = parts.hostname or (query.get("host") or ["localhost"])[0]
    if port is None and query.get("port"):
        try:
            port = int(query["port"][0])
        except ValueError:
            raise BadDatabaseUrl(f"port {query['port'][0]!r} is not a number") from None
    return Target(host, port or _DEFAULT_PORT)


def redacted(url: str) -> str:
    """`url` with its password replaced by `***`, for printing."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    user = urllib.parse.unquote(parts.username or "")
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
