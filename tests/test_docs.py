"""The README is where users read the settings: it must list every one, as the code declares it.
`queen serve --help` and the README's table come from one list (cli.documented_settings)."""

from pathlib import Path

from queen_timers.cli import _settings_epilog, documented_settings, settings_markdown
from queen_timers.transport import discover


def test_readme_settings_table_matches_the_code():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for line in settings_markdown(documented_settings(discover())).splitlines()[2:]:
        assert line in readme, f"README settings table is stale; run `queen settings`: {line}"


def test_help_lists_what_the_docs_list():
    decls = documented_settings(discover())
    epilog = _settings_epilog(decls)
    assert {"QUEEN_POOL_MAX", "QUEEN_HTTP_PORT", "QUEEN_TCP_PORT"} <= {s.env for s in decls}
    for s in decls:
        assert s.flag in epilog and s.env in epilog and s.help in epilog
