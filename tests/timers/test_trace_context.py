"""Traces across the delay (queen_timers/tracing.py, docs/guides/tracing.md): a schedule is a
span whose W3C context is stored with the timer, the fire is a span linked to it, and the pop
hands the context to the consumer. The spans are the SDK's, recorded by an in-memory exporter
(the `spans` fixture, which skips without the `[otel]` extra); the database is real."""

from __future__ import annotations

import base64
import datetime as dt

import asyncpg
import msgspec
import pytest

from queen_timers import sqlapi, tracing
from queen_timers.errors import QueenError
from queen_timers.log.frames import Frame, TracedFrame, pack_segment, unpack_segment
from queen_timers.timers import fire

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


def op(queue: str, key: str, payload: object = None) -> dict[str, object]:
    data = msgspec.json.encode(payload if payload is not None else {"k": key})
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": 0,
        "txn": f"t-{key}",
        "payload": base64.b64encode(data).decode(),
    }


def later() -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)


async def stored(conn, queue: str, key: str) -> tuple[str | None, str | None]:
    row = await conn.fetchrow(
        "SELECT trace_parent, trace_state FROM queen.log_timers"
        " WHERE queue = $1 AND timer_key = $2",
        queue,
        key,
    )
    return row["trace_parent"], row["trace_state"]


def traceparent_of(span) -> str:
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def by_name(spans, name: str):
    found = [s for s in spans.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    return found[0]


def consumer_context(message: dict[str, object]):
    """What a consumer does: extract the popped message as a W3C carrier."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    ctx = TraceContextTextMapPropagator().extract(message)
    return trace.get_current_span(ctx).get_span_context()


async def test_schedule_fire_and_pop_are_one_trace(queen, conn, ident, spans):
    from opentelemetry.trace import SpanKind

    [res] = await queen.timers_apply(
        ident, [op("tq", "k1")], traceparent=TRACEPARENT, tracestate="vendor=v1"
    )
    assert res["status"] == "scheduled"
    sched = by_name(spans, "create tq")
    assert sched.kind is SpanKind.PRODUCER
    assert f"{sched.context.trace_id:032x}" == TRACE
    assert sched.parent is not None and f"{sched.parent.span_id:016x}" == PARENT
    assert dict(sched.attributes) == {
        "messaging.system": "queen",
        "messaging.operation.type": "create",
        "messaging.operation.name": "schedule",
        "messaging.destination.name": "tq",
        "messaging.message.id": res["messageId"],
    }
    # the timer keeps the schedule span's context, not the caller's
    assert await stored(conn, "tq", "k1") == (traceparent_of(sched), "vendor=v1")

    assert (await fire.drain(queen.rt, now=later())).fired == 1
    send = by_name(spans, "send tq")
    assert send.kind is SpanKind.PRODUCER
    assert [link.context.span_id for link in send.links] == [sched.context.span_id]
    # one scheduling context: the fire is its child, in the same trace
    assert send.context.trace_id == sched.context.trace_id
    assert send.parent is not None and send.parent.span_id == sched.context.span_id
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["queen.timers.fired"] == 1

    popped = await queen.pop(ident, "tq", batch=1)
    assert popped is not None
    [message] = popped["messages"]
    assert message["traceparent"] == traceparent_of(sched)
    assert message["tracestate"] == "vendor=v1"
    got = consumer_context(message)
    assert got.trace_id == sched.context.trace_id and got.span_id == sched.context.span_id


async def test_an_in_process_callers_current_span_is_the_parent(queen, conn, ident, spans):
    from opentelemetry.sdk.trace import TracerProvider

    app = TracerProvider().get_tracer("app")
    with app.start_as_current_span("handle order") as outer:
        await queen.timers_apply(ident, [op("tq", "k2")])
    sched = by_name(spans, "create tq")
    assert sched.parent is not None and sched.parent.span_id == outer.get_span_context().span_id
    assert sched.context.trace_id == outer.get_span_context().trace_id
    assert (await stored(conn, "tq", "k2"))[0] == traceparent_of(sched)


async def test_timers_of_two_traces_fire_under_a_root_linked_to_both(queen, ident, spans):
    other = f"00-{'1' * 32}-{'2' * 16}-01"
    await queen.timers_apply(ident, [op("tq", "a")], traceparent=TRACEPARENT)
    await queen.timers_apply(ident, [op("tq", "b")], traceparent=other)
    assert (await fire.drain(queen.rt, now=later())).fired == 2
    send = by_name(spans, "send tq")
    assert send.parent is None
    creates = [s for s in spans.get_finished_spans() if s.name == "create tq"]
    assert {link.context.span_id for link in send.links} == {s.context.span_id for s in creates}
    assert send.context.trace_id not in {s.context.trace_id for s in creates}
    assert send.attributes["messaging.batch.message_count"] == 2


async def test_the_transaction_riders_schedules_are_traced(queen, conn, ident, spans):
    answer = await queen.transaction(
        ident, {"operations": [], "timers": [op("tq", "r1")]}, traceparent=TRACEPARENT
    )
    assert answer["success"] is True
    sched = by_name(spans, "create tq")
    assert sched.parent is not None and f"{sched.parent.span_id:016x}" == PARENT
    parent, _ = await stored(conn, "tq", "r1")
    assert parent == traceparent_of(sched)


async def test_a_malformed_traceparent_is_ignored_and_a_non_string_refused(
    queen, conn, ident, spans
):
    await queen.timers_apply(ident, [op("tq", "m")], traceparent="00-not-a-context-01")
    sched = by_name(spans, "create tq")
    assert sched.parent is None  # a new trace, as the W3C asks for a malformed header
    assert (await stored(conn, "tq", "m"))[0] == traceparent_of(sched)
    with pytest.raises(QueenError) as ei:
        await queen.timers_apply(ident, [op("tq", "n")], traceparent=7)
    assert (ei.value.reason, ei.value.status) == ("bad_trace_context", 400)
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers WHERE timer_key = 'n'") == 0


async def test_without_the_extra_nothing_is_stored_or_sent(queen, conn, ident, monkeypatch):
    monkeypatch.setattr(tracing, "_api", None)
    monkeypatch.setattr(tracing, "_tried", True)
    assert tracing.api() is None
    await queen.timers_apply(ident, [op("tq", "plain")], traceparent=TRACEPARENT)
    assert await stored(conn, "tq", "plain") == (None, None)
    assert (await fire.drain(queen.rt, now=later())).fired == 1
    popped = await queen.pop(ident, "tq", batch=1)
    assert popped is not None
    [message] = popped["messages"]
    assert "traceparent" not in message and "tracestate" not in message


async def test_the_sql_api_stores_a_traceparent_the_consumer_gets(queen, conn, ident):
    res = await sqlapi.schedule(
        conn, "sq", "s1", 0, {"a": 1}, traceparent=TRACEPARENT, tracestate="x=1"
    )
    assert res["status"] == "scheduled"
    assert await stored(conn, "sq", "s1") == (TRACEPARENT, "x=1")
    # the public function takes them by name; _v1 stays as it was
    await conn.fetchval(
        "SELECT queen.timer_schedule_v2('sq', 's2', 0, '{}'::bytea, traceparent => $1)",
        TRACEPARENT,
    )
    await conn.fetchval("SELECT queen.timer_schedule_v1('sq', 's3', 0, '{}'::bytea)")
    assert await stored(conn, "sq", "s2") == (TRACEPARENT, None)
    assert await stored(conn, "sq", "s3") == (None, None)
    assert (await fire.drain(queen.rt, now=later())).fired == 3
    popped = await queen.pop(ident, "sq", batch=10)
    assert popped is not None
    got = {m["transactionId"]: m.get("traceparent") for m in popped["messages"]}
    assert sorted(got.values(), key=lambda v: v or "") == [None, TRACEPARENT, TRACEPARENT]


@pytest.mark.parametrize(
    ("traceparent", "tracestate"),
    [
        ("00-abc-def-01", None),
        (f"01-{TRACE}-{PARENT}-01", None),  # only version 00 is stored as given
        (f"00-{TRACE.upper()}-{PARENT}-01", None),
        (f"00-{'0' * 32}-{PARENT}-01", None),
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (None, "vendor=1"),  # a tracestate without a traceparent
        (TRACEPARENT, "a=1\n"),
    ],
)
async def test_the_sql_api_refuses_a_malformed_context_and_writes_nothing(
    queen, conn, traceparent, tracestate
):
    with pytest.raises(asyncpg.PostgresError, match="QTIMER timers_bad_traceparent"):
        await conn.fetchval(
            "SELECT queen.timer_schedule_v2('sq', 'bad', 0, '{}'::bytea,"
            " traceparent => $1, tracestate => $2)",
            traceparent,
            tracestate,
        )
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0


def test_an_untraced_frame_encodes_as_it_always_did():
    plain = Frame(
        message_id=b"\x01" * 16, txn="t", producer_sub=None, encrypted=False, payload=b"{}"
    )
    old_shape = [b"\x01" * 16, "t", None, False, b"{}"]
    assert msgspec.msgpack.encode(plain) == msgspec.msgpack.encode(old_shape)
    # a segment written before frames had a trace context decodes with none
    [back] = unpack_segment(pack_segment([plain]))
    assert (back.trace_parent, back.trace_state) == (None, None)
    assert msgspec.structs.astuple(back)[:5] == msgspec.structs.astuple(plain)
    traced = TracedFrame(b"\x01" * 16, "t", None, False, b"{}", TRACEPARENT, "v=1")
    assert unpack_segment(pack_segment([traced, plain]))[0] == traced
