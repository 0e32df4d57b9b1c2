"""Is the CPU running at its own speed? One pinned process per core times a fixed unit of pure
arithmetic (no allocation, no system call inside it) every few milliseconds, with the
thread's CPU time and its run-queue wait beside the wall time of each unit.

    queen bench <scenario> --cpu-probe     (machine, soak, peers, sweeper, sql-schedule,
                                            transport-schedule)

A unit that takes many times its median has lost the time in one of three places:
  - it waited in the guest's run queue behind another task (the benchmark's own load): not
    counted here;
  - it was on the CPU the whole time (thread CPU time close to wall time: no preemption, no
    sleep, no page fault) and the core ran slower than itself: the guest kernel charged the
    time to the thread, so neither the steal counter nor the run-queue wait shows it;
  - it was neither running nor waiting in the guest: the host took the core (steal).
Units that lost at least 80% of their time to the last two ran on a slow machine. When every
core's units are slow at the same moments, the machine was slow in that window, whatever ran
on it: the benchmark's client, the broker and PostgreSQL alike.

Benchmarks run a `CpuProbe` beside their paced runs and report which requests overlapped such a
window or the 100 ms after it (its backlog drains then), and the tail of the others: what the
code did while the machine ran at its speed. The probe costs about 5% of each core (a 160 us
unit every 3 ms).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import msgspec

from bench.harness import percentile, stall_starts

__all__ = ["CpuProbe", "Window", "episodes", "overlapping", "slow_windows", "summary"]

UNIT_LOOPS = 2000  # ~160 us of arithmetic on the 2-core development machine
SLOW_FACTOR = 3.0  # a unit over 3x its core's median is slow (the machine at a third of its
# speed: a slow phase is a plateau of 10-15x for ~20 ms, then ~80 ms
# of recovery through 7x, 5x, 3x, 2x)
MACHINE_SHARE = 0.8  # ...if at least 80% of it was not spent waiting behind a guest task
MERGE_S = 0.010  # slow units less than 10 ms apart belong to one window
AFTERMATH_S = 0.100  # a window's backlog: what queued during it drains after it, at the
# machine's recovering speed, so the 100 ms after a window count too
EPISODE_S = 0.3  # windows come in bursts; starts less than 0.3 s apart are one burst


def _unit() -> int:
    x = 0
    for i in range(UNIT_LOOPS):
        x += i * i
    return x


def _run_queue_ns(fd: int | None) -> int:
    # /proc/thread-self/schedstat: "<on-cpu ns> <run-queue wait ns> <slices>"; 0.5 us a read
    return int(os.pread(fd, 64, 0).split()[1]) if fd is not None else 0


def run_probe(
    cpu: int | None,
    pause_s: float,
    stop: threading.Event,
    max_s: float = 3600.0,
    started: Callable[[], None] | None = None,
    min_units: int = 0,
) -> list[tuple[float, float, float]]:
    """(start on CLOCK_MONOTONIC, wall s, wall s not spent waiting behind a guest task) of
    every unit until `stop` is set and at least `min_units` ran (or `max_s` passed); `started`
    is called before the first."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    try:
        fd: int | None = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:  # not Linux: only the thread's CPU time counts as "not waiting"
        fd = None
    out: list[tuple[float, float, float]] = []
    try:
        end = time.perf_counter() + max_s
        if started is not None:
            started()
        while not stop.is_set() or len(out) < min_units:
            q0 = _run_queue_ns(fd)
            t0, c0 = time.perf_counter(), time.thread_time()
            _unit()
            t1, c1 = time.perf_counter(), time.thread_time()
            q1 = _run_queue_ns(fd)
            wall = t1 - t0
            queued = (q1 - q0) / 1e9 if fd is not None else wall - (c1 - c0)
            out.append((t0, wall, max(0.0, wall - queued)))
            if t1 > end:
                break
            time.sleep(pause_s)
    finally:
        if fd is not None:
            os.close(fd)
    return out


@dataclasses.dataclass
class Window:
    start: float  # CLOCK_MONOTONIC seconds (time.perf_counter in any process)
    end: float
    cores: frozenset[int]  # the cores whose units were slow in it
    slowdown: float  # the slowest unit's wall time over its core's median

    @property
    def seconds(self) -> float:
        return self.end - self.start


def slow_windows(
    samples: dict[int, list[tuple[float, float, float]]],
    *,
    factor: float = SLOW_FACTOR,
    machine: float = MACHINE_SHARE,
    merge_s: float = MERGE_S,
) -> list[Window]:
    """The windows in which units ran slow for the machine's reasons (not behind a guest
    task), merged across cores."""
    slow = []  # (start, end, core, ratio)
    for core, units in samples.items():
        if not units:
            continue
        med = statistics.median(w for _, w, _ in units)
        for t, w, lost_to_machine in units:
            if w > factor * med and lost_to_machine >= machine * w:
                slow.append((t, t + w, core, w / med))
    slow.sort()
    out: list[Window] = []
    for t0, t1, core, ratio in slow:
        if out and t0 - out[-1].end <= merge_s:
            last = out[-1]
            out[-1] = Window(
                last.start, max(last.end, t1), last.cores | {core}, max(last.slowdown, ratio)
            )
        else:
            out.append(Window(t0, t1, frozenset({core}), ratio))
    return out


def overlapping(
    intervals: list[tuple[float, float]],
    windows: list[Window],
    offset: float = 0.0,
    after_s: float = 0.0,
) -> list[bool]:
    """For each (start, end) interval, whether it overlaps a window or the `after_s` seconds
    after one. `offset` is added to the windows' times first (time.time() -
    time.perf_counter() to compare with wall-clock intervals, such as the database's
    timestamps)."""
    spans: list[tuple[float, float]] = []
    for w in sorted(windows, key=lambda w: w.start):  # extended windows may now touch: merge
        a, b = w.start + offset, w.end + offset + after_s
        if spans and a <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], b))
        else:
            spans.append((a, b))
    starts = [s for s, _ in spans]
    out = []
    for a, b in intervals:
        # Merged windows are disjoint, so the last one starting before the interval ends is
        # the only one that can reach back into it.
        i = bisect.bisect_right(starts, b)
        out.append(i > 0 and spans[i - 1][1] >= a)
    return out


def episodes(windows: list[Window], gap_s: float = EPISODE_S) -> list[float]:
    """Start of each burst of windows (harness.stall_starts on their starts)."""
    return stall_starts([w.start for w in windows], gap_s)


def summary(windows: list[Window], cores: int, seconds: float) -> dict:
    every = [w for w in windows if len(w.cores) >= cores]
    starts = episodes(windows)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    return {
        "windows": len(windows),
        "on_every_core": len(every),
        "episodes": len(starts),
        "slow_share_pct": 100.0 * sum(w.seconds for w in windows) / seconds if seconds else 0.0,
        "slowdown_x": statistics.median(w.slowdown for w in windows) if windows else 0.0,
        "every_s": statistics.median(gaps) if gaps else float("nan"),
    }


class CpuProbe:
    """Run the probe on every core (a process each) for the length of a `with` block."""

    def __init__(
        self,
        pause_ms: float = 3.0,
        enabled: bool = True,
        factor: float = SLOW_FACTOR,
        min_units: int = 0,
    ):
        self.pause_ms = pause_ms
        self.min_units = min_units  # each child times at least this many units, block or not
        self.factor = factor
        self.enabled = enabled
        self.cores = (
            sorted(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else list(range(os.cpu_count() or 1))
        )
        self.samples: dict[int, list[tuple[float, float, float]]] = {}
        self.windows: list[Window] = []
        self.wall_offset = time.time() - time.perf_counter()
        self._procs: list[subprocess.Popen] = []
        self.t0 = self.t1 = 0.0  # the block's start and end, CLOCK_MONOTONIC

    def __enter__(self) -> CpuProbe:
        if self.enabled:
            self._procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.cpuprobe",
                        "--child",
                        "--cpu",
                        str(c),
                        "--pause-ms",
                        str(self.pause_ms),
                        "--min-units",
                        str(self.min_units),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                for c in self.cores
            ]
            for p in self._procs:  # each child says when it is timing units: cover the block
                assert p.stdout is not None
                p.stdout.read(1)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1 = time.perf_counter()
        for core, p in zip(self.cores, self._procs):
            out, _ = p.communicate(timeout=30)  # closing stdin stops the child
            self.samples[core] = [tuple(x) for x in msgspec.json.decode(out)] if out else []
        self._procs = []
        self.windows = [
            w
            for w in slow_windows(self.samples, factor=self.factor)
            if w.end >= self.t0 and w.start <= self.t1
        ]

    @property
    def ran(self) -> bool:
        return any(self.samples.values())

    @property
    def unit_median_s(self) -> float:
        """The unit's median wall time over every core: the machine's speed in this block."""
        return statistics.median(w for units in self.samples.values() for _, w, _ in units)

    def overlapping(
        self, intervals: list[tuple[float, float]], wall: bool = False, after_s: float = AFTERMATH_S
    ) -> list[bool]:
        return overlapping(intervals, self.windows, self.wall_offset if wall else 0.0, after_s)

    def split(
        self, spans: list[tuple[float, float]], values: list[float], wall: bool = False
    ) -> tuple[float, list[float]]:
        """(share of the requests that overlapped a slow window or its aftermath, the values
        of the others: what the code did on a machine running at its speed)."""
        touched = self.overlapping(spans, wall)
        rest = [v for v, t in zip(values, touched) if not t]
        return (1.0 - len(rest) / len(values) if values else 0.0), rest

    def clear_figures(
        self, spans: list[tuple[float, float]], lat_ms: list[float], wall: bool = False
    ) -> dict[str, float | None]:
        """A paced run's figures beside its tail (empty when the probe did not run): the share
        of its requests that overlapped a slow window or the 100 ms after it, and the p50 and
        p99 of the others (ms)."""
        if not self.ran:
            return {}
        share, rest = self.split(spans, lat_ms, wall)
        return {
            "in slow windows %": 100.0 * share,
            "p50 clear ms": percentile(rest, 50),
            "p99 clear ms": percentile(rest, 99),
        }

    def slow_seconds(self, start: float, end: float, wall: bool = False) -> float:
        """How much of [start, end] the slow windows cover."""
        off = self.wall_offset if wall else 0.0
        return sum(
            max(0.0, min(end, w.end + off) - max(start, w.start + off)) for w in self.windows
        )

    def summary(self) -> dict:
        return summary(self.windows, len(self.cores), self.t1 - self.t0)

    def describe(self) -> str:
        if not self.ran:
            return "cpu probe off"
        s = self.summary()
        return (
            f"cpu probe: unit median {self.unit_median_s * 1e6:.0f} us; "
            f"{s['windows']} slow windows "
            f"({s['on_every_core']} on every core), {s['slowdown_x']:.0f}x slower, "
            f"{s['slow_share_pct']:.1f}% of the time; in {s['episodes']} bursts, one every "
            f"{s['every_s']:.2f} s"
        )


def _child(cpu: int, pause_ms: float, min_units: int = 0) -> None:
    stop = threading.Event()

    def wait_eof() -> None:
        sys.stdin.buffer.read()
        stop.set()

    threading.Thread(target=wait_eof, daemon=True).start()

    def started() -> None:
        sys.stdout.buffer.write(b"r")
        sys.stdout.flush()

    units = run_probe(cpu, pause_ms / 1000.0, stop, started=started, min_units=min_units)
    sys.stdout.buffer.write(msgspec.json.encode(units))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """A probe process: `python -m bench.cpuprobe --child --cpu N`, started by CpuProbe."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pause-ms", type=float, default=3.0)
    p.add_argument("--child", action="store_true", required=True)
    p.add_argument("--cpu", type=int, default=None)
    p.add_argument("--min-units", type=int, default=0)
    args = p.parse_args(argv)
    _child(args.cpu, args.pause_ms, args.min_units)
    return 0


if __name__ == "__main__":
    sys.exit(main())
