"""Where the operator's reads go: a replica when QUEEN_READ_DATABASE_URL names one, else the
primary's pool.

Peek, list, count, the queue overviews and the histogram read through `Reads.acquire`; every
write, the fire and the pop keep to the primary's pool, and the replica's connections are
opened read-only (`default_transaction_read_only`), so nothing is written through them even
where `prefer-standby` lands on a primary. An answer read on a replica says how stale it may be:
`lag_ms` is 0 when the replica has replayed all the WAL it received and is streaming, else the
time since the last transaction it replayed committed on the primary (an upper bound of what
the answer may miss, as far as the replica knows). On the primary it is None, and the answer
carries no lag at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar, cast

import asyncpg

from .conn import Conn

__all__ = ["REPLICA_LAG_KEY", "Reading", "Reads", "replica_lag_ms", "with_lag"]

# The key an answer read on a replica carries its lag under (ms).
REPLICA_LAG_KEY = "replicaLagMs"

# On a primary (a `prefer-standby` URL that found no standby): 0, the answer is current.
_LAG = """
SELECT CASE
  WHEN NOT pg_is_in_recovery() THEN 0
  WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn()
       AND EXISTS (SELECT FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN 0
  ELSE greatest(0, floor(1000 * extract(epoch FROM
         clock_timestamp() - coalesce(pg_last_xact_replay_timestamp(), clock_timestamp()))))
END::bigint
"""


async def replica_lag_ms(conn: Conn) -> int:
    lag: int = await conn.fetchval(_LAG)
    return lag


@dataclasses.dataclass(frozen=True)
class Reading:
    conn: Conn
    lag_ms: int | None  # None: read on the primary's pool


class Reads:
    def __init__(self, pool: asyncpg.Pool, *, replica: bool):
        self.pool = pool
        self.replica = replica

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Reading]:
        async with self.pool.acquire() as conn:
            lag = await replica_lag_ms(conn) if self.replica else None
            yield Reading(conn, lag)


A = TypeVar("A", bound=Mapping[str, Any])


def with_lag(answer: A, lag_ms: int | None) -> A:
    """The answer, with its replica lag when it was read on a replica."""
    if lag_ms is None:
        return answer
    return cast(A, {**answer, REPLICA_LAG_KEY: lag_ms})
