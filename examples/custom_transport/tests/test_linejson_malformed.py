"""Malformed request lines: each is answered with the 400 envelope, and the connection goes on
(a newline still marks where the next request starts); a malformed hello is answered, then
closed."""

import asyncio
import json

import pytest

from queen_linejson import LineJsonTransport
from queen_timers.settings import Settings


@pytest.fixture
async def linejson(queen):
    t = LineJsonTransport(Settings(environ={}, extra=(LineJsonTransport.settings_class,)))
    await t.start(queen)
    try:
        yield t
    finally:
        await t.stop()


async def _ask(reader, writer, line: bytes) -> dict:
    writer.write(line + b"\n")
    return json.loads(await asyncio.wait_for(reader.readline(), 10))


def _refused_400(answer: dict) -> bool:
    err = answer.get("error") or {}
    return (
        answer.get("ok") is False
        and answer.get("status") == 400
        and all(isinstance(err.get(k), str) for k in ("error", "reason", "detail"))
        and err["error"] == "bad_request"
    )


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 1000,
        b"[" * 1200 + b"]" * 1200,
        b'{"op": "push", "args": ' + b"[" * 1200 + b"}",
        b"{nope",
        b"\xff\xfe",
        b"[1, 2]",
        b'"a string"',
        b'{"op": "push", "args": [1]}',
    ],
    ids=["deep-open", "deep-closed", "deep-args", "syntax", "not-utf8", "array", "string", "args"],
)
async def test_a_malformed_line_is_a_400_and_the_connection_goes_on(linejson, line):
    reader, writer = await asyncio.open_connection(linejson.host, linejson.port)
    try:
        assert (await _ask(reader, writer, b'{"token": null}'))["ok"] is True
        answer = await _ask(reader, writer, line)
        assert _refused_400(answer), answer
        again = await _ask(reader, writer, b'{"op": "switches_get", "args": {}}')
        assert again["ok"] is True and again["result"]["timersFireEnabled"] is True
    finally:
        writer.close()


@pytest.mark.parametrize("line", [b"[" * 1000, b"{nope", b"[]"], ids=["deep", "syntax", "array"])
async def test_a_malformed_hello_is_answered_then_closed(linejson, line):
    reader, writer = await asyncio.open_connection(linejson.host, linejson.port)
    try:
        answer = await _ask(reader, writer, line)
        assert _refused_400(answer), answer
        assert await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()


async def test_a_line_past_the_stream_limit_is_a_413_and_the_connection_goes_on(linejson):
    reader, writer = await asyncio.open_connection(linejson.host, linejson.port)
    try:
        assert (await _ask(reader, writer, b'{"token": null}'))["ok"] is True
        answer = await _ask(reader, writer, b'{"op": "push", "pad": "' + b"x" * 200_000 + b'"}')
        assert (answer["status"], answer["error"]["reason"]) == (413, "line_too_long"), answer
        again = await _ask(reader, writer, b'{"op": "switches_get", "args": {}}')
        assert again["ok"] is True
    finally:
        writer.close()
