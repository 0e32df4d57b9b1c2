"""bench/console_routes.py: one small run loads its timers and times every operator call."""

from __future__ import annotations

import argparse
import json

from bench import console_routes, harness


async def test_a_small_run_times_every_call(pg_server_url, tmp_path, capsys):
    p = argparse.ArgumentParser()
    console_routes.add_arguments(p)
    harness.add_common(p)
    ns = p.parse_args(
        ["--database-url", pg_server_url, "--out", str(tmp_path), "--timers", "3000"]
        + ["--calls", "2"]
    )
    assert await console_routes.main(ns) == 0
    out = capsys.readouterr().out
    assert "loaded 3,000 timers" in out
    [result] = tmp_path.glob("*-console-routes/result.json")
    rows = {r["what"]: r for r in json.loads(result.read_text())["rows"]}
    for name in ("queues_overview", "histogram 90d", "cancel-prefix", "dlq delete"):
        [row] = [r for what, r in rows.items() if name in what]
        assert row["calls"] == 2 and 0 < row["p50 ms"] <= row["p99 ms"], row
