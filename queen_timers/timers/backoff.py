"""Backoff after a failed fire. No jitter: the rows of one failure already spread across
brokers through SKIP LOCKED, and a deterministic backoff is what the user sees in peek."""

from __future__ import annotations

from ..db.errors import FailureClass
from ..settings import Settings

__all__ = ["backoff_ms"]

_MAX_SHIFT = 30  # 2**30 ms is already past any sane backoff_max; keeps the int small


def backoff_ms(settings: Settings, attempts: int, cls: FailureClass) -> int:
    """Transient: fixed `sweeper_transient_backoff_ms`, no attempt spent. Config/permanent:
    min(backoff_min * 2**attempts, backoff_max), `attempts` = attempts before this failure
    (1 s, 2 s, 4 s, 8 s, 16 s with the defaults)."""
    if cls is FailureClass.TRANSIENT:
        return max(int(settings.sweeper_transient_backoff_ms), 0)
    a = min(max(int(attempts), 0), _MAX_SHIFT)
    return max(
        min(int(settings.sweeper_backoff_min_ms) << a, int(settings.sweeper_backoff_max_ms)), 0
    )
