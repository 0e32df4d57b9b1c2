"""What sits between the broker and PostgreSQL: nothing, or a connection pooler.

A transaction pooler (PgBouncer with `pool_mode = transaction`) lends a server connection for
one transaction at a time, so nothing may outlive a transaction on a connection. What the broker
keeps on a connection, and what it does about each behind a pooler:

- asyncpg's prepared statement cache (named statements, prepared once per connection): off
  behind a pooler, unless QUEEN_POOLER_PREPARED_STATEMENTS says the pooler keeps them itself
  (PgBouncer >= 1.21 with `max_prepared_statements` > 0). With the cache off asyncpg prepares an
  unnamed statement and binds it before its Sync, all on one server connection.
- `statement_timeout` (a startup parameter of every pooled connection): not sent behind a pooler,
  since PgBouncer refuses startup parameters it does not track; the role's own setting applies
  (`ALTER ROLE ... SET statement_timeout`), and boot says so when it differs from ours.
- a bound on each statement: without statement_timeout nothing ends a statement that waits,
  and a pooler queues a statement while it has no server connection to lend (PgBouncer 1.18,
  its logins failing, held the first callers for its query_wait_timeout, 120 s). Behind a
  pooler asyncpg's `command_timeout` is QUEEN_POOLER_COMMAND_TIMEOUT_MS: past it asyncpg
  cancels and raises TimeoutError, which the service answers 503 `unavailable` like a lost
  connection. Like a lost answer it is ambiguous (the statement may have committed just then),
  so a client's retry relies on what makes any retry safe: a push's transactionId is
  deduplicated.
- `application_name` (a startup parameter): PgBouncer tracks it and sets it on the server
  connection it lends, so pg_stat_activity still tells whose backend is whose.
- LISTEN: a notification reaches the server connection that ran LISTEN, which the pooler lends
  to anyone; the listener therefore connects to QUEEN_LISTEN_DATABASE_URL (a direct URL), and
  without one a broker behind a pooler does not listen (its poll still finds every timer).
- The migration lock (pg_advisory_xact_lock), `synchronous_commit` in the fire (set_config
  with is_local) and the fire's `plan_cache_mode` (a function's SET clause) end with their
  transaction or call; the maintenance cycle takes a lease row, not a session lock.

How a pooler is detected: PostgreSQL announces its backend pid at connect (BackendKeyData); a
pooler answers the startup itself with a key of its own making (PgBouncer's is random), so the
pid asyncpg was told is not `pg_backend_pid()`. `SHOW pool_mode` is no test: on an ordinary
connection PgBouncer passes it to PostgreSQL, where it fails with or without a pooler. The check
cannot tell a session pooler from a transaction one; both get the transaction-safe treatment.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import asyncpg

from .pool import application_name
from .queries import Q

__all__ = ["Link", "explain_link", "probe_link"]

log = logging.getLogger("queen_timers.db")

# asyncpg's own default size of the prepared statement cache, kept on a direct link.
_ASYNCPG_STATEMENT_CACHE = 100


@dataclasses.dataclass(frozen=True)
class Link:
    pooled: bool = False
    keeps_prepared_statements: bool = True  # the server side keeps named statements
    statement_timeout_ms: int | None = None  # the server's own, read behind a pooler

    def pool_options(
        self, statement_timeout_ms: int, command_timeout_ms: int = 0
    ) -> dict[str, Any]:
        """The arguments of db.pool.connect_pool that depend on the link; `command_timeout_ms`
        (QUEEN_POOLER_COMMAND_TIMEOUT_MS) applies behind a pooler only."""
        return {
            "statement_timeout_ms": 0 if self.pooled else statement_timeout_ms,
            "statement_cache_size": (
                _ASYNCPG_STATEMENT_CACHE if self.keeps_prepared_statements else 0
            ),
            "command_timeout_ms": command_timeout_ms if self.pooled else 0,
        }


async def probe_link(url: str, pooler_prepared_statements: bool = False) -> Link:
    """One short connection: is `url` a pooler, and what statement_timeout applies behind it."""
    # No statement cache (it would name statements) and no codecs: two plain reads.
    conn = await asyncpg.connect(
        url, statement_cache_size=0, server_settings={"application_name": application_name("probe")}
    )
    try:
        if await conn.fetchval(Q.link_backend_pid) == conn.get_server_pid():
            return Link()
        return Link(
            pooled=True,
            keeps_prepared_statements=pooler_prepared_statements,
            statement_timeout_ms=await conn.fetchval(Q.link_statement_timeout),
        )
    finally:
        await conn.close()


def explain_link(link: Link, statement_timeout_ms: int) -> None:
    """Boot's log lines about a pooler (none on a direct link)."""
    if not link.pooled:
        return
    log.info(
        "QUEEN_DATABASE_URL goes through a connection pooler: asyncpg's statement cache is %s",
        "on (QUEEN_POOLER_PREPARED_STATEMENTS=true)"
        if link.keeps_prepared_statements
        else "off (QUEEN_POOLER_PREPARED_STATEMENTS=false)",
    )
    if link.statement_timeout_ms != statement_timeout_ms:
        log.warning(
            "behind a connection pooler QUEEN_STATEMENT_TIMEOUT_MS=%d is not sent per connection; "
            "PostgreSQL's statement_timeout for this role is %s ms "
            "(set it with ALTER ROLE ... SET statement_timeout = %d)",
            statement_timeout_ms,
            link.statement_timeout_ms,
            statement_timeout_ms,
        )
