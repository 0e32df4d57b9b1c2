from queen_timers.log.frames import unpack_segment


async def test_push_appends_contiguous_offsets(queen, ident, conn):
    res = await queen.push(ident, [{"queue": "q1", "payload": {"a": i}} for i in range(3)])
    assert [r["status"] for r in res] == ["queued"] * 3
    assert [r["offset"] for r in res] == [0, 1, 2]
    blob = await conn.fetchval("SELECT blob FROM queen.log_segments")
    frames = unpack_segment(blob)
    assert [f.payload for f in frames] == [b'{"a":0}', b'{"a":1}', b'{"a":2}']
    assert all(f.producer_sub == "tester" for f in frames)


async def test_push_duplicate_txn_in_window(queen, ident, conn):
    first = await queen.push(ident, [{"queue": "q1", "payload": 1, "transactionId": "t1"}])
    again = await queen.push(
        ident,
        [
            {"queue": "q1", "payload": 2, "transactionId": "t1"},
            {"queue": "q1", "payload": 3, "transactionId": "t2"},
        ],
    )
    assert again[0]["status"] == "duplicate"
    assert again[0]["message_id"] == first[0]["message_id"]
    assert again[1]["status"] == "queued" and again[1]["offset"] == 1
    assert await conn.fetchval("SELECT count(*) FROM queen.log_txns") == 2
