"""The site's shape: the nav of mkdocs.yml lists every page under docs/ and only pages that
exist, including the pages other work owns (the shared contract's layout)."""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from .scan import DOCS, ROOT

# The layout the contract between the branches fixes (docs/ paths).
CONTRACT_PAGES = {
    "index.md",
    *(f"concepts/{p}.md" for p in ("timers", "exactly-once", "log")),
    *(
        f"guides/{p}.md"
        for p in (
            "clients",
            "plugins",
            "operators",
            "benchmarks",
            "cli",
            "console",
            "sql-api",
            "tenants",
            "scale",
        )
    ),
    *(f"reference/{p}.md" for p in ("http", "tcp", "settings", "errors", "metrics")),
    *(
        f"design/{p}.md"
        for p in ("timer-internals", "timers-contract", "log-engine", "client-wire")
    ),
    "DEVELOPING.md",
}


def _pages(nav: object) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _pages(value)


def _nav() -> list[str]:
    # mkdocs.yml holds no custom tags, so the safe loader reads it.
    return list(_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


def test_nav_lists_every_page_once():
    nav = _nav()
    assert len(nav) == len(set(nav))
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert set(nav) == on_disk


def test_the_contract_layout_is_there():
    assert set(_nav()) >= CONTRACT_PAGES
