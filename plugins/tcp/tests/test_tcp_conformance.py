"""The conformance suite over the TCP transport; TcpClient is its own adapter."""

import pytest

from queen_tcp import TcpSettings, TcpTransport
from queen_tcp.client import TcpClient
from queen_timers.settings import Settings
from queen_timers.testing.conformance import *  # noqa: F403 - the suite's tests and fixtures


@pytest.fixture
async def conformance_connect(conformance_queen):
    t = TcpTransport(Settings({"tcp_port": 0}, environ={}, extra=(TcpSettings,)))
    await t.start(conformance_queen)

    async def connect(token):
        return await TcpClient.connect(t.host, t.port, token)

    try:
        yield connect
    finally:
        await t.stop()
