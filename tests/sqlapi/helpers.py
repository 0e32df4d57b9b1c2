"""Small helpers of the SQL API tests."""

from __future__ import annotations


async def set_limit(conn, name: str, value) -> None:
    """Set one value of the SQL API's limits row, as an operator would."""
    await conn.execute(
        "INSERT INTO queen.system_state AS s (key, value) VALUES ('timers_sql_limits', $1)"
        " ON CONFLICT (key) DO UPDATE SET value = s.value || excluded.value",
        {name: value},
    )


def with_user(url: str, user: str) -> str:
    """The same URL, logging in as `user` (no password: the test server trusts its socket)."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))
