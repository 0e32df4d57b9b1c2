"""`queen serve --help` lists every setting, as the code declares it (cli.documented_settings)."""

from queen_timers.cli import _settings_epilog, documented_settings
from queen_timers.transport import discover


def test_help_lists_what_the_docs_list():
    decls = documented_settings(discover())
    epilog = _settings_epilog(decls)
    assert {"QUEEN_POOL_MAX", "QUEEN_HTTP_PORT", "QUEEN_TCP_PORT"} <= {s.env for s in decls}
    for s in decls:
        assert s.flag in epilog and s.env in epilog and s.help in epilog
