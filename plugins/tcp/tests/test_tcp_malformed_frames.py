"""Malformed request frames: a frame whose length prefix is intact is answered with the 400
envelope and the connection goes on serving; before hello it is answered and then closed."""

from __future__ import annotations

import asyncio

import pytest

from queen_tcp.client import TcpClient
from queen_tcp.protocol import DECODER, encode_frame
from queen_timers.errors import QueenError

# msgpack: 0x93 is an array of 3, 0x91 an array of 1; 0xa4 a 4-byte string.
DEEP_BODY = b"\x91" * 5000 + b"\xc0"


def frame(raw: bytes) -> bytes:
    return len(raw).to_bytes(4, "big") + raw


async def _read_frame(reader):
    n = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
    return DECODER.decode(await reader.readexactly(n))


async def _hello(tcp_transport):
    reader, writer = await asyncio.open_connection(tcp_transport.host, tcp_transport.port)
    writer.write(encode_frame([0, "hello", {"token": None}]))
    assert (await _read_frame(reader))[1] == 200
    return reader, writer


def _is_envelope(body) -> bool:
    return isinstance(body, dict) and all(
        isinstance(body.get(k), str) for k in ("error", "reason", "detail")
    )


@pytest.mark.parametrize(
    "raw, rid",
    [
        (b"\x93\x07\xa4push" + DEEP_BODY, 7),  # the head is readable: the answer carries its id
        (b"\x93\xcd\x01\x00\xa4push" + DEEP_BODY, 256),
        (b"\x91" * 5000 + b"\xc0", 0),  # nothing readable: id 0
        (b"abc", 0),
        (b"\x93\x05\xa4push", 5),  # truncated: the body is missing, the id is there
        (b"\xc1", 0),  # a byte msgpack never uses
        (b"\x92\x01\xa4push", 0),  # two elements, not three
    ],
    ids=["deep-id7", "deep-id256", "deep-no-head", "garbage", "truncated", "reserved", "short"],
)
async def test_a_malformed_frame_is_answered_and_the_connection_goes_on(
    tcp_transport, conn, raw, rid
):
    before = await conn.fetchval("SELECT count(*) FROM queen.queues")
    reader, writer = await _hello(tcp_transport)
    try:
        writer.write(frame(raw))
        got_id, status, body = await _read_frame(reader)
        assert (got_id, status) == (rid, 400), body
        assert _is_envelope(body) and (body["error"], body["reason"]) == (
            "bad_request",
            "bad_frame",
        )
        # The length prefix marked where the next frame starts: the connection still serves.
        writer.write(encode_frame([9, "push", {"items": [{"queue": "after", "payload": 1}]}]))
        got_id, status, body = await _read_frame(reader)
        assert (got_id, status, body[0]["status"]) == (9, 200, "queued")
    finally:
        writer.close()
    assert await conn.fetchval("SELECT count(*) FROM queen.queues") == before + 1


async def test_a_malformed_frame_before_hello_is_answered_then_closed(tcp_transport):
    reader, writer = await asyncio.open_connection(tcp_transport.host, tcp_transport.port)
    try:
        writer.write(frame(b"\x93\x03\xa5hello" + DEEP_BODY))
        got_id, status, body = await _read_frame(reader)
        assert (got_id, status, body["reason"]) == (3, 400, "bad_frame")
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed
    finally:
        writer.close()


async def test_the_client_gets_the_refusal_of_its_own_call(tcp_transport):
    """The official TcpClient pairs answers by id: a deep body fails that call alone."""
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        raw_items = [{"queue": "q", "payload": 1}]
        assert (await c.push(raw_items))[0]["status"] == "queued"
        # The client's encoder cannot build such a frame: write it on the client's own
        # connection, under an id (4242, uint16 0x1092) the client awaits.
        fut = asyncio.get_running_loop().create_future()
        c._pending[4242] = fut
        c._wire.transport.write(frame(b"\x93\xcd\x10\x92\xa4push" + DEEP_BODY))
        with pytest.raises(QueenError) as ei:
            await asyncio.wait_for(fut, 10)
        assert (ei.value.status, ei.value.reason) == (400, "bad_frame")
        assert (await c.push(raw_items))[0]["status"] == "queued"
