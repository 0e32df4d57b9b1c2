"""Fixtures of the TCP transport's tests: the shared database fixtures and a transport started
on a free port."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("queen_timers.testing.conformance")

from queen_tcp import TcpSettings, TcpTransport  # noqa: E402
from queen_timers.settings import Settings  # noqa: E402
from queen_timers.testing.fixtures import *  # noqa: E402, F403 - pytest collects fixtures by name


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
