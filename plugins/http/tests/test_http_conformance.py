"""The conformance suite over the HTTP transport."""

import pytest

from queen_http import HttpTransport
from queen_http.testing import HttpAdapter, http_settings
from queen_timers.testing.conformance import *  # noqa: F403 - the suite's tests and fixtures


@pytest.fixture
async def conformance_connect(conformance_queen):
    t = HttpTransport(http_settings())
    await t.start(conformance_queen)

    async def connect(token):
        return HttpAdapter(t.url, token)

    try:
        yield connect
    finally:
        await t.stop()
