"""Test fixtures: a real PostgreSQL for every test that touches the database.

The fixtures live in queen_timers.testing.fixtures so transport plugins' tests share them (and one
run starts one server); see that module for how databases are made.
"""

from queen_timers.testing.fixtures import *  # noqa: F403 - pytest collects fixtures by name
