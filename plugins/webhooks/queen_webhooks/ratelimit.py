"""A target's rate limit: a token bucket refilled at `rate` per second, holding at most one
second of tokens, awaited before each attempt."""

from __future__ import annotations

import asyncio
import time

__all__ = ["Bucket"]


class Bucket:
    def __init__(self, rate: float):
        self.rate = rate
        self._tokens = max(1.0, rate)
        self._at = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        async with self._lock:  # one waiter refills at a time: FIFO among attempts
            while True:
                now = time.monotonic()
                self._tokens = min(max(1.0, self.rate), self._tokens + (now - self._at) * self.rate)
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.rate)
