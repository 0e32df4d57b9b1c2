"""Peer drivers of the peers scenario: one process per (system, workload) that schedules the
workload and consumes it, and prints one JSON line: {scheduled, delivered, pairs: [[due,
delivered_at], ...], errors}. Times are epoch seconds of this machine's clock.

The peers are used as installed libraries only (procrastinate in bench/.peers/venv, pg-boss in
bench/.peers/node_modules, both git-ignored and installed on demand by bench/peers.py).
"""
