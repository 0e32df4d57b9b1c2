"""`queen bench compare`: the order of the runs, the arithmetic of its table, the checkout of
the other build (against a tiny git repository made here) and the environment that makes a run
import that build instead of the installed one."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import (
    CompareError,
    alternation,
    checkout,
    compare_figures,
    numeric_figures,
    run,
    run_env,
)
from queen_timers.cli import build_parser


def test_runs_alternate_in_pairs_a_b_then_b_a():
    assert alternation(1) == ["A", "B"]
    assert alternation(2) == ["A", "B", "B", "A"]
    assert alternation(3) == ["A", "B", "B", "A", "A", "B"]
    assert alternation(4) == ["A", "B", "B", "A"] * 2
    for n in range(1, 7):  # every build runs once per pair
        order = alternation(n)
        assert order.count("A") == order.count("B") == n
    with pytest.raises(ValueError):
        alternation(0)


def test_numeric_figures_skip_flags_text_and_missing_figures():
    rows = [
        {"what": "steady", "p99 ms": 12.5, "delivered": 100, "errors": None, "censored": False},
        {"what": "burst", "per s": 9000.0, "late p99 ms": ">= 3.00"},
    ]
    assert numeric_figures(rows) == {
        ("steady", "p99 ms"): 12.5,
        ("steady", "delivered"): 100.0,
        ("burst", "per s"): 9000.0,
    }


def _run(build: str, p99: float, rate: float, extra: dict | None = None) -> dict:
    return {
        "build": build,
        "rows": [{"what": "steady", "p99 ms": p99, "per s": rate, **(extra or {})}],
    }


def test_medians_spread_and_the_ratio_b_over_a():
    runs = [
        _run("A", 10.0, 500.0, {"only A": 1.0}),
        _run("B", 15.0, 400.0),
        _run("B", 5.0, 410.0),
        _run("A", 30.0, 520.0),
        _run("A", 20.0, 510.0),
        _run("B", 6.0, 420.0),
    ]
    figs = {f["figure"]: f for f in compare_figures(runs)}
    assert set(figs) == {"p99 ms", "per s"}  # a figure of one build alone has no ratio
    p99 = figs["p99 ms"]
    assert p99["a"] == {"median": 20.0, "min": 10.0, "max": 30.0, "runs": 3}
    assert p99["b"] == {"median": 6.0, "min": 5.0, "max": 15.0, "runs": 3}
    assert p99["ratio"] == pytest.approx(0.3)
    assert p99["overlap"] is True  # B's 15 lies inside A's 10-30: within this run's noise
    rate = figs["per s"]
    assert rate["ratio"] == pytest.approx(410.0 / 510.0)
    assert rate["overlap"] is False  # 400-420 against 500-520
    assert [f["figure"] for f in compare_figures(runs, keep=["p99"])] == ["p99 ms"]


def test_an_even_number_of_runs_takes_the_mean_of_the_middle_two_and_a_zero_has_no_ratio():
    runs = [_run("A", 0.0, 100.0), _run("B", 4.0, 300.0), _run("B", 2.0, 200.0)]
    runs.append(_run("A", 0.0, 200.0))
    figs = {f["figure"]: f for f in compare_figures(runs)}
    assert figs["p99 ms"]["ratio"] is None
    assert figs["per s"]["a"]["median"] == 150.0 and figs["per s"]["b"]["median"] == 250.0


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    for version in ("one", "two"):
        (r / "build.txt").write_text(version)
        _git(r, "add", "build.txt")
        _git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", version)
    return r


def test_checkout_puts_the_revision_beside_the_repository_and_removes_it(repo):
    head = _git(repo, "rev-parse", "HEAD~1").strip()
    with checkout("HEAD~1", repo) as (path, commit):
        assert commit == head
        assert (path / "build.txt").read_text() == "one"
        assert (repo / "build.txt").read_text() == "two"  # this build is left as it is
        assert repo not in path.parents
        assert str(path) in _git(repo, "worktree", "list")
    assert not path.exists() and not path.parent.exists()
    assert _git(repo, "worktree", "list").count("\n") == 1


def test_checkout_is_removed_when_the_runs_fail(repo):
    with pytest.raises(RuntimeError), checkout("HEAD", repo) as (path, _):
        raise RuntimeError("a run failed")
    assert not path.exists()
    assert _git(repo, "worktree", "list").count("\n") == 1


def test_an_unknown_revision_is_refused_before_anything_is_checked_out(repo):
    with pytest.raises(CompareError, match="no such revision"), checkout("v9.9", repo):
        pass
    assert _git(repo, "worktree", "list").count("\n") == 1


def test_a_run_imports_the_checked_out_build_not_the_installed_one(tmp_path):
    build = tmp_path / "build"
    for pkg in ("queen_timers", "bench", "plugins/http/queen_http"):
        (build / pkg).mkdir(parents=True)
        (build / pkg / "__init__.py").write_text("BUILD = 'checked out'\n")
    env = run_env(build, {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(":")[0] == str(build.resolve())
    assert env["PYTHONPATH"].split(":")[-1] == "/elsewhere"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import bench, queen_http, queen_timers; "
            "print(queen_timers.BUILD, bench.BUILD, queen_http.BUILD)",
        ],
        env=env,
        cwd=tmp_path,  # not the build: PYTHONPATH alone finds it (a run's cwd is its build)
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["checked", "out"] * 3


def test_compare_takes_its_options_then_the_scenario_and_the_scenario_its_own():
    parser, _ = build_parser()
    ns = parser.parse_args(
        [
            "bench",
            "compare",
            "--against",
            "HEAD~3",
            "--rounds",
            "3",
            "sweeper",
            "steady",
            "--seconds",
            "5",
            "--rate",
            "200",
        ]
    )
    assert ns.against == "HEAD~3" and ns.rounds == 3 and ns.scenario == "sweeper"
    assert ns.scenario_args == ["steady", "--seconds", "5", "--rate", "200"]
    assert callable(ns.command_main)
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "compare", "sweeper"])  # --against is required


# A stand-in for `python -m bench SCENARIO ... --out DIR`: writes a result.json whose one figure
# is the build's own (read from the checkout it runs in), and appends its build to a shared log.
_FAKE_BENCH = """
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1]) / "x-fake"
out.mkdir(parents=True)
here = pathlib.Path.cwd()
value = float((here / "figure.txt").read_text())
with open(os.environ["FAKE_ORDER_LOG"], "a") as f:
    f.write(f"{value:g} {' '.join(sys.argv[1:3])}\\n")
rows = [{"what": "steady", "p99 ms": value, "per s": 100.0}]
(out / "result.json").write_text(json.dumps({"meta": {"git": {"commit": "x"}}, "rows": rows}))
"""


def test_a_compare_runs_each_build_in_turn_and_reads_b_over_a(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "__init__.py").write_text("")
    (repo / "bench" / "__main__.py").write_text(_FAKE_BENCH)
    (repo / "figure.txt").write_text("40")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "A")
    (repo / "figure.txt").write_text("30")  # B: this build, uncommitted
    log = tmp_path / "order.log"
    monkeypatch.setenv("FAKE_ORDER_LOG", str(log))
    ns = argparse.Namespace(
        against="HEAD",
        rounds=2,
        figures="p99",
        run_timeout=60.0,
        scenario="machine",
        scenario_args=["--seconds", "1"],
        database_url=None,
        out=str(tmp_path / "results"),
        json=False,
        no_progress=True,
    )
    assert run(ns, repo) == 0
    assert log.read_text().split("\n")[:4] == [
        "40 machine --seconds",
        "30 machine --seconds",
        "30 machine --seconds",
        "40 machine --seconds",
    ]
    [result] = (tmp_path / "results").glob("*-compare/result.json")
    doc = json.loads(result.read_text())
    assert doc["config"]["order"] == ["A", "B", "B", "A"]
    [fig] = doc["figures"]
    assert fig["figure"] == "p99 ms" and fig["ratio"] == pytest.approx(0.75)
    assert fig["overlap"] is False
    assert len(list(result.parent.glob("runs/*/output.log"))) == 4
    assert _git(repo, "worktree", "list").count("\n") == 1  # A's checkout is gone
