"""What only the TCP transport does: framing, hello, pipelining."""

from __future__ import annotations

import asyncio

import pytest

from queen_tcp import TcpSettings, TcpTransport
from queen_tcp.client import TcpClient
from queen_tcp.protocol import DECODER, encode_frame
from queen_timers.errors import QueenError
from queen_timers.settings import Settings


def tcp_settings(**overrides) -> Settings:
    return Settings({"tcp_port": 0, **overrides}, environ={}, extra=(TcpSettings,))


async def _raw(t):
    return await asyncio.open_connection(t.host, t.port)


async def _read_frame(reader):
    n = int.from_bytes(await reader.readexactly(4), "big")
    return DECODER.decode(await reader.readexactly(n))


async def test_hello_answers_the_identity(tcp_transport):
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        assert c.server["server"] == "queen-tcp" and c.server["protocol"] == 1
        assert c.server["tenant"] == "00000000-0000-0000-0000-000000000001"


async def test_first_frame_must_be_hello(tcp_transport):
    reader, writer = await _raw(tcp_transport)
    writer.write(encode_frame([7, "push", {"items": []}]))
    rid, status, body = await _read_frame(reader)
    assert (rid, status, body["reason"]) == (7, 400, "hello_required")
    assert await reader.read() == b""  # closed
    writer.close()


async def test_an_oversized_frame_closes_and_garbage_is_refused(queen):
    t = TcpTransport(tcp_settings(tcp_max_frame_bytes=1024))
    await t.start(queen)
    try:
        reader, writer = await _raw(t)
        writer.write((10**6).to_bytes(4, "big"))
        _rid, status, body = await _read_frame(reader)
        assert (status, body["error"]) == (413, "payload_too_large")
        assert await reader.read() == b""
        writer.close()
        reader, writer = await _raw(t)
        writer.write(b"\x00\x00\x00\x03abc")
        _rid, status, body = await _read_frame(reader)
        assert (status, body["reason"]) == (400, "bad_frame")
        writer.close()
    finally:
        await t.stop()


async def test_unknown_operation_and_bad_arguments(tcp_transport):
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        with pytest.raises(QueenError) as ei:
            await c.call("drop_database")
        assert ei.value.reason == "unknown_operation"
        with pytest.raises(QueenError) as ei:
            await c.call("push", itemz=[])
        assert (ei.value.reason, ei.value.status) == ("bad_arguments", 400)
        with pytest.raises(QueenError) as ei:  # the service's test clock is not on the wire
            await c.call("extend_lease", lease_id="x", now="2099-01-01T00:00:00Z")
        assert ei.value.reason == "bad_arguments"
        # The connection survives refusals.
        assert (await c.push([{"queue": "q", "payload": 1}]))[0]["status"] == "queued"


async def test_pipelined_requests_answer_out_of_order(tcp_transport):
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        # A parked long-poll must not hold up the calls sent after it on the same connection.
        parked = asyncio.create_task(c.pop("lp", batch=1, wait=True, timeout_ms=10_000))
        await asyncio.sleep(0.05)
        results = await asyncio.gather(
            *[c.push([{"queue": f"q{i}", "payload": i}]) for i in range(50)]
        )
        assert [r[0]["status"] for r in results] == ["queued"] * 50
        assert not parked.done()
        await c.push([{"queue": "lp", "payload": "wake"}])
        got = await asyncio.wait_for(parked, 10)
        assert got["messages"][0]["data"] == "wake"


async def test_pending_calls_fail_when_the_server_stops(queen):
    t = TcpTransport(tcp_settings())
    await t.start(queen)
    c = await TcpClient.connect(t.host, t.port)
    parked = asyncio.create_task(c.pop("none", batch=1, wait=True, timeout_ms=30_000))
    await asyncio.sleep(0.05)
    await t.stop()
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(parked, 10)
    await c.aclose()
    await t.stop()  # twice is fine


async def test_a_client_leaving_does_not_hurt_the_others(tcp_transport):
    host, port = tcp_transport.host, tcp_transport.port
    stays = await TcpClient.connect(host, port)
    for _ in range(3):
        c = await TcpClient.connect(host, port)
        await c.push([{"queue": "q", "payload": 1}])
        await c.aclose()
    # A client that vanishes with a request in flight.
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        encode_frame([0, "hello", {}])
        + encode_frame([1, "pop", {"queue": "q2", "wait": True, "timeout_ms": 5000}])
    )
    await writer.drain()
    await _read_frame(reader)
    writer.close()
    await asyncio.sleep(0.05)
    assert (await stays.push([{"queue": "q", "payload": 2}]))[0]["status"] == "queued"
    again = await TcpClient.connect(host, port)
    assert (await again.push([{"queue": "q", "payload": 3}]))[0]["status"] == "queued"
    await again.aclose()
    await stays.aclose()


async def test_non_string_map_keys_are_refused_cleanly(tcp_transport):
    # msgpack maps may have integer keys; a body or an op mixing them with strings must be
    # refused with its code (400), never answered 500 internal_error.
    reader, writer = await _raw(tcp_transport)
    try:
        writer.write(encode_frame([0, "hello", {"token": None}]))
        assert (await _read_frame(reader))[1] == 200
        writer.write(encode_frame([1, "timer_peek", {1: "x", "queue": "q", "timer_key": "k"}]))
        rid, status, body = await _read_frame(reader)
        assert (rid, status, body["reason"]) == (1, 400, "bad_arguments")
        op = {
            "op": "schedule",
            "queue": "q",
            "timerKey": "k",
            "delayMs": 1,
            "txn": "t",
            "payload": "e30=",
            7: 1,
            "zz": 2,
        }
        writer.write(encode_frame([2, "timers_apply", {"body": [op]}]))
        rid, status, body = await _read_frame(reader)
        assert (rid, status, body["reason"]) == (2, 400, "timers_unknown_field")
    finally:
        writer.close()


async def test_transaction_required_leases(tcp_transport):
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        await c.push([{"queue": "in", "payload": 1}])
        got = await c.pop("in", batch=1)
        m = got["messages"][0]
        ack = {
            "type": "ack",
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "status": "completed",
            "leaseId": m["leaseId"],
        }
        push = {"type": "push", "items": [{"queue": "out", "payload": 2}]}
        res = await c.transaction({"operations": [push], "requiredLeases": ["gone"]})
        assert (res["success"], res["reason"], res["leaseId"]) == (False, "lease_lost", "gone")
        assert await c.pop("out", batch=1) is None
        res = await c.transaction({"operations": [ack, push], "requiredLeases": [m["leaseId"]]})
        assert res["success"] is True and [r["type"] for r in res["results"]] == ["ack", "push"]
        with pytest.raises(QueenError) as ei:
            await c.transaction({"operations": [push], "requiredLeases": [""]})
        assert (ei.value.code, ei.value.status) == ("bad_request", 400)


async def test_dlq_window_travels_as_msgpack_timestamps(tcp_transport, queen, ident):
    import datetime as dt

    t0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    for n in (1, 2):
        await queen.push(ident, [{"queue": "dq", "payload": n}])
        r = await queen.pop(ident, "dq", batch=1, now=t0 + dt.timedelta(hours=n))
        m = r["messages"][0]
        await queen.ack(
            ident,
            [
                {
                    "transactionId": m["transactionId"],
                    "leaseId": m["leaseId"],
                    "partitionId": m["partitionId"],
                    "status": "dlq",
                }
            ],
            now=t0 + dt.timedelta(hours=n),
        )
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        page = await c.dlq(queue="dq", from_=t0 + dt.timedelta(hours=1, minutes=30))
        assert [m["data"] for m in page["messages"]] == [2] and page["total"] == 1
        with pytest.raises(QueenError) as ei:
            await c.dlq(queue="dq", to="tomorrow")
        assert (ei.value.reason, ei.value.status) == ("dlq_bad_to", 400)


async def test_max_inflight_holds_back_the_next_request(queen):
    # With one request in flight allowed, a push pipelined behind a parked long-poll is not
    # started (nor answered) before the long-poll completes; then it is, on the same connection.
    t = TcpTransport(tcp_settings(tcp_max_inflight=1))
    await t.start(queen)
    try:
        reader, writer = await _raw(t)
        writer.write(
            encode_frame([0, "hello", {}])
            + encode_frame(
                [1, "pop", {"queue": "held", "batch": 1, "wait": True, "timeout_ms": 300}]
            )
            + encode_frame([2, "push", {"items": [{"queue": "held", "payload": 1}]}])
        )
        assert (await _read_frame(reader))[1] == 200
        first = await asyncio.wait_for(_read_frame(reader), 10)
        assert first[:2] == [1, 200] and first[2] is None  # the pop timed out empty
        second = await asyncio.wait_for(_read_frame(reader), 10)
        assert second[:2] == [2, 200] and second[2][0]["status"] == "queued"
        writer.close()
    finally:
        await t.stop()


async def test_schedules_travel_through_the_operations_table(tcp_transport):
    import base64

    body = {
        "queue": "jobs",
        "scheduleKey": "tick",
        "everyMs": 60_000,
        "payload": base64.b64encode(b"x").decode(),
    }
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        made = await c.call("schedule_set", body=body)
        assert made["status"] == "created"
        view = await c.call("schedule_peek", queue="jobs", schedule_key="tick", count=2)
        assert len(view["next"]) == 2
        assert (await c.call("schedule_pause", queue="jobs", schedule_key="tick"))["paused"] is True
        page = await c.call("schedules_list", queue="jobs")
        assert [s["scheduleKey"] for s in page["schedules"]] == ["tick"]
        assert (await c.call("schedule_delete", queue="jobs", schedule_key="tick"))[
            "deleted"
        ] is True
        with pytest.raises(QueenError) as ei:
            await c.call("schedule_run_now", queue="jobs", schedule_key="tick")
        assert (ei.value.code, ei.value.status) == ("schedule_not_found", 404)


async def test_webhook_targets_travel_through_the_operations_table(tcp_transport):
    body = {"name": "billing", "queue": "invoices", "url": "https://hooks.example.com/in"}
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        made = await c.call("webhook_target_set", body=body)
        assert made["status"] == "created" and made["secret"]["value"].startswith("whsec_")
        added = await c.call("webhook_secret_add", name="billing")
        assert (await c.call("webhook_target_pause", name="billing"))["paused"] is True
        page = await c.call("webhook_targets_list")
        assert [len(t["secrets"]) for t in page["targets"]] == [2]
        gone = await c.call("webhook_secret_delete", name="billing", secret_id=added["id"])
        assert gone["deleted"] is True
        assert (await c.call("webhook_attempts", name="billing"))["attempts"] == []
        assert (await c.call("webhook_target_delete", name="billing"))["deleted"] is True
        with pytest.raises(QueenError) as ei:
            await c.call("webhook_target_get", name="billing")
        assert (ei.value.code, ei.value.status) == ("webhook_target_not_found", 404)
