"""Fixtures of the webhook delivery's tests: a real aiohttp receiver on loopback, and a broker
(the HTTP transport, the sweeper and the webhook delivery) on this test's database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from webhook_helpers import Receiver, delivering

from queen_timers.testing.inprocess import RunningBroker


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    try:
        yield r
    finally:
        await r.stop()


@pytest.fixture
async def broker(db_url: str) -> AsyncIterator[RunningBroker]:
    async with delivering(db_url) as b:
        yield b


@pytest.fixture
async def http(broker: RunningBroker) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(broker.url) as s:
        yield s
