"""Fixtures of the TCP transport's tests: the transport started on a free port (the database
fixtures come from the queen_timers pytest plugin)."""

from __future__ import annotations

import pytest

from queen_tcp import TcpSettings, TcpTransport
from queen_timers.settings import Settings


def tcp_settings(**overrides) -> Settings:
    return Settings({"tcp_port": 0, **overrides}, environ={}, extra=(TcpSettings,))


@pytest.fixture
async def tcp_transport(queen):
    """The TCP transport on a free loopback port, over the plain `queen` service (no auth)."""
    t = TcpTransport(tcp_settings())
    await t.start(queen)
    try:
        yield t
    finally:
        await t.stop()
