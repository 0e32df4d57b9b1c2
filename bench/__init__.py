"""queen-timers bench suite: `queen bench <scenario>` or `python -m bench <scenario>`.

Its own distribution (bench/pyproject.toml, `pip install -e bench` from a checkout), which
registers `queen bench` under the entry-point group queen_timers.commands. Scenarios: see
bench/cli.py. Results go to bench/results/<date>-<scenario>/ (git-ignored); the current table
of measured numbers is bench/RESULTS.md.
"""

__all__ = ["SCENARIOS", "__version__"]

__version__ = "0.1.0"

SCENARIOS = (
    "soak",
    "amplification",
    "peers",
    "sweeper",
    "transport-schedule",
    "fire-cost",
    "log-push-pop",
    "console-routes",
    "sql-schedule",
    "schedules",
    "pending",
    "tenant-stall",
    "tracing-cost",
    "machine",
    "webhooks",
    "tail-trace",
)
