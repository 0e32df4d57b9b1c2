"""Properties of a `payloadZstd` payload's decoding (queen_timers.timers.pack.decompress), which
both the schedule (to refuse a bad payload) and the fire (to deliver it) go through."""

from __future__ import annotations

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from queen_timers.timers.pack import PayloadError, decompress

from .op_strategies import zstd_frames

LIMIT = 4096
data = st.binary(max_size=LIMIT)
cuts = st.lists(st.integers(0, LIMIT), max_size=4)


@given(data=data, cuts=cuts)
def test_any_number_of_frames_decodes_to_every_byte(data, cuts):
    assert decompress(zstd_frames(data, cuts), LIMIT) == data


@given(data=st.binary(min_size=1, max_size=LIMIT), cuts=cuts, at=st.integers(0, 2**16))
def test_a_stream_cut_short_is_refused(data, cuts, at):
    stream = zstd_frames(data, cuts)
    with pytest.raises(PayloadError, match="not zstd"):
        decompress(stream[: at % len(stream)], LIMIT)


# Junk: bytes that do not start another frame (a zstd or a skippable frame's magic number).
junk = st.binary(min_size=1, max_size=16).filter(
    lambda b: not b.startswith(b"\x28\xb5\x2f\xfd") and b[1:4] != b"\x2a\x4d\x18"
)


@given(data=data, cuts=cuts, junk=junk)
def test_junk_after_the_last_frame_is_refused(data, cuts, junk):
    stream = zstd_frames(data, cuts) + junk
    with pytest.raises(PayloadError, match="not zstd"):
        decompress(stream, LIMIT)


@given(size=st.integers(LIMIT + 1, 64 * LIMIT), frames=st.integers(1, 3))
def test_output_past_the_limit_is_refused(size, frames):
    stream = zstd_frames(b"\x00" * size, [size * i // frames for i in range(1, frames)])
    with pytest.raises(PayloadError, match="over"):
        decompress(stream, LIMIT)


def test_a_stream_written_incrementally_decodes():
    # A frame written by a streaming compressor carries no content size.
    c = zstandard.ZstdCompressor().compressobj()
    stream = c.compress(b"abc" * 100) + c.flush()
    assert zstandard.get_frame_parameters(stream).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(stream, LIMIT) == b"abc" * 100
