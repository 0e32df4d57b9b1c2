"""Properties of the server's frame decoder (queen_tcp._Connection cutting length-prefixed
msgpack frames out of what arrives, queen_tcp.protocol for the format).

The decoder is fed by hand, so the split points are the test's and nothing races: a recording
stand-in takes the socket's place, and the request handler records what the decoder hands on
instead of calling the service (the decoder is what is under test, not the service).

- A stream of valid frames yields the same requests, in order, whatever the split points and
  the in-flight limit (backpressure stops and restarts the reading).
- Whatever the bytes, the decoder never fails on its own: the connection either waits for
  more, or closes after answering the envelope {"error", "reason", "detail"} with a 4xx; what
  it does is the same whatever the split points.
- Frames after a refused one are never handed on.
- A length prefix over the limit is refused as soon as its four bytes arrive, without waiting
  for, or allocating, the body it announces.
"""

from __future__ import annotations

import asyncio
import tracemalloc

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from queen_tcp import TcpSettings, TcpTransport, _Connection
from queen_tcp.protocol import DECODER, HEADER, encode_frame
from queen_timers.identity import Authenticator
from queen_timers.settings import Settings

LIMIT = 1024  # the frame limit of these tests: small, so that oversized frames are cheap
ENVELOPE = {"error", "reason", "detail"}
HELLO = encode_frame([0, "hello", {"token": None}])


class _Socket(asyncio.Transport):
    """What the server does to its end of a connection, recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.out += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


class _Recording(TcpTransport):
    """The TCP transport, unstarted, whose request handler records the request."""

    def __init__(self, max_inflight: int, limit: int) -> None:
        super().__init__(
            Settings(
                {"tcp_port": 0, "tcp_max_frame_bytes": limit, "tcp_max_inflight": max_inflight},
                environ={},
                extra=(TcpSettings,),
            )
        )
        self._auth = Authenticator(Settings(environ={}))  # no JWT: every hello is admitted
        self.requests: list = []

    def _serve_one(self, conn, caller, req):
        # Called by the decoder as it hands the request on; the coroutine it returns runs as
        # the request's task, so the in-flight limit still counts it until it completes.
        self.requests.append(list(req))  # as the frame carried it: [id, op, body]
        return asyncio.sleep(0)


async def _feed(chunks: list[bytes], max_inflight: int = 256, limit: int = LIMIT):
    """Feed the chunks as a socket would deliver them (none while reading is paused), then let
    every request finish. Answers what the decoder handed on and what it wrote."""
    server = _Recording(max_inflight, limit)
    conn, sock = _Connection(server), _Socket()
    conn.connection_made(sock)
    for chunk in chunks:
        await _settle(conn, sock)
        if sock.closed:
            break
        conn.data_received(chunk)
    await _settle(conn, sock)
    return server.requests, _frames(bytes(sock.out)), sock.closed


async def _settle(conn, sock) -> None:
    while conn._tasks:  # a paused socket resumes once in-flight requests complete
        await asyncio.wait(set(conn._tasks))
    assert sock.closed or not sock.paused


def _frames(data: bytes) -> list:
    out, off = [], 0
    while off < len(data):
        n = int.from_bytes(data[off : off + HEADER], "big")
        out.append(DECODER.decode(data[off + HEADER : off + HEADER + n]))
        off += HEADER + n
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


# -- strategies ----------------------------------------------------------------------------------

# msgpack values, nested a few levels (no NaN: it equals nothing, its round trip included).
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
requests = st.tuples(st.integers(-(2**63), 2**64 - 1), st.text(max_size=12), values).map(list)
small_requests = requests.filter(lambda r: len(encode_frame(r)) - HEADER <= LIMIT)
cuts = st.lists(st.integers(0, 2**16), max_size=12)
inflight = st.sampled_from([1, 2, 256])


def _cut_msgpack(value) -> bytes:
    data = msgspec.msgpack.encode(value)
    return data[: len(data) // 2]


# Bodies of a frame within the limit that are no request [int id, str op, body].
not_requests = st.one_of(
    values.filter(
        lambda v: (
            not (
                isinstance(v, list)
                and len(v) == 3
                and isinstance(v[0], int)
                and isinstance(v[1], str)
            )
        )
    ).map(msgspec.msgpack.encode),
    st.tuples(st.text(max_size=4), st.text(max_size=4), values).map(
        lambda r: msgspec.msgpack.encode(list(r))  # a str id
    ),
    requests.map(lambda r: msgspec.msgpack.encode([*r, None])),  # four items
    requests.map(lambda r: msgspec.msgpack.encode(r) + b"\xc0"),  # trailing bytes
    requests.filter(lambda r: len(msgspec.msgpack.encode(r)) > 1).map(_cut_msgpack),
    st.just(b""),
    st.just(b"\xc1"),  # the one byte msgpack never uses
).filter(lambda body: len(body) <= LIMIT)


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(HEADER, "big") + body


# -- properties ----------------------------------------------------------------------------------


@given(reqs=st.lists(small_requests, max_size=8), cuts=cuts, max_inflight=inflight)
async def test_valid_frames_decode_the_same_whatever_the_split_points(reqs, cuts, max_inflight):
    stream = HELLO + b"".join(encode_frame(r) for r in reqs)
    got, answers, closed = await _feed(_split(stream, cuts), max_inflight)
    assert got == reqs
    assert not closed
    assert len(answers) == 1 and answers[0][:2] == [0, 200]  # the hello's


def _refusal(answer, status: int, reason: str) -> None:
    rid, got_status, body = answer
    assert (rid, got_status) == (0, status)
    assert set(body) == ENVELOPE and body["reason"] == reason


@given(
    before=st.lists(small_requests, max_size=4),
    bad=not_requests,
    after=st.lists(small_requests, max_size=3),
    cuts=cuts,
    max_inflight=inflight,
)
async def test_a_refused_frame_answers_the_envelope_and_the_stream_goes_on(
    before, bad, after, cuts, max_inflight
):
    # The length prefix still marks where the next frame starts, so after the hello a frame
    # the decoder refuses is answered and the frames behind it are served.
    stream = (
        HELLO
        + b"".join(encode_frame(r) for r in before)
        + _frame(bad)
        + b"".join(encode_frame(r) for r in after)
    )
    got, answers, closed = await _feed(_split(stream, cuts), max_inflight)
    assert got == before + after
    assert not closed and len(answers) == 2
    _rid, status, body = answers[1]
    assert status == 400 and set(body) == ENVELOPE and body["reason"] == "bad_frame"


@given(
    before=st.lists(small_requests, max_size=4),
    size=st.integers(LIMIT + 1, 2**32 - 1),
    tail=st.binary(max_size=64),
    cuts=cuts,
)
async def test_an_oversized_length_prefix_is_refused(before, size, tail, cuts):
    stream = HELLO + b"".join(encode_frame(r) for r in before) + size.to_bytes(HEADER, "big")
    got, answers, closed = await _feed(_split(stream + tail, cuts))
    assert got == before
    assert closed and len(answers) == 2
    _refusal(answers[1], 413, "frame_too_large")


@given(size=st.integers(64 * 1024 * 1024, 2**32 - 1))
async def test_an_oversized_frame_is_refused_without_allocating_it(size):
    # Refused on its four header bytes alone (nothing of the body has arrived), and the decoder
    # allocates nothing near the size it announces: tracemalloc sees the Python heap's peak.
    tracemalloc.start()
    try:
        _, answers, closed = await _feed([HELLO + size.to_bytes(HEADER, "big")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert closed
    _refusal(answers[1], 413, "frame_too_large")
    assert peak < 1024 * 1024


@given(hello=st.booleans(), noise=st.binary(max_size=256), cuts=cuts, max_inflight=inflight)
async def test_any_bytes_are_decoded_or_refused_the_same_whatever_the_split_points(
    hello, noise, cuts, max_inflight
):
    # Under 1,000 nesting levels: deeper is the case of the nesting test below.
    stream = (HELLO if hello else b"") + noise
    whole = await _feed([stream], max_inflight)
    split = await _feed(_split(stream, cuts), max_inflight)
    assert msgspec.msgpack.encode(split) == msgspec.msgpack.encode(whole)  # NaN is not NaN
    got, answers, closed = whole
    assert all(
        isinstance(r, list) and len(r) == 3 and isinstance(r[0], int) and isinstance(r[1], str)
        for r in got
    )
    # The decoder answers a hello (200) or refuses with the envelope (4xx), nothing else; it
    # closes only right after a refusal.
    for _rid, status, body in answers:
        assert status == 200 or (400 <= status < 500 and ENVELOPE <= set(body))
    if closed:
        assert answers and answers[-1][1] >= 400


async def test_a_deeply_nested_frame_answers_the_envelope():
    nested = b"\x91" * 100_000 + b"\xc0"  # [[[...[nil]...]]]: 100,000 levels in 100 kB
    body = msgspec.msgpack.encode([1, "timers_apply", {"body": msgspec.Raw(nested)}])
    stream = HELLO + _frame(body)
    got, answers, _closed = await _feed([stream], limit=64 * 1024 * 1024)  # the default limit
    assert got == [] and len(answers) == 2  # not handed on, and answered
    _rid, status, refusal = answers[1]
    assert status == 400 and set(refusal) == ENVELOPE
