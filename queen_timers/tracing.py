"""Traces across the delay: OpenTelemetry spans for a schedule and its fire, and the W3C trace
context a timer keeps until its message is popped (docs/guides/tracing.md).

Everything here is a no-op unless the `[otel]` extra (opentelemetry-api, opentelemetry-sdk) is
installed. `api()` tries the import once and then answers a module global, so the core never
requires OpenTelemetry and a broker without it pays one function call where a span would
start (bench/RESULTS.md, "2026-12-06 03:13-03:24 UTC, tracing without the extra").

* A schedule (`Queen.timers_apply`, the transaction wire's `timers` rider) is a PRODUCER span
  `create <queue>`, the child of the caller's W3C `traceparent` (an HTTP header, an argument on
  TCP) or, for an in-process caller, of its current span. Its context (traceparent, and
  tracestate if any) is stored with each timer it schedules: that is the message's creation
  context in the messaging conventions' terms.
* The fire of a batch is a PRODUCER span `send <queue>` that links to the creation context of
  every timer it fires. When they all share one context (the common case: one request, one
  trace) it is also that context's child, so the fire appears in the trace that scheduled it;
  timers of several traces fire under a root span with one link per trace.
* The frame keeps the creation context and the pop hands it to the consumer as each message's
  `traceparent` / `tracestate` keys, which the W3C propagator extracts as they are.

The context is always W3C Trace Context, whatever propagators the process configures: it is
what the timer row, the frame and the SQL API (`queen.timer_schedule_v2`) store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["SYSTEM", "Carrier", "Tracing", "api"]

# messaging.system: not one of the conventions' well-known values, so the product's own name.
SYSTEM = "queen"

# (traceparent, tracestate or None): a W3C trace context as the timer row stores it.
Carrier = tuple[str, str | None]

# tracestate: at most 32 list members of at most 256 characters each (W3C, 3.3.1).
_TRACESTATE_MAX = 32 * 257


class Tracing:
    """The OpenTelemetry side, built once the import succeeded."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._trace = trace
        self._context = context
        self._w3c = TraceContextTextMapPropagator()
        self._tracer = trace.get_tracer("queen_timers")

    @contextlib.contextmanager
    def recording_to(self, provider: Any) -> Iterator[None]:
        """Send the broker's spans to `provider` (a TracerProvider) for the duration instead of
        the global one: for tests, which must not install a provider for the whole process.
        An application configures the global provider instead."""
        saved = self._tracer
        self._tracer = provider.get_tracer("queen_timers")
        try:
            yield
        finally:
            self._tracer = saved

    # -- contexts --------------------------------------------------------------------------------
    def extract(self, traceparent: str | None, tracestate: str | None = None) -> Any:
        """The Context a W3C carrier names; None when it names none (malformed: ignored, as
        the W3C recommends for a header)."""
        if not traceparent:
            return None
        carrier = {"traceparent": traceparent}
        if tracestate:
            carrier["tracestate"] = tracestate[:_TRACESTATE_MAX]
        ctx = self._w3c.extract(carrier)
        return ctx if self._trace.get_current_span(ctx).get_span_context().is_valid else None

    def carrier_of(self, span: Any) -> Carrier | None:
        """The W3C context of `span`, to store with a timer; None when it has none."""
        if not span.get_span_context().is_valid:
            return None
        out: dict[str, str] = {}
        self._w3c.inject(out, context=self._trace.set_span_in_context(span))
        parent = out.get("traceparent")
        return None if parent is None else (parent, out.get("tracestate") or None)

    def current(self) -> Carrier | None:
        """The W3C context of the current span (an in-process caller's), or None."""
        return self.carrier_of(self._trace.get_current_span())

    # -- spans -----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def schedule_span(
        self, ops: object, traceparent: str | None, tracestate: str | None
    ) -> Iterator[tuple[Any, Carrier | None]]:
        """The span of one schedule call (`ops`: the call's ops as sent) and the context its
        timers store. A call that only cancels stores nothing, but is still a span."""
        raw = _ops(ops)
        queues = sorted(
            {o["queue"] for o in raw if isinstance(o, dict) and isinstance(o.get("queue"), str)}
        )
        name = f"create {queues[0]}" if len(queues) == 1 else "create"
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "create",
            "messaging.operation.name": "schedule",
        }
        if len(queues) == 1:
            attributes["messaging.destination.name"] = queues[0]
        if len(raw) != 1:
            attributes["messaging.batch.message_count"] = len(raw)
        parent = self.extract(traceparent, tracestate)
        with self._tracer.start_as_current_span(
            name, context=parent, kind=self._trace.SpanKind.PRODUCER, attributes=attributes
        ) as span:
            yield span, self.carrier_of(span)

    def scheduled(self, span: Any, results: Sequence[Mapping[str, Any]]) -> None:
        """Record a one-op schedule's message id on its span."""
        if len(results) == 1 and results[0].get("messageId") is not None:
            span.set_attribute("messaging.message.id", str(results[0]["messageId"]))

    @contextlib.contextmanager
    def fire_span(self, queues: Sequence[str], contexts: Iterable[Carrier]) -> Iterator[Any]:
        """The span of one fire batch: links to each distinct creation context; the child of
        the one context when there is exactly one."""
        trace = self._trace
        links: list[Any] = []
        parent: Any = None
        seen: set[Carrier] = set()
        for carrier in contexts:
            if carrier in seen:
                continue
            seen.add(carrier)
            ctx = self.extract(*carrier)
            if ctx is not None:
                parent = ctx
                links.append(trace.Link(trace.get_current_span(ctx).get_span_context()))
        if len(links) != 1:
            parent = self._context.Context()  # a root of its own: the sweeper's, not a caller's
        names = sorted(set(queues))
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "fire",
        }
        if len(names) == 1:
            attributes["messaging.destination.name"] = names[0]
        with self._tracer.start_as_current_span(
            f"send {names[0]}" if len(names) == 1 else "send",
            context=parent,
            kind=trace.SpanKind.PRODUCER,
            attributes=attributes,
            links=links,
        ) as span:
            yield span

    def fired(self, span: Any, *, messages: int, fired: int, failed: int) -> None:
        """A fire batch's outcome on its span (the fire records failures, it never raises)."""
        span.set_attribute("messaging.batch.message_count", messages)
        span.set_attribute("queen.timers.fired", fired)
        if failed:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "fire failed"))


def _ops(body: object) -> list[Any]:
    """The ops of a schedule body as sent (a list, or {"operations": [...]}), unvalidated."""
    raw = body.get("operations") if isinstance(body, dict) else body
    return raw if isinstance(raw, list) else []


_api: Tracing | None = None
_tried = False


def api() -> Tracing | None:
    """The OpenTelemetry side, or None where the `[otel]` extra is not installed."""
    global _api, _tried
    if not _tried:
        _tried = True
        try:
            _api = Tracing()
        except ImportError:
            _api = None
    return _api
