"""The `queen` command: serve, migrate, the operator's commands (status, queues, timers, dlq,
switches, tenants), transports, settings, and every command an installed distribution registers
(queen_timers.commands: `queen bench` from the bench suite).

Modules: `main` (parser and the failure line), `serve` (serve, migrate), `overview_cmd`
(status, queues), `timers_cmd`, `admin_cmd` (dlq, switches), `connect` (the client Queen a
command talks through), `output` (JSON or a rich table), `failures` (what a person is told),
`settings_help` (settings as help and docs list them).
"""

from __future__ import annotations

from .main import build_parser, main
from .settings_help import documented_settings, settings_epilog, settings_markdown

# The name tests/test_docs.py imports the epilog by.
_settings_epilog = settings_epilog

__all__ = ["build_parser", "documented_settings", "main", "settings_markdown"]
