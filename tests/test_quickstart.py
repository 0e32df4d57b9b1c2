"""The README's quickstart runs as written: each block marked `<!-- quickstart: NAME ... -->` is
taken verbatim and run (the shell block with bash, the client blocks with this venv's Python)
against a broker started here, whose address reaches the block through the variables the block
itself reads (`QUEEN_URL`, `QUEEN_TCP_PORT`). The blocks wait for the fire with long-poll pops,
never a sleep, so a run's length is the timer's 2 s delay plus the calls."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from queen_timers.testing import serving

README = Path(__file__).resolve().parents[1] / "README.md"
# Generous: a block takes about 2.5 s; its long-poll pops give up after 30 s each.
BLOCK_TIMEOUT_S = 120


def quickstart_block(name: str) -> tuple[str, str]:
    """(language, text) of the fenced block right after the block's marker comment."""
    readme = README.read_text()
    marker = re.search(rf"^<!-- quickstart: {re.escape(name)}\b.*-->\n", readme, re.M)
    assert marker, f"README.md has no `<!-- quickstart: {name} -->` marker"
    fence = re.compile(r"```(\w+)\n(.*?)^```$", re.S | re.M).match(readme, marker.end())
    assert fence, f"the quickstart marker {name!r} is not followed by a fenced block"
    return fence.group(1), fence.group(2)


async def run_block(argv: list[str], text: str, env: dict[str, str]) -> list[str]:
    """Run `argv` with the block on its standard input; answer its stdout's non-empty lines."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(text.encode()), BLOCK_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out.decode()}\n{err.decode()}"
    assert not err.strip(), err.decode()
    return [line for line in out.decode().splitlines() if line.strip()]


def labelled(lines: list[str]) -> list[tuple[str, str]]:
    """The `label: value` lines a client block prints (the client's own chatter left out)."""
    out = []
    for line in lines:
        label, sep, value = line.partition(": ")
        if sep and label in {"schedule", "peek", "popped", "ack", "cancel"}:
            out.append((label, value))
    return out


@pytest.mark.parametrize("name", ["shell", "python", "tcp"])
def test_the_blocks_read_the_broker_address_and_never_sleep(name):
    language, text = quickstart_block(name)
    assert language == {"shell": "sh"}.get(name, "python")
    assert not re.search(r"\bsleep\b", text), "the quickstart waits with long-poll pops"
    wanted = {"shell": "${QUEEN_URL:-http://127.0.0.1:6632}", "python": '"QUEEN_URL"'}
    assert wanted.get(name, '"QUEEN_TCP_PORT"') in text


async def test_the_shell_quickstart_delivers_a_timer(db_url):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (the shell quickstart needs it)")
    _, text = quickstart_block("shell")
    async with serving(database_url=db_url, sweeper=True) as broker:
        lines = await run_block(["bash", "-s"], text, {"QUEEN_URL": broker.url})
    answers = [json.loads(line) for line in lines]
    assert len(answers) == 8, lines
    schedule, peek, pop, ack, first, second, cancel, late_cancel = answers

    [scheduled] = schedule["results"]
    assert scheduled["status"] == "scheduled" and scheduled["timerKey"] == "order-42/expire"
    assert peek["found"] is True and peek["txn"] == scheduled["txn"]
    [msg] = pop["messages"]
    assert msg["data"] == {"orderId": 42}
    assert msg["transactionId"] == scheduled["txn"] and msg["id"] == scheduled["messageId"]
    assert [a["success"] for a in ack] == [True], ack
    assert [r["status"] for r in first["results"] + second["results"]] == [
        "scheduled",
        "rescheduled",
    ]
    assert cancel["status"] == "cancelled" and cancel["timerKey"] == "order-43/expire"
    assert late_cancel["status"] == "absent" and late_cancel["timerKey"] == "order-42/expire"


async def test_the_official_client_quickstart_delivers_a_timer(db_url):
    _, text = quickstart_block("python")
    async with serving(database_url=db_url, sweeper=True) as broker:
        lines = await run_block([sys.executable, "-"], text, {"QUEEN_URL": broker.url})
    got = labelled(lines)
    assert [label for label, _ in got] == [
        "schedule",
        "peek",
        "popped",
        "ack",
        "schedule",
        "schedule",
        "cancel",
    ], lines
    status, txn, _deliver_at = got[0][1].split(" ")
    assert status == "scheduled"
    assert got[1][1] == "True"
    assert got[2][1] == f"{{'orderId': 44}} {txn}"
    assert [value for _, value in got[3:]] == ["True", "scheduled", "rescheduled", "cancelled"]


async def test_the_tcp_client_quickstart_delivers_a_timer(db_url):
    _, text = quickstart_block("tcp")
    async with serving(database_url=db_url, sweeper=True, transports=("tcp",)) as broker:
        port = broker.transports["tcp"].port  # type: ignore[attr-defined]
        lines = await run_block([sys.executable, "-"], text, {"QUEEN_TCP_PORT": str(port)})
    assert labelled(lines) == [
        ("schedule", "scheduled"),
        ("peek", "True"),
        ("popped", "{'orderId': 46}"),
        ("ack", "True"),
        ("schedule", "scheduled"),
        ("schedule", "rescheduled"),
        ("cancel", "cancelled"),
    ], lines
