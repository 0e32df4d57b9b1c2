"""End-to-end smoke runs of the scenarios at toy sizes, against real PostgreSQL (pending,
console-routes and sql-schedule have their own tests at toy sizes).

Not part of the default run (they start PostgreSQL and broker processes and take a few
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
    doc = json.loads((run / "result.json").read_text())
    assert doc["meta"]["postgres"]["settings"]["autovacuum_naptime"]
    return doc


def test_soak_ramp_smoke(tmp_path):
    doc = _run(tmp_path, "soak", "--ramp", "--rates", "50,100", "--duration", "4")
    assert doc["fired"] == doc["scheduled"] > 0
    assert [s["label"] for s in doc["steps"]] == ["50/s", "100/s"]
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


def _rows(doc: dict) -> dict[str, dict]:
    return {r["what"]: r for r in doc["rows"]}


def test_machine_smoke(tmp_path):
    doc = _run(tmp_path, "machine", "--seconds", "1", "--rate", "100", "--cpu-probe")
    rows = _rows(doc)
    assert {w.split(" (")[0] for w in rows} == {"fsync", "jitter", "select1", "commit"}
    for what in ("select1", "commit"):
        [row] = [r for w, r in rows.items() if w.startswith(what)]
        assert row["count"] == 100 and row["p50 ms"] <= row["p99 ms"]
        assert "p99 clear ms" in row


def test_sweeper_steady_smoke(tmp_path):
    doc = _run(
        tmp_path,
        "sweeper",
        "steady",
        "--seconds",
        "2",
        "--rate",
        "50",
        "--delay",
        "0.5",
        "--cpu-probe",
    )
    [row] = doc["rows"]
    assert row["scheduled"] == row["delivered"] == 100 and row["early"] == 0
    assert "p99 clear ms" in row and doc["runs"][0]["cpu_probe"]["slow_windows"] >= 0


def test_sweeper_burst_runs_no_probe_unless_asked_smoke(tmp_path):
    doc = _run(tmp_path, "sweeper", "burst", "--timers", "300")
    [row] = doc["rows"]
    assert row["delivered"] == 300 and row["duplicates"] == 0
    assert "drain_slow_pct" not in doc["runs"][0]


def test_transport_schedule_smoke(tmp_path):
    doc = _run(
        tmp_path,
        "transport-schedule",
        "--seconds",
        "1",
        "--rate",
        "100",
        "--transports",
        "none",
        "tcp",
        "--cpu-probe",
    )
    rows = _rows(doc)
    assert rows["tcp: paced at 100/s"]["p99 clear ms"] is not None
    assert rows["none: 256-op batches, 4 clients"]["timers/s"] > 0


def test_fire_cost_and_log_push_pop_smoke(tmp_path):
    doc = _run(tmp_path / "a", "fire-cost", "--timers", "400", "--queues", "2", "--rounds", "1")
    assert _rows(doc)["claim 200, fire by ctid"]["claims"] >= 1
    doc = _run(tmp_path / "b", "log-push-pop", "--messages", "1000", "--single-messages", "50")
    assert _rows(doc)["pop+ack batch=500, 4 consumers"]["msg_per_s"] > 0
