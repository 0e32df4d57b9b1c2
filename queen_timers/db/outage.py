"""One warning when a broker loses its database, one line when it is back.

An expected outage (a PostgreSQL restart, a failover) makes every connection attempt fail
until the server answers again: asyncpg's pool retries its connection floor in the
background and logs each failed attempt with a traceback ("Failed to restore the pool
connection floor"), 4-6 per pool and restart. Every connection a broker opens goes through
`connect`, which reports to the broker's `Outage` (one per database URL in a process, so the
pool, the sweeper's pool and the listener share it): the first failure logs one warning, the
first success after it logs the recovery, and the attempts in between are marked reported.
`QuietFloor` drops asyncpg's per-attempt record only for an exception marked so, so a pool
that is not ours keeps its log.
"""

from __future__ import annotations

import logging
import time

from .errors import link_lost

__all__ = ["Outage", "QuietFloor", "is_reported", "outage_for"]

log = logging.getLogger("queen_timers.db")

_MARK = "_queen_outage_reported"


class Outage:
    def __init__(self) -> None:
        self.down_since: float | None = None
        self.failures = 0  # connection attempts that failed, told or not

    def lost(self, exc: BaseException) -> None:
        self.failures += 1
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning(
                "database unreachable (%s: %s); reconnecting quietly until it answers",
                type(exc).__name__,
                exc,
            )
        try:
            setattr(exc, _MARK, True)
        except AttributeError:  # an exception type with slots: its record stays as it is
            pass

    def restored(self) -> None:
        if self.down_since is not None:
            log.warning("database reachable again after %.1f s", time.monotonic() - self.down_since)
            self.down_since = None


_outages: dict[str, Outage] = {}


def outage_for(url: str) -> Outage:
    o = _outages.get(url)
    if o is None:
        o = _outages[url] = Outage()
    return o


def absorbed(url: str, exc: BaseException) -> bool:
    """For a background loop's own warning: is this failure part of an outage the broker
    tells once? A failed connection attempt is already told; a lost connection is told now
    (its Outage warns, if it has not yet). Anything else is the caller's to log."""
    if is_reported(exc):
        return True
    if link_lost(exc):
        outage_for(url).lost(exc)
        return True
    return False


def is_reported(exc: BaseException | None) -> bool:
    """Was this failure (or the one it came from) already told as part of an outage?"""
    while exc is not None:
        if getattr(exc, _MARK, False):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class QuietFloor(logging.Filter):
    """On asyncpg's pool logger: drops a failed floor restore whose failure an Outage has
    already told."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage().startswith("Failed to restore") and is_reported(exc))


_quiet = QuietFloor()


def quiet_asyncpg_floor() -> None:
    logger = logging.getLogger("asyncpg.pool")
    if _quiet not in logger.filters:
        logger.addFilter(_quiet)
