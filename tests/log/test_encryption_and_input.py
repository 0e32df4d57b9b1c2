import ast
import pathlib

import pytest

import queen_timers as queen_pkg
from queen_timers.errors import QueenError
from queen_timers.log.frames import unpack_segment

from .helpers import acks_for

SECRET = "plaintext-marker-5f1c"


async def test_encrypted_queue_stores_ciphertext_and_serves_plaintext(queen, ident, conn):
    await queen.configure_queue(ident, "vault", {"encryptionEnabled": True, "retryLimit": 0})
    await queen.push(ident, [{"queue": "vault", "payload": {"s": SECRET}, "transactionId": "t"}])
    blob = await conn.fetchval("SELECT blob FROM queen.log_segments")
    assert SECRET.encode() not in blob
    [frame] = unpack_segment(blob)
    assert frame.encrypted and SECRET.encode() not in frame.payload
    r = await queen.pop(ident, "vault")
    assert r["messages"][0]["data"] == {"s": SECRET}
    # the dead-letter snapshot stays encrypted at rest; the listing decrypts it
    await queen.ack(ident, [{**acks_for(r)[0], "status": "failed"}])
    stored = await conn.fetchval("SELECT payload::text FROM queen.log_dlq")
    assert SECRET not in stored and "authTag" in stored
    dl = await queen.dlq(ident, queue="vault")
    assert dl["messages"][0]["data"] == {"s": SECRET}


async def test_plain_queue_is_not_encrypted(queen, ident, conn):
    await queen.push(ident, [{"queue": "open", "payload": {"s": SECRET}}])
    [frame] = unpack_segment(await conn.fetchval("SELECT blob FROM queen.log_segments"))
    assert not frame.encrypted and SECRET.encode() in frame.payload


async def _nothing_written(conn):
    for t in ("queues", "log_partitions", "log_segments", "log_txns"):
        assert await conn.fetchval(f"SELECT count(*) FROM queen.{t}") == 0, t


@pytest.mark.parametrize(
    "batch,reason",
    [
        ([{"queue": "q", "payload": 1}, 5], "push_bad_item"),
        (
            [{"queue": "q", "payload": 1}, {"queue": "q", "partition": "", "payload": 2}],
            "push_bad_partition",
        ),
        ([{"queue": "q", "partition": "bad\nname", "payload": 1}], "push_bad_partition"),
        ([{"queue": "q", "partition": "x" * 256, "payload": 1}], "push_bad_partition"),
        ([{"queue": "q", "partition": 7, "payload": 1}], "push_bad_partition"),
        (
            [{"queue": "q", "payload": 1}, {"queue": "q", "payload": "x" * 2_000_000}],
            "payload_too_large",
        ),
        # names of the wrong JSON type, unhashable ones included: a 400, never a TypeError (500)
        ([{"queue": ["q"], "payload": 1}], "push_bad_queue"),
        ([{"queue": {"q": 1}, "payload": 1}], "push_bad_queue"),
        ([{"queue": "q", "partition": ["p"], "payload": 1}], "push_bad_partition"),
        # msgpack (TCP) maps may have integer keys beside string ones
        ([{"queue": "q", "payload": 1, 7: 1, "zz": 2}], "push_unknown_field"),
    ],
)
async def test_bad_push_is_refused_and_writes_nothing(queen, ident, conn, batch, reason):
    with pytest.raises(QueenError) as ei:
        await queen.push(ident, batch)
    assert ei.value.reason == reason and ei.value.status in (400, 413)
    await _nothing_written(conn)


async def test_unknown_config_key_writes_nothing(queen, ident, conn):
    with pytest.raises(QueenError) as ei:
        await queen.configure_queue(ident, "q", {"leaseTime": 5, "bogus": 1})
    assert "bogus" in ei.value.detail
    await _nothing_written(conn)


def test_core_never_imports_aiohttp():
    root = pathlib.Path(queen_pkg.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None))
                in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names = [str(node.args[0].value)]
            offenders += [
                f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')} {n}"
                for n in names
                if n == "aiohttp" or n.startswith("aiohttp.")
            ]
    assert offenders == []


def test_txn_hashes_are_the_xxh3_128_of_the_utf8_bytes_as_a_uuid():
    import uuid

    import xxhash

    from queen_timers.log.frames import txn_hash, txn_hashes

    txns = ["t1", "ünïcode", "x" * 1000, "01a22940-d2e9-731b-b82d-4fd2c4f730c9"]
    recipe = [uuid.UUID(bytes=xxhash.xxh3_128_digest(t.encode("utf-8"))) for t in txns]
    assert txn_hashes(txns) == recipe == [txn_hash(t) for t in txns]
    assert all(
        isinstance(h, uuid.UUID) and hash(h) == hash(r) for h, r in zip(txn_hashes(txns), recipe)
    )


async def test_ack_with_integer_and_string_unknown_keys_is_a_400(queen, ident):
    # msgpack (TCP) maps may mix integer and string keys: a refusal with its code, not a
    # TypeError from sorting them for the message.
    with pytest.raises(QueenError) as ei:
        await queen.ack(ident, [{"transactionId": "t", "partitionId": "p", 7: 1, "zz": 2}])
    assert (ei.value.status, ei.value.reason) == (400, "ack_unknown_field")


async def test_nul_in_text_fields_is_refused_with_its_code(queen, ident, conn):
    # PostgreSQL text cannot hold U+0000: these reached the database and came back as an
    # unhandled CharacterNotInRepertoireError (500 internal_error over HTTP).
    pid = "00000000-0000-0000-0000-000000000001"
    calls = [
        ("configure_bad_namespace", queen.configure_queue(ident, "q", {}, namespace="a\x00")),
        ("configure_bad_task", queen.configure_queue(ident, "q", {}, task="a\x00")),
        ("pop_bad_namespace", queen.pop(ident, None, namespace="a\x00")),
        ("pop_bad_task", queen.pop(ident, None, task="a\x00", wait=True, timeout_ms=10)),
        (
            "ack_bad_lease",
            queen.ack(ident, [{"transactionId": "t", "partitionId": pid, "leaseId": "L\x00"}]),
        ),
        (
            "ack_bad_error",
            queen.ack(
                ident,
                [
                    {
                        "transactionId": "t",
                        "partitionId": pid,
                        "status": "failed",
                        "error": "boom\x00",
                    }
                ],
            ),
        ),
        ("lease_bad_id", queen.extend_lease(ident, "L\x00")),
    ]
    for reason, call in calls:
        with pytest.raises(QueenError) as ei:
            await call
        assert (ei.value.status, ei.value.reason) == (400, reason)
    await _nothing_written(conn)
