"""Hypothesis strategies of timer ops: valid calls, and mutations that each make a call invalid
for one documented reason.

The rules are written here from the docs (the errors reference's timer sections), not
imported from queen_timers.timers.ops: a property that borrowed the code's own tables would
agree with any mistake in them.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from pathlib import Path
from typing import Any

import zstandard
from hypothesis import strategies as st

from queen_timers.settings import Settings

_SETTINGS = Settings()
MAX_OPS = _SETTINGS.timers_max_ops_per_call
HORIZON_MS = 1000 * _SETTINGS.timers_max_horizon_s
MAX_PAYLOAD = _SETTINGS.timers_max_payload_bytes
MAX_NAME_CHARS = 255
MAX_KEY_BYTES = 1024
MAX_TXN_BYTES = 65535
# A queue created with encryptionEnabled before the examples run (see the properties' fixture).
SEALED = "sealed"

# The client-spellable server-owned names the docs list, each with its snake_case form.
SERVER_OWNED = [
    "producerSub",
    "producer_sub",
    "messageId",
    "message_id",
    "tenant",
    "tenantId",
    "tenant_id",
    "deliverAt",
    "deliver_at",
    "delaySeconds",
    "delay_seconds",
    "attempts",
    "claimToken",
    "claim_token",
    "claimedUntil",
    "claimed_until",
]
KNOWN_FIELDS = {
    "op",
    "queue",
    "timerKey",
    "partition",
    "delayMs",
    "txn",
    "payload",
    "payloadZstd",
    "encrypted",
}


def documented_reasons() -> set[str]:
    """Every code and reason the errors reference names for the timer ops and the timer reads
    (docs/reference/errors.md, from "### Timer ops" to the operator's actions)."""
    page = (Path(__file__).resolve().parents[2] / "docs/reference/errors.md").read_text()
    section = page.split("### Timer ops", 1)[1].split("Operator actions on timers", 1)[0]
    return set(re.findall(r"`([a-z][a-z0-9_]*)`", section))


# -- valid values --------------------------------------------------------------------------------

# Any character a name may hold: UTF-8 encodable, no C0 control character and no DEL (C1 controls
# are legal); keys and txns refuse only NUL.
_name_char = st.characters(codec="utf-8").filter(lambda c: ord(c) >= 32 and ord(c) != 127)
_text_char = st.characters(codec="utf-8", exclude_characters="\x00")


_WIDE = ["a", "é", "€", "\U0001f600"]  # 1 to 4 bytes in UTF-8


def _up_to_bytes(limit: int):
    """The longest repeat of one character within `limit` UTF-8 bytes: the boundary."""
    return st.sampled_from(_WIDE).map(lambda c: c * (limit // len(c.encode())))


def _over_bytes(limit: int):
    """The shortest repeat of one character over `limit` UTF-8 bytes."""
    return st.sampled_from(_WIDE).map(lambda c: c * (limit // len(c.encode()) + 1))


names = st.one_of(
    st.text(_name_char, min_size=1, max_size=12),
    _name_char.map(lambda c: c * MAX_NAME_CHARS),  # 255 characters of up to 4 bytes each
)
_short_text = st.text(_text_char, min_size=1, max_size=24)  # at most 96 bytes
timer_keys = st.one_of(_short_text, _up_to_bytes(MAX_KEY_BYTES))
txns = st.one_of(_short_text, _up_to_bytes(MAX_TXN_BYTES))
delays = st.one_of(
    st.integers(min_value=-(10**15), max_value=HORIZON_MS),
    st.floats(max_value=HORIZON_MS, allow_nan=False, allow_infinity=False),
    st.sampled_from([0, HORIZON_MS, float(HORIZON_MS), -(10**400)]),  # bounds; far back is due
)
payload_bytes = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"", b"\x00" * MAX_PAYLOAD]),
)


def zstd_frames(data: bytes, cuts: list[int]) -> bytes:
    """`data` as one zstd frame per piece between the cut points (several frames concatenated
    are one zstd stream, RFC 8878 section 3.1)."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    c = zstandard.ZstdCompressor()
    return b"".join(c.compress(data[a:b]) for a, b in zip(bounds, bounds[1:]))


@st.composite
def schedule_ops(draw, queue: str, key: str) -> dict:
    data = draw(payload_bytes)
    mode = draw(st.sampled_from(["plain", "zstd", "client_encrypted"]))
    if queue == SEALED and mode == "client_encrypted":
        mode = "plain"  # refused on an encrypting queue: a mutation, not a valid op
    op: dict[str, Any] = {
        "op": draw(st.sampled_from(["schedule", "reschedule"])),
        "queue": queue,
        "timerKey": key,
        "delayMs": draw(delays),
        "txn": draw(txns),
    }
    if mode == "zstd":
        data = zstd_frames(data, draw(st.lists(st.integers(0, 64), max_size=2)))
        op["payloadZstd"] = True
    elif draw(st.booleans()):
        op["payloadZstd"] = False
    if mode == "client_encrypted":
        op["encrypted"] = True
    elif draw(st.booleans()):
        op["encrypted"] = False
    op["payload"] = base64.b64encode(data).decode()
    if draw(st.booleans()):
        op["partition"] = draw(names)
    return _shuffled(draw, op)


@st.composite
def cancel_ops(draw, queue: str, key: str) -> dict:
    op: dict[str, Any] = {"op": "cancel", "queue": queue, "timerKey": key}
    if draw(st.booleans()):
        op["txn"] = draw(txns)
    if draw(st.booleans()):
        op["partition"] = draw(names)
    return _shuffled(draw, op)


def _shuffled(draw, op: dict) -> dict:
    """Field order never matters; the dict's order is what a JSON object's would be."""
    return dict(draw(st.permutations(list(op.items()))))


@st.composite
def valid_calls(draw, min_ops: int = 0, max_ops: int = 6) -> list[dict]:
    """Ops on a few queues (so a list sees several keys), each (queue, timerKey) once."""
    queues = draw(st.lists(st.one_of(names, st.just(SEALED)), min_size=1, max_size=3, unique=True))
    slots = draw(
        st.lists(
            st.tuples(st.sampled_from(queues), timer_keys),
            min_size=min_ops,
            max_size=max_ops,
            unique=True,
        )
    )
    return [draw(st.one_of(schedule_ops(q, k), cancel_ops(q, k))) for q, k in slots]


# -- mutations: each makes one op (or the call) invalid for one reason ---------------------------


@dataclasses.dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    reason: str


def _bad(reason: str) -> Refusal:
    return Refusal(400, "timers_bad_request", reason)


HORIZON = Refusal(403, "timer_horizon_exceeded", "timers_horizon")
TOO_LARGE = Refusal(413, "payload_too_large", "timers_payload_too_large")

_absent = object()  # the field is removed
_not_text = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.lists(st.integers(), max_size=2)
)
_not_number = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=4),
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.lists(st.integers(), max_size=2),
)
_surrogate = st.characters(categories=["Cs"])  # not text: it has no UTF-8 encoding
_missing_or_empty = st.one_of(st.just(_absent), st.just(""), _not_text)


@st.composite
def _containing(draw, text, bad_char) -> str:
    """A string of `text` with one character of `bad_char` inserted somewhere."""
    s, c = draw(text), draw(bad_char)
    at = draw(st.integers(0, len(s)))
    return s[:at] + c + s[at:]


def _unstorable(text):
    """Strings no text column can hold: a NUL, or a character with no UTF-8 encoding."""
    return _containing(text, st.just("\x00") | _surrogate)


# Names the log could never provision: too long, a control character, or not text.
_bad_names = st.one_of(
    st.text(_name_char, min_size=MAX_NAME_CHARS + 1, max_size=MAX_NAME_CHARS + 3),
    _containing(names, st.characters(max_codepoint=31) | st.just("\x7f") | _surrogate),
)
_unknown_fields = st.one_of(st.text(max_size=8), st.integers(), st.just("partiton")).filter(
    lambda k: (
        k not in KNOWN_FIELDS
        and k not in SERVER_OWNED
        and not (isinstance(k, str) and k.startswith("_"))
    )
)
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE_TAIL = b"\x2a\x4d\x18"  # bytes 1-3 of a skippable frame's magic, 0x184D2A5?


@st.composite
def _not_zstd(draw) -> bytes:
    """Payload bytes that are no complete zstd stream: nothing, a cut frame, junk after a
    frame, or bytes that never were zstd."""
    frame = zstd_frames(draw(st.binary(min_size=1, max_size=64)), [])
    return draw(
        st.one_of(
            st.just(b""),
            st.integers(1, len(frame) - 1).map(lambda n: frame[:n]),
            st.binary(min_size=1, max_size=8).map(lambda junk: frame + junk),
            st.binary(min_size=1, max_size=64).filter(
                lambda b: not b.startswith(_ZSTD_MAGIC) and b[1:4] != _SKIPPABLE_TAIL
            ),
        )
    )


def _bomb() -> bytes:
    """A few bytes of zstd that decompress to one byte over the payload limit."""
    return zstandard.ZstdCompressor().compress(b"\x00" * (MAX_PAYLOAD + 1))


@st.composite
def _bad_base64(draw, good: str) -> str:
    return draw(
        st.one_of(
            st.just(good + "==="),  # more padding than any quantum has
            st.just(good + "A"),  # a length that is no multiple of 4, or "A" after padding
            _containing(st.just(good), st.sampled_from("!-_ \n*é\x00")),
            _surrogate,
        )
    )


# The mutations of one op, by name: (the ops it applies to, the field, the strategy of its new
# value or _absent, the refusal). A few fields are special: see mutate_op.
_ANY, _SCHEDULE, _CANCEL = "any", "schedule", "cancel"
OP_MUTATIONS: dict[str, tuple[str, str, Any, Refusal]] = {
    "unknown_field": (_ANY, "(unknown)", _not_text, _bad("timers_unknown_field")),
    "server_owned_field": (_ANY, "(owned)", _not_text, _bad("timers_server_owned_field")),
    "underscore_field": (_ANY, "(underscore)", _not_text, _bad("timers_server_owned_field")),
    "unknown_op": (
        _ANY,
        "op",
        st.one_of(
            st.just(_absent),
            _not_text,
            st.text(max_size=10).filter(lambda s: s not in ("schedule", "reschedule", "cancel")),
            st.sampled_from(["Schedule", "fire", "schedule "]),
        ),
        _bad("timers_unknown_op"),
    ),
    "queue_missing": (_ANY, "queue", _missing_or_empty, _bad("timers_queue_required")),
    "queue_bad": (_ANY, "queue", _bad_names, _bad("timers_bad_queue")),
    "key_missing": (_ANY, "timerKey", _missing_or_empty, _bad("timers_timer_key_required")),
    "key_bad": (
        _ANY,
        "timerKey",
        st.one_of(_unstorable(timer_keys), _over_bytes(MAX_KEY_BYTES)),
        _bad("timers_bad_timer_key"),
    ),
    "partition_bad": (
        _ANY,
        "partition",
        st.just("") | _not_text | _bad_names,
        _bad("timers_bad_partition"),
    ),
    "cancel_txn_bad": (
        _CANCEL,
        "txn",
        st.one_of(st.booleans(), st.integers(), _unstorable(txns)),
        _bad("timers_bad_txn"),
    ),
    "delay_missing": (
        _SCHEDULE,
        "delayMs",
        st.one_of(st.just(_absent), _not_number),
        _bad("timers_delay_required"),
    ),
    "beyond_horizon": (
        _SCHEDULE,
        "delayMs",
        st.one_of(
            st.integers(min_value=HORIZON_MS + 1),
            st.floats(min_value=HORIZON_MS, exclude_min=True, allow_infinity=False),
            st.just(10**400),  # beyond any float
        ),
        HORIZON,
    ),
    "payload_missing": (
        _SCHEDULE,
        "payload",
        st.one_of(st.just(_absent), _not_text),
        _bad("timers_payload_required"),
    ),
    "payload_not_base64": (_SCHEDULE, "(base64)", None, _bad("timers_payload_not_base64")),
    "payload_too_large": (_SCHEDULE, "(too large)", None, TOO_LARGE),
    "txn_missing": (_SCHEDULE, "txn", _missing_or_empty, _bad("timers_txn_required")),
    "txn_bad": (
        _SCHEDULE,
        "txn",
        st.one_of(_unstorable(txns), _over_bytes(MAX_TXN_BYTES)),
        _bad("timers_bad_txn"),
    ),
    "flag_not_boolean": (
        _SCHEDULE,
        "(flag)",
        st.one_of(st.none(), st.integers(0, 1), st.text(max_size=5)),
        _bad("timers_bad_flag"),
    ),
    "zstd_and_encrypted": (_SCHEDULE, "(both)", None, _bad("timers_zstd_encrypted_conflict")),
    "not_zstd": (_SCHEDULE, "(zstd)", _not_zstd(), _bad("timers_payload_not_zstd")),
    "zstd_bomb": (_SCHEDULE, "(zstd)", st.builds(_bomb), TOO_LARGE),
}


def mutate_op(draw, op: dict, name: str) -> tuple[dict, Refusal]:
    """`op` made invalid by mutation `name`. An op of the other kind first becomes one of the
    kind the mutation applies to, under the same key."""
    applies, field, values, refusal = OP_MUTATIONS[name]
    q, k = op["queue"], op["timerKey"]
    if applies == _SCHEDULE and op["op"] == "cancel":
        op = draw(schedule_ops(q, k))
    elif applies == _CANCEL and op["op"] != "cancel":
        op = draw(cancel_ops(q, k))
    out = dict(op)
    if field == "(unknown)":
        out[draw(_unknown_fields)] = draw(values)
    elif field == "(owned)":
        out[draw(st.sampled_from(SERVER_OWNED))] = draw(values)
    elif field == "(underscore)":
        out["_" + draw(st.text(max_size=8))] = draw(values)
    elif field == "(flag)":
        out[draw(st.sampled_from(["payloadZstd", "encrypted"]))] = draw(values)
    elif field == "(both)":
        data = zstd_frames(base64.b64decode(out["payload"]), [])
        out.update(payload=base64.b64encode(data).decode(), payloadZstd=True, encrypted=True)
    elif field == "(zstd)":
        out.update(payload=base64.b64encode(draw(values)).decode(), payloadZstd=True)
        out.pop("encrypted", None)
    elif field == "(base64)":
        out["payload"] = draw(_bad_base64(out["payload"]))
    elif field == "(too large)":
        out["payload"] = base64.b64encode(b"\x00" * (MAX_PAYLOAD + 1)).decode()
    else:
        value = draw(values)
        if value is _absent:
            out.pop(field, None)
        else:
            out[field] = value
    return out, refusal


CALL_MUTATIONS = ["not_an_object", "duplicate_key", "too_many_ops", "encrypted_for_sealed"]
MUTATIONS = [*OP_MUTATIONS, *CALL_MUTATIONS]
_SMALL_OP = {"op": "schedule", "queue": "q", "delayMs": 1000, "txn": "t", "payload": ""}


@st.composite
def refused_calls(draw, mutation: str) -> tuple[list[Any], Refusal]:
    """A call that `mutation` makes invalid, and its refusal. An op mutation may be joined by
    bad ops further on, of any mutation: ops are checked in input order and the first bad one
    names the reason."""
    ops = draw(valid_calls(min_ops=1))
    if mutation in OP_MUTATIONS:
        first = draw(st.integers(0, len(ops) - 1))
        ops[first], refusal = mutate_op(draw, ops[first], mutation)
        later = range(first + 1, len(ops))
        for at in draw(
            st.lists(st.sampled_from(later), max_size=2, unique=True) if later else st.just([])
        ):
            ops[at], _ = mutate_op(draw, ops[at], draw(st.sampled_from(list(OP_MUTATIONS))))
        return ops, refusal
    if mutation == "not_an_object":
        ops[draw(st.integers(0, len(ops) - 1))] = draw(st.one_of(_not_text, st.text(max_size=4)))
        return ops, _bad("timers_bad_op")
    if mutation == "duplicate_key":
        twin = draw(st.sampled_from(ops))
        q, k = twin["queue"], twin["timerKey"]
        ops.insert(draw(st.integers(0, len(ops))), draw(schedule_ops(q, k) | cancel_ops(q, k)))
        return ops, _bad("timers_duplicate_key")
    if mutation == "too_many_ops":
        ops = [{**_SMALL_OP, "timerKey": f"k{n}"} for n in range(MAX_OPS + 1)]
        return ops, _bad("timers_too_many_ops")
    assert mutation == "encrypted_for_sealed"
    # A client-encrypted payload for a queue that encrypts at rest: refused once the broker
    # knows the queue encrypts, still before anything is written.
    sealed = draw(schedule_ops(SEALED, draw(timer_keys)))
    sealed.pop("payloadZstd", None)
    sealed["encrypted"] = True
    ops = [o for o in ops if (o["queue"], o["timerKey"]) != (SEALED, sealed["timerKey"])]
    ops.insert(draw(st.integers(0, len(ops))), sealed)
    return ops, _bad("timers_encrypted_conflict")
