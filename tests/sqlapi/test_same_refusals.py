"""Every refusal of the SQL API: its SQLSTATE and reason code, and for each value rule the
SAME reason and status as the wire's (the broker's service call, through the batcher and the
statement that writes), with nothing written on either path. The rules have one
implementation (queen._log_timers_refusal_v1); these pin that both paths reach it with the
same limits and read its answer the same way."""

from __future__ import annotations

import base64

import pytest
import zstandard
from timers.helpers import timer_row

import queen_timers
from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.settings import Settings
from queen_timers.sqlapi import limits

from .helpers import set_limit

MAX_PAYLOAD = Settings().timers_max_payload_bytes
_ZSTD = zstandard.ZstdCompressor().compress(b"{}")
HORIZON_MS = Settings().timers_max_horizon_s * 1000

# (case, wire op, SQL schedule arguments): the same mistake spelt for each path.
GOOD = {"queue": "q", "timer_key": "k", "delay_ms": 1000, "payload": b"{}", "txn": "t"}
SCHEDULE_CASES = [
    ("queue empty", {"queue": ""}),
    ("queue too long", {"queue": "q" * 256}),
    ("queue control character", {"queue": "a\x01b"}),
    ("queue DEL", {"queue": "a\x7fb"}),
    ("key empty", {"timer_key": ""}),
    ("key too long", {"timer_key": "é" * 513}),
    ("partition empty", {"partition": ""}),
    ("partition too long", {"partition": "p" * 256}),
    ("partition control character", {"partition": "p\n"}),
    ("delay missing", {"delay_ms": None}),
    ("delay beyond the horizon", {"delay_ms": HORIZON_MS + 1}),
    ("payload missing", {"payload": None}),
    ("payload too large", {"payload": b"x" * (MAX_PAYLOAD + 1)}),
    ("txn empty", {"txn": ""}),
    ("txn too long", {"txn": "t" * 65536}),
    ("zstd and encrypted", {"payload_zstd": True, "encrypted": True}),
    # first failure wins, in the same order on both paths
    ("queue before key", {"queue": "", "timer_key": ""}),
    (
        "horizon before payload size",
        {"delay_ms": HORIZON_MS + 1, "payload": b"x" * (MAX_PAYLOAD + 1)},
    ),
    ("key too long before a repeat", {"timer_key": "k" * 1025}),
    ("payload before txn", {"payload": b"x" * (MAX_PAYLOAD + 1), "txn": ""}),
]
CANCEL_CASES = [
    ("queue empty", {"queue": ""}),
    ("queue too long", {"queue": "q" * 256}),
    ("key empty", {"timer_key": ""}),
    ("key too long", {"timer_key": "k" * 1025}),
]


# Values exactly at each limit: accepted by both paths (with the refusals one past them, the
# two paths' limits must be equal, not merely both finite).
LIMIT_CASES = [
    ("queue of 255 characters", {"queue": "é" * 255}),
    ("key of 1024 bytes", {"timer_key": "é" * 512}),
    ("partition of 255 characters", {"partition": "p" * 255}),
    ("delay at the horizon", {"delay_ms": HORIZON_MS}),
    ("payload at the limit", {"payload": b"x" * MAX_PAYLOAD}),
    ("txn of 65535 bytes", {"txn": "t" * 65535}),
    ("a negative delay", {"delay_ms": -(10**15)}),
    ("zstd alone", {"payload_zstd": True, "payload": _ZSTD}),
    ("encrypted alone", {"encrypted": True}),
]


def wire_op(args: dict, kind: str = "schedule") -> dict:
    op = {"op": kind, "queue": args["queue"], "timerKey": args["timer_key"]}
    if args.get("partition") is not None:
        op["partition"] = args["partition"]
    if kind == "cancel":
        return op
    for wire, name in (("delayMs", "delay_ms"), ("txn", "txn")):
        if args.get(name) is not None:
            op[wire] = args[name]
    if args.get("payload") is not None:
        op["payload"] = base64.b64encode(args["payload"]).decode()
    for wire, name in (("payloadZstd", "payload_zstd"), ("encrypted", "encrypted")):
        if name in args:
            op[wire] = args[name]
    return op


APP = Identity(subject="app")


async def wire_refusal(queen, op: dict) -> QueenError:
    with pytest.raises(QueenError) as ei:
        await queen.timers_apply(APP, [op])
    return ei.value


async def sql_refusal(conn, args: dict, kind: str = "schedule") -> queen_timers.TimerRefused:
    with pytest.raises(queen_timers.TimerRefused) as ei:
        async with conn.transaction():
            if kind == "cancel":
                await queen_timers.cancel(conn, args["queue"], args["timer_key"])
            else:
                await conn.fetchval(
                    "SELECT queen.timer_schedule_v1($1, $2, $3, $4, $5, $6, NULL, $7, $8)",
                    args["queue"],
                    args["timer_key"],
                    args.get("delay_ms"),
                    args.get("payload"),
                    args.get("txn"),
                    args.get("partition"),
                    args.get("payload_zstd", False),
                    args.get("encrypted", False),
                )
    return ei.value


@pytest.fixture
def as_refusal(monkeypatch):
    """Raw asyncpg errors of the test's own statements, read as the helpers read them."""
    import asyncpg

    from queen_timers.sqlapi import _translate

    real = asyncpg.connection.Connection.fetchval

    async def fetchval(self, *a, **kw):
        try:
            return await real(self, *a, **kw)
        except asyncpg.PostgresError as exc:
            raise _translate(exc) from exc

    monkeypatch.setattr(asyncpg.connection.Connection, "fetchval", fetchval)


@pytest.mark.parametrize(("case", "bad"), SCHEDULE_CASES, ids=[c for c, _ in SCHEDULE_CASES])
async def test_a_schedule_refusal_is_the_same_on_both_paths(queen, conn, as_refusal, case, bad):
    args = {**GOOD, **bad}
    wire = await wire_refusal(queen, wire_op(args))
    sql = await sql_refusal(conn, args)
    assert (sql.code, sql.reason, sql.status) == (wire.code, wire.reason, wire.status), case
    assert sql.sqlstate == {400: "22023", 403: "22008", 413: "22001"}[wire.status]
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


@pytest.mark.parametrize(("case", "bad"), CANCEL_CASES, ids=[c for c, _ in CANCEL_CASES])
async def test_a_cancel_refusal_is_the_same_on_both_paths(queen, conn, case, bad):
    args = {**GOOD, **bad}
    wire = await wire_refusal(queen, wire_op(args, "cancel"))
    sql = await sql_refusal(conn, args, "cancel")
    assert (sql.code, sql.reason, sql.status, sql.sqlstate) == (
        wire.code,
        wire.reason,
        wire.status,
        "22023",
    ), case


@pytest.mark.parametrize(("case", "edge"), LIMIT_CASES, ids=[c for c, _ in LIMIT_CASES])
async def test_a_value_at_the_limit_passes_both_paths(queen, conn, case, edge):
    args = {**GOOD, **edge}
    [res] = await queen.timers_apply(APP, [wire_op(args)])
    assert res["status"] == "scheduled", case
    await queen.timer_cancel(APP, args["queue"], args["timer_key"])
    res = await conn.fetchval(
        "SELECT queen.timer_schedule_v1($1, $2, $3, $4, $5, $6, NULL, $7, $8)",
        args["queue"],
        args["timer_key"],
        args["delay_ms"],
        args["payload"],
        args["txn"],
        args.get("partition"),
        args.get("payload_zstd", False),
        args.get("encrypted", False),
    )
    assert res["status"] == "scheduled", case


async def test_the_good_arguments_pass_both_paths(queen, conn):
    [res] = await queen.timers_apply(APP, [wire_op(GOOD)])
    assert res["status"] == "scheduled"
    await queen.timer_cancel(APP, "q", "k")
    res = await queen_timers.schedule(conn, "q", "k", 1000, b"{}", txn="t")
    assert res["status"] == "scheduled"


async def test_the_message_carries_the_reason_for_any_driver(conn):
    import asyncpg

    with pytest.raises(asyncpg.PostgresError) as ei:
        await conn.fetchval("SELECT queen.timer_schedule_v1('', 'k', 0, '\\x00')")
    assert ei.value.sqlstate == "22023"
    assert ei.value.message.startswith("QTIMER timers_queue_required: ")


async def test_the_sql_limits_default_to_the_settings_defaults(conn):
    await conn.execute("DELETE FROM queen.system_state WHERE key = 'timers_sql_limits'")
    got = await conn.fetchval("SELECT queen.log_timers_limits_v1()")
    assert got == {**limits(Settings()), "notifyMaxQueueUsage": 0.5}


async def test_a_broker_publishes_its_limits_and_the_sql_api_applies_them(db_url, conn):
    from queen_timers.testing.fixtures import started_broker

    await set_limit(conn, "notifyMaxQueueUsage", 0.25)
    async with started_broker(db_url, timers_max_horizon_s=60, timers_max_payload_bytes=10):
        got = await conn.fetchval("SELECT queen.log_timers_limits_v1()")
        assert got["maxHorizonS"] == 60 and got["maxPayloadBytes"] == 10
        assert got["notifyMaxQueueUsage"] == 0.25  # an operator's value survives the boot
        with pytest.raises(queen_timers.TimerRefused) as ei:
            await queen_timers.schedule(conn, "q", "k", 60_001, b"{}")
        assert ei.value.reason == "timers_horizon"
        with pytest.raises(queen_timers.TimerRefused) as ei:
            await queen_timers.schedule(conn, "q", "k", 1, b"x" * 11)
        assert ei.value.reason == "timers_payload_too_large"
        assert (await queen_timers.schedule(conn, "q", "k", 60_000, b"x" * 10))["ok"]


async def test_a_paused_schedule_is_refused_and_cancel_still_works(queen, conn):
    await queen_timers.schedule(conn, "q", "k", 60_000, b"{}")
    await queen.switches_set(Identity(subject="op", admin=True), {"timersSchedule": False})
    try:
        with pytest.raises(queen_timers.TimerRefused) as ei:
            await queen_timers.schedule(conn, "q", "k2", 0, b"{}")
        assert (ei.value.sqlstate, ei.value.reason, ei.value.status) == (
            "55000",
            "timers_disabled",
            503,
        )
        assert (await queen_timers.cancel(conn, "q", "k"))["status"] == "cancelled"
    finally:
        await queen.switches_set(Identity(subject="op", admin=True), {"timersSchedule": True})
    assert (await queen_timers.schedule(conn, "q", "k2", 0, b"{}"))["ok"]


async def test_an_encrypting_queue_refuses_clear_payloads_and_takes_the_helpers(queen, conn):
    ident = Identity(subject="app")
    await queen.configure_queue(ident, "secret", {"encryptionEnabled": True})
    with pytest.raises(queen_timers.TimerRefused) as ei:
        await queen_timers.schedule(conn, "secret", "k", 0, {"card": "4111"})
    assert (ei.value.sqlstate, ei.value.reason) == ("22023", "timers_encryption_required")
    assert await timer_row(conn, "secret", "k") is None
    # compressing is no way around it
    with pytest.raises(queen_timers.TimerRefused):
        await queen_timers.schedule(conn, "secret", "k", 0, {"card": "4111"}, compress=True)

    key = "11" * 32  # the fixture broker's QUEEN_ENCRYPTION_KEY
    res = await queen_timers.schedule(
        conn, "secret", "k", 0, {"card": "4111"}, encryption_key=key, compress=True
    )
    assert res["status"] == "scheduled"
    row = await timer_row(conn, "secret", "k")
    assert row["encrypted"] is True and row["payload_zstd"] is False
    assert b"4111" not in row["payload"]

    from queen_timers.timers import fire

    from .test_schedule_cancel import later

    assert (await fire.drain(queen.rt, now=later(5))).fired == 1
    popped = await queen.pop(ident, "secret", batch=1, auto_ack=True)
    [msg] = popped["messages"]
    assert msg["data"] == {"card": "4111"}  # the broker decrypts with its key at the pop


async def test_a_tenant_that_is_not_a_uuid_is_a_driver_error(conn):
    with pytest.raises(ValueError):
        await queen_timers.schedule(conn, "q", "k", 0, b"{}", tenant="not-a-uuid")
