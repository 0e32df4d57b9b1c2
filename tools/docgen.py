"""The generated parts of the docs site, written from the code's own declarations.

    python tools/docgen.py           rewrite every generated block in docs/
    python tools/docgen.py --check   exit 1 and name the pages whose blocks differ

A generated block sits between `<!-- generated:NAME -->` and `<!-- end generated:NAME -->` in
its page; the prose around it is written by hand. tests/test_docs.py fails when a block has
drifted from the code, so a new setting or metric cannot ship undocumented.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from queen_timers.delivery import discover_deliveries
from queen_timers.metrics import Metrics
from queen_timers.settings import Setting, Settings, cross_rules, declared
from queen_timers.transport import discover, settings_classes

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The plugins whose settings the page documents: the two shipped transports, the example and the
# webhook delivery (an installation without one of them would silently drop its rows, so the
# check names them).
DOCUMENTED_TRANSPORTS = ("http", "tcp", "linejson", "webhooks")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def setting_sources() -> list[tuple[str, list[Setting]]]:
    """(where it is declared, its settings): the core first, then each plugin's."""
    factories = {**discover(), **discover_deliveries()}
    missing = [name for name in DOCUMENTED_TRANSPORTS if name not in factories]
    if missing:
        raise SystemExit(f"install the plugins {missing} before generating the settings page")
    out = [("queen_timers.settings.Settings", list(declared(Settings)))]
    for cls in settings_classes(factories[name] for name in DOCUMENTED_TRANSPORTS):
        out.append((f"{cls.__module__}.{cls.__qualname__}", list(declared(cls))))
    return out


def settings_block() -> str:
    parts: list[str] = []
    for source, settings in setting_sources():
        groups: dict[str, list[Setting]] = {}
        for s in settings:
            groups.setdefault(s.group, []).append(s)
        for group, members in groups.items():
            parts.append(f"### `{group}` ({source})\n")
            parts.append("| environment | flag | default | allowed | meaning |")
            parts.append("|---|---|---|---|---|")
            for s in members:
                parts.append(
                    f"| `{s.env}` | `{s.flag}` | `{_cell(s.default_text())}` | "
                    f"{_cell(s.allowed_text())} | {_cell(s.help)} |"
                )
            parts.append("")
    parts.append("### Rules over several settings\n")
    plugins = [*discover().values(), *discover_deliveries().values()]
    for cls in [Settings, *settings_classes(plugins)]:
        flags = {s.name: s.flag for s in declared(cls)}
        for rule in cross_rules(cls):
            parts.append(f"- `{flags[rule.first]}` must be {_cell(rule.describe)}.")
    return "\n".join(parts).rstrip("\n")


def metric_rows(metrics: Metrics | None = None) -> list[tuple[str, str, str, str]]:
    """(exposed name, type, labels, help) of every metric a broker's Metrics declares."""
    metrics = metrics if metrics is not None else Metrics()
    rows = []
    for collector in vars(metrics).values():
        if not callable(getattr(collector, "describe", None)):
            continue
        # prometheus_client keeps a metric's label names private and shows them only on
        # samples, which a labelled metric has none of before its first observation.
        labels = ", ".join(f"`{n}`" for n in getattr(collector, "_labelnames", ()))
        for family in collector.describe():
            name = family.name + ("_total" if family.type == "counter" else "")
            rows.append((name, family.type, labels, family.documentation))
    return sorted(rows)


def metrics_block() -> str:
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name, kind, labels, doc in metric_rows():
        lines.append(f"| `{name}` | {kind} | {labels or '-'} | {_cell(doc)} |")
    return "\n".join(lines)


BLOCKS: dict[str, tuple[Path, Callable[[], str]]] = {
    "settings": (DOCS / "reference" / "settings.md", settings_block),
    "metrics": (DOCS / "reference" / "metrics.md", metrics_block),
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated:{name} -->\n)(.*?)(<!-- end generated:{name} -->)", re.DOTALL
    )


def rendered(name: str) -> tuple[str, str]:
    """(the page as it is, the page with its block regenerated)."""
    page, make = BLOCKS[name]
    text = page.read_text()
    pattern = _pattern(name)
    if not pattern.search(text):
        raise SystemExit(f"{page}: no <!-- generated:{name} --> block")
    block = make()
    return text, pattern.sub(lambda m: m.group(1) + block + "\n" + m.group(3), text)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report drift")
    ns = parser.parse_args(list(argv) if argv is not None else None)
    stale = []
    for name, (page, _) in BLOCKS.items():
        old, new = rendered(name)
        if old != new:
            stale.append(page.relative_to(ROOT))
            if not ns.check:
                page.write_text(new)
    if ns.check and stale:
        print("stale generated docs (run python tools/docgen.py):", *stale, file=sys.stderr)
        return 1
    for page in stale:
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
