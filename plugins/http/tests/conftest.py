"""Fixtures of the HTTP transport's tests: the transport started on a free port (the database
fixtures come from the queen_timers pytest plugin)."""

from __future__ import annotations

import aiohttp
import pytest

from queen_http import HttpTransport
from queen_http.testing import http_settings


@pytest.fixture
async def http_transport(queen):
    """The HTTP transport on a free loopback port, over the plain `queen` service (no auth)."""
    t = HttpTransport(http_settings())
    await t.start(queen)
    try:
        yield t
    finally:
        await t.stop()


@pytest.fixture
async def http(http_transport):
    """An aiohttp session on the transport, for raw wire checks."""
    async with aiohttp.ClientSession(http_transport.url) as s:
        yield s
