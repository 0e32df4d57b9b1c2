"""Peer drivers of the peers scenario: one process per (system, workload) that schedules the
workload and consumes it, and prints one JSON line: {scheduled, delivered, pairs: [[due,
delivered_at], ...], errors}. Times are epoch seconds of this machine's clock.

The peers are used as installed libraries only: a Python peer in a venv of its own,
bench/.peers/<system>/.venv (procrastinate, pgqueuer), pg-boss in bench/.peers/node_modules; all
git-ignored and installed on demand by bench/peers.py. A Python driver runs in its peer's venv;
the pgqueuer driver imports its peer inside `main`, so the bench's tests read its arithmetic
without PgQueuer installed.
"""
