"""The whole transport conformance suite over the example transport: copy this file."""

from importlib.metadata import entry_points

import pytest

from queen_linejson import LineJsonTransport
from queen_linejson.client import LineJsonClient
from queen_timers.settings import Settings
from queen_timers.testing.conformance import *  # noqa: F403 - the suite's tests and fixtures


@pytest.fixture
async def conformance_connect(conformance_queen):
    t = LineJsonTransport(Settings(environ={}, extra=(LineJsonTransport.settings_class,)))
    await t.start(conformance_queen)

    async def connect(token):
        return await LineJsonClient.connect(t.host, t.port, token)

    try:
        yield connect
    finally:
        await t.stop()


def test_registered_as_a_transport():
    eps = {ep.name: ep for ep in entry_points(group="queen_timers.transports")}
    if "linejson" not in eps:
        pytest.skip("not installed: pip install -e examples/custom_transport (CI does)")
    assert eps["linejson"].load() is LineJsonTransport
