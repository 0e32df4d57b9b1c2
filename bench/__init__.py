"""queen-timers bench suite: `queen bench <scenario>` or `python -m bench <scenario>`.

Scenarios: soak, amplification, peers (see bench/cli.py). Needs the `bench` extra:
`pip install -e ".[dev,bench]"`. Results go to bench/results/<date>-<scenario>/ (git-ignored);
the current table of measured numbers is bench/RESULTS.md.
"""

__all__ = ["SCENARIOS"]

SCENARIOS = ("soak", "amplification", "peers")
