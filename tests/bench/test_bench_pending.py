"""bench/pending.py: the growth arithmetic, the load's layout, and the whole scenario at tiny
sizes on the real server (every phase runs, every figure is there, the table is judged)."""

from __future__ import annotations

import argparse
import json

import pytest

from bench import pending
from bench.cli import add_bench_parser


def test_growth_is_worse_over_better_for_costs_and_rates():
    cost = pending.Figure("x", "x", "ms", "low", "p")
    rate = pending.Figure("y", "y", "/s", "high", "p")
    assert pending.growth(cost, 2.0, 3.0) == pytest.approx(1.5)
    assert pending.growth(rate, 20_000.0, 10_000.0) == pytest.approx(2.0)
    assert pending.growth(rate, 10_000.0, 20_000.0) == pytest.approx(0.5)
    assert pending.growth(cost, None, 3.0) is None
    assert pending.growth(cost, 0.0, 3.0) is None


def test_every_figure_has_a_distinct_key():
    keys = [f.key for f in pending.FIGURES]
    assert len(keys) == len(set(keys))


def test_layout_keys_sort_in_load_order_and_prefixes_match_one_hundred():
    keys = [pending.layout_key(j) for j in range(1000)]
    assert keys == sorted(keys)
    prefix = pending.layout_key(300)[:9]
    assert sum(k.startswith(prefix) for k in keys) == 100


def _ns(tmp_path, server_url: str, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(
        ["bench", "pending", "--database-url", server_url, "--out", str(tmp_path), *argv]
    )


async def test_the_scenario_runs_whole_at_tiny_sizes(tmp_path, pg_server_url):
    ns = _ns(
        tmp_path,
        pg_server_url,
        "--sizes",
        "320,1600",
        "--steady-rate",
        "50",
        "--steady-seconds",
        "2",
        "--delay",
        "0.5",
        "--drain",
        "300",
        "--schedule-seconds",
        "0.5",
        "--ops",
        "8",
        "--repeats",
        "5",
        "--extras-at",
        "1600",
        "--backoff-timers",
        "200",
        "--av-seconds",
        "1",
        "--no-progress",
    )
    assert await pending.run(ns) == 0
    (run,) = list(tmp_path.iterdir())
    doc = json.loads((run / "result.json").read_text())
    assert doc["sizes"] == [320, 1600]
    for n in ("320", "1600"):
        r = doc["runs"][n]
        assert r["steady"]["delivered"] == r["steady"]["scheduled"] == 100
        assert r["drain"]["delivered"] == 300
        assert r["ops"]["cancel_statuses"] == {"cancelled": 8}
        assert r["sizes_after_load"]["heap_bytes"] > 0
        for f in pending.FIGURES:
            if f.key not in ("autovacuum_ms",):  # autovacuum may not visit in two seconds
                assert r["figures"][f.key] is not None, (n, f.key)
    big = doc["runs"]["1600"]
    assert big["backoff"]["with"]["claim200_buffers"] > 0
    assert big["brokers3"]["drain"]["brokers"] == 3
    assert set(big["autovacuum"]) == {"schema", "defaults"}
    assert "autovacuum_vacuum_threshold=500" in big["autovacuum"]["schema"]["reloptions"]
    assert "autovacuum_vacuum_threshold" not in big["autovacuum"]["defaults"]["reloptions"]
    summary = (run / "summary.md").read_text()
    assert "growth 1,600 vs 320" in summary
    assert (run / "pending-growth.png").exists() and (run / "pending-lateness.png").exists()
