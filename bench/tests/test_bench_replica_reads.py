"""bench/replica_reads.py (`queen bench console-routes --replica`): the phases alternate, the
primary's CPU is read from its process tree, and one small run on a real primary and standby
records every phase and the ratios."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from bench import console_routes, harness, replica_reads


def test_phases_alternate_a_b_b_a():
    assert replica_reads.phases(2) == ["A", "B", "B", "A", "A", "B", "B", "A"]


def test_a_process_tree_counts_its_children_cpu_live_and_reaped():
    before = replica_reads.tree_cpu_s(os.getpid())
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)  # reaped: in our cutime
    assert replica_reads.tree_cpu_s(os.getpid()) - before >= 0.25


async def test_a_small_run_records_each_phase(tmp_path, capsys):
    p = argparse.ArgumentParser()
    console_routes.add_arguments(p)
    harness.add_common(p)
    ns = p.parse_args(
        ["--replica", "--out", str(tmp_path), "--timers", "2000", "--calls", "1", "--rounds", "1"]
    )
    assert await console_routes.main(ns) == 0
    assert "loaded 2,000 timers, replayed on the standby" in capsys.readouterr().out
    [result] = tmp_path.glob("*-console-routes-replica/result.json")
    doc = json.loads(result.read_text())
    rows = doc["rows"]
    assert [r["what"].split(": ")[1] for r in rows] == [
        "reads on the primary",
        "reads on the replica",
        "reads on the replica",
        "reads on the primary",
    ]
    assert all(r["calls"] == len(replica_reads.READS) and r["primary CPU s"] >= 0 for r in rows)
    assert len(doc["ratios_b_over_a"]) == 2
