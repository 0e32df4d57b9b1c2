"""The peers scenario's systems: every run names the five by default, each Python peer runs from
a venv of its own, and the PgQueuer driver's arithmetic (its pacing, its delays, its chunks),
read without PgQueuer installed."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bench import peers
from bench.peer_drivers import pgqueuer_driver as pgq


def _parse(*args: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    peers.add_arguments(p)
    return p.parse_args(list(args))


def test_every_peers_run_names_the_floor_queen_and_the_three_peers():
    assert _parse().systems.split(",") == ["floor", "queen", "pgboss", "procrastinate", "pgqueuer"]
    assert _parse("--systems", "floor,pgqueuer").systems == "floor,pgqueuer"


def test_each_python_peer_runs_its_driver_from_a_venv_of_its_own():
    for system in ("procrastinate", "pgqueuer"):
        py, driver = peers.peer_command(system)
        assert py == str(peers.PEERS_DIR / system / ".venv" / "bin" / "python")
        assert driver == str(peers.DRIVERS / f"{system}_driver.py")
        assert (peers.DRIVERS / f"{system}_driver.py").exists()
    packages, module = peers.PIP_PEERS["pgqueuer"]
    assert module == "pgqueuer" and packages[0] == peers.PGQUEUER_SPEC
    assert peers.PGQUEUER_SPEC.startswith("pgqueuer>=1.6")


def test_a_missing_peer_is_skipped_with_its_reason_under_no_install(tmp_path, monkeypatch):
    monkeypatch.setattr(peers, "PEERS_DIR", tmp_path)
    monkeypatch.setattr(peers, "REPO_ROOT", tmp_path.parent)
    cmd, why = peers.ensure_pip_peer("pgqueuer", install=False)
    assert cmd is None
    assert why == f"pgqueuer not installed in {tmp_path.name}/pgqueuer/.venv (--no-install)"


def test_the_pgqueuer_driver_imports_only_the_standard_library_at_its_top():
    # It runs in PgQueuer's venv, where the bench is not installed, and the bench reads it
    # where PgQueuer is not: its peer is imported inside main() only.
    tree = ast.parse(Path(pgq.__file__).read_text())
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            top.add(node.module.split(".")[0])
    assert top <= set(sys.stdlib_module_names) | {"__future__"}, top


def test_the_pgqueuer_driver_reports_its_recommended_settings():
    assert pgq.SETTINGS["consumer_connections"] == 1
    assert pgq.SETTINGS["batch_size"] == pgq.BATCH > 10  # raised above its default for short jobs
    assert "autovac" in str(pgq.SETTINGS["autovacuum"])


def test_pgqueuer_delays_are_relative_to_the_instant_of_the_enqueue():
    assert pgq.delay_until(110.0, 100.0) == timedelta(seconds=10)
    assert pgq.delay_until(100.25, 100.0) == timedelta(milliseconds=250)
    assert pgq.delay_until(99.0, 100.0) == timedelta(0)  # already due: at once, never negative


def test_pgqueuer_steady_pacing_is_the_other_drivers_open_loop():
    # 500/s: one job at t=0, then rate * elapsed (+1) in all, capped at n, never negative
    assert pgq.steady_want(500, 0.0, 1000, 0) == 1
    assert pgq.steady_want(500, 0.1, 1000, 1) == 50
    assert pgq.steady_want(500, 0.1, 1000, 51) == 0
    assert pgq.steady_want(500, 0.1, 1000, 60) == 0  # ahead of the grid: wait
    assert pgq.steady_want(500, 10.0, 1000, 990) == 10  # the cap
    sent, t = 0, 0.0
    while sent < 1000:  # at any tick, the run sends exactly n in all
        sent += pgq.steady_want(500, t, 1000, sent)
        t += 0.013
    assert sent == 1000


def test_pgqueuer_burst_chunks_cover_the_burst_exactly():
    assert pgq.burst_chunks(2500) == [1000, 1000, 500]
    assert pgq.burst_chunks(1000) == [1000]
    assert pgq.burst_chunks(0) == []
    assert sum(pgq.burst_chunks(20000)) == 20000


@pytest.mark.skipif(
    importlib.util.find_spec("pgqueuer") is not None, reason="PgQueuer is importable here"
)
async def test_a_driver_that_cannot_start_is_reported_not_waited_for():
    # The driver's command line, run where PgQueuer is missing (the bench's own environment):
    # it exits at the import inside main, and the scenario reports why instead of a figure.
    cfg = {"workload": "burst", "n": 5, "due": 0.0, "timeout": 1.0, "url": "postgresql:///x"}
    out = await peers._driver([sys.executable, pgq.__file__], cfg, timeout=5.0)
    assert out["delivered"] == 0 and out["scheduled"] == 5
    [error] = out["errors"]
    assert error.startswith("driver exit 1:") and "pgqueuer" in error
