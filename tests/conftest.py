"""Test fixtures: a real PostgreSQL for every test that touches the database.

The fixtures live in queen.testing.fixtures so transport plugins' tests share them (and one
run starts one server); see that module for how databases are made.
"""

from queen.testing.fixtures import *  # noqa: F401,F403 - pytest collects fixtures by name
