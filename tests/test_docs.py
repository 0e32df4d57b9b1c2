"""The README is where users read the settings: it must list every one, as the code has it."""

from pathlib import Path

from queen_timers.cli import settings_markdown
from queen_timers.settings import SETTINGS
from queen_timers.transport import discover, transport_settings


def test_readme_settings_table_matches_the_code():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    installed = transport_settings(discover())
    for line in settings_markdown([*SETTINGS, *installed]).splitlines()[2:]:
        assert line in readme, f"README settings table is stale; run `queen settings`: {line}"
