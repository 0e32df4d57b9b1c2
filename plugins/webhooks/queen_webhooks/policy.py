"""What an answer means for a delivery, and when the next attempt may go.

- 2xx: delivered.
- 408, 409, 425, 429 and every 5xx, a timeout or a connection failure: retried.
- Any other 4xx, and a 3xx (redirects are not followed: a target names its final URL):
  permanent, the message goes to the dead-letter queue at once.

The n-th retry waits `backoffMs * 2^(n-1)` capped at `maxBackoffMs`, with equal jitter (half
the wait, plus a random share of the other half), so a receiver coming back is not met by every
message at one instant; a `Retry-After` on 429 or 503 lengthens the wait, never shortens it.
"""

from __future__ import annotations

import email.utils
import enum
import random
import time

__all__ = ["Verdict", "backoff_ms", "retry_after_ms", "verdict"]

_RETRIED_4XX = frozenset({408, 409, 425, 429})
# A Retry-After beyond a day is a misconfigured receiver; the message's age limit decides.
_RETRY_AFTER_CAP_MS = 86_400_000


class Verdict(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    PERMANENT = "permanent"


def verdict(status: int | None) -> Verdict:
    """`status` None: no answer (timeout, refused connection, reset)."""
    if status is None:
        return Verdict.RETRY
    if 200 <= status < 300:
        return Verdict.DELIVERED
    if status >= 500 or status in _RETRIED_4XX:
        return Verdict.RETRY
    return Verdict.PERMANENT


def retry_after_ms(status: int | None, header: str | None, now: float | None = None) -> int:
    """The wait a 429 or 503 asks for (delta-seconds or an HTTP date), else 0."""
    if status not in (429, 503) or not header:
        return 0
    text = header.strip()
    if text.isdigit():
        return min(int(text) * 1000, _RETRY_AFTER_CAP_MS)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return 0
    if when is None:
        return 0
    wait = when.timestamp() - (time.time() if now is None else now)
    return max(0, min(int(wait * 1000), _RETRY_AFTER_CAP_MS))


def backoff_ms(retry: int, base_ms: int, cap_ms: int, rng: random.Random | None = None) -> int:
    """The wait before retry number `retry` (1 for the first retry)."""
    full = min(cap_ms, base_ms * 2 ** min(retry - 1, 40))
    share = (rng or random).random()
    return int(full / 2 + share * full / 2)
