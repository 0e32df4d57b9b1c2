"""What tracing costs the schedule and the fire, with the `[otel]` extra and without it.

    queen bench tracing-cost [--calls 1000] [--rounds 2] [--database-url URL] [--keep-db]

One broker in this process (sweeper off) on a fresh bench database. Three modes, each round
alternating them forwards then backwards (off noop sdk sdk noop off):

  off   the extra absent: queen_timers.tracing.api() answers None, as when OpenTelemetry is
        not installed (the path every broker without the extra runs);
  noop  the extra installed and no tracer provider configured (the API's no-op tracer: the
        caller's traceparent is still passed on to the timer);
  sdk   an SDK TracerProvider recording every span into an exporter that drops them.

Per mode: `--calls` one-op schedules through Queen.timers_apply, one after the other, each
sent with a traceparent (the latency of each call), then the fire of those timers by
fire.drain in claims of 200 (the wall time per timer), then one pop of them all. Beside them,
micro figures that need no database: the call the off path adds where a span would start,
and the decode of a 200-frame segment as frames decoded before the trace context existed
(five fields) and as they decode now (TracedFrame, two more defaults). Without the extra
installed, only `off` runs.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import time
import timeit
from collections.abc import Iterator
from typing import Any

import msgspec

from bench import harness
from bench.env import Target
from bench.harness import Results

__all__ = ["add_arguments", "main"]

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
PAYLOAD = base64.b64encode(b'{"order":42}').decode()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calls", type=int, default=1000, help="one-op schedules per mode (1000)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of the alternation (2)")


@contextlib.contextmanager
def _mode(name: str) -> Iterator[None]:
    from queen_timers import tracing

    if name == "off":
        saved = (tracing._api, tracing._tried)
        tracing._api, tracing._tried = None, True
        try:
            yield
        finally:
            tracing._api, tracing._tried = saved
        return
    otel = tracing.api()
    assert otel is not None
    if name == "noop":
        yield
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class _Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    with otel.recording_to(provider):
        yield
    provider.shutdown()


async def _run(queen: Any, ident: Any, mode: str, tag: str, calls: int) -> dict[str, float]:
    from queen_timers.timers import fire

    queue = f"bench-trace-{tag}"
    lat: list[float] = []
    with _mode(mode):
        for i in range(calls):
            op = {
                "op": "schedule",
                "queue": queue,
                "timerKey": f"k{i}",
                "delayMs": 0,
                "txn": f"{tag}-{i}",
                "payload": PAYLOAD,
            }
            t0 = time.perf_counter()
            await queen.timers_apply(ident, [op], traceparent=TRACEPARENT)
            lat.append((time.perf_counter() - t0) * 1e6)
        now = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
        t0 = time.perf_counter()
        fired = (await fire.drain(queen.rt, now=now, max_rows=200)).fired
        drain_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        popped = await queen.pop(ident, queue, batch=calls)
        pop_s = time.perf_counter() - t0
    got = len(popped["messages"]) if popped else 0
    assert fired == calls and got == calls, (mode, fired, got)
    return {
        "schedule_p50_us": harness.percentile(lat, 50) or 0.0,
        "schedule_p99_us": harness.percentile(lat, 99) or 0.0,
        "fire_us_per_timer": drain_s * 1e6 / calls,
        "pop_us_per_message": pop_s * 1e6 / calls,
    }


def _micro() -> dict[str, float]:
    from queen_timers import tracing
    from queen_timers.log.frames import Frame, TracedFrame, pack_segment

    saved = (tracing._api, tracing._tried)
    tracing._api, tracing._tried = None, True
    try:
        n = 1_000_000
        api_ns = min(timeit.repeat(tracing.api, number=n, repeat=5)) * 1e9 / n
    finally:
        tracing._api, tracing._tried = saved
    frames = [Frame(bytes(16), f"txn-{i}", None, False, b'{"order":42}') for i in range(200)]
    raw = msgspec.msgpack.encode(frames)
    old = msgspec.msgpack.Decoder(list[Frame])
    new = msgspec.msgpack.Decoder(list[TracedFrame])
    assert len(pack_segment(frames)) > 0
    reps = 2000
    out = {"api_off_ns": api_ns}
    # alternated, best of ten each: the two decoders on the same bytes
    olds, news = [], []
    for _ in range(10):
        olds.append(timeit.timeit(lambda: old.decode(raw), number=reps))
        news.append(timeit.timeit(lambda: new.decode(raw), number=reps))
    out["decode200_frame_us"] = min(olds) * 1e6 / reps
    out["decode200_traced_us"] = min(news) * 1e6 / reps
    return out


async def main(ns: argparse.Namespace) -> int:
    from queen_timers import tracing
    from queen_timers.identity import Identity
    from queen_timers.service import Queen

    modes = ["off", "noop", "sdk"] if tracing.api() is not None else ["off"]
    ident = Identity(subject="bench")
    res = Results("tracing-cost", ns)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    async with Target("tracing-cost", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        queen = Queen(database_url=tgt.url, sweeper=False, retention_interval_ms=0)
        await queen.start()
        try:
            await _run(queen, ident, "off", "warm", min(ns.calls, 200))  # plans, pool, caches
            for r in range(ns.rounds):
                for j, mode in enumerate(modes + modes[::-1]):
                    res.say(f"round {r + 1}: {mode}")
                    runs[mode].append(await _run(queen, ident, mode, f"r{r}-{j}", ns.calls))
        finally:
            await queen.stop()
    micro = _micro()
    figures = {}
    for mode, rs in runs.items():
        med = {k: harness.median([x[k] for x in rs]) for k in rs[0]}
        ranges = {k: (min(x[k] for x in rs), max(x[k] for x in rs)) for k in rs[0]}
        figures[mode] = {"median": med, "range": ranges, "runs": rs}
        res.row(
            mode,
            runs=len(rs),
            **{
                "schedule p50 us": med["schedule_p50_us"],
                "schedule p99 us": med["schedule_p99_us"],
                "fire us/timer": med["fire_us_per_timer"],
                "pop us/msg": med["pop_us_per_message"],
            },
        )
    res.data.update(
        {"config": {"calls": ns.calls, "rounds": ns.rounds}, "modes": figures, "micro": micro}
    )
    res.section(
        f"{ns.calls} one-op schedules (each with a traceparent), their fire and their pop per "
        f"run; modes alternated ({' '.join(modes + modes[::-1])}) x {ns.rounds}; medians of "
        f"the runs. Micro: tracing.api() without the extra {micro['api_off_ns']:.0f} ns a "
        f"call; a 200-frame segment decodes in {micro['decode200_frame_us']:.1f} us as "
        f"five-field frames, {micro['decode200_traced_us']:.1f} us as TracedFrame."
    )
    res.finish()
    return 0
