"""The test fixtures as a pytest plugin: the `pytest11` entry point names the fixtures module,
and in a project of someone else's the plugin only offers fixtures: it starts no server until a
test asks for one, and the project's own fixtures of the same names win."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

PLUGIN_MODULE = "queen_timers.testing.fixtures"

FOREIGN_CONFTEST = """
import pytest


@pytest.fixture
def queen():
    return "the project's own"
"""

FOREIGN_TESTS = """
from queen_timers.identity import Identity
from queen_timers.testing import fixtures


def test_the_plugin_is_loaded(request):
    assert request.config.pluginmanager.has_plugin("queen_timers")


def test_a_fixture_of_the_plugin_is_offered(ident):
    assert ident == Identity(subject="tester")


def test_the_projects_own_fixture_wins(queen):
    assert queen == "the project's own"


def test_no_server_was_started():
    assert fixtures._shared == {}
"""


def test_the_entry_point_names_the_fixtures_module():
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("queen_timers") == PLUGIN_MODULE


def test_in_a_foreign_project_the_plugin_offers_fixtures_and_starts_nothing(tmp_path):
    # A typical project's settings (pytest-asyncio warns when the loop scope is unset).
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
    )
    (tmp_path / "conftest.py").write_text(textwrap.dedent(FOREIGN_CONFTEST))
    (tmp_path / "test_foreign.py").write_text(textwrap.dedent(FOREIGN_TESTS))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout
