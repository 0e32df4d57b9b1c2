"""The official `queen-mq` 2.6.0 client and our broker in ONE environment and one process.

The client installs the import package `queen`; ours is `queen_timers`, so both import side by
side. The dev extra pins the client, so CI installs it with everything else. Three proofs:
no file of one distribution is a file of the other; a broker started in-process through
`queen_timers.testing.serving` answers the client in the same interpreter (schedule, fire,
pop, ack and the rest of the scenario); and so does `queen serve`, the command a user runs.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from importlib import metadata
from pathlib import Path

import httpx
import pytest
import queen
from official_client_scenario import run

import queen_timers
from queen_timers.testing import serving

CLIENT_VERSION = "2.6.0"
EVERY_STEP = [
    "configure",
    "schedule",
    "peek",
    "list",
    "pop fired",
    "ack",
    "cancel twice",
    "reschedule",
    "list pagination",
    "transaction",
    "refusals",
]


@pytest.fixture(autouse=True)
def _client_wire(monkeypatch):
    monkeypatch.setenv("QUEEN_SDK_POP_AUTOPILOT", "on")  # the client's default wire, on purpose


def _installed_files(dist: str) -> set[str]:
    files = metadata.distribution(dist).files or []
    return {str(f) for f in files if not str(f).endswith((".pyc", "RECORD", "INSTALLER"))}


def test_both_packages_import_side_by_side():
    assert metadata.version("queen-mq") == CLIENT_VERSION
    assert hasattr(queen, "Queen") and hasattr(queen_timers, "Queen")
    assert queen.Queen is not queen_timers.Queen
    ours, theirs = Path(queen_timers.__file__).parent, Path(queen.__file__).parent
    assert ours != theirs and not ours.is_relative_to(theirs)
    shared = _installed_files("queen-mq") & _installed_files("queen-timers")
    assert not shared, f"files of both distributions: {sorted(shared)}"


async def test_official_client_against_a_broker_in_this_process(db_url):
    async with serving(database_url=db_url, sweeper=True) as broker:
        assert await run(broker.url) == EVERY_STEP


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _ready(url: str, proc: asyncio.subprocess.Process, timeout_s: float = 60) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=2) as h:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while loop.time() < end:
            if proc.returncode is not None:
                raise AssertionError(f"queen serve exited with {proc.returncode}")
            try:
                if (await h.get("/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)  # a subprocess sets no event we could wait on
    raise AssertionError("queen serve never became ready")


@pytest.mark.slow
async def test_official_client_against_queen_serve(db_url, tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEEN_JWT_")}
    env |= {
        "QUEEN_DATABASE_URL": db_url,
        "QUEEN_HTTP_HOST": "127.0.0.1",
        "QUEEN_HTTP_PORT": str(port),
        "QUEEN_SWEEPER": "true",
    }
    command = Path(sys.executable).with_name("queen")  # the console script a user runs
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = await asyncio.create_subprocess_exec(
            str(command), "serve", "--transport", "http", env=env, stdout=log, stderr=log
        )
    try:
        await _ready(url, proc)
        assert await run(url) == EVERY_STEP, log_path.read_text()[-4000:]
    finally:
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()
