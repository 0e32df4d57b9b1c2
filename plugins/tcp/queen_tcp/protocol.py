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

Any other op is a method of queen_timers.service.Queen (OPERATIONS) and its body holds that method's
keyword arguments, minus the identity, under the same names: e.g. `timer_peek` takes
{"queue": "orders", "timer_key": "k1"} and `timers_apply` takes {"body": [op, ...]}.

Requests are pipelined: a client may send many before reading, the server answers each as it
completes (not in request order) and the id pairs them up.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "DECODER",
    "ENCODER",
    "HEADER",
    "OK",
    "OPERATIONS",
    "PROTOCOL_VERSION",
    "decode_length",
    "encode_frame",
]

PROTOCOL_VERSION = 1
OK = 200
HEADER = 4  # bytes of the length prefix

OPERATIONS = frozenset(
    {
        "configure_queue",
        "push",
        "pop",
        "ack",
        "extend_lease",
        "dlq",
        "transaction",
        "timers_apply",
        "timer_cancel",
        "timer_peek",
        "timers_list",
        "timers_count",
        "timers_read",
        "switches_get",
        "switches_set",
    }
)

ENCODER = msgspec.msgpack.Encoder()
DECODER = msgspec.msgpack.Decoder()


def encode_frame(value: object) -> bytes:
    data = ENCODER.encode(value)
    return len(data).to_bytes(HEADER, "big") + data


def decode_length(header: bytes) -> int:
    return int.from_bytes(header, "big")
