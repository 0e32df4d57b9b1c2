"""This broker's recent fire: timers fired per second and the fire lag's p50 / p99 over a
sliding window, in memory, fed by the sweeper after every fire (no query answers it).

Memory is bounded whatever the rate: one slot per second of the window, each a histogram of
lags on logarithmic bins (5% wide, 0.1 ms to a day), so a percentile is read within 5%.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["WINDOW_SECONDS", "FireWindow"]

# "The last few minutes" of the overview: long enough to smooth a bursty fire, short enough
# to show a stall within minutes. A choice, not measured.
WINDOW_SECONDS = 300

_BIN_RATIO = 1.05
_MIN_MS = 0.1
_LOG_RATIO = math.log(_BIN_RATIO)
_MAX_BIN = int(math.log(86_400_000 / _MIN_MS) / _LOG_RATIO) + 1


def _bin(lag_ms: float) -> int:
    if lag_ms <= _MIN_MS:
        return 0
    return min(int(math.log(lag_ms / _MIN_MS) / _LOG_RATIO) + 1, _MAX_BIN)


def _bin_value(b: int) -> float:
    """The middle of bin b (0 is everything up to 0.1 ms)."""
    if b == 0:
        return 0.0
    lo = _MIN_MS * _BIN_RATIO ** (b - 1)
    return lo * (1 + _BIN_RATIO) / 2


class FireWindow:
    def __init__(
        self, seconds: int = WINDOW_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self._clock = clock
        self._started = clock()
        # second -> [fired, Counter(bin -> n)], oldest first
        self._slots: collections.OrderedDict[int, tuple[list[int], collections.Counter[int]]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def record(self, fired: int, lags_ms: Iterable[float]) -> None:
        now = int(self._clock())
        with self._lock:
            slot = self._slots.get(now)
            if slot is None:
                slot = self._slots[now] = ([0], collections.Counter())
            slot[0][0] += fired
            slot[1].update(_bin(v) for v in lags_ms)
            self._trim(now)

    def _trim(self, now: int) -> None:
        while self._slots and next(iter(self._slots)) <= now - self.seconds:
            self._slots.popitem(last=False)

    def bare(self) -> dict[str, Any]:
        """What a non-admin is shown of this broker's fire: the window, no figures (they are
        every tenant's timers)."""
        return {"windowSeconds": self.seconds}

    def snapshot(self) -> dict[str, Any]:
        """{windowSeconds, firedPerSec, fireLagP50Ms, fireLagP99Ms}; the rate is over the
        window, or over the broker's uptime while that is shorter."""
        t = self._clock()
        now = int(t)
        with self._lock:
            self._trim(now)
            fired = sum(s[0][0] for s in self._slots.values())
            bins: collections.Counter[int] = collections.Counter()
            for s in self._slots.values():
                bins.update(s[1])
        span = max(min(float(self.seconds), t - self._started), 1.0)
        return {
            "windowSeconds": self.seconds,
            "firedPerSec": round(fired / span, 3),
            "fireLagP50Ms": _percentile(bins, 0.50),
            "fireLagP99Ms": _percentile(bins, 0.99),
        }


def _percentile(bins: collections.Counter[int], q: float) -> float | None:
    total = sum(bins.values())
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for b in sorted(bins):
        seen += bins[b]
        if seen >= rank:
            return round(_bin_value(b), 3)
    return round(_bin_value(max(bins)), 3)
