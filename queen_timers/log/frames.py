"""Frames and segments.

A frame is one message as the log stores it: message id, txn, producer subject, encrypted
flag, payload bytes, and for a traced timer its W3C trace context. A segment is the msgpack
array of its frames, zstd-compressed: one blob per push per partition. A frame has no
timestamp and no offset of its own: its offset is the segment's base offset plus its index,
its createdAt is the segment's created_at.

The txn of every frame is also stored in queen.log_txns as `txn_hash`: the xxh3-128 digest of
its UTF-8 bytes, typed as a UUID. SQL never hashes; this module does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import msgspec
import zstandard
from asyncpg.pgproto.pgproto import UUID as PgUUID
from xxhash import xxh3_128_digest as _xxh3_128

__all__ = ["Frame", "TracedFrame", "pack_segment", "txn_hash", "txn_hashes", "unpack_segment"]


class Frame(msgspec.Struct, array_like=True, frozen=True):
    message_id: bytes  # 16 raw bytes of the UUID
    txn: str
    producer_sub: str | None
    encrypted: bool
    payload: bytes

    @property
    def id(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.message_id)


class TracedFrame(Frame, frozen=True):
    """A frame with the W3C trace context of a timer's schedule (queen_timers/tracing.py): the
    same array with two more items. Segments decode as these, so a plain frame, written by
    a push or before frames had a context, reads with None for both; a plain frame is still
    encoded as the five items it always was (msgspec writes trailing defaults)."""

    trace_parent: str | None = None
    trace_state: str | None = None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[TracedFrame])
_compressors: dict[int, zstandard.ZstdCompressor] = {}
_decompressor = zstandard.ZstdDecompressor()


def pack_segment(frames: Sequence[Frame], level: int = 3) -> bytes:
    comp = _compressors.get(level)
    if comp is None:
        comp = _compressors[level] = zstandard.ZstdCompressor(level=level)
    return comp.compress(_encoder.encode(frames))


def unpack_segment(blob: bytes) -> list[TracedFrame]:
    return _decoder.decode(_decompressor.decompress(blob))


# asyncpg's UUID, not uuid.UUID(bytes=...): it is a uuid.UUID (isinstance, ==, hash) built in
# C, ~10x cheaper (uuid.UUID takes 15% of a 500-item push, 2026-11-29; bench/RESULTS.md,
# "Measurements the code cites").
def txn_hash(txn: str) -> uuid.UUID:
    return PgUUID(_xxh3_128(txn.encode()))


def txn_hashes(txns: Iterable[str]) -> list[uuid.UUID]:
    return [PgUUID(_xxh3_128(t.encode())) for t in txns]
