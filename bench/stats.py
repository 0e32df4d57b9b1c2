"""The bench's definitions: WAL deltas, autovacuum shares, CPU attribution, "kept up".

Pure functions over plain numbers and dicts, so bench/tests/ checks every definition on
synthetic samples without a database. Every definition a report states ("autovacuum enters
the profile", "p99 doubles", "kept up") is implemented here and only here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "AV_CPU_SHARE",
    "AV_SAMPLE_SHARE",
    "CpuAttribution",
    "StepVerdict",
    "attribute_cpu",
    "av_mean_workers",
    "av_table_share",
    "counter_delta",
    "cpu_cores",
    "first_doubling",
    "growth_ratio",
    "hot_ratio",
    "parse_lsn",
    "pids_cpu",
    "profile_entry",
    "same_page_ratio",
    "step_verdict",
    "wal_delta",
]

# The stated definition of "autovacuum on queen.log_timers enters the profile" at a rate step:
# an autovacuum worker is seen working on the table in more than AV_SAMPLE_SHARE of the 100 ms
# samples of the step, OR autovacuum workers burn more than AV_CPU_SHARE of all PostgreSQL CPU
# during the step. Either alone is enough.
AV_SAMPLE_SHARE = 0.05
AV_CPU_SHARE = 0.05


def parse_lsn(lsn: str) -> int:
    """A PostgreSQL LSN 'X/Y' (two hex halves) as a byte position."""
    hi, _, lo = lsn.strip().partition("/")
    if not lo:
        raise ValueError(f"not an LSN: {lsn!r}")
    return (int(hi, 16) << 32) | int(lo, 16)


def wal_delta(before: str | int, after: str | int) -> int:
    """WAL bytes written between two positions (LSN strings or byte positions)."""
    a = parse_lsn(before) if isinstance(before, str) else int(before)
    b = parse_lsn(after) if isinstance(after, str) else int(after)
    if b < a:
        raise ValueError(f"WAL went backwards: {before} -> {after}")
    return b - a


def counter_delta(before: Mapping[str, int], after: Mapping[str, int], key: str) -> int:
    """after[key] - before[key] for a monotone counter; a reset (stats reset, server restart)
    shows as a negative difference and is reported as the 'after' value."""
    d = int(after.get(key) or 0) - int(before.get(key) or 0)
    return int(after.get(key) or 0) if d < 0 else d


def hot_ratio(upd: int, hot_upd: int) -> float | None:
    """Share of updates that were HOT (heap-only tuples): hot / all; None with no update."""
    if upd <= 0:
        return None
    if hot_upd > upd:
        raise ValueError("more HOT updates than updates")
    return hot_upd / upd


def same_page_ratio(upd: int, newpage_upd: int | None) -> float | None:
    """Share of updates whose new row version stayed on the old version's page (HOT or not):
    1 - n_tup_newpage_upd / n_tup_upd (PostgreSQL >= 16). What a fillfactor's headroom buys
    when the update cannot be HOT."""
    if upd <= 0 or newpage_upd is None:
        return None
    return 1.0 - newpage_upd / upd


def av_table_share(samples: Iterable[Mapping], table: str) -> float | None:
    """Share of samples in which at least one autovacuum worker was working on `table`.
    A sample carries `av` = list of {"pid", "table"} of the autovacuum workers it saw."""
    n = hit = 0
    for s in samples:
        n += 1
        if any(w.get("table") == table for w in s.get("av") or ()):
            hit += 1
    return None if n == 0 else hit / n


def av_mean_workers(samples: Iterable[Mapping], table: str | None = None) -> float | None:
    """Mean number of autovacuum workers per sample (on `table` only, when given): the time-
    average of the workers the table occupies, against autovacuum_max_workers."""
    n = tot = 0
    for s in samples:
        n += 1
        tot += sum(1 for w in s.get("av") or () if table is None or w.get("table") == table)
    return None if n == 0 else tot / n


def cpu_cores(cpu_seconds: float, wall_seconds: float) -> float | None:
    """CPU time over wall time: cores kept busy (1.0 = one core fully)."""
    return None if wall_seconds <= 0 else cpu_seconds / wall_seconds


@dataclass
class CpuAttribution:
    autovacuum: float = 0.0  # CPU seconds of autovacuum workers
    backends: float = 0.0  # client backends (broker, bench connections)
    background: float = 0.0  # walwriter, checkpointer, bgwriter, launcher, io workers...
    exited: float = 0.0  # processes that exited in the interval (see attribute_cpu)

    @property
    def total(self) -> float:
        return self.autovacuum + self.backends + self.background + self.exited


def attribute_cpu(
    prev: Mapping[int, tuple[float, str]],
    cur: Mapping[int, tuple[float, str]],
    reaped_before: float,
    reaped_after: float,
    prev_time: float,
    born_after: Mapping[int, float] | None = None,
) -> CpuAttribution:
    """CPU seconds spent by PostgreSQL's processes between two samples, by kind.

    `prev` and `cur` map pid -> (cumulative CPU seconds, kind) for the postmaster's live
    children at each sample; kind is 'autovacuum', 'backend' or 'background'. A pid only in
    `cur` counts from zero when it was born after the previous sample (`born_after[pid]` is its
    start time), else only from now on. A pid only in `prev` has exited: the postmaster's reaped-
    children counter (`reaped_*`, cutime+cstime) grew by its whole lifetime CPU, of which we
    already counted what we saw; the rest is attributed to the exited pid's kind. Reaped CPU we
    cannot match to a pid we saw goes to `exited` (in the bench the only processes that exit are
    autovacuum workers, short ones included: the report adds `exited` to autovacuum and says so).
    """
    out = CpuAttribution()
    born_after = born_after or {}

    def add(kind: str, v: float) -> None:
        v = max(v, 0.0)
        if kind == "autovacuum":
            out.autovacuum += v
        elif kind == "backend":
            out.backends += v
        else:
            out.background += v

    for pid, (cpu, kind) in cur.items():
        if pid in prev:
            add(kind, cpu - prev[pid][0])
        elif born_after.get(pid, 0.0) >= prev_time:
            add(kind, cpu)
    reaped = max(reaped_after - reaped_before, 0.0)
    # An exited pid's lifetime total is in `reaped`, of which we had counted `cpu` already;
    # the remainder is its CPU since the last sample plus processes too short to be seen.
    # Reaping is asynchronous, so a remainder below zero means "not yet reaped": clamp at 0.
    seen = sum(cpu for pid, (cpu, _kind) in prev.items() if pid not in cur)
    out.exited = max(reaped - seen, 0.0)
    return out


def pids_cpu(
    prev: Mapping[int, tuple[float, str]],
    cur: Mapping[int, tuple[float, str]],
    prev_time: float,
    born_after: Mapping[int, float],
    pids: Iterable[int],
) -> float:
    """CPU seconds of the given live pids since the previous sample (same rules as
    attribute_cpu for a pid seen for the first time)."""
    tot = 0.0
    for pid in set(pids):
        if pid not in cur:
            continue
        if pid in prev:
            tot += max(cur[pid][0] - prev[pid][0], 0.0)
        elif born_after.get(pid, 0.0) >= prev_time:
            tot += cur[pid][0]
    return tot


@dataclass
class StepVerdict:
    kept_up: bool
    reason: str


def step_verdict(
    target_rate: float,
    scheduled_rate: float | None,
    due: int,
    fired_of_due: int,
    lateness_p99_ms: float | None,
    *,
    min_rate_share: float = 0.95,
    min_fired_share: float = 0.99,
    max_p99_ms: float = 1000.0,
) -> StepVerdict:
    """The stated definition of "the broker kept up" at a rate step: the load generator reached
    at least 95% of the target rate, at least 99% of the timers that fell due during the step
    (up to one second before its end) were fired by the end of the step, and fire lateness p99
    stayed at or below one second (the fallback poll: beyond it lateness is load, not wake-up).
    """
    if scheduled_rate is None or scheduled_rate < min_rate_share * target_rate:
        return StepVerdict(
            False, f"load generator reached {scheduled_rate or 0:.0f}/s of {target_rate:.0f}/s"
        )
    if due > 0 and fired_of_due < min_fired_share * due:
        return StepVerdict(False, f"fired {fired_of_due} of {due} due timers")
    if lateness_p99_ms is None:
        return StepVerdict(False, "no timer fired")
    if lateness_p99_ms > max_p99_ms:
        return StepVerdict(False, f"lateness p99 {lateness_p99_ms:.0f} ms > {max_p99_ms:.0f} ms")
    return StepVerdict(True, "kept up")


def first_doubling(
    rates: Sequence[float], p99s: Sequence[float | None], floor_ms: float = 5.0
) -> float | None:
    """The first rate whose lateness p99 is at least twice the baseline, where the baseline is
    the p99 of the first (lowest-rate) step, floored at `floor_ms` so that a sub-millisecond
    baseline's noise is not called a doubling. None if it never doubles."""
    if not rates or p99s[0] is None:
        return None
    base = max(p99s[0], floor_ms)
    for r, p in zip(rates[1:], p99s[1:]):
        if p is not None and p >= 2 * base:
            return r
    return None


def profile_entry(
    rates: Sequence[float],
    sample_shares: Sequence[float | None],
    cpu_shares: Sequence[float | None],
    *,
    sample_share: float = AV_SAMPLE_SHARE,
    cpu_share: float = AV_CPU_SHARE,
) -> float | None:
    """The first rate at which autovacuum on the table enters the profile (definition at the
    top of this module). None if it never does within the steps run."""
    for r, s, c in zip(rates, sample_shares, cpu_shares):
        if (s is not None and s > sample_share) or (c is not None and c > cpu_share):
            return r
    return None


def growth_ratio(first: float, last: float) -> float | None:
    return None if first <= 0 else last / first
