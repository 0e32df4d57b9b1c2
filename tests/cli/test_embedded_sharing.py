"""Two users of one embedded data directory: the server is shared and reference-counted, so
stopping one never takes the database from another, and the last one out stops it."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import asyncpg
import pytest

from queen_timers.db.embedded import EmbeddedNotRunning, EmbeddedPostgres, _postmaster_running

from .helpers import Serving, short_dir

pytestmark = pytest.mark.slow


async def _answers(url: str) -> bool:
    conn = await asyncpg.connect(url, timeout=30)
    try:
        return await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()


async def test_the_last_user_stops_the_server_whichever_started_it():
    with short_dir() as root:
        d = root / "pg"
        first, second = EmbeddedPostgres(d), EmbeddedPostgres(d)
        url = await asyncio.to_thread(first.start)
        assert first.launched
        assert await asyncio.to_thread(second.start) == url
        assert not second.launched  # it joined the running server
        await asyncio.to_thread(first.stop)  # the one that started it leaves first
        assert _postmaster_running(d)
        assert await _answers(url)
        await asyncio.to_thread(second.stop)
        assert not _postmaster_running(d)
        await asyncio.to_thread(second.stop)  # twice is safe


async def test_joining_only_never_launches_nor_creates_the_directory():
    with short_dir() as root:
        d = root / "pg"
        with pytest.raises(EmbeddedNotRunning, match="queen serve --data-dir"):
            await asyncio.to_thread(EmbeddedPostgres(d).start, launch=False)
        assert not d.exists()
        owner = EmbeddedPostgres(d)
        await asyncio.to_thread(owner.start)
        await asyncio.to_thread(owner.stop)
        with pytest.raises(EmbeddedNotRunning):
            await asyncio.to_thread(EmbeddedPostgres(d).start, launch=False)
        assert not _postmaster_running(d)


def _schedule_over_http(base: str, key: str) -> str:
    body = json.dumps(
        [
            {
                "op": "schedule",
                "queue": "shared",
                "timerKey": key,
                "delayMs": 3_600_000,
                "payload": "aGk=",
                "txn": key,
            }
        ]
    ).encode()
    req = urllib.request.Request(
        f"{base}/api/v1/timers", body, {"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["results"][0]["status"]


@pytest.mark.parametrize("first_out", ["the_launcher", "the_joiner"])
def test_stopping_one_broker_leaves_the_other_its_database(first_out):
    with short_dir() as root:
        d = str(root / "pg")
        args = ("--data-dir", d, "--transport", "http", "--http-port", "0")
        with Serving(*args) as a, Serving(*args) as b:
            leaving, staying = (a, b) if first_out == "the_launcher" else (b, a)
            assert leaving.stop() == 0
            assert _postmaster_running(root / "pg")
            base = staying.field("http")
            assert _schedule_over_http(base, "after-the-other-left") == "scheduled"
            assert staying.stop() == 0
        assert not _postmaster_running(root / "pg")
