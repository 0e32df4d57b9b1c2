"""Packing claimed timers into segments, outside any transaction.

One segment per (tenant, queue, partition), never per (queue, partition): two tenants' timers
for the same names are two destinations. Inside a segment the claim order is kept (the order in
which frames enter the log). Each segment is chunked so its estimated size stays under
`sweeper_max_fire_bytes` (at least one row per chunk), and batches (one fire transaction each)
are assembled round by round, so a batch never holds two segments of the same triple: the fire
refuses that, because the two allocator calls would have no chosen order.

The payload rule. Encryption is outermost, and the broker only ever stores one of two shapes:
  * `payload_zstd` (never together with `encrypted`): the zstd of the message bytes as the
    client sent them; decompressed here, so the frame carries the plain bytes and the consumer
    gets the decoded JSON;
  * anything else: the frame bytes exactly as they will be delivered (plain, or the encryption
    envelope when `encrypted`), carried as stored.
The schedule guarantees it: on a queue that encrypts, a zstd payload is decompressed and then
encrypted at schedule (so the fire never needs the key, and a key rotation cannot make the fire
fail); a client-encrypted payload cannot also be zstd (refused at schedule: the broker could
not decompress what it cannot read). Price: on encrypting queues the staged row holds the
envelope of the uncompressed bytes.
"""

from __future__ import annotations

import dataclasses
import io
import uuid
from collections import OrderedDict
from collections.abc import Sequence

import zstandard

from ..log.frames import Frame, TracedFrame, pack_segment, txn_hashes
from .store import ClaimedTimer

__all__ = ["PayloadError", "Segment", "decompress", "frame_bytes", "pack_batches"]

# Per-row overhead in the byte estimate (frame header, msgpack framing, array slots). Not
# measured: a round number above the ~30 bytes a frame header actually takes.
ROW_OVERHEAD_BYTES = 64


class PayloadError(ValueError):
    pass


def decompress(data: bytes, limit: int) -> bytes:
    """The bytes of a whole zstd stream (one frame, or several concatenated: RFC 8878 3.1), at
    most `limit` of them. Larger output is an error (a small compressed payload must not become
    gigabytes at the fire), and so is anything but complete frames: no frame at all, junk after
    a frame, or a frame cut short, whose tail would otherwise vanish without a word."""
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data), read_across_frames=True
        )
        chunks, size = [], 0
        while size <= limit and (chunk := reader.read(limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except zstandard.ZstdError as exc:
        raise PayloadError(f"payload is not zstd: {exc}") from None
    if size > limit:
        raise PayloadError(f"decompressed payload is over {limit} bytes")
    if not _whole_frames(data):
        raise PayloadError("payload is not zstd: no frame, or the last frame is cut short")
    return b"".join(chunks)


def _whole_frames(data: bytes) -> bool:
    """Whether `data` is one or more complete zstd frames. The streaming reader above bounds the
    output but takes a frame cut short (even a cut magic number) for a shorter one; a
    decompression object tells the end of a frame (`eof`) from a lack of input. Its output is
    unbounded, so this runs only once the reader has found the whole output within the limit."""
    if not data:
        return False
    rest = data
    while rest:
        frame = zstandard.ZstdDecompressor().decompressobj()
        try:
            frame.decompress(rest)
        except zstandard.ZstdError:
            return False
        if not frame.eof:
            return False
        rest = frame.unused_data
    return True


def frame_bytes(t: ClaimedTimer, limit: int) -> bytes:
    return decompress(t.payload, limit) if t.payload_zstd else t.payload


@dataclasses.dataclass
class Segment:
    tenant: uuid.UUID
    queue: str
    partition: str
    rows: list[ClaimedTimer]
    blob: bytes
    hashes: list[uuid.UUID]


def pack_batches(
    claimed: Sequence[ClaimedTimer], max_bytes: int, level: int, payload_limit: int
) -> tuple[list[list[Segment]], list[tuple[ClaimedTimer, str]]]:
    """Returns (batches, unpackable): `unpackable` are rows whose payload cannot become a frame
    (a permanent failure of that row alone, never of its neighbours)."""
    groups: OrderedDict[tuple[uuid.UUID, str, str], list[tuple[ClaimedTimer, bytes]]] = (
        OrderedDict()
    )
    bad: list[tuple[ClaimedTimer, str]] = []
    for t in claimed:
        try:
            data = frame_bytes(t, payload_limit)
        except PayloadError as exc:
            bad.append((t, str(exc)))
            continue
        groups.setdefault((t.tenant, t.queue, t.partition), []).append((t, data))

    # Each chunk with its estimated size, computed once per row.
    Chunk = tuple[list[tuple[ClaimedTimer, bytes]], int]
    chunked: list[tuple[tuple[uuid.UUID, str, str], list[Chunk]]] = []
    for key, rows in groups.items():
        chunks: list[Chunk] = []
        cur: list[tuple[ClaimedTimer, bytes]] = []
        size = 0
        for t, data in rows:
            est = len(data) + len(t.txn.encode()) + ROW_OVERHEAD_BYTES
            if cur and size + est > max_bytes:
                chunks.append((cur, size))
                cur, size = [], 0
            cur.append((t, data))
            size += est
        chunks.append((cur, size))
        chunked.append((key, chunks))

    batches: list[list[Segment]] = []
    rounds = max((len(c) for _, c in chunked), default=0)
    for r in range(rounds):
        batch: list[Segment] = []
        size = 0
        for (tenant, queue, partition), chunks in chunked:
            if r >= len(chunks):
                continue
            chunk, est = chunks[r]
            if batch and size + est > max_bytes:
                batches.append(batch)
                batch, size = [], 0
            frames = [
                Frame(t.message_id.bytes, t.txn, t.producer_sub, t.encrypted, d)
                if t.trace_parent is None
                else TracedFrame(
                    t.message_id.bytes,
                    t.txn,
                    t.producer_sub,
                    t.encrypted,
                    d,
                    t.trace_parent,
                    t.trace_state,
                )
                for t, d in chunk
            ]
            batch.append(
                Segment(
                    tenant=tenant,
                    queue=queue,
                    partition=partition,
                    rows=[t for t, _ in chunk],
                    blob=pack_segment(frames, level),
                    hashes=txn_hashes([t.txn for t, _ in chunk]),
                )
            )
            size += est
        if batch:
            batches.append(batch)
    return batches, bad
