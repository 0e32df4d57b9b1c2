"""One version source per distribution (its package's `__version__`), and every package ships
its `py.typed` marker, so a type checker reads our annotations in a user's project. The papers:
each distribution's long description is its own short README (the core's is the front-door
README, never a reference manual: that is docs/), and LICENSE is the Apache-2.0 text the
metadata declares."""

from __future__ import annotations

import hashlib
import importlib
import tomllib
from importlib.metadata import PackageNotFoundError, metadata, version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The front door stays a front door: the README once grew to 639 lines and 50 KB of reference
# and benchmark notes, which PyPI showed as the package's page. Reference belongs in docs/.
FRONT_DOOR_MAX_LINES = 250
FRONT_DOOR_MAX_BYTES = 16_000
PLUGIN_README_MAX_LINES = 80
# SHA-256 of the Apache License 2.0 text as the ASF publishes it (LICENSE-2.0.txt).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
# Directories with a distribution of their own, each with its short README.
DISTRIBUTIONS = ["plugins/http", "plugins/tcp", "examples/custom_transport", "bench"]

PACKAGES = [
    ("queen-timers", "queen_timers"),
    ("queen-http", "queen_http"),
    ("queen-tcp", "queen_tcp"),
    ("queen-linejson-example", "queen_linejson"),
]


@pytest.mark.parametrize(("dist", "package"), PACKAGES)
def test_the_distribution_version_is_the_package_version(dist, package):
    try:
        installed = version(dist)
    except PackageNotFoundError:
        pytest.skip(f"{dist} is not installed (CI installs it)")
    module = importlib.import_module(package)
    assert module.__version__ == installed
    assert module.__file__ is not None
    assert (Path(module.__file__).parent / "py.typed").is_file()


def _project(directory: Path) -> dict:
    return tomllib.loads((directory / "pyproject.toml").read_text())["project"]


def test_the_core_long_description_is_the_short_front_door_readme():
    assert _project(ROOT)["readme"] == "README.md"
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= FRONT_DOOR_MAX_LINES, "move reference material to docs/"
    assert len(readme.encode()) <= FRONT_DOOR_MAX_BYTES, "move reference material to docs/"
    try:
        described = metadata("queen-timers").get_payload() or ""  # type: ignore[attr-defined]
    except PackageNotFoundError:
        pytest.skip("queen-timers is not installed (CI installs it)")
    assert described.startswith("# Queen timers")
    assert len(described.encode()) <= FRONT_DOOR_MAX_BYTES


@pytest.mark.parametrize("directory", DISTRIBUTIONS)
def test_each_distribution_describes_itself_with_its_own_short_readme(directory):
    assert _project(ROOT / directory)["readme"] == "README.md"
    readme = (ROOT / directory / "README.md").read_text()
    assert readme.startswith("# ")
    assert len(readme.splitlines()) <= PLUGIN_README_MAX_LINES
    assert "docs/" in readme, "a plugin's README links into the documentation"


def test_the_license_is_the_apache_2_text_the_metadata_declares():
    assert _project(ROOT)["license"] == {"text": "Apache-2.0"}
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
