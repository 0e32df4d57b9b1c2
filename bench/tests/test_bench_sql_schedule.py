"""bench/sql_schedule.py end to end at a tiny size: both paths schedule, every timer fires
once, none early, and the result names both paths."""

from __future__ import annotations

import argparse
import json

from bench import harness, sql_schedule


async def test_a_tiny_run_fires_every_timer_of_both_paths(pg_server_url, tmp_path):
    p = argparse.ArgumentParser()
    sql_schedule.add_arguments(p)
    harness.add_common(p)
    ns = p.parse_args(
        ["--rate", "20", "--seconds", "1", "--delay", "0.2", "--clients", "2"]
        + ["--database-url", pg_server_url, "--out", str(tmp_path)]
    )
    assert await sql_schedule.main(ns) == 0
    [result] = tmp_path.glob("*-sql-schedule/result.json")
    paths = json.loads(result.read_text())["paths"]
    assert set(paths) == {"sql", "http"}
    for p in paths.values():
        assert p["scheduled"] == 20 and p["fired"] == 20, p
        assert p["early"] == 0 and p["pending_at_end"] == 0 and not p["errors"]
