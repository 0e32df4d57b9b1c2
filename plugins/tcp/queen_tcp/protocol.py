"""The queen-tcp wire: length-prefixed msgpack frames.

Every frame is a 4-byte big-endian length followed by that many bytes of msgpack.

    request   [id, op, body]        id: int chosen by the client, op: str, body: map
    response  [id, status, body]    status: 200 ok (body = the result, nil for "nothing",
                                    e.g. an empty pop) or the HTTP-style status of a refusal
                                    (body = {"error", "reason", "detail", "retryAfter"?})

The first request on a connection must be `hello` with body {"token": <JWT or nil>,
"protocol": 1}; it answers {"server": "queen-tcp", "protocol": 1, "tenant", "subject",
"admin"} or a 401 refusal, after which the server closes the connection. The token's `exp`
(if it has one) bounds the connection's identity: once it has passed, every request is answered
401 {"error": "unauthorized", "reason": "invalid_token", ...}, the refusal an expired token gets
at hello, while requests accepted before it still complete; reconnect with a fresh token.

Any other op is one of queen_timers.wire.OPERATIONS, a method of Queen, and its body is the
map of that operation's arguments struct (queen_timers.wire.operations), the method's keyword
arguments minus the identity: e.g. `timer_peek` takes {"queue": "orders", "timer_key": "k1"}
and `timers_apply` takes {"body": [op, ...]}.

Requests are pipelined: a client may send many before reading, the server answers each as it
completes (not in request order) and the id pairs them up.

A frame that is not such a request (not msgpack, not [id, op, body], or nested too deeply to
decode) is answered 400 {"error": "bad_request", "reason": "bad_frame", ...} under its id when
the frame begins with a readable [id, ...], else under id 0. The length prefix still marks where
the next frame starts, so after hello the connection goes on; before hello it is closed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from queen_timers.errors import QueenError
from queen_timers.wire import OPERATIONS

__all__ = [
    "DECODER",
    "ENCODER",
    "HEADER",
    "OK",
    "OPERATIONS",
    "PROTOCOL_VERSION",
    "BadFrame",
    "decode_length",
    "decode_request",
    "encode_frame",
]

PROTOCOL_VERSION = 1
OK = 200
HEADER = 4  # bytes of the length prefix


ENCODER = msgspec.msgpack.Encoder()
DECODER = msgspec.msgpack.Decoder()


def encode_frame(value: object) -> bytes:
    data = ENCODER.encode(value)
    return len(data).to_bytes(HEADER, "big") + data


def decode_length(header: bytes) -> int:
    return int.from_bytes(header, "big")


class BadFrame(Exception):
    """A request frame that cannot be served: `rid` is the id to answer under, `error` the 400."""

    def __init__(self, rid: int, error: QueenError):
        super().__init__(error.detail)
        self.rid = rid
        self.error = error


def decode_request(raw: bytes | bytearray | memoryview) -> tuple[int, str, Any]:
    """The one decode of a request frame: (id, op, body), or BadFrame.

    msgspec decodes nested arrays and maps recursively and raises RecursionError (not
    DecodeError) once the nesting exhausts the interpreter's recursion limit: a few KB of
    0x91 bytes do it. Both are the sender's fault, so both are the 400."""
    try:
        req = DECODER.decode(raw)
    except msgspec.DecodeError as exc:
        raise BadFrame(_head_id(raw), _bad_frame(f"not msgpack: {exc}")) from None
    except RecursionError:
        raise BadFrame(_head_id(raw), _bad_frame("nested too deeply to decode")) from None
    if (
        isinstance(req, list)
        and len(req) == 3
        and isinstance(req[0], int)
        and isinstance(req[1], str)
    ):
        return req[0], req[1], req[2]
    raise BadFrame(0, _bad_frame("the frame is not [id, op, body]"))


def _bad_frame(why: str) -> QueenError:
    return QueenError(
        "bad_request", "bad_frame", f"a request is [id, op, body] in msgpack; this one is {why}"
    )


# msgpack's integer formats after the marker byte: how many bytes of value follow.
_INT_WIDTH = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_ARRAY_OF_3 = 0x93


def _head_id(raw: bytes | bytearray | memoryview) -> int:
    """The id of a frame the decoder refused, when the frame opens with [id, ...]: the refusal
    then reaches the call that sent it (a pipelining client pairs answers by id) instead of
    failing the whole connection. 0 when the head is unreadable."""
    if len(raw) < 2 or raw[0] != _ARRAY_OF_3:
        return 0
    marker = raw[1]
    width = 0 if marker <= 0x7F or marker >= 0xE0 else _INT_WIDTH.get(marker)
    if width is None or len(raw) < 2 + width:
        return 0
    try:
        rid = DECODER.decode(raw[1 : 2 + width])
    except msgspec.DecodeError:
        return 0
    return rid if isinstance(rid, int) else 0
