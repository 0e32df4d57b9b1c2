"""`queen bench` is one front door, found by the core through its command seam
(queen_timers.commands): every scenario takes the harness's common options, and the CPU probe
runs only when a flag asks for it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from bench import SCENARIOS
from queen_timers import commands
from queen_timers.cli import build_parser

pytestmark = pytest.mark.skipif(
    "bench" not in {ep.name for ep in entry_points(group=commands.ENTRY_POINT_GROUP)},
    reason="the bench distribution is not installed: pip install -e bench (CI does)",
)


def _parse(*args: str) -> argparse.Namespace:
    parser, _ = build_parser()
    return parser.parse_args(["bench", *args])


def test_every_scenario_is_a_subcommand_of_queen_bench():
    for name in SCENARIOS:
        ns = _parse(name, *(["steady"] if name == "sweeper" else []))
        assert callable(ns.command_main), name


@pytest.mark.parametrize(
    "args",
    [
        ["soak"],
        ["peers"],
        ["sweeper", "steady"],
        ["transport-schedule"],
        ["sql-schedule"],
        ["machine"],
    ],
)
def test_the_cpu_probe_is_opt_in(args):
    assert _parse(*args).cpu_probe is False
    assert _parse(*args, "--cpu-probe").cpu_probe is True


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_takes_the_common_options(name):
    ns = _parse(name, *(["steady"] if name == "sweeper" else []), "--json", "--out", "/x")
    assert ns.json is True and ns.out == "/x"
    assert ns.database_url is None and ns.keep_db is False and ns.no_progress is False


def test_queen_bench_and_python_m_bench_are_one_command():
    for cmd in (
        [sys.executable, "-m", "queen_timers", "bench", "--help"],
        [sys.executable, "-m", "bench", "--help"],
    ):
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
        assert all(name in out for name in SCENARIOS), cmd
