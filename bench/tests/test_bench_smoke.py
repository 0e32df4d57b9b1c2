"""End-to-end smoke runs of every scenario at toy sizes, against real PostgreSQL.

Not part of the default run (they start PostgreSQL and broker processes and take about two
minutes): QUEEN_BENCH_SMOKE=1 python -m pytest bench/tests/test_bench_smoke.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("QUEEN_BENCH_SMOKE") != "1",
    reason="bench smoke runs only with QUEEN_BENCH_SMOKE=1",
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, *args: str) -> dict:
    out = tmp_path / "results"
    r = subprocess.run(
        [sys.executable, "-m", "bench", *args, "--no-progress", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (run,) = list(out.iterdir())
    assert (run / "summary.md").exists()
    assert list(run.glob("*.png"))
    return json.loads((run / "result.json").read_text())


def test_soak_ramp_smoke(tmp_path):
    doc = _run(tmp_path, "soak", "--ramp", "--rates", "50,100", "--duration", "4")
    assert doc["fired"] == doc["scheduled"] > 0
    assert [s["label"] for s in doc["steps"]] == ["50/s", "100/s"]
    assert doc["meta"]["postgres"]["settings"]["autovacuum_naptime"]
    assert doc["samples"] and "lsn" in doc["samples"][0]


def test_amplification_smoke(tmp_path):
    doc = _run(
        tmp_path,
        "amplification",
        "--timers",
        "300",
        "--sustain-seconds",
        "2",
        "--sustain-rate",
        "50",
        "--backoff",
        "0,500",
        "--repeats",
        "2",
    )
    for v in ("A", "B", "C"):
        assert doc["variants"][v]["phases"]["fired"] == 300
    assert doc["variants"]["C"]["phases"]["claim_hot_ratio"] > 0.5
    assert doc["variants"]["A"]["phases"]["claim_hot_ratio"] == 0


def test_peers_smoke(tmp_path):
    doc = _run(
        tmp_path,
        "peers",
        "--systems",
        "floor,queen",
        "--burst",
        "200",
        "--steady-rate",
        "50",
        "--steady-seconds",
        "2",
        "--peer-timeout",
        "30",
    )
    for w in ("burst", "steady"):
        for s in ("floor", "queen"):
            r = doc["workloads"][w][s]
            assert r["delivered"] == r["scheduled"] > 0


def _scenario(*args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def test_sweeper_steady_with_the_host_floor_smoke():
    out = _scenario(
        "sweeper",
        "steady",
        "--seconds",
        "2",
        "--rate",
        "50",
        "--delay",
        "0.5",
        "--host-floor",
        "--cpu-probe",
        "--fsync",
    )
    assert out.startswith("fsync floor (")
    for name in ("jitter", "select1", "commit"):
        assert f"\n  {name} " in out
    assert "scheduled=100, delivered=100, early=0" in out
    assert "cpu_probe={slow_windows=" in out and "outside_slow_windows={timers_pct=" in out
    assert "of requests overlapped a slow-CPU window or the 100 ms after it; the others: p50" in out


def test_sweeper_steady_runs_no_diagnostic_unless_asked_smoke():
    out = _scenario("sweeper", "steady", "--seconds", "2", "--rate", "50", "--delay", "0.5")
    assert "scheduled=100, delivered=100, early=0" in out
    assert "host floor" not in out and "fsync floor" not in out and "cpu_probe=" not in out


def test_transport_schedule_smoke():
    out = _scenario(
        "transport-schedule",
        "--seconds",
        "1",
        "--rate",
        "100",
        "--transports",
        "none",
        "tcp",
        "--host-floor",
        "--cpu-probe",
    )
    assert "floor paced" in out and "tcp   paced" in out and "none  batch" in out
    assert out.count("cpu probe: unit median") == 3  # the floor and each paced run


def test_fire_cost_and_log_push_pop_smoke():
    out = _scenario("fire-cost", "--timers", "400", "--queues", "2", "--rounds", "1")
    assert "round 1: 400 timers due at once in 2 queues" in out
    out = _scenario("log-push-pop", "--messages", "1000", "--single-messages", "50")
    assert "push    batch=500" in out and "pop+ack batch=500 consumers=4" in out
