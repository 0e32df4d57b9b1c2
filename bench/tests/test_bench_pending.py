"""bench/pending.py: the growth arithmetic, the load's layout, and the whole scenario at tiny
sizes on the real server (every phase runs, every figure is there, the table is judged)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from bench import pending
from bench.cli import add_bench_parser
from bench.env import with_database


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


def _ns(out, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", "pending", "--out", str(out), *argv])


def test_alternated_rounds_go_forward_then_back():
    assert pending.alternated([1, 2], 3) == [(0, 1), (0, 2), (1, 2), (1, 1), (2, 1), (2, 2)]
    assert [n for _, n in pending.alternated([1, 2, 3], 2)] == [1, 2, 3, 3, 2, 1]
    assert pending._chunks(10, 4) == [3, 3, 2, 2]


TINY = [
    "--sizes", "320,1600", "--steady-rate", "50", "--steady-seconds", "1", "--delay", "0.5",
    "--drain", "300", "--schedule-seconds", "0.6", "--ops", "8", "--repeats", "6",
    "--rounds", "3", "--no-progress",
]  # fmt: skip


async def _tamper_stamp(data_dir, n: int) -> None:
    """Make the kept template of size n look loaded under another schema."""
    import asyncio

    import asyncpg

    from queen_timers.db import EmbeddedPostgres

    emb = EmbeddedPostgres(data_dir)
    url = await asyncio.to_thread(emb.start)
    try:
        conn = await asyncpg.connect(with_database(url, pending.template_name(n)))
        try:
            await conn.execute(
                "UPDATE queen.system_state SET value = jsonb_set(value, '{digest}', "
                "'\"older\"') WHERE key = 'schema'"
            )
        finally:
            await conn.close()
    finally:
        await asyncio.to_thread(emb.stop)


@pytest.fixture
def kept_dir():
    # Not under tmp_path: the server runs as another user when the tests run as root, and
    # pytest keeps its own directory 0700 (any pytest session starting resets that).
    root = tempfile.mkdtemp(prefix="qbk-", dir="/tmp")
    os.chmod(root, 0o755)
    yield Path(root) / "pg"
    shutil.rmtree(root, ignore_errors=True)


async def test_the_scenario_runs_whole_alternated_and_reuses_its_loads(tmp_path, kept_dir):
    data = kept_dir
    extras = ["--extras-at", "1600", "--backoff-timers", "200", "--av-seconds", "1"]
    ns = _ns(tmp_path / "r1", "--keep-data", str(data), "--shared-buffers", "64MB", *TINY, *extras)
    assert await pending.run(ns) == 0
    (run,) = list((tmp_path / "r1").iterdir())
    doc = json.loads((run / "result.json").read_text())
    assert doc["sizes"] == [320, 1600]
    assert doc["prepared"] == {"320": "loaded", "1600": "loaded"}
    assert doc["server"]["shared_buffers"] == "64MB"
    # the samples were taken alternated: A B, B A, A B for the calls, A B B A for the phases
    calls = [o["n"] for o in doc["order"] if o["phase"] == "calls"]
    assert calls == [320, 1600, 1600, 320, 320, 1600]
    phases = [o["n"] for o in doc["order"] if o["phase"] == "steady+drain"]
    assert phases == [320, 1600, 1600, 320]
    for n in ("320", "1600"):
        r = doc["runs"][n]
        assert [v["round"] for v in r["visits"]] == [0, 1, 2]
        assert r["steady"]["runs"] == 2 and len(r["boot"]["runs"]) == 2
        assert r["steady"]["delivered"] == r["steady"]["scheduled"] == 100
        assert r["drain"]["delivered"] == 600
        assert r["ops"]["cancel_statuses"] == {"cancelled": 8}
        assert r["sweeper"]["repeats"] == 6
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
    assert "growth 1,600 vs 320" in summary and "shared_buffers = 64MB" in summary
    assert (run / "pending-growth.png").exists() and (run / "pending-lateness.png").exists()

    # Again on the kept directory, the 320 template stamped by another schema: that one is
    # loaded again, the other copied; shared_buffers back to the default.
    await _tamper_stamp(data, 320)
    ns = _ns(
        tmp_path / "r2", "--keep-data", str(data), *TINY,
        "--extras", "", "--phase-rounds", "1", "--drain", "100", "--warm",
    )  # fmt: skip
    assert await pending.run(ns) == 0
    (run,) = list((tmp_path / "r2").iterdir())
    doc = json.loads((run / "result.json").read_text())
    assert doc["prepared"] == {"320": "reloaded", "1600": "reused"}
    assert "schema changed" in doc["runs"]["320"]["load"]["why"]
    assert doc["server"]["shared_buffers"] == "256MB"
    assert doc["runs"]["1600"]["ops"]["cancel_statuses"] == {"cancelled": 8}  # a fresh copy
    # --warm read each heap before the rounds, and the summary says so
    assert all(doc["runs"][n]["load"]["warm_s"] >= 0 for n in ("320", "1600"))
    assert doc["settings"]["warm"] is True
    assert "read into shared_buffers before the rounds" in (run / "summary.md").read_text()
