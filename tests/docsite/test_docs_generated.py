"""The settings and metrics pages carry tables generated from the code (tools/docgen.py): each
must equal what the generator writes now, so a new setting or metric cannot ship undocumented."""

from __future__ import annotations

from queen_timers.cli import _settings_epilog, documented_settings
from queen_timers.metrics import Metrics
from queen_timers.transport import discover

from .scan import docgen


def test_settings_page_matches_the_code():
    page, regenerated = docgen().rendered("settings")
    assert page == regenerated, "docs/reference/settings.md is stale: run python tools/docgen.py"


def test_settings_page_lists_every_setting_of_core_and_transports():
    page, _ = docgen().rendered("settings")
    decls = documented_settings(discover())
    assert {"QUEEN_POOL_MAX", "QUEEN_HTTP_PORT", "QUEEN_TCP_PORT", "QUEEN_LINEJSON_PORT"} <= {
        s.env for s in decls
    }
    for s in decls:
        assert f"| `{s.env}` | `{s.flag}` |" in page, s.env


def test_help_lists_what_the_docs_list():
    decls = documented_settings(discover())
    epilog = _settings_epilog(decls)
    for s in decls:
        assert s.flag in epilog and s.env in epilog and s.help in epilog


def test_metrics_page_matches_the_registry():
    page, regenerated = docgen().rendered("metrics")
    assert page == regenerated, "docs/reference/metrics.md is stale: run python tools/docgen.py"


def test_metrics_rows_are_every_family_the_registry_exposes():
    m = Metrics()
    exposed = {f.name + ("_total" if f.type == "counter" else "") for f in m.registry.collect()}
    assert {row[0] for row in docgen().metric_rows(m)} == exposed
