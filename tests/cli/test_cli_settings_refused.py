"""`queen serve` with a setting out of its range refuses before anything starts (issue 24, "A bad
setting never starts"): one line on stderr naming the flag, the environment variable, the value
and what is allowed, exit status 2, no traceback, no PostgreSQL launched and no port bound.

Every declared setting (the core's and each installed transport's) is walked in-process through
the command's entry point, as a flag and as an environment variable; a few are run as a person
runs them, in a subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from queen_timers.cli import main

from .helpers import Serving, failure_line, queen, short_dir
from .setting_walk import ALL, bad_values

# One malformed or out-of-range value per setting (the first its rule refuses); the rule tests
# walk all of them.
WALK = [pytest.param(s, bad_values(s)[0], id=s.env) for s in ALL]


@pytest.fixture
def empty_root(monkeypatch):
    """A fresh short directory, the working directory of the command (a relative --data-dir
    lands in it), and an environment without QUEEN_ variables."""
    for name in [k for k in os.environ if k.startswith("QUEEN_")]:
        monkeypatch.delenv(name)
    with short_dir() as root:
        monkeypatch.chdir(root)
        yield root


def _refused_in_process(capsys, root: Path, argv: list[str], flag: str, env: str) -> None:
    code = main(["serve", *argv])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""  # no banner: nothing served
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"queen: {flag} / {env} = "), err
    # The embedded PostgreSQL starts first of all (before the sweeper and any listener), in
    # --data-dir under `root`: an empty root means none of them ran.
    assert list(root.iterdir()) == []


@pytest.mark.parametrize(("s", "value"), WALK)
def test_every_setting_out_of_range_refuses_as_a_flag(s, value, empty_root, capsys):
    data_dir = [] if s.name == "data_dir" else ["--data-dir", str(empty_root / "pg")]
    _refused_in_process(capsys, empty_root, [*data_dir, f"{s.flag}={value}"], s.flag, s.env)


@pytest.mark.parametrize(("s", "value"), WALK)
def test_every_setting_out_of_range_refuses_from_the_environment(
    s, value, empty_root, capsys, monkeypatch
):
    monkeypatch.setenv(s.env, value)
    data_dir = [] if s.name == "data_dir" else ["--data-dir", str(empty_root / "pg")]
    _refused_in_process(capsys, empty_root, data_dir, s.flag, s.env)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (
            ["--zstd-level", "99"],
            {},
            "queen: --zstd-level / QUEEN_ZSTD_LEVEL = 99: must be an integer from 1 to 22 "
            "(zstd's compression levels)",
        ),
        (
            [],
            {"QUEEN_HTTP_PORT": "99999"},
            "queen: --http-port / QUEEN_HTTP_PORT = 99999: must be an integer from 0 to 65535 "
            "(a TCP port; 0: any free one)",
        ),
        (
            ["--pool-max", "abc"],
            {},
            "queen: --pool-max / QUEEN_POOL_MAX = abc: must be an integer of at least 1 "
            "(a pool serves nothing without a connection)",
        ),
    ],
)
def test_the_reported_cases_as_a_person_runs_them(args, env, line):
    with short_dir() as root:
        data_dir = root / "pg"
        r = queen("serve", "--data-dir", str(data_dir), *args, check=False, **env)
        assert failure_line(r) == line and r.returncode == 2
        assert r.stdout == "" and not data_dir.exists()


@pytest.mark.slow
def test_migrate_refuses_too():
    with short_dir() as root:
        r = queen("migrate", "--data-dir", str(root / "pg"), "--pool-min", "-1", check=False)
        assert failure_line(r).startswith("queen: --pool-min / QUEEN_POOL_MIN = -1: must be")
        assert not (root / "pg").exists()


@pytest.mark.slow
def test_a_broker_at_the_edges_of_the_ranges_starts():
    edges = {
        "--zstd-level": "22",
        "--sweeper-parallelism": "8",
        "--http-port": "0",
        "--tcp-port": "0",
        "--linejson-port": "0",
        "--pool-min": "1",
        "--pool-max": "1",
        "--statement-timeout-ms": "2147483647",
        "--timers-tenant-writes-per-sec": "0.001",
    }
    with short_dir() as d:
        args = [x for pair in edges.items() for x in pair]
        with Serving("--data-dir", str(d / "pg"), *args) as broker:
            assert broker.lines[0].startswith("queen: serving")
            assert broker.stop() == 0
