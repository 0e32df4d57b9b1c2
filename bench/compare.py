"""compare: one scenario on two builds, alternated in one run, read as a ratio beside its noise.

    queen bench compare --against REV [--rounds N] [--figures F,...] SCENARIO [its options]

A is REV, checked out beside this build (`git worktree add --detach` in a temporary directory,
removed after); B is this build, the working tree as it is (uncommitted changes included).
Each run is `python -m bench SCENARIO [its options]` in a process of its own, with PYTHONPATH
naming the build's checkout first (its queen_timers, plugins and bench win over the installed
ones), on a fresh database like any run. The builds alternate in pairs, A B then B A:
--rounds 2 runs A B B A, --rounds 3 runs A B B A A B, so a drift of the machine over the run
falls on both builds alike.

For every numeric figure of the scenario's summary rows (the `rows` of its result.json), the
summary shows each build's median and its min-max over the runs, and B/A, the ratio of the
medians: below 1 means B's figure is smaller (for a lateness: better; for a rate: worse).
Where the two ranges overlap, the difference is within this run's own noise.
Each run's own result directory is kept under runs/ in the compare's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from . import SCENARIOS
from .harness import REPO_ROOT, Results, fmt, median

__all__ = ["alternation", "checkout", "compare_figures", "main", "run_env"]

BUILDS = {"A": "--against", "B": "this build"}
# Where a checkout keeps its importable packages (PYTHONPATH entries, in this order).
PACKAGE_ROOTS = (".", "plugins/http", "plugins/tcp", "examples/custom_transport")


class CompareError(Exception):
    """A build cannot be checked out or run: the message says why."""


def alternation(pairs: int) -> list[str]:
    """The order of the runs: `pairs` pairs, A B then B A in turn (A B B A A B ...)."""
    if pairs < 1:
        raise ValueError(f"at least one pair: {pairs}")
    order: list[str] = []
    for i in range(pairs):
        order += ["A", "B"] if i % 2 == 0 else ["B", "A"]
    return order


def _git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise CompareError(f"git {' '.join(args)}: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


@contextlib.contextmanager
def checkout(rev: str, repo: Path = REPO_ROOT) -> Iterator[tuple[Path, str]]:
    """(a checkout of `rev` in a temporary directory, its commit); removed on exit, its
    worktree entry too, however the block ends."""
    try:
        commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except CompareError:
        raise CompareError(f"no such revision in {repo}: {rev!r}") from None
    tmp = Path(tempfile.mkdtemp(prefix="queen-bench-compare-"))
    path = tmp / commit[:12]
    try:
        _git(repo, "worktree", "add", "--detach", str(path), commit)
        yield path, commit
    finally:
        with contextlib.suppress(CompareError):
            _git(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(CompareError):
            _git(repo, "worktree", "prune")


def run_env(root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a run of the build checked out at `root`: its package roots first
    on PYTHONPATH (ahead of the editable installs, which are .pth entries after it)."""
    env = dict(os.environ if base is None else base)
    paths = [str((root / p).resolve()) for p in PACKAGE_ROOTS]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def numeric_figures(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(row, figure) -> value of every number in a run's summary rows (not a flag, not text)."""
    out: dict[tuple[str, str], float] = {}
    for row in rows:
        what = str(row.get("what"))
        for k, v in row.items():
            if k != "what" and isinstance(v, int | float) and not isinstance(v, bool):
                out[(what, k)] = float(v)
    return out


def compare_figures(
    runs: Sequence[dict[str, Any]], keep: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Per figure present in both builds' runs: each build's median, min and max, B/A (the
    ratio of the medians; None where A's is 0) and whether the two ranges overlap. `runs` are
    {"build": "A" | "B", "rows": [...]}; `keep`, substrings of the figures to keep (all if
    empty). In the order the figures first appear."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for run in runs:
        for key, v in numeric_figures(run.get("rows") or []).items():
            if keep and not any(k in key[1] for k in keep):
                continue
            values.setdefault(key, {"A": [], "B": []})[run["build"]].append(v)
    out = []
    for (what, figure), by in values.items():
        a, b = by["A"], by["B"]
        if not a or not b:
            continue
        ma, mb = median(a), median(b)
        assert ma is not None and mb is not None
        out.append(
            {
                "what": what,
                "figure": figure,
                "a": {"median": ma, "min": min(a), "max": max(a), "runs": len(a)},
                "b": {"median": mb, "min": min(b), "max": max(b), "runs": len(b)},
                "ratio": (mb / ma) if ma else None,
                "overlap": max(a) >= min(b) and max(b) >= min(a),
            }
        )
    return out


def _span(x: dict[str, float]) -> str:
    return f"{fmt(x['min'], 2)}-{fmt(x['max'], 2)}"


def _run_one(
    build: str, root: Path, ns: argparse.Namespace, out: Path, log: Path
) -> dict[str, Any]:
    """One run of the scenario on one build: its result.json's rows, or its error."""
    args = list(ns.scenario_args)
    if ns.database_url and "--database-url" not in args:
        args += ["--database-url", ns.database_url]
    cmd = [sys.executable, "-m", "bench", ns.scenario, *args, "--no-progress", "--out", str(out)]
    t0 = time.monotonic()
    with log.open("w") as f:
        try:
            r = subprocess.run(
                cmd,
                cwd=root,
                env=run_env(root),
                stdout=f,
                stderr=subprocess.STDOUT,
                timeout=ns.run_timeout,
            )
            code: int | None = r.returncode
        except subprocess.TimeoutExpired:
            code = None
    wall = time.monotonic() - t0
    found = sorted(out.glob("*/result.json"))
    if code != 0 or not found:
        why = "timed out" if code is None else f"exit {code}"
        return {"build": build, "wall_s": wall, "error": f"{why}; see {log}", "rows": []}
    doc = json.loads(found[-1].read_text())
    return {
        "build": build,
        "wall_s": wall,
        "commit": doc.get("meta", {}).get("git", {}).get("commit"),
        "result_dir": str(found[-1].parent),
        "postgres": doc.get("meta", {}).get("postgres"),
        "rows": doc.get("rows") or [],
    }


def run(ns: argparse.Namespace, repo: Path = REPO_ROOT) -> int:
    """The compare of `ns` on `repo`'s working tree (B) and its revision ns.against (A)."""
    order = alternation(ns.rounds)
    res = Results("compare", ns)
    keep = [k.strip() for k in (ns.figures or "").split(",") if k.strip()]
    runs: list[dict[str, Any]] = []
    try:
        with checkout(ns.against, repo) as (a_root, a_commit):
            roots = {"A": a_root, "B": repo}
            res.meta["builds"] = {
                "A": {"rev": ns.against, "commit": a_commit},
                "B": {"rev": "this build", "commit": res.meta["git"].get("commit")},
            }
            res.say(f"A = {ns.against} ({a_commit[:12]}) in {a_root}; B = this build")
            for i, build in enumerate(order, 1):
                res.say(f"run {i}/{len(order)}: {build} ({ns.scenario}) ...")
                tag = f"{i:02d}-{build}"
                out = res.dir / "runs" / tag
                out.mkdir(parents=True, exist_ok=True)
                r = _run_one(build, roots[build], ns, out, out / "output.log")
                runs.append({"order": i, **r})
                if r.get("postgres") and "postgres" not in res.meta:
                    res.meta["postgres"] = r["postgres"]  # the summary's header shows it
                res.say(
                    f"run {i}/{len(order)}: {build} {r.get('error') or 'done'}, {r['wall_s']:.1f} s"
                )
    except CompareError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    figures = compare_figures(runs, keep)
    res.data["config"] = {
        "against": ns.against,
        "rounds": ns.rounds,
        "order": order,
        "scenario": ns.scenario,
        "scenario_args": list(ns.scenario_args),
        "figures": keep,
    }
    res.data["runs"] = runs
    res.data["figures"] = figures
    for f in figures:
        res.row(
            f"{f['what']}: {f['figure']}",
            **{
                "A median": f["a"]["median"],
                "A min-max": _span(f["a"]),
                "B median": f["b"]["median"],
                "B min-max": _span(f["b"]),
                "B/A": f["ratio"],
                "ranges overlap": f["overlap"],
            },
        )
    failed = [r for r in runs if r.get("error")]
    res.section(
        f"A = `{ns.against}` ({res.meta['builds']['A']['commit'][:12]}), B = this build; "
        f"runs in the order {' '.join(order)}: `{ns.scenario} {' '.join(ns.scenario_args)}`. "
        "B/A is the ratio of the medians; where the ranges overlap, the difference is within "
        "this run's noise."
        + (
            "\n\nFailed runs: "
            + "; ".join(f"{r['order']} ({r['build']}): {r['error']}" for r in failed)
            if failed
            else ""
        )
    )
    res.finish()
    return 1 if failed or not figures else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--against", required=True, metavar="REV", help="the build to compare with (git revision)"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="alternated pairs of runs: A B, then B A, ... (2: A B B A)",
    )
    p.add_argument(
        "--figures",
        default=None,
        help="keep only the figures whose name contains one of these (comma-separated: "
        "'p50,p99,per s'); all numeric figures by default",
    )
    p.add_argument(
        "--run-timeout",
        type=float,
        default=1800.0,
        help="seconds one run of the scenario may take before it is stopped (1800)",
    )
    p.add_argument("scenario", choices=SCENARIOS, help="the scenario to run on both builds")
    p.add_argument(
        "scenario_args",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="the scenario's own options, as after `queen bench SCENARIO`",
    )


def main(ns: argparse.Namespace) -> int:
    if ns.rounds < 1:
        print("compare: --rounds must be at least 1", file=sys.stderr)
        return 2
    return run(ns)
