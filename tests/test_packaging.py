"""One version source per distribution (its package's `__version__`), and every package ships
its `py.typed` marker, so a type checker reads our annotations in a user's project."""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

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
    assert (Path(module.__file__).parent / "py.typed").is_file()
