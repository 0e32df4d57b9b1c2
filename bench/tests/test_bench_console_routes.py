"""bench/console_routes.py: one small run loads its timers and times every operator call."""

from __future__ import annotations

import argparse

from bench import console_routes


async def test_a_small_run_times_every_call(pg_server_url, capsys):
    ns = argparse.Namespace(database_url=pg_server_url, timers=3000, calls=2)
    assert await console_routes.main(ns) == 0
    out = capsys.readouterr().out
    assert "loaded 3,000 timers" in out
    for name in ("queues_overview", "histogram 90d", "cancel-prefix", "dlq delete"):
        assert name in out
