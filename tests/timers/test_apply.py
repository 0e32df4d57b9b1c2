"""Schedule / reschedule / cancel / peek / list / count, through the service and the procedure.

Service calls use the database clock; procedure calls pass instants (time travel)."""

import base64
import json
import uuid

import asyncpg
import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import DEFAULT_TENANT, Identity
from queen_timers.timers import fire, store

from .helpers import at, b64json, cancel, sched, timer_row


async def test_statuses_and_result_fields(queen, ident, conn):
    res = await queen.timers_apply(
        ident,
        {
            "operations": [
                sched("orders", "a", 60000, txn="ta"),
                cancel("orders", "nope", txn="tx-nope"),
                cancel("orders", "nope2"),
            ]
        },
    )
    a, absent, absent2 = res
    assert a["ok"] is True and a["status"] == "scheduled"
    assert set(a) == {"ok", "status", "queue", "timerKey", "txn", "messageId", "deliverAt"}
    assert uuid.UUID(a["messageId"]).version == 7
    assert a["deliverAt"].endswith("Z") and len(a["deliverAt"]) == 27
    assert absent == {
        "ok": False,
        "status": "absent",
        "queue": "orders",
        "timerKey": "nope",
        "txn": "tx-nope",
    }
    assert absent2["txn"] is None
    # the op name is cosmetic: the upsert says whether the row existed
    again = await queen.timers_apply(
        ident,
        [
            sched("orders", "a", 1000, txn="ta2", op="reschedule"),
            sched("orders", "b", 1000, op="reschedule"),
        ],
    )
    assert [r["status"] for r in again] == ["rescheduled", "scheduled"]
    assert again[0]["messageId"] != a["messageId"]  # a rescheduled timer is a new message
    row = await timer_row(conn, "orders", "a")
    assert row["txn"] == "ta2" and row["producer_sub"] == "tester"
    c = await queen.timer_cancel(ident, "orders", "a", txn="ignored")
    assert c == {
        "ok": True,
        "status": "cancelled",
        "queue": "orders",
        "timerKey": "a",
        "txn": "ta2",
    }  # the STORED txn
    assert (await queen.timer_cancel(ident, "orders", "a"))["status"] == "absent"
    assert await conn.fetchval("SELECT count(*) FROM queen.queues") == 0  # never written


async def test_results_by_input_position_applied_in_key_order(queen, ident):
    ops = [sched("q", k, 1000) for k in ["zz", "a", "m", "B"]]
    res = await queen.timers_apply(ident, ops)
    assert [r["timerKey"] for r in res] == ["zz", "a", "m", "B"]


@pytest.mark.parametrize(
    "field",
    [
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
    ],
)
async def test_server_owned_fields_refused_nothing_written(queen, ident, conn, field):
    ops = [sched("q", "ok1", 1000), sched("q", "bad", 1000, **{field: "x"})]
    with pytest.raises(QueenError) as e:
        await queen.timers_apply(ident, ops)
    assert e.value.code == "timers_bad_request" and e.value.status == 400
    assert e.value.reason == "timers_server_owned_field"
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


@pytest.mark.parametrize("field", ["_messageId", "_tenant", "_anything"])
async def test_underscore_fields_refused(queen, ident, conn, field):
    with pytest.raises(QueenError) as e:
        await queen.timers_apply(ident, [sched("q", "k", 1000, **{field: "x"})])
    assert (e.value.code, e.value.reason) == ("timers_bad_request", "timers_server_owned_field")
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


BIG = 1048576


@pytest.mark.parametrize(
    "body,status,code,reason",
    [
        ({"ops": []}, 400, "timers_bad_request", "timers_bad_body"),
        ("x", 400, "timers_bad_request", "timers_bad_body"),
        (
            [sched("q", str(i), 1) for i in range(257)],
            400,
            "timers_bad_request",
            "timers_too_many_ops",
        ),
        ([1], 400, "timers_bad_request", "timers_bad_op"),
        ([{**sched("q", "k"), "op": "fire"}], 400, "timers_bad_request", "timers_unknown_op"),
        ([{**sched("q", "k"), "queue": ""}], 400, "timers_bad_request", "timers_queue_required"),
        ([{**sched("q", "k"), "queue": "x" * 300}], 400, "timers_bad_request", "timers_bad_queue"),
        (
            [{**sched("q", "k"), "timerKey": ""}],
            400,
            "timers_bad_request",
            "timers_timer_key_required",
        ),
        ([{**sched("q", "k"), "partition": ""}], 400, "timers_bad_request", "timers_bad_partition"),
        (
            [{**sched("q", "k"), "partition": None}],
            400,
            "timers_bad_request",
            "timers_bad_partition",
        ),
        ([cancel("q", "k", partition="")], 400, "timers_bad_request", "timers_bad_partition"),
        ([{**sched("q", "k"), "delayMs": "5"}], 400, "timers_bad_request", "timers_delay_required"),
        (
            [{**sched("q", "k"), "delayMs": True}],
            400,
            "timers_bad_request",
            "timers_delay_required",
        ),
        (
            [{k: v for k, v in sched("q", "k").items() if k != "delayMs"}],
            400,
            "timers_bad_request",
            "timers_delay_required",
        ),
        ([sched("q", "k", 7776000001)], 403, "timer_horizon_exceeded", "timers_horizon"),
        (
            [{k: v for k, v in sched("q", "k").items() if k != "payload"}],
            400,
            "timers_bad_request",
            "timers_payload_required",
        ),
        (
            [{**sched("q", "k"), "payload": "not base64!"}],
            400,
            "timers_bad_request",
            "timers_payload_not_base64",
        ),
        (
            [{**sched("q", "k"), "payload": "YQ"}],
            400,
            "timers_bad_request",
            "timers_payload_not_base64",
        ),  # unpadded
        (
            [{**sched("q", "k"), "payload": base64.b64encode(b"x" * (BIG + 1)).decode()}],
            413,
            "payload_too_large",
            "timers_payload_too_large",
        ),
        ([{**sched("q", "k"), "txn": ""}], 400, "timers_bad_request", "timers_txn_required"),
        (
            [{k: v for k, v in sched("q", "k").items() if k != "txn"}],
            400,
            "timers_bad_request",
            "timers_txn_required",
        ),
        ([sched("q", "k"), sched("q", "k")], 400, "timers_bad_request", "timers_duplicate_key"),
        ([sched("q", "k"), cancel("q", "k")], 400, "timers_bad_request", "timers_duplicate_key"),
        ([{**sched("q", "k"), "partiton": "p"}], 400, "timers_bad_request", "timers_unknown_field"),
        # NUL cannot be stored in a text column: refused up front, not a 500 from PostgreSQL
        ([{**sched("q", "k"), "txn": "t\x00"}], 400, "timers_bad_request", "timers_bad_txn"),
        ([cancel("q", "k", txn="t\x00")], 400, "timers_bad_request", "timers_bad_txn"),
        (
            [{**sched("q", "k"), "payloadZstd": True, "encrypted": True}],
            400,
            "timers_bad_request",
            "timers_zstd_encrypted_conflict",
        ),
        (
            [{**sched("q", "k"), "payloadZstd": True}],
            400,
            "timers_bad_request",
            "timers_payload_not_zstd",
        ),
    ],
)
async def test_bad_input_refused_with_its_code_and_changes_nothing(
    queen, ident, conn, body, status, code, reason
):
    if isinstance(body, list):  # a valid op first: a bad op anywhere changes nothing
        body = [sched("q", "first", 1000)] + body
    with pytest.raises(QueenError) as e:
        await queen.timers_apply(ident, body)
    assert (e.value.status, e.value.code, e.value.reason) == (status, code, reason)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_legal_delays_and_empty_batch(queen, ident, conn):
    assert await queen.timers_apply(ident, []) == []
    assert await queen.timers_apply(ident, {"operations": []}) == []
    res = await queen.timers_apply(
        ident,
        [
            sched("q", "zero", 0),
            sched("q", "neg", -3600000),
            sched("q", "frac", 1.5),
            sched("q", "max", 7776000000),
        ],
    )
    assert all(r["status"] == "scheduled" for r in res)


async def test_schedule_kill_switch_never_blocks_cancel(queen, ident):
    await queen.timers_apply(ident, [sched("q", "k", 60000)])
    queen.rt.switches.timers_schedule_enabled = False
    try:
        with pytest.raises(QueenError) as e:
            await queen.timers_apply(ident, [sched("q", "k2", 1000), cancel("q", "k")])
        assert (e.value.code, e.value.status, e.value.retry_after) == ("timers_disabled", 503, 1)
        assert (await queen.timers_apply(ident, [cancel("q", "k")]))[0]["status"] == "cancelled"
        assert (await queen.timer_cancel(ident, "q", "k"))["status"] == "absent"
    finally:
        queen.rt.switches.timers_schedule_enabled = True


async def test_wake_hint_after_commit(queen, ident, monkeypatch):
    seen = []
    # the post-commit hook wakes the local sweeper through the hub
    monkeypatch.setattr(queen.rt.hub, "timer_due", lambda at, reason="local": seen.append(at))
    await queen.timers_apply(ident, [sched("q", "late", 90000), sched("q", "soon", 1000)])
    await queen.timers_apply(ident, [cancel("q", "late")])
    assert len(seen) == 1
    import time

    assert time.time() < seen[0] < time.time() + 2


# -- the procedure (timers-contract §12 items 4-7: SQL 22023, nothing written under any tenant) -


@pytest.mark.parametrize(
    "extra",
    [
        {"producerSub": "eve"},
        {"messageId": str(uuid.uuid4())},
        {"tenant": "x"},
        {"tenantId": "x"},
        {"_tenant": "x"},
    ],
)
async def test_procedure_refuses_server_owned(conn, extra):
    with pytest.raises(asyncpg.PostgresError) as e:
        await store.apply(
            conn,
            [sched("q", "ok", 1000), sched("q", "k", 1000, **extra)],
            DEFAULT_TENANT,
            "alice",
            at(0),
        )
    assert e.value.sqlstate == "22023"
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_procedure_refuses_absolute_instant(conn):
    op = {k: v for k, v in sched("q", "k").items() if k != "delayMs"}
    op["deliverAt"] = "2030-01-01T00:00:00Z"
    with pytest.raises(asyncpg.PostgresError) as e:
        await store.apply(conn, [op], DEFAULT_TENANT, None, at(0))
    assert e.value.sqlstate == "22023"
    op.pop("deliverAt")
    with pytest.raises(asyncpg.PostgresError) as e:
        await store.apply(conn, [op], DEFAULT_TENANT, None, at(0))
    assert e.value.sqlstate == "22023" and "delayMs" in str(e.value)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


async def test_procedure_refuses_repeated_key_and_unknown_op(conn):
    for ops in (
        [sched("q", "k"), cancel("q", "k")],
        [{**sched("q", "k"), "op": "fire"}],
        [{**sched("q", "k"), "partition": None}],
        "not an array",
    ):
        with pytest.raises(asyncpg.PostgresError) as e:
            # "not an array" is wrong on purpose: the procedure refuses it
            await store.apply(conn, ops, DEFAULT_TENANT, None, at(0))  # type: ignore[arg-type]
        assert e.value.sqlstate == "22023"


# -- peek / list / count -----------------------------------------------------------------------


async def test_peek_round_trip_and_miss(queen, ident):
    await queen.timers_apply(
        ident, [sched("orders", "a/b:c", 5000, payload={"x": [1, 2]}, partition="p1", txn="t")]
    )
    p = await queen.timer_peek(ident, "orders", "a/b:c")
    assert p["found"] is True
    assert json.loads(base64.b64decode(p["payload"])) == {"x": [1, 2]}
    assert (p["partition"], p["txn"], p["attempts"], p["lastError"], p["claimed"]) == (
        "p1",
        "t",
        0,
        None,
        False,
    )
    assert p["producerSub"] == "tester" and p["payloadZstd"] is False and p["encrypted"] is False
    assert p["state"] == "waiting"
    assert set(p) == {
        "found",
        "state",
        "queue",
        "timerKey",
        "partition",
        "deliverAt",
        "txn",
        "messageId",
        "payload",
        "payloadZstd",
        "encrypted",
        "producerSub",
        "attempts",
        "lastError",
        "claimed",
        "retryAt",  # ours, beside the reference's fields: null unless backing off
        "createdAt",
        "updatedAt",
    }
    assert p["retryAt"] is None
    assert await queen.timer_peek(ident, "orders", "zzz") == {
        "found": False,
        "queue": "orders",
        "timerKey": "zzz",
    }


async def test_list_keyset_pages(queen, ident):
    keys = ["b", "a", "C", "é", "a/1", "%", "_x"]
    await queen.timers_apply(ident, [sched("q", k, 60000) for k in keys])
    await queen.timers_apply(ident, [sched("other", "zz", 60000)])
    seen, after = [], None
    while True:
        page = await queen.timers_list(ident, "q", after=after, limit=2)
        assert len(page["rows"]) <= 2 and all(
            "payload" not in r and "found" not in r for r in page["rows"]
        )
        seen += [r["timerKey"] for r in page["rows"]]
        if not page["truncated"]:
            assert page["nextAfter"] is None
            break
        after = page["nextAfter"]
        assert after == seen[-1]
    assert seen == sorted(keys, key=lambda k: k.encode())  # byte order
    full = await queen.timers_list(ident, "q", limit=0)  # clamped to 1, never rejected
    assert len(full["rows"]) == 1 and full["truncated"] is True
    assert len((await queen.timers_list(ident, "q", limit="junk"))["rows"]) == len(keys)
    assert len((await queen.timers_list(ident, "q", limit=5000))["rows"]) == len(keys)
    assert await queen.timers_list(ident, "missing") == {
        "rows": [],
        "truncated": False,
        "nextAfter": None,
    }


async def test_a_deep_list_page_reads_one_page_under_a_generic_plan(queen, ident, conn):
    # PL/pgSQL may switch a statement to a generic plan after five calls; the page must still be
    # bounded by `after` there, or a page deep in a large queue reads every key before it.
    keys = [f"k{i:04d}" for i in range(2000)]
    for i in range(0, len(keys), 250):
        await queen.timers_apply(ident, [sched("deep", k, 600_000) for k in keys[i : i + 250]])
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    # index entries the primary key returned in this transaction (idx_tup_read, uncommitted)
    read = "SELECT pg_stat_get_xact_tuples_returned('queen.log_timers_pkey'::regclass)"
    async with conn.transaction():
        before = await conn.fetchval(read)
        page = await conn.fetchval(
            "SELECT queen.log_timers_list_v1($1, 'deep', 'k1899', 100, NULL)", DEFAULT_TENANT
        )
        entries = await conn.fetchval(read) - before
    page = json.loads(page) if isinstance(page, str) else page
    assert [r["timerKey"] for r in page["rows"]] == keys[1900:]
    assert entries <= 101, entries


async def test_count_literal_prefix_scoped(queen, ident, tenant_ident, conn):
    other = tenant_ident()
    await queen.timers_apply(
        ident, [sched("q", k, 60000) for k in ["ab1", "ab2", "a%b", "a_b", "axb", "b"]]
    )
    await queen.timers_apply(ident, [sched("q2", "ab9", 60000)])
    await queen.timers_apply(other, [sched("q", "ab5", 60000)])
    assert await queen.timers_count(ident, "q", "ab") == {"count": 2}
    assert await queen.timers_count(ident, "q", "a%") == {"count": 1}
    assert await queen.timers_count(ident, "q", "a_") == {"count": 1}
    assert await queen.timers_count(ident, "q", "zz") == {"count": 0}
    assert await queen.timers_count(other, "q", "ab") == {"count": 1}
    assert await queen.timers_count(ident, "q", "é" * 64) == {"count": 0}
    for prefix, reason in [
        ("", "timers_count_prefix_required"),
        (None, "timers_count_prefix_required"),
        ("é" * 65, "timers_count_prefix_too_long"),
        ("x" * 129, "timers_count_prefix_too_long"),
        ("a\x00", "timers_count_prefix_invalid"),
    ]:
        with pytest.raises(QueenError) as e:
            await queen.timers_count(ident, "q", prefix)
        assert e.value.reason == reason and e.value.status == 400
    with pytest.raises(QueenError) as e:
        await queen.timers_read(ident, "q", mode="count", prefix="a", limit=5)
    assert e.value.reason == "timers_count_page_parameters"
    with pytest.raises(QueenError) as e:
        await queen.timers_read(ident, "q", mode="sum")
    assert e.value.reason == "timers_read_mode_unknown"
    assert await queen.timers_read(ident, "q", mode="count", prefix="ab") == {"count": 2}
    # the procedure refuses what the broker refuses
    with pytest.raises(asyncpg.PostgresError) as refused:
        await store.count(conn, DEFAULT_TENANT, "q", "x" * 129)
    assert refused.value.sqlstate == "22023"


async def test_count_is_served_by_the_primary_key(queen, ident, conn):
    await queen.timers_apply(ident, [sched("q", f"k{i}", 60000) for i in range(50)])
    # a tiny table is cheaper to scan; what matters is that the index CAN serve the prefix as a
    # key range (with a generic LIKE it could only filter every key of the queue)
    await conn.execute("SET enable_seqscan = off")
    sql = await conn.fetchval("SELECT queen._log_timers_count_sql_v1($1)", "k1")
    plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, DEFAULT_TENANT, "q"))
    assert "log_timers_pkey" in plan and "Seq Scan" not in plan
    cond = [ln for ln in plan.splitlines() if "Index Cond" in ln]
    assert cond and "timer_key >=" in cond[0] and "timer_key <" in cond[0]


# -- encryption at schedule --------------------------------------------------------------------


async def test_encrypting_queue_stores_no_plaintext(queen, ident, conn):
    await queen.configure_queue(ident, "secret", {"encryptionEnabled": True})
    secret = {"card": "4111-1111-1111-1111"}
    res = await queen.timers_apply(ident, [sched("secret", "k", 0, payload=secret)])
    assert res[0]["status"] == "scheduled"
    row = await timer_row(conn, "secret", "k")
    assert row["encrypted"] is True and b"4111" not in row["payload"]
    peek = await queen.timer_peek(ident, "secret", "k")
    assert peek["encrypted"] is True and b"4111" not in base64.b64decode(peek["payload"])
    with pytest.raises(QueenError) as e:
        await queen.timers_apply(ident, [sched("secret", "k2", 0, encrypted=True)])
    assert e.value.reason == "timers_encrypted_conflict"
    # the frame carries the envelope and the flag; a consumer decrypts it
    await fire.drain(queen.rt)
    blobs = await conn.fetch("SELECT blob FROM queen.log_segments")
    assert all(b"4111" not in b["blob"] for b in blobs)
    from .helpers import log_frames

    [f] = await log_frames(conn, queue="secret")
    assert f["encrypted"] is True and b"4111" not in f["payload"]
    assert json.loads(queen.rt.cipher.decrypt(f["payload"])) == secret
    popped = await queen.pop(ident, "secret")
    assert popped["messages"][0]["data"] == secret
    assert popped["messages"][0]["id"] == res[0]["messageId"]


async def test_one_call_to_an_encrypting_and_a_plain_queue(queen, ident, conn):
    """The schedule is sent optimistically in clear; the procedure refuses (writing nothing)
    when a destination encrypts, and the second round encrypts exactly those queues."""
    await queen.configure_queue(ident, "enc", {"encryptionEnabled": True})
    res = await queen.timers_apply(
        ident,
        [
            sched("plain", "k", 0, payload={"v": "p"}),
            sched("enc", "k", 0, payload={"v": "secret-e"}),
        ],
    )
    assert [r["status"] for r in res] == ["scheduled", "scheduled"]
    plain, enc = await timer_row(conn, "plain", "k"), await timer_row(conn, "enc", "k")
    assert plain["encrypted"] is False and json.loads(plain["payload"]) == {"v": "p"}
    assert enc["encrypted"] is True and b"secret-e" not in enc["payload"]
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 2
    verdict = await conn.fetchval(
        "SELECT queen.log_timers_apply_checked_v1($1::jsonb, $2, NULL, NULL, $3)",
        [sched("enc", "k3", 0)],
        DEFAULT_TENANT,
        ["enc", "plain"],
    )
    assert verdict == {"encrypt": ["enc"]}
    assert await timer_row(conn, "enc", "k3") is None


async def test_encryption_flag_travels_with_the_frame(queen, ident, conn):
    """Declared price: encryption switched on after the schedule delivers that frame in clear."""
    await queen.timers_apply(ident, [sched("late", "k", 0, payload={"v": "clear"})])
    await queen.configure_queue(ident, "late", {"encryptionEnabled": True})
    await fire.drain(queen.rt)
    from .helpers import log_frames

    [f] = await log_frames(conn, queue="late")
    assert f["encrypted"] is False and json.loads(f["payload"]) == {"v": "clear"}


def test_identity_never_from_the_body():
    assert Identity().tenant == DEFAULT_TENANT


async def test_b64_helper_is_standard_padded():
    assert b64json("just a string") == base64.b64encode(b'"just a string"').decode()


# -- timers-contract §12 19-20: tenant isolation is a WHERE clause inside every procedure -------


async def test_tenants_see_only_their_own_timers(queen, tenant_ident, conn):
    a, b, c = tenant_ident("a"), tenant_ident("b"), tenant_ident("c")
    await queen.timers_apply(a, [sched("q", "k", 60000, txn="ta", payload={"who": "a"})])
    await queen.timers_apply(b, [sched("q", "k", 60000, txn="tb", payload={"who": "b"})])
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 2
    pa, pb = await queen.timer_peek(a, "q", "k"), await queen.timer_peek(b, "q", "k")
    assert (pa["txn"], pb["txn"]) == ("ta", "tb")
    assert await queen.timer_peek(c, "q", "k") == {"found": False, "queue": "q", "timerKey": "k"}
    assert [r["txn"] for r in (await queen.timers_list(a, "q"))["rows"]] == ["ta"]
    assert (await queen.timers_list(c, "q"))["rows"] == []
    res = await queen.timers_apply(b, [sched("q", "k", 1000, txn="tb2")])
    assert res[0]["status"] == "rescheduled"
    assert (await queen.timer_peek(a, "q", "k"))["txn"] == "ta"
    assert await queen.timer_cancel(c, "q", "k") == {
        "ok": False,
        "status": "absent",
        "queue": "q",
        "timerKey": "k",
        "txn": None,
    }
    assert (await queen.timer_cancel(b, "q", "k"))["status"] == "cancelled"
    assert (await queen.timer_peek(a, "q", "k"))["found"] is True
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 1


async def test_refusals_are_counted_by_reason(queen, ident):
    reg = queen.rt.metrics.registry

    def count(reason):
        return reg.get_sample_value("queen_timers_schedule_rejected_total", {"reason": reason}) or 0

    for body in (
        [sched("q", "k", producerSub="x")],
        [sched("q", "k", 7776000001)],
        [{**sched("q", "k"), "payload": base64.b64encode(b"x" * (BIG + 1)).decode()}],
    ):
        with pytest.raises(QueenError):
            await queen.timers_apply(ident, body)
    assert (count("shape"), count("horizon"), count("payload_too_large")) == (1, 1, 1)
    queen.rt.switches.timers_schedule_enabled = False
    try:
        with pytest.raises(QueenError):
            await queen.timers_apply(ident, [sched("q", "k")])
    finally:
        queen.rt.switches.timers_schedule_enabled = True
    assert count("disabled") == 1


async def test_list_limit_beyond_int32_is_clamped_not_unavailable(queen, ident):
    # "clamped to 1..1000, never rejected": a limit past the int4 parameter must not surface
    # as a database error (it was answered 503 timers_unavailable, an invitation to retry).
    await queen.timers_apply(ident, [sched("q", k, 60000) for k in ["a", "b"]])
    assert len((await queen.timers_list(ident, "q", limit="99999999999"))["rows"]) == 2
    assert len((await queen.timers_list(ident, "q", limit=-(2**40)))["rows"]) == 1


async def test_count_with_nul_in_queue_is_zero_not_a_server_error(queen, ident):
    # peek and list answer a miss for a queue name holding NUL (no such queue can exist);
    # count reached PostgreSQL with it and came back 500 timers_error.
    assert await queen.timers_count(ident, "q\x00", "a") == {"count": 0}


async def test_reads_of_names_no_text_column_can_hold_are_misses_or_refusals(queen, ident):
    # A Python caller can pass a lone surrogate (no JSON or msgpack body can): the driver
    # cannot encode it, and it reached asyncpg as a DataError, not an answer.
    bad = "q\ud800"
    assert (await queen.timer_peek(ident, bad, "k"))["found"] is False
    assert (await queen.timers_list(ident, bad))["rows"] == []
    assert await queen.timers_count(ident, bad, "a") == {"count": 0}
    for call, reason in [
        (queen.timer_peek(ident, "q", bad), "timers_timer_key_required"),
        (queen.timers_list(ident, "q", after=bad), "timers_bad_after"),
        (queen.timers_count(ident, "q", bad), "timers_count_prefix_invalid"),
    ]:
        with pytest.raises(QueenError) as e:
            await call
        assert (e.value.status, e.value.reason) == (400, reason)


async def test_very_negative_delay_is_legal_not_a_server_error(queen, ident, conn):
    # "<= 0 legal, fires first cycle": a delay far in the past must not overflow PostgreSQL's
    # interval/timestamp (it was answered 500 timers_error, 22008).
    res = await queen.timers_apply(
        ident, [sched("q", "a", -1e300), sched("q", "b", -1e15), sched("q", "c", -(2**63))]
    )
    assert [r["status"] for r in res] == ["scheduled"] * 3
    due = await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE deliver_at < now()")
    assert due == 3


async def test_peek_payload_is_standard_base64_without_line_breaks(queen, ident):
    # PostgreSQL's encode(.., 'base64') wraps every 76 characters (MIME). The peeked payload
    # of anything over 57 bytes carried "\n", which the broker's own validation refuses: a
    # client that peeks and reschedules with the same payload was answered
    # timers_payload_not_base64.
    value = {"x": "y" * 500}
    await queen.timers_apply(ident, [sched("q", "k", 60000, payload=value)])
    p = await queen.timer_peek(ident, "q", "k")
    assert "\n" not in p["payload"]
    assert json.loads(base64.b64decode(p["payload"], validate=True)) == value
    res = await queen.timers_apply(
        ident, [sched("q", "k", 60000, txn="t2") | {"payload": p["payload"]}]
    )
    assert res[0]["status"] == "rescheduled"


async def test_each_call_is_timed_refusals_included(queen, ident):
    reg = queen.metrics_registry

    def count() -> float:
        return reg.get_sample_value("queen_timers_apply_seconds_count") or 0.0

    before = count()
    await queen.timers_apply(ident, [sched("timed", "k1"), sched("timed", "k2")])
    assert count() == before + 1  # one call, whatever its op count
    with pytest.raises(QueenError):
        await queen.timers_apply(ident, [{"op": "schedule", "queue": "timed"}])
    assert count() == before + 2
    total = reg.get_sample_value("queen_timers_apply_seconds_sum")
    assert total is not None and total > 0
    # the cumulative buckets end with every call
    assert reg.get_sample_value("queen_timers_apply_seconds_bucket", {"le": "+Inf"}) == count()
