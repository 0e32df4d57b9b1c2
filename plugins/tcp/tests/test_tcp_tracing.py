"""Traces across the delay over TCP (docs/guides/tracing.md): `timers_apply` with a
`traceparent` argument (the TCP equivalent of HTTP's header) is that context's child, the fire
links to it, and the message popped over TCP carries the context the consumer continues. Spans
are the SDK's in an in-memory exporter (the `spans` fixture skips without the `[otel]`
extra); the fire is driven explicitly (`fire.drain`)."""

from __future__ import annotations

import datetime as dt

from queen_tcp.client import TcpClient
from queen_timers.timers import fire

TRACE = "5b8aa5a2d2c872e8321cf37308d69df2"
CALLER = "051581bf3cb55c13"
TRACEPARENT = f"00-{TRACE}-{CALLER}-01"


async def test_tcp_schedule_with_a_traceparent_to_tcp_pop(queen, tcp_transport, spans):
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    op = {
        "op": "schedule",
        "queue": "tq",
        "timerKey": "k1",
        "delayMs": 0,
        "txn": "t1",
        "payload": "e30=",
    }
    async with await TcpClient.connect(tcp_transport.host, tcp_transport.port) as c:
        [res] = await c.timers_apply([op], traceparent=TRACEPARENT, tracestate="t=1")
        assert res["status"] == "scheduled"
        now = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
        assert (await fire.drain(queen.rt, now=now)).fired == 1
        popped = await c.pop("tq", batch=1)
    assert popped is not None
    [message] = popped["messages"]

    finished = {s.name: s for s in spans.get_finished_spans()}
    sched, send = finished["create tq"], finished["send tq"]
    assert f"{sched.context.trace_id:032x}" == TRACE
    assert sched.parent is not None and f"{sched.parent.span_id:016x}" == CALLER
    assert [link.context.span_id for link in send.links] == [sched.context.span_id]
    assert send.context.trace_id == sched.context.trace_id
    assert message["tracestate"] == "t=1"
    ctx = TraceContextTextMapPropagator().extract(message)
    got = trace.get_current_span(ctx).get_span_context()
    assert (got.trace_id, got.span_id) == (sched.context.trace_id, sched.context.span_id)
