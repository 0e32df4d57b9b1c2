"""Traces across the delay over HTTP (docs/guides/tracing.md): a schedule sent with a W3C
`traceparent` header is that context's child, the fire links to it, and the message popped
over HTTP, raw or by the official `queen-mq` client, carries the context the consumer
continues. Spans are the SDK's in an in-memory exporter (the `spans` fixture skips without
the `[otel]` extra); the fire is driven explicitly (`fire.drain`), never awaited by time."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
from queen import Queen as Client  # the official client

from queen_timers.timers import fire

TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE}-{CALLER}-01"


@pytest.fixture(autouse=True)
def _client_wire(monkeypatch):
    monkeypatch.setenv("QUEEN_SDK_POP_AUTOPILOT", "off")  # one plain pop, no sizing echo


def traceparent_of(span) -> str:
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def consumer_context(message):
    """What a consumer does: extract the popped message as a W3C carrier."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    ctx = TraceContextTextMapPropagator().extract(message)
    return trace.get_current_span(ctx).get_span_context()


def one_trace(spans, queue: str, message) -> None:
    """The schedule span (the caller's child), the fire span (linked, same trace) and the
    consumer's extracted context belong to the caller's trace."""
    finished = {s.name: s for s in spans.get_finished_spans()}
    sched, send = finished[f"create {queue}"], finished[f"send {queue}"]
    assert f"{sched.context.trace_id:032x}" == TRACE
    assert sched.parent is not None and f"{sched.parent.span_id:016x}" == CALLER
    assert [link.context.span_id for link in send.links] == [sched.context.span_id]
    assert send.context.trace_id == sched.context.trace_id
    assert message["traceparent"] == traceparent_of(sched)
    got = consumer_context(message)
    assert (got.trace_id, got.span_id) == (sched.context.trace_id, sched.context.span_id)


def later() -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)


async def test_http_schedule_with_a_traceparent_to_http_pop(queen, http, spans):
    op = {
        "op": "schedule",
        "queue": "hq",
        "timerKey": "k1",
        "delayMs": 0,
        "txn": "t1",
        "payload": base64.b64encode(json.dumps({"order": 1}).encode()).decode(),
    }
    headers = {"traceparent": TRACEPARENT, "tracestate": "congo=t61rcWkgMzE"}
    async with http.post("/api/v1/timers", json={"operations": [op]}, headers=headers) as r:
        assert r.status == 200, await r.text()
    assert (await fire.drain(queen.rt, now=later())).fired == 1
    async with http.get("/api/v1/pop/queue/hq", params={"batch": "1", "wait": "false"}) as r:
        assert r.status == 200, await r.text()
        [message] = (await r.json())["messages"]
    assert message["tracestate"] == "congo=t61rcWkgMzE"
    one_trace(spans, "hq", message)


async def test_the_transaction_riders_schedule_follows_the_header(queen, http, spans):
    body = {
        "operations": [],
        "timers": [
            {
                "op": "schedule",
                "queue": "hq",
                "timerKey": "tx",
                "delayMs": 0,
                "txn": "t-tx",
                "payload": base64.b64encode(b"{}").decode(),
            }
        ],
    }
    headers = {"traceparent": TRACEPARENT}
    async with http.post("/api/v1/transaction", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["success"] is True
    assert (await fire.drain(queen.rt, now=later())).fired == 1
    async with http.get("/api/v1/pop/queue/hq", params={"batch": "1", "wait": "false"}) as r:
        [message] = (await r.json())["messages"]
    assert "tracestate" not in message
    one_trace(spans, "hq", message)


async def test_the_official_client_schedules_and_pops_in_one_trace(queen, http_transport, spans):
    # the client sends its constructor's headers with every request: the caller's context
    client = Client(
        http_transport.url.rstrip("/"),
        timeout_millis=10_000,
        retry_attempts=1,
        headers={"traceparent": TRACEPARENT},
    )
    try:
        sched = await client.timers.schedule("cq", "k1", {"order": 2}, delay_ms=0, txn="c1")
        assert sched["status"] == "scheduled"
        assert (await fire.drain(queen.rt, now=later())).fired == 1
        [message] = await client.queue("cq").batch(1).wait(False).pop()
    finally:
        await client.close()
    assert message["data"] == {"order": 2}
    one_trace(spans, "cq", message)
