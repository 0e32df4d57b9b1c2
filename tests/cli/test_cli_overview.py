"""`queen status` and `queen queues` against a database a broker serves: what they report is
what the database holds, and the command itself never counts as a broker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .helpers import RUN_TIMEOUT_S, Serving, env, queen, queen_json

pytestmark = pytest.mark.slow


def _schedule(db_url: str, queue: str, key: str, delay: str) -> None:
    queen(
        "timers", "schedule", queue, key, f"--delay={delay}", "--payload", "x",
        "--database-url", db_url,
    )  # fmt: skip


def test_status_reports_the_broker_the_switches_and_the_timers(db_url):
    queen("switches", "set", "--timers-fire", "off", "--database-url", db_url)  # nothing fires
    _schedule(db_url, "orders", "late", "-1h")  # overdue: due an hour ago
    _schedule(db_url, "orders", "soon", "10m")
    _schedule(db_url, "billing", "later", "2h")
    with Serving("--transport", "none", QUEEN_DATABASE_URL=db_url) as broker:
        p = subprocess.run(
            [sys.executable, "-m", "queen_timers", "status", "--json", "--database-url", db_url],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            env=env(),
        )
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        pids = [int(b["pid"]) for b in out["brokers"]["list"]]
        assert broker.proc.pid in pids
        assert out["brokers"]["alive"] == len(pids) == 1  # the command is not a broker
        text = queen("status", "--database-url", db_url).stdout
        assert broker.stop() == 0
    assert out["database"]["reachable"] and out["schema"]["current"]
    assert out["switches"]["timersFireEnabled"] is False
    assert out["timers"]["pending"] == 3 and out["timers"]["overdue"] == 1
    assert out["timers"]["oldestOverdueMs"] >= 3_600_000
    for shown in ("1 alive", "timersFireEnabled OFF", "3 pending, 1 overdue", "matches this"):
        assert shown in text, text


def test_queues_lists_each_queue_with_its_timers_and_dead_letters(db_url):
    queen("switches", "set", "--timers-fire", "off", "--database-url", db_url)
    _schedule(db_url, "orders", "late", "-1h")
    _schedule(db_url, "orders", "soon", "10m")
    _schedule(db_url, "billing", "later", "2h")
    out = queen_json("queues", "--database-url", db_url)
    by_name = {q["name"]: q for q in out["queues"]}
    assert by_name["orders"]["timers"]["pending"] == 2
    # Due counts are from now on; the overdue one is counted apart.
    assert by_name["orders"]["timers"]["dueNextMinute"] == 0
    assert by_name["orders"]["timers"]["dueNextHour"] == 1
    assert by_name["orders"]["timers"]["overdue"] == 1
    assert by_name["orders"]["timers"]["oldestOverdueMs"] >= 3_600_000
    assert by_name["billing"]["timers"]["dueNextHour"] == 0
    assert by_name["billing"]["deadLetters"] == 0
    table = queen("queues", "--database-url", db_url).stdout
    assert "oldest overdue" in table and "orders" in table and "billing" in table
    assert "2 queue(s)" in table


def test_status_on_a_schema_of_another_installation_says_to_migrate(db_url):
    # A digest that is not this installation's: the schema a different version applied.
    import asyncio

    import asyncpg

    async def forge() -> None:
        conn = await asyncpg.connect(db_url)
        try:
            await conn.execute(
                'UPDATE queen.system_state SET value = value || \'{"digest": "0"}\' '
                "WHERE key = 'schema'"
            )
        finally:
            await conn.close()

    asyncio.run(forge())
    r = queen("status", "--database-url", db_url, check=False)
    assert r.returncode == 1
    assert "run `queen migrate`" in r.stdout
