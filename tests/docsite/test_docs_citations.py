"""Every "<document> §N" the code and the docs cite names a document in docs/design that has a
section N, so a reader can follow every citation inside the repository. A bare "§N" continues
the citation before it in the same file ("client-wire §6, §7", "timers-contract §12 ... §12").
A path to a design document (spec/<name>.md) must name one that docs/design holds."""

from __future__ import annotations

import re

from .scan import ROOT, citations, citing_files, design_sections, ours, python_files

_SPEC_PATH = re.compile(r"\bspec/([\w-]+)\.md")


def test_design_documents_are_in_the_repository():
    sections = design_sections()
    assert {"timer-internals", "timers-contract", "log-engine", "client-wire"} <= sections.keys()
    assert "architecture" in sections
    assert {"2.3", "2.10", "12"} <= sections["timers-contract"]


def test_every_section_citation_resolves():
    sections = design_sections()
    bad, count = [], 0
    for path in citing_files():
        current = None
        for line, doc, sec in citations(path.read_text()):
            count += 1
            where = f"{path.relative_to(ROOT)}:{line}"
            if doc is not None:
                current = doc
            if current is None:
                bad.append(f"{where}: §{sec} names no document")
            elif current not in sections:
                bad.append(f"{where}: {current} §{sec}: no docs/design/{current}.md")
            elif sec not in sections[current]:
                bad.append(f"{where}: {current} has no section {sec}")
    assert count > 30, "the scan found too few citations: is it reading the code?"
    assert not bad, "\n".join(bad)


def test_every_path_to_a_design_document_resolves():
    names = design_sections().keys()
    bad = []
    for path in citing_files():
        text = path.read_text()
        for m in _SPEC_PATH.finditer(text):
            if m.group(1) not in names:
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
        if "../shared/" in text:
            bad.append(f"{path.relative_to(ROOT)}: points outside the repository (../shared/)")
    assert not bad, "\n".join(bad)


def test_the_scans_skip_installed_peers_and_bench_results():
    # The bench installs its peers (their own pages and sources) and writes its results inside
    # the tree; neither is ours to cite correctly.
    assert ours(ROOT / "bench" / "peers.py") and ours(ROOT / "docs" / "index.md")
    for path in (
        "bench/.peers",
        "bench/.peers/pgqueuer/.venv/lib/python3.11/site-packages/pgqueuer/qm.py",
        "bench/.peers/node_modules/pg-boss/README.md",
        "bench/results/2026-12-05-000000-peers/summary.md",
        "plugins/http/.venv/lib/x.py",
    ):
        assert not ours(ROOT / path), path
    skipped = [p for p in (*citing_files(), *python_files(ROOT / "bench")) if not ours(p)]
    assert not skipped
