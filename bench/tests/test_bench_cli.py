"""`queen bench` is one front door, found by the core through its command seam
(queen_timers.commands), with the machine diagnostics off unless a flag asks for them."""

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
        ["amplification"],
        ["sweeper", "steady"],
        ["transport-schedule"],
        ["fire-cost"],
        ["log-push-pop"],
    ],
)
def test_the_machine_diagnostics_are_opt_in(args):
    ns = _parse(*args)
    for flag in ("cpu_probe", "host_floor", "fsync"):
        assert getattr(ns, flag, False) is False, flag
    on = _parse(*args, "--fsync")
    assert on.fsync is True


def test_cpu_probe_and_host_floor_flags_switch_them_on():
    ns = _parse("sweeper", "steady", "--cpu-probe", "--host-floor")
    assert ns.cpu_probe and ns.host_floor
    assert _parse("soak", "--cpu-probe").cpu_probe


def test_queen_bench_and_python_m_bench_are_one_command():
    for cmd in (
        [sys.executable, "-m", "queen_timers", "bench", "--help"],
        [sys.executable, "-m", "bench", "--help"],
    ):
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
        assert all(name in out for name in SCENARIOS), cmd
