"""When a recurring schedule's occurrences fall: cron or a fixed interval, in an IANA zone.

The cron grammar and its iteration are cronsim's (5 fields, or 6 with seconds first). cronsim
over croniter: it is small, typed, maintained, has no dependencies, and documents its DST
behaviour; croniter's maintainers announced its end of life in 2024. Zones are the standard
zoneinfo, with `tzdata` declared so a system without a zone database still has them.

The DST policy, the same for every expression:
* a local time that does not exist (spring forward) fires at the first instant after the gap:
  `30 2 * * *` in Europe/Paris on 2027-03-28 fires at 03:00 CEST (01:00 UTC);
* a local time that exists twice (fall back) fires once, at the first: `30 2 * * *` on
  2027-10-31 fires at 02:30 CEST (00:30 UTC), not again at 02:30 CET.
cronsim is iterated over wall-clock (naive) times, and each wall time is mapped to an instant
by that policy here; two wall times that map to one instant (a gap's) fire once.

Instants are UTC datetimes at millisecond precision (the precision of an occurrence's txn).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import uuid
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = [
    "Recurrence",
    "RecurrenceError",
    "iso",
    "jitter_offset_ms",
    "min_gap_ms",
    "parse_instant",
    "schedule_id",
    "zone",
]

UTC = dt.UTC
_MS = dt.timedelta(milliseconds=1)
# The prefix of the text a schedule id digests; the SQL API computes the same id
# (migrations/033_schedules.sql, queen._schedule_id_v1).
_ID_PREFIX = "queen-timers:schedules"
# cron iteration steps examined for one answer before giving up: an expression that matches
# nothing for that long (`0 0 30 2 *`) has no next occurrence.
_MAX_STEPS = 100_000


class RecurrenceError(ValueError):
    """A cron expression or zone that cannot be used; the message says why."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RecurrenceError(f"unknown time zone {name!r} (an IANA name)") from None


def schedule_id(tenant: uuid.UUID, queue: str, key: str) -> uuid.UUID:
    """The same for a deleted and re-created schedule: occurrence txns derive from it. The
    first 128 bits of a SHA-256 (not a uuid5: PostgreSQL has SHA-256 built in, not SHA-1, and
    the SQL API derives the same id)."""
    text = f"{_ID_PREFIX}\x1f{tenant}\x1f{queue}\x1f{key}"
    return uuid.UUID(hashlib.sha256(text.encode()).hexdigest()[:32])


def iso(at: dt.datetime) -> str:
    """An instant as occurrence txns and keys spell it (ms, UTC, Z)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def parse_instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(UTC)


def _ms(at: dt.datetime) -> dt.datetime:
    at = at.astimezone(UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def jitter_offset_ms(sid: uuid.UUID, instant: dt.datetime, window_ms: int) -> int:
    """A deterministic offset in [0, window_ms) for one occurrence: the same on every broker
    and at every retry, spread uniformly across schedules."""
    if window_ms <= 0:
        return 0
    digest = hashlib.blake2b(f"{sid}@{iso(instant)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest) % window_ms


def _instant(wall: dt.datetime, z: ZoneInfo) -> dt.datetime:
    """A wall-clock time in `z` as an instant, by the DST policy (module docstring)."""
    first = wall.replace(tzinfo=z, fold=0)
    at = first.astimezone(UTC)
    if at.astimezone(z).replace(tzinfo=None) == wall:
        return at  # exists (fold 0 is the first of an ambiguous pair)
    # In a gap: fold=1 reads the wall with the offset after the change and lands before it,
    # fold=0 with the offset before and lands after; the change lies between.
    lo = wall.replace(tzinfo=z, fold=1).astimezone(UTC)
    hi = at
    after = hi.astimezone(z).utcoffset()
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
    while lo_s + 1 < hi_s:
        mid = (lo_s + hi_s) // 2
        if dt.datetime.fromtimestamp(mid, UTC).astimezone(z).utcoffset() == after:
            hi_s = mid
        else:
            lo_s = mid
    return dt.datetime.fromtimestamp(hi_s, UTC)


@dataclasses.dataclass(frozen=True)
class Recurrence:
    """One schedule's cadence: exactly one of `cron` and `every_ms`. `anchor` is where an
    interval counts from (its start, or its creation)."""

    cron: str | None
    every_ms: int | None
    zone_name: str = "UTC"
    anchor: dt.datetime = dt.datetime(1970, 1, 1, tzinfo=UTC)
    start_at: dt.datetime | None = None
    end_at: dt.datetime | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_ms is None):
            raise RecurrenceError("a schedule has exactly one of cron and everyMs")
        zone(self.zone_name)
        if self.cron is not None:
            try:
                CronSim(self.cron, dt.datetime(2000, 1, 1))
            except CronSimError as exc:
                raise RecurrenceError(f"cron {self.cron!r}: {exc}") from None
        elif self.every_ms is not None and self.every_ms < 1:
            raise RecurrenceError("everyMs must be at least 1")

    # -- iteration ------------------------------------------------------------------------
    def _raw(self, start: dt.datetime, reverse: bool) -> Iterator[dt.datetime]:
        """Distinct instants strictly after (before, reversed) `start`, ignoring start/end."""
        if self.every_ms is not None:
            e = self.every_ms
            a = int(self.anchor.timestamp() * 1000)
            s = round(start.timestamp() * 1000)
            k = (s - a) // e
            if not reverse:
                k += 1
            elif (s - a) % e == 0:
                k -= 1
            while True:
                yield dt.datetime.fromtimestamp((a + k * e) / 1000, UTC)
                k += -1 if reverse else 1
        assert self.cron is not None
        z = zone(self.zone_name)
        wall = start.astimezone(z).replace(tzinfo=None)
        last: dt.datetime | None = None
        it = CronSim(self.cron, wall, reverse=reverse)
        for _ in range(_MAX_STEPS):
            try:
                w = next(it)
            except StopIteration:
                return
            at = _ms(_instant(w, z))
            if (at <= start or (last is not None and at <= last)) and not reverse:
                continue
            if reverse and (at >= start or (last is not None and at >= last)):
                continue
            last = at
            yield at

    def next_after(self, after: dt.datetime) -> dt.datetime | None:
        """The first occurrence strictly after `after` (within start/end), or None."""
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - _MS
        for at in self._raw(after, reverse=False):
            if self.end_at is not None and at > self.end_at:
                return None
            return at
        return None

    def upcoming(self, after: dt.datetime, n: int) -> list[dt.datetime]:
        out: list[dt.datetime] = []
        at: dt.datetime | None = after
        while len(out) < n and at is not None:
            at = self.next_after(at)
            if at is not None:
                out.append(at)
        return out

    def recent(self, before: dt.datetime, after: dt.datetime, n: int) -> list[dt.datetime]:
        """Up to `n` of the latest occurrences in (after, before), oldest first."""
        out: list[dt.datetime] = []
        for at in self._raw(before, reverse=True):
            if at <= after or len(out) >= n:
                break
            if self.start_at is not None and at < self.start_at:
                break
            if self.end_at is not None and at > self.end_at:
                continue
            out.append(at)
        return out[::-1]


def min_gap_ms(rec: Recurrence, after: dt.datetime, samples: int = 64) -> float | None:
    """The shortest gap between consecutive occurrences among the next `samples` (None: fewer
    than two). A cron's gaps vary (`0,1 * * * *`), so its first ones are sampled."""
    if rec.every_ms is not None:
        return float(rec.every_ms)
    free = dataclasses.replace(rec, start_at=None, end_at=None)
    got = free.upcoming(after, samples)
    gaps = [(b - a).total_seconds() * 1000 for a, b in zip(got, got[1:])]
    return min(gaps) if gaps else None
