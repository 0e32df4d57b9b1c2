"""Fixtures of the HTTP transport's tests: the shared database fixtures and a transport started
on a free port."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("queen_timers.testing.conformance")

import aiohttp  # noqa: E402

from queen_http import HttpTransport  # noqa: E402
from queen_http.testing import http_settings  # noqa: E402
from queen_timers.testing.fixtures import *  # noqa: E402, F403 - pytest collects fixtures by name


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
