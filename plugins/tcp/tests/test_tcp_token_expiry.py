"""A TCP connection authenticates once, at hello, but its token keeps its `exp`: every request
after the expiry is answered with the refusal an expired token gets at hello (and on every
HTTP request), while requests accepted before it still complete."""

from __future__ import annotations

import asyncio
import math
import time
import uuid

import jwt
import pytest

from queen_tcp import TcpSettings, TcpTransport
from queen_tcp.client import TcpClient
from queen_tcp.protocol import DECODER, encode_frame
from queen_timers.errors import QueenError
from queen_timers.settings import Settings
from queen_timers.testing.fixtures import started_broker

SECRET = "tcp-expiry-secret-0123456789abcdef0123"


def tcp_settings(**overrides) -> Settings:
    return Settings({"tcp_port": 0, **overrides}, environ={}, extra=(TcpSettings,))


def _token(tenant: uuid.UUID, exp: int | None = None) -> str:
    claims: dict = {"sub": "expiring", "tenant": str(tenant)}
    if exp is not None:
        claims["exp"] = exp
    return jwt.encode(claims, SECRET, algorithm="HS256")


@pytest.fixture
async def authed_tcp(db_url):
    async with started_broker(db_url, jwt_secret=SECRET) as q:
        t = TcpTransport(tcp_settings())
        await t.start(q)
        try:
            yield t
        finally:
            await t.stop()


def _soon() -> int:
    # `exp` is whole seconds (a JWT NumericDate): 0.5 to 1.5 s from now, time enough for the
    # calls that must still pass on a loaded machine.
    return math.ceil(time.time() + 0.5)


async def _until(instant: float) -> None:
    delay = instant - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


async def _read_frame(reader):
    n = int.from_bytes(await reader.readexactly(4), "big")
    return DECODER.decode(await reader.readexactly(n))


async def test_requests_after_exp_are_refused_like_an_expired_hello(authed_tcp):
    t = authed_tcp
    tenant = uuid.uuid4()
    exp = _soon()
    expiring = await TcpClient.connect(t.host, t.port, _token(tenant, exp))
    other = await TcpClient.connect(t.host, t.port, _token(tenant))  # no exp: never expires
    parked = None
    try:
        assert (await expiring.push([{"queue": "q", "payload": 1}]))[0]["status"] == "queued"
        # Accepted before the expiry, answered after it: a parked long-poll is not dropped.
        parked = asyncio.create_task(expiring.pop("lp", batch=1, wait=True, timeout_ms=15_000))
        await asyncio.sleep(0.05)

        await _until(exp + 0.05)
        with pytest.raises(QueenError) as at_hello:
            await TcpClient.connect(t.host, t.port, _token(tenant, exp))
        for call in (
            lambda: expiring.push([{"queue": "q", "payload": 2}]),
            lambda: expiring.timers_list("q"),
            lambda: expiring.pop("q", batch=1),
        ):
            with pytest.raises(QueenError) as ei:
                await call()
            assert ei.value.to_dict() == at_hello.value.to_dict()
            assert ei.value.status == at_hello.value.status == 401
            assert ei.value.code == "unauthorized"

        # Nothing of the refused requests happened, and the long-poll still gets its message.
        assert not parked.done()
        await other.push([{"queue": "lp", "payload": "wake"}])
        got = await asyncio.wait_for(parked, 10)
        assert got is not None and got["messages"][0]["data"] == "wake"
        got = await other.pop("q", batch=10)
        assert [m["data"] for m in got["messages"]] == [1]
    finally:
        if parked is not None and not parked.done():
            parked.cancel()
        await expiring.aclose()
        await other.aclose()


async def test_pipelined_frames_after_exp_are_each_answered_by_id(authed_tcp):
    t = authed_tcp
    exp = _soon()
    reader, writer = await asyncio.open_connection(t.host, t.port)
    try:
        writer.write(encode_frame([0, "hello", {"token": _token(uuid.uuid4(), exp)}]))
        assert (await _read_frame(reader))[1] == 200
        await _until(exp + 0.05)
        writer.write(
            b"".join(encode_frame([rid, "timers_list", {"queue": "q"}]) for rid in (5, 6, 7))
        )
        await writer.drain()
        answers = [await asyncio.wait_for(_read_frame(reader), 5) for _ in range(3)]
        assert sorted(a[0] for a in answers) == [5, 6, 7]
        for _, status, body in answers:
            assert status == 401
            assert (body["error"], body["reason"]) == ("unauthorized", "invalid_token")
            assert set(body) == {"error", "reason", "detail"}
    finally:
        writer.close()
