"""tail-trace: where a timer's lateness goes, step by step, and what a burst's batches cost.

    queen bench tail-trace steady [--rate 500] [--seconds 10] [--delay 2] [--asyncio-debug]
    queen bench tail-trace burst  [--timers 20000]

One broker fires in this process with its sweeper traced: the bench wraps the fire's service
calls the sweeper makes (fire.probe, fire.claim, fire.pack, fire.fire_packed) and its sleep,
and records when each ran; a 1 ms ticker records the event loop's stalls and gc.callbacks the
collector's pauses. The steady load comes from a second process (as in `queen bench peers`:
the firing broker schedules nothing), `Queen.timers_apply` through its schedule batcher; that
process reports its schedule calls' latency.

Steady: every timer's lateness (the log segment's created_at minus its due instant, both the
database's clock on this host) is cut into the steps it spent, in order:
- wait: due -> its claim is sent, split by what the sweeper was doing meanwhile: sleeping
  (the floor of the sleep, the wake-up's own delay), probing, claiming or packing or firing
  other timers; `other` is the rest (the loop between steps);
- claim: the claim's round trip; pack: claimed -> packed; queue: packed -> its fire is sent
  (the previous batch's fire still running);
- fire: the fire is sent -> created_at (the fire's verify and partition lock; the append,
  the delete and the commit come after created_at, outside the lateness).
Beside them, not adding up with them: the loop's stalls and the collector's pauses inside the
timer's wait. Each step's share is reported at the median (the timers between p45 and p55) and
at the tail (the timers at or above p99).

Burst: `--timers` due at once (fire paused while scheduling), then drained by this broker:
per claim and fire (rows, ms), how much of the drain had a claim and a fire in flight at once
(the parallelism of one broker), and the drain rate.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.env import Target, runtime
from bench.harness import REPO_ROOT, Results, percentile, summarize
from queen_timers.identity import Identity
from queen_timers.service import Queen
from queen_timers.timers import fire
from queen_timers.timers import sweeper as sweeper_mod

__all__ = ["Trace", "attribute", "overlap", "shares"]

ADMIN = Identity(admin=True)
QUEUE = "bench-trace"
STEPS = (
    "sleep",
    "probe",
    "claim_other",
    "pack_other",
    "fire_other",
    "other",
    "claim",
    "pack",
    "queue",
    "fire",
)


def overlap(a0: float, a1: float, spans: Sequence[tuple[float, float]]) -> float:
    """Seconds of [a0, a1] covered by `spans` (each (start, end); they may overlap each other,
    then the union is counted)."""
    if a1 <= a0:
        return 0.0
    cut = sorted((max(s, a0), min(e, a1)) for s, e in spans if e > a0 and s < a1)
    total, end = 0.0, a0
    for s, e in cut:
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


class Trace:
    """What the traced sweeper did, on the host's wall clock (time.time(), the clock
    PostgreSQL on this host stamps with)."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("sleep", "probe", "claim", "pack", "fire")
        }
        self.timers: dict[bytes, dict[str, float]] = {}
        self.batches: list[dict[str, float]] = []
        self.stalls: list[tuple[float, float]] = []
        self.gc: list[tuple[float, float, int]] = []
        self.sleep_overshoot_ms: list[float] = []
        self._gc_t0 = 0.0
        self._undo: list[Callable[[], None]] = []

    # -- installing the probes ---------------------------------------------------------------
    def install(self) -> None:
        tr = self
        orig_probe, orig_claim = fire.probe, fire.claim
        orig_pack, orig_fire = fire.pack, fire.fire_packed
        orig_sleep = sweeper_mod.Sweeper._sleep

        async def probe(*a: Any, **k: Any) -> Any:
            t0 = time.time()
            try:
                return await orig_probe(*a, **k)
            finally:
                tr.spans["probe"].append((t0, time.time()))

        async def claim(*a: Any, **k: Any) -> Any:
            t0 = time.time()
            got = await orig_claim(*a, **k)
            t1 = time.time()
            tr.spans["claim"].append((t0, t1))
            for t in got:
                tr.timers[t.message_id.bytes] = {
                    "due": fire.could_fire_at(t).timestamp(),
                    "claim0": t0,
                    "claim1": t1,
                }
            return got

        async def pack(rt: Any, claimed: Any, **k: Any) -> Any:
            t0 = time.time()
            out = await orig_pack(rt, claimed, **k)
            t1 = time.time()
            if claimed:
                tr.spans["pack"].append((t0, t1))
            for t in claimed:
                rec = tr.timers.get(t.message_id.bytes)
                if rec is not None:
                    rec["pack1"] = t1
            return out

        async def fire_packed(rt: Any, packed: Any, **k: Any) -> Any:
            t0 = time.time()
            report = await orig_fire(rt, packed, **k)
            t1 = time.time()
            tr.spans["fire"].append((t0, t1))
            rows = [t for batch in packed.batches for seg in batch for t in seg.rows]
            tr.batches.append({"fire0": t0, "fire1": t1, "rows": len(rows)})
            # lags_ms follow the rows batch by batch when every segment fired
            exact = len(report.lags_ms) == len(rows)
            for i, t in enumerate(rows):
                rec = tr.timers.get(t.message_id.bytes)
                if rec is None:
                    continue
                rec["fire0"], rec["fire1"] = t0, t1
                if exact:
                    rec["created"] = rec["due"] + report.lags_ms[i] / 1000.0
            return report

        async def sleep(self: Any, seconds: float, reason: str) -> None:
            t0 = time.time()
            try:
                await orig_sleep(self, seconds, reason)
            finally:
                t1 = time.time()
                tr.spans["sleep"].append((t0, t1))
                if t1 - t0 >= seconds - 1e-4:  # ran to its deadline: how far past it
                    tr.sleep_overshoot_ms.append((t1 - t0 - seconds) * 1000.0)

        def gc_cb(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                tr._gc_t0 = time.time()
            else:
                tr.gc.append((tr._gc_t0, time.time(), int(info.get("generation", -1))))

        fire.probe, fire.claim, fire.pack, fire.fire_packed = probe, claim, pack, fire_packed
        sweeper_mod.Sweeper._sleep = sleep  # type: ignore[method-assign]
        gc.callbacks.append(gc_cb)

        def undo() -> None:
            fire.probe, fire.claim, fire.pack, fire.fire_packed = (
                orig_probe,
                orig_claim,
                orig_pack,
                orig_fire,
            )
            sweeper_mod.Sweeper._sleep = orig_sleep  # type: ignore[method-assign]
            gc.callbacks.remove(gc_cb)

        self._undo.append(undo)

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    async def tick(self, stop: asyncio.Event, period_s: float = 0.001, over_s: float = 0.002):
        """The loop's stalls: a sleep of `period_s` that returns more than `over_s` late is a
        stall from its deadline to its return."""
        while not stop.is_set():
            want = time.time() + period_s
            await asyncio.sleep(period_s)
            now = time.time()
            if now - want > over_s:
                self.stalls.append((want, now))


def attribute(tr: Trace) -> list[dict[str, float]]:
    """Every fired timer's lateness cut into STEPS (ms), plus its loop stall and GC ms."""
    sp = tr.spans
    gcs = [(s, e) for s, e, _ in tr.gc]
    out = []
    for rec in tr.timers.values():
        if "created" not in rec or "fire0" not in rec or "pack1" not in rec:
            continue
        due, c0, c1 = rec["due"], rec["claim0"], rec["claim1"]
        p1, f0, created = rec["pack1"], rec["fire0"], rec["created"]
        w0, w1 = due, max(due, c0)
        # while it waited, what the sweeper was busy with (the first that covers an instant)
        own = [(c0, c1)]
        parts = {
            "sleep": overlap(w0, w1, sp["sleep"]),
            "probe": overlap(w0, w1, sp["probe"]),
            "claim_other": overlap(w0, w1, [s for s in sp["claim"] if s not in own]),
            "pack_other": overlap(w0, w1, sp["pack"]),
            "fire_other": overlap(w0, w1, sp["fire"]),
        }
        busy = overlap(w0, w1, sp["sleep"] + sp["probe"] + sp["claim"] + sp["pack"] + sp["fire"])
        total_parts = sum(parts.values())
        if total_parts > busy > 0:  # spans overlapping each other (a probe beside a fire)
            parts = {k: v * busy / total_parts for k, v in parts.items()}
        parts["other"] = (w1 - w0) - busy
        parts["claim"] = c1 - max(c0, due) if c1 > due else 0.0
        parts["pack"] = max(0.0, p1 - max(c1, due))
        parts["queue"] = max(0.0, f0 - max(p1, due))
        parts["fire"] = max(0.0, created - max(f0, due))
        row = {k: v * 1000.0 for k, v in parts.items()}
        row["late"] = (created - due) * 1000.0
        row["stall"] = overlap(due, created, tr.stalls) * 1000.0
        row["gc"] = overlap(due, created, gcs) * 1000.0
        out.append(row)
    return out


def shares(rows: list[dict[str, float]], lo: float, hi: float) -> dict[str, Any]:
    """Mean ms of each step over the timers whose lateness lies in [p`lo`, p`hi`], and its
    share of their mean lateness."""
    if not rows:
        return {}
    late = sorted(r["late"] for r in rows)
    a = percentile(late, lo) or 0.0
    b = (percentile(late, hi) or 0.0) if hi < 100 else float("inf")
    band = [r for r in rows if a <= r["late"] <= b]
    mean_late = statistics.fmean(r["late"] for r in band)
    out: dict[str, Any] = {"timers": len(band), "late_ms": mean_late}
    for k in (*STEPS, "stall", "gc"):
        ms = statistics.fmean(r[k] for r in band)
        out[k] = {"ms": ms, "pct": 100.0 * ms / mean_late if mean_late > 0 else None}
    return out


async def _load(url: str, rate: int, seconds: float, delay: float) -> dict:
    """The steady load from a process of its own (the firing broker schedules nothing)."""
    cfg = {"url": url, "rate": rate, "seconds": seconds, "delay": delay}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.tail_trace",
        "--load",
        json.dumps(cfg),
        stdout=asyncio.subprocess.PIPE,
        cwd=str(REPO_ROOT),
        env={**os.environ, "QUEEN_SWEEPER": "false"},
    )
    out, _ = await proc.communicate()
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": f"load exit {proc.returncode}"}


async def _load_child(cfg: dict) -> dict:
    from bench.load import Scheduler

    q = Queen(database_url=cfg["url"], sweeper=False, retention_interval_ms=0)
    await q.start()
    took: list[float] = []
    sched = Scheduler(q, Identity(subject="bench"), QUEUE, batch=256)
    inner = sched.apply

    async def timed(ops: list[dict]) -> int:
        t0 = time.perf_counter()
        try:
            return await inner(ops)
        finally:
            took.append((time.perf_counter() - t0) * 1000.0)

    sched.apply = timed  # type: ignore[method-assign]
    try:
        paced = await sched.paced(cfg["rate"], cfg["seconds"], cfg["delay"], "s")
    finally:
        await q.stop()
    return {
        "scheduled": sched.scheduled,
        "schedule_calls": len(took),
        "schedule_call_ms": summarize(took),
        "paced": paced,
        "errors": sched.errors[:5],
    }


async def _fired(pool: Any, n: int, timeout: float) -> int:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        left = await pool.fetchval("SELECT count(*) FROM queen.log_timers WHERE queue = $1", QUEUE)
        if left == 0:
            break
        await asyncio.sleep(0.1)
    return n


async def trace_steady(url: str, ns: argparse.Namespace) -> dict:
    tr = Trace()
    tr.install()
    q = Queen(database_url=url, sweeper=True, retention_interval_ms=0)
    stop = asyncio.Event()
    slow: list[str] = []
    handler = None
    try:
        await q.start()
        gc.collect()
        gc.freeze()  # as `queen serve` does after boot
        loop = asyncio.get_running_loop()
        if ns.asyncio_debug:
            loop.set_debug(True)
            loop.slow_callback_duration = 0.005

            class Grab(logging.Handler):
                def emit(self, record: logging.LogRecord) -> None:
                    slow.append(record.getMessage()[:200])

            handler = Grab()
            logging.getLogger("asyncio").addHandler(handler)
        ticker = asyncio.create_task(tr.tick(stop))
        await asyncio.sleep(1.0)
        load = await _load(url, ns.rate, ns.seconds, ns.delay)
        await _fired(runtime(q).pool, 0, ns.delay + 30)
        stop.set()
        await ticker
    finally:
        if handler is not None:
            logging.getLogger("asyncio").removeHandler(handler)
        await q.stop()
        tr.uninstall()
        gc.unfreeze()
    rows = attribute(tr)
    late = [r["late"] for r in rows]
    return {
        "scenario": "steady",
        "rate": ns.rate,
        "seconds": ns.seconds,
        "load": load,
        "traced": len(rows),
        "lateness_ms": summarize(late),
        "p50_band": shares(rows, 45, 55),
        "p99_band": shares(rows, 99, 100),
        "sweeper": {
            "sleeps": len(tr.spans["sleep"]),
            "sleep_overshoot_ms": summarize(tr.sleep_overshoot_ms),
            "claims": len(tr.spans["claim"]),
            "claim_ms": summarize([(e - s) * 1000 for s, e in tr.spans["claim"]]),
            "probe_ms": summarize([(e - s) * 1000 for s, e in tr.spans["probe"]]),
            "fire_ms": summarize([(e - s) * 1000 for s, e in tr.spans["fire"]]),
            "rows_per_fire": summarize([float(b["rows"]) for b in tr.batches]),
        },
        "loop_stalls": {
            "count": len(tr.stalls),
            "ms": summarize([(e - s) * 1000 for s, e in tr.stalls]),
        },
        "gc": {
            "pauses": len(tr.gc),
            "ms": summarize([(e - s) * 1000 for s, e, _ in tr.gc]),
            "by_generation": {g: sum(1 for *_, x in tr.gc if x == g) for g in (0, 1, 2)},
        },
        "slow_callbacks": {"count": len(slow), "first": slow[:5]} if ns.asyncio_debug else None,
    }


async def trace_burst(url: str, ns: argparse.Namespace) -> dict:
    from bench.sweeper import schedule_due

    tr = Trace()
    tr.install()
    q = Queen(database_url=url, sweeper=True, retention_interval_ms=0)
    try:
        await q.start()
        await q.switches_set(ADMIN, {"timersFire": False})
        await schedule_due(q, ns.timers, prefix="t")
        gc.collect()
        gc.freeze()
        tr.spans = {k: [] for k in tr.spans}
        tr.batches.clear()
        cpu0 = time.process_time()  # this process: the broker (and the 50 ms polls below)
        await q.switches_set(ADMIN, {"timersFire": True})
        pool = runtime(q).pool
        t_end = time.monotonic() + 300
        while time.monotonic() < t_end:
            if not await pool.fetchval("SELECT EXISTS (SELECT 1 FROM queen.log_timers)"):
                break
            await asyncio.sleep(0.05)
        cpu = time.process_time() - cpu0
    finally:
        await q.stop()
        tr.uninstall()
        gc.unfreeze()
    claims = [(s, e) for s, e in tr.spans["claim"]]
    fires = [(b["fire0"], b["fire1"]) for b in tr.batches if b["rows"]]
    if not fires:
        return {"scenario": "burst", "error": "nothing fired"}
    t0, t1 = min(s for s, _ in claims), max(e for _, e in fires)
    wall = t1 - t0
    both = 0.0  # seconds with a claim (or its pack) and a fire in flight at once
    for s, e in fires:
        both += overlap(s, e, claims + tr.spans["pack"])
    rows = [b["rows"] for b in tr.batches if b["rows"]]
    return {
        "scenario": "burst",
        "timers": ns.timers,
        "drain_s": wall,
        "timers_per_s": sum(rows) / wall,
        "batches": len(fires),
        "rows_per_fire": summarize([float(r) for r in rows]),
        "claim_ms": summarize([(e - s) * 1000 for s, e in claims]),
        "pack_ms": summarize([(e - s) * 1000 for s, e in tr.spans["pack"]]),
        "fire_ms": summarize([(e - s) * 1000 for s, e in fires]),
        "fire_us_per_timer": 1e6 * sum(e - s for s, e in fires) / max(sum(rows), 1),
        "claim_us_per_timer": 1e6 * sum(e - s for s, e in claims) / max(sum(rows), 1),
        "fire_busy_pct": 100.0 * overlap(t0, t1, fires) / wall,
        "claim_busy_pct": 100.0 * overlap(t0, t1, claims) / wall,
        "claim_beside_fire_pct": 100.0 * both / wall,
        "gc_pauses": len(tr.gc),
        "gc_ms": sum((e - s) * 1000 for s, e, _ in tr.gc),
        # the broker's own CPU over the drain: what it takes from PostgreSQL on a shared host
        "broker_cpu_us_per_timer": 1e6 * cpu / max(sum(rows), 1),
        "broker_cpu_pct_of_drain": 100.0 * cpu / wall,
    }


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("scenario", nargs="?", default="steady", choices=["steady", "burst"])
    ap.add_argument("--rate", type=int, default=500, help="steady: timers/s (500)")
    ap.add_argument("--seconds", type=float, default=10.0, help="steady: seconds of load (10)")
    ap.add_argument("--delay", type=float, default=2.0, help="steady: schedule to due, s (2)")
    ap.add_argument("--timers", type=int, default=20000, help="burst: timers due at once")
    ap.add_argument(
        "--asyncio-debug",
        action="store_true",
        help="steady: the loop in debug mode, callbacks over 5 ms logged (it slows the loop)",
    )


def _band_table(r: dict) -> str:
    head = "| step | p50 band ms | p50 band % | p99 band ms | p99 band % |\n|---|---|---|---|---|"
    lines = [head]
    a, b = r["p50_band"], r["p99_band"]
    for k in (*STEPS, "stall", "gc"):
        lines.append(
            f"| {k} | {a[k]['ms']:.2f} | {a[k]['pct'] or 0:.0f} | {b[k]['ms']:.2f} "
            f"| {b[k]['pct'] or 0:.0f} |"
        )
    lines.append(
        f"| lateness (mean of the band) | {a['late_ms']:.2f} | 100 | {b['late_ms']:.2f} | 100 |"
    )
    return "\n".join(lines)


async def main(ns: argparse.Namespace) -> int:
    res = Results(f"tail-trace-{ns.scenario}", ns)
    async with Target("tailtrace", ns.database_url, ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.server_url or tgt.url, tgt.embedded)
        url = await tgt.fresh()
        res.say(f"{ns.scenario}...")
        fn = trace_steady if ns.scenario == "steady" else trace_burst
        r = await fn(url, ns)
        await tgt.drop(url)
    r["load_avg"] = os.getloadavg()
    res.data["run"] = r
    if ns.scenario == "steady":
        lat = r["lateness_ms"]
        res.row(
            "steady",
            traced=r["traced"],
            **{"p50 ms": lat.get("p50"), "p99 ms": lat.get("p99")},
            **{"loop stalls": r["loop_stalls"]["count"], "gc pauses": r["gc"]["pauses"]},
            **{"schedule call p99 ms": (r["load"].get("schedule_call_ms") or {}).get("p99")},
        )
        res.section("## Where the lateness goes\n\n" + _band_table(r))
        sw = r["sweeper"]
        res.section(
            "## The sweeper\n\n"
            + "\n".join(
                f"- {k}: {json.dumps(v, default=lambda x: round(x, 3))}" for k, v in sw.items()
            )
        )
    else:
        res.row(
            "burst",
            timers=r.get("timers"),
            **{"timers/s": r.get("timers_per_s"), "batches": r.get("batches")},
            **{"claim p50 ms": (r.get("claim_ms") or {}).get("p50")},
            **{"fire p50 ms": (r.get("fire_ms") or {}).get("p50")},
            **{
                "fire busy %": r.get("fire_busy_pct"),
                "claim beside fire %": r.get("claim_beside_fire_pct"),
            },
        )
    res.finish()
    return 0


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--load":
    print(json.dumps(asyncio.run(_load_child(json.loads(sys.argv[2]))), default=str))
