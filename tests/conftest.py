"""Test fixtures: a real PostgreSQL for every test that touches the database.

The fixtures (db_url, conn, queen, pgbouncer...) come from the pytest plugin
queen_timers.testing.fixtures, which the package registers under the `pytest11` entry point, so
transport plugins' tests share them (and one run starts one server); see that module for how
databases are made.
"""
