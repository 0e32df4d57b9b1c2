"""`queen serve --data-dir X` remembers X, so the commands after it find that broker without
being told again; when nothing answers, the error names every place a command looked."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from queen_timers.cli.connect import choose
from queen_timers.cli.failures import Refusal
from queen_timers.cli.remembered import recall, remember, state_file

from .helpers import Serving, failure_line, queen, queen_json, short_dir


def _ns(**given: str) -> argparse.Namespace:
    return argparse.Namespace(data_dir=given.get("data_dir"), database_url=given.get("url"))


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """A user whose state and data directories are fresh (and nothing runs in them)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for name in ("QUEEN_DATABASE_URL", "QUEEN_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_the_state_file_follows_xdg_and_falls_back_to_home(homes, monkeypatch):
    assert state_file() == homes / "state" / "queen" / "data-dir"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(homes / "home"))
    assert state_file() == homes / "home" / ".local" / "state" / "queen" / "data-dir"


def test_remember_then_recall(homes):
    assert recall() is None
    assert remember(Path("/srv/queen/pg")) == state_file()
    assert recall() == Path("/srv/queen/pg")
    remember(Path("/srv/other"))  # the last one served wins
    assert recall() == Path("/srv/other")
    assert state_file().read_text() == "/srv/other\n"


def test_a_state_directory_that_cannot_be_written_does_not_stop_anything(homes):
    (homes / "state").write_text("a file where a directory should be")
    assert remember(Path("/srv/queen/pg")) is None
    assert recall() is None


def test_explicit_choices_come_first(homes):
    remember(homes / "served")
    env = {"QUEEN_DATABASE_URL": "postgresql://db/queen"}
    # the flag beats the environment's URL
    s = choose(_ns(data_dir="/x/pg"), env).settings
    assert (s.data_dir, s.database_url) == ("/x/pg", None)
    assert choose(_ns(url="postgresql://other/q"), env).settings.database_url == (
        "postgresql://other/q"
    )
    c = choose(_ns(), env)
    assert c.settings.database_url == "postgresql://db/queen" and c.remembered is None
    c = choose(_ns(), {"QUEEN_DATA_DIR": "/y/pg"})
    assert c.settings.data_dir == "/y/pg" and c.remembered is None and not c.looked
    with pytest.raises(Refusal, match="not both") as exc:
        choose(_ns(data_dir="/x/pg", url="postgresql://db/queen"), {})
    assert exc.value.code == 2


def test_with_nothing_given_and_nothing_running_every_place_is_listed(homes):
    default = homes / "data" / "queen" / "pg"
    c = choose(_ns(), {})
    assert c.remembered is None and Path(c.settings.data_dir) == default
    assert any(f"none in {state_file()}" in x for x in c.looked)
    assert f"the default data directory {default}: no PostgreSQL runs there" in c.looked
    remember(homes / "served")
    c = choose(_ns(), {})
    assert c.remembered is None and Path(c.settings.data_dir) == default  # not running
    assert any(str(homes / "served") in x and str(state_file()) in x for x in c.looked)
    remember(default)  # served from the default directory: said once, of the default
    c = choose(_ns(), {})
    last_used = "(the one `queen serve` last used)"
    assert c.looked[-1] == (
        f"the default data directory {default} {last_used}: no PostgreSQL runs there"
    )
    assert len(c.looked) == 3


@pytest.mark.slow
def test_the_commands_find_the_broker_serve_last_started():
    with short_dir() as root:
        d = root / "pg"
        homes = {"XDG_STATE_HOME": str(root / "st"), "XDG_DATA_HOME": str(root / "dt")}
        with Serving("--data-dir", str(d), "--transport", "none", **homes) as broker:
            state = root / "st" / "queen" / "data-dir"
            assert state.read_text() == f"{d}\n"
            assert broker.field("remembered").startswith(f"in {state}: ")
            # no flag, no variable: the remembered directory, said on stderr
            r = queen("status", "--json", check=True, **homes)
            assert "Traceback" not in r.stderr
            assert f"the database of {d}, the data directory `queen serve` last used" in r.stderr
            assert queen_json("status", **homes)["database"]["embedded"] == str(d)
            # an explicit choice is never second-guessed
            other = root / "other"
            line = failure_line(queen("status", "--data-dir", str(other), check=False, **homes))
            assert f"no embedded PostgreSQL is running in {other}" in line
            assert broker.stop() == 0
        line = failure_line(queen("status", check=False, **homes))
        assert "found no running database; looked at:" in line
        assert f"{d}, the data directory `queen serve` last used ({state})" in line
        assert f"the default data directory {root / 'dt' / 'queen' / 'pg'}" in line
        assert "--data-dir" in line and "--database-url" in line
        assert not (root / "dt").exists()  # a command launches nothing
