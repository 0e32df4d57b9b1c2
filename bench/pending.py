"""pending: what every cost of the broker does as the pending set grows, 10^4 to 10^7 timers.

    queen bench pending [--sizes 10000,100000,1000000,10000000] [--steady-seconds 30]
                        [--extras backoff,brokers,autovacuum] [--extras-at 1000000]

All sizes run in ONE invocation on one server, smallest first, so the ratio between two sizes
is read from one run on one machine. Per size N, on a fresh database:

  load      N pending timers due 1 to 91 days ahead (uniform), over --tenants tenants x
            --queues queues, by ONE `INSERT ... SELECT` over generate_series
            (bench/sql/q_pending.sql, pending_load): the table computes shard,
            visible_at and its defaults itself, both indexes are maintained as rows arrive;
            then VACUUM (ANALYZE) and a CHECKPOINT, the state of a table whose timers have
            waited a while;
  boot      a broker process started (`queen serve`, no transport) until it serves: seconds,
            and its RSS once idle;
  sweeper   the probe (log_timers_due_v1) and the claim (log_timers_claim_v2) called directly
            --repeats times with nothing due (a sweeper's idle pass), and a 200-row claim over
            200 due rows in transactions rolled back, with EXPLAIN (ANALYZE, BUFFERS): ms and
            buffers per call;
  steady    `queen bench sweeper steady` (bench/sweeper.py) on top: --steady-rate timers/s due
            --delay s later for --steady-seconds, one in-process broker: fire lateness p50/p99,
            WAL bytes per timer (from a CHECKPOINT, so full-page images count alike at every
            N), and the sweeper's own probe and claim per call as the server timed them
            (pg_stat_user_functions, track_functions = 'pl' on the bench database);
  drain     --drain timers due at one instant, fire paused while they are scheduled, one
            broker process: timers/s, and the broker's RSS after the drain;
  schedule  16 clients sending one-op schedules back to back for --schedule-seconds
            (bench/transport_schedule.py's closed loop, no transport): req/s, p50/p99; the
            rows are deleted after;
  ops       --ops rounds of peek, list (a page of 100), count by a prefix matching 100 keys,
            and cancel, each on a random key of the loaded set, interleaved: p50/p99 each;
  vacuum    autovacuum's time on the table over the size's phases (total_autovacuum_time,
            PostgreSQL 18) and one VACUUM of the table after them, timed; the sizes of the
            heap, TOAST, each index.

The log is emptied (TRUNCATE) between phases, with no broker running, so each phase counts its
own frames; the pending set is not touched. At --extras-at (when it is among the sizes), after
its phases: `backoff` adds --backoff-timers timers in permanent backoff (attempts 3,
claimed_until an hour ahead) and measures the sweeper again; `brokers` runs steady and drain
with three broker processes; `autovacuum` runs a steady --av-seconds under 025's autovacuum
parameters and under PostgreSQL's defaults (bloat, vacuum time, lateness).

Output: bench/results/<date>-pending/ with result.json, summary.md (the table of every figure
per size and its growth from the smallest size to the largest) and one PNG per figure against
N on a log axis, plus growth.png (every figure over its value at the smallest size).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from . import stats
from .env import Target
from .queries import BQ
from .report import Results, fmt, md_table
from .sweeper import ADMIN, schedule_due, steady, wait_count
from .transport_schedule import Direct, closed_loop

__all__ = ["FIGURES", "Figure", "add_arguments", "figures_of", "growth", "layout_key", "main"]

GOAL = 1.5  # the bound: a figure at the largest N within 1.5x of the smallest N's
PAYLOAD = b'{"orderId":"9f1c2e","amount":4200,"currency":"EUR","note":"expiry of the order"}'
SWEEPER_FUNCTIONS = [
    "log_timers_due_v1",
    "log_timers_claim_v2",
    "log_timers_fire_v2",
    "log_timers_apply_v1",
]


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    better: str  # "low" (a cost) or "high" (a rate)
    plot: str  # the PNG it is drawn in
    goal: bool = True  # judged against GOAL (sizes are not: they grow with N by definition)


FIGURES = [
    Figure("steady_p50_ms", "fire lateness p50, steady", "ms", "low", "lateness"),
    Figure("steady_p99_ms", "fire lateness p99, steady", "ms", "low", "lateness"),
    Figure("drain_per_s", "drain, one broker", "timers/s", "high", "drain"),
    Figure("schedule_rps", "single-op schedules, 16 clients", "req/s", "high", "schedule_rate"),
    Figure("schedule_p50_ms", "schedule p50", "ms", "low", "schedule_latency"),
    Figure("schedule_p99_ms", "schedule p99", "ms", "low", "schedule_latency"),
    Figure("peek_p50_ms", "peek p50", "ms", "low", "peek"),
    Figure("peek_p99_ms", "peek p99", "ms", "low", "peek"),
    Figure("list_p50_ms", "list (100) p50", "ms", "low", "list"),
    Figure("list_p99_ms", "list (100) p99", "ms", "low", "list"),
    Figure("count_p50_ms", "count by prefix p50", "ms", "low", "count"),
    Figure("count_p99_ms", "count by prefix p99", "ms", "low", "count"),
    Figure("cancel_p50_ms", "cancel p50", "ms", "low", "cancel"),
    Figure("cancel_p99_ms", "cancel p99", "ms", "low", "cancel"),
    Figure("probe_idle_ms", "probe, nothing due (p50 per call)", "ms", "low", "sweeper"),
    Figure("claim_idle_ms", "claim, nothing due (p50 per call)", "ms", "low", "sweeper"),
    Figure("claim200_ms", "claim of 200 due (median per call)", "ms", "low", "sweeper"),
    Figure("probe_live_ms", "probe per call, steady (server time)", "ms", "low", "sweeper_live"),
    Figure("claim_live_ms", "claim per call, steady (server time)", "ms", "low", "sweeper_live"),
    Figure("probe_buffers", "probe, nothing due: buffers", "buffers", "low", "buffers"),
    Figure("claim200_buffers", "claim of 200: buffers", "buffers", "low", "buffers"),
    Figure("wal_per_timer", "WAL per timer, steady", "bytes", "low", "wal"),
    Figure("autovacuum_ms", "autovacuum time on the table, all phases", "ms", "low", "vacuum"),
    Figure("vacuum_ms", "one VACUUM after the phases", "ms", "low", "vacuum"),
    Figure("rss_idle_mb", "broker RSS, idle after boot", "MiB", "low", "rss"),
    Figure("rss_drain_mb", "broker RSS, after the drain", "MiB", "low", "rss"),
    Figure("boot_s", "broker boot", "s", "low", "boot"),
    Figure("heap_bytes_per_timer", "heap per pending timer", "bytes", "low", "size", False),
    Figure("index_bytes_per_timer", "indexes per pending timer", "bytes", "low", "size", False),
    Figure("heap_mb", "heap", "MiB", "low", "size_total", False),
    Figure("pkey_mb", "primary key", "MiB", "low", "size_total", False),
    Figure("visible_mb", "(shard, visible_at)", "MiB", "low", "size_total", False),
    Figure("toast_mb", "TOAST (heap + index)", "MiB", "low", "size_total", False),
]


def layout_key(j: int) -> str:
    """The key of the j-th timer of a (tenant, queue) in the load (pending_load's format)."""
    return "k" + f"{j:010d}"


def _ms(values: list[float], p: float) -> float | None:
    v = stats.percentile(values, p)
    return None if v is None else v * 1000.0


def figures_of(raw: dict) -> dict[str, float | None]:
    """One size's flat figures (FIGURES' keys) from its raw measurements."""
    n = raw["n"]
    sw, st, dr, sc, ops, sz = (
        raw["sweeper"],
        raw["steady"],
        raw["drain"],
        raw["schedule"],
        raw["ops"],
        raw["sizes_after_load"],
    )
    live = raw.get("steady_functions") or {}
    mib = 2**20
    out: dict[str, float | None] = {
        "steady_p50_ms": st["lateness_ms"]["p50"],
        "steady_p99_ms": st["lateness_ms"]["p99"],
        "drain_per_s": dr["timers_per_s"],
        "schedule_rps": sc["rps"],
        "schedule_p50_ms": sc["p50_ms"],
        "schedule_p99_ms": sc["p99_ms"],
        "probe_idle_ms": sw["probe_idle_p50_ms"],
        "claim_idle_ms": sw["claim_idle_p50_ms"],
        "claim200_ms": sw["claim200_ms"],
        "probe_buffers": sw["probe_buffers"],
        "claim200_buffers": sw["claim200_buffers"],
        "probe_live_ms": (live.get("log_timers_due_v1") or {}).get("ms_per_call"),
        "claim_live_ms": (live.get("log_timers_claim_v2") or {}).get("ms_per_call"),
        "wal_per_timer": raw["steady_wal_per_timer"],
        "autovacuum_ms": raw["vacuum"]["autovacuum_ms"],
        "vacuum_ms": raw["vacuum"]["vacuum_ms"],
        "rss_idle_mb": raw["boot"]["rss_idle"] / mib,
        "rss_drain_mb": dr["rss_after"][0] / mib if dr.get("rss_after") else None,
        "boot_s": raw["boot"]["boot_s"],
        "heap_bytes_per_timer": stats.per_unit(sz["heap_bytes"], n),
        "index_bytes_per_timer": stats.per_unit(sz["pkey_bytes"] + sz["visible_bytes"], n),
        "heap_mb": sz["heap_bytes"] / mib,
        "pkey_mb": sz["pkey_bytes"] / mib,
        "visible_mb": sz["visible_bytes"] / mib,
        "toast_mb": sz["toast_bytes"] / mib,
    }
    for kind in ("peek", "list", "count", "cancel"):
        out[f"{kind}_p50_ms"] = ops[kind]["p50_ms"]
        out[f"{kind}_p99_ms"] = ops[kind]["p99_ms"]
    return out


def growth(fig: Figure, small: float | None, large: float | None) -> float | None:
    """How much worse the figure is at the large size than at the small one: large/small for
    a cost, small/large for a rate (1.0 = flat; GOAL is the bound)."""
    if small is None or large is None or small <= 0 or large <= 0:
        return None
    return large / small if fig.better == "low" else small / large


# -- phases ------------------------------------------------------------------------------------


def _tenants(count: int) -> list[uuid.UUID]:
    # The default tenant first, then fixed ids: the same layout at every size and every run.
    ids = [uuid.UUID("00000000-0000-0000-0000-000000000001")]
    ids += [uuid.UUID(int=(0xBE4C << 112) + i) for i in range(1, count)]
    return sorted(ids)


async def _db_now(conn) -> dt.datetime:
    return dt.datetime.fromtimestamp(await conn.fetchval(BQ.now_epoch), dt.UTC)


def _explain(doc: Any) -> dict:
    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    top = doc[0]
    plan = top["Plan"]
    return {
        "ms": top.get("Execution Time"),
        "buffers": (plan.get("Shared Hit Blocks") or 0) + (plan.get("Shared Read Blocks") or 0),
        "read": plan.get("Shared Read Blocks") or 0,
    }


async def _sizes(conn) -> dict:
    return dict(await conn.fetchrow(BQ.pending_sizes))


async def _table_stats(conn) -> dict:
    await asyncio.sleep(1.1)  # backends flush their counters at most once a second
    await conn.execute(BQ.pending_stats_flush)
    return dict(await conn.fetchrow(BQ.pending_table_stats))


async def _function_stats(conn) -> dict[str, tuple[int, float]]:
    rows = await conn.fetch(BQ.pending_function_stats, SWEEPER_FUNCTIONS)
    return {r["funcname"]: (int(r["calls"]), float(r["total_time"])) for r in rows}


def function_deltas(before: dict, after: dict) -> dict[str, dict]:
    out = {}
    for name in SWEEPER_FUNCTIONS:
        c0, t0 = before.get(name, (0, 0.0))
        c1, t1 = after.get(name, (0, 0.0))
        calls = c1 - c0
        out[name] = {
            "calls": calls,
            "ms": t1 - t0,
            "ms_per_call": stats.per_unit(t1 - t0, calls),
        }
    return out


async def load(conn, n: int, tenants: int, queues: int) -> dict:
    ids = _tenants(tenants)
    now = await _db_now(conn)
    t0 = time.perf_counter()
    await conn.execute(BQ.pending_load, n, ids, queues, now, PAYLOAD)
    t1 = time.perf_counter()
    await conn.execute(BQ.pending_vacuum_analyze)
    t2 = time.perf_counter()
    await conn.execute(BQ.pending_checkpoint)
    count = await conn.fetchval(BQ.pending_count)
    if count != n:
        raise RuntimeError(f"loaded {count} pending timers, wanted {n}")
    return {
        "insert_s": t1 - t0,
        "rows_per_s": n / max(t1 - t0, 1e-9),
        "vacuum_analyze_s": t2 - t1,
        "tenants": [str(i) for i in ids],
        "queues": queues,
    }


async def boot(url: str) -> dict:
    import psutil

    from queen_timers.testing.broker import BrokerProcess

    b = BrokerProcess(url)
    t0 = time.perf_counter()
    await b.start()
    boot_s = time.perf_counter() - t0
    try:
        await asyncio.sleep(2.0)  # a few idle sweeper cycles
        rss = psutil.Process(b.pid).memory_info().rss
    finally:
        await b.kill()
    return {"boot_s": boot_s, "rss_idle": rss}


async def sweeper_calls(conn, repeats: int) -> dict:
    """The probe and the claim called as the sweeper calls them, with nothing due, then a
    200-row claim over 200 due rows (rolled back each time)."""
    from queen_timers.timers import store

    probe, claim = [], []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        await store.due(conn, None, None, 2000)
        t1 = time.perf_counter()
        got = await store.claim(conn, None, None, 30000, 200, 50)
        t2 = time.perf_counter()
        if got:
            raise RuntimeError("the idle claim found due rows")
        if i:  # the first call plans the procedures' statements
            probe.append(t1 - t0)
            claim.append(t2 - t1)
    idle_plan = _explain(await conn.fetchval(BQ.pending_explain_due, await _db_now(conn)))
    await conn.execute(BQ.insert_due, 200, await _db_now(conn))
    walls, plans, due_plans = [], [], []
    try:
        for i in range(max(repeats // 5, 3) + 1):
            at = await _db_now(conn)
            tr = conn.transaction()
            await tr.start()
            try:
                t0 = time.perf_counter()
                c = _explain(await conn.fetchval(BQ.pending_explain_claim, at, 200))
                walls.append(time.perf_counter() - t0)
            finally:
                await tr.rollback()
            d = _explain(await conn.fetchval(BQ.pending_explain_due, at))
            if i:
                plans.append(c)
                due_plans.append(d)
    finally:
        await conn.execute(BQ.pending_delete_queue, "bench-due")
    return {
        "repeats": repeats,
        "probe_idle_p50_ms": _ms(probe, 50),
        "probe_idle_p99_ms": _ms(probe, 99),
        "claim_idle_p50_ms": _ms(claim, 50),
        "claim_idle_p99_ms": _ms(claim, 99),
        "probe_buffers": idle_plan["buffers"],
        "probe_with_due_ms": stats.median([p["ms"] for p in due_plans]),
        "probe_with_due_buffers": stats.median([p["buffers"] for p in due_plans]),
        "claim200_ms": stats.median([p["ms"] for p in plans]),
        "claim200_buffers": stats.median([p["buffers"] for p in plans]),
        "claim200_read": stats.median([p["read"] for p in plans]),
    }


async def steady_phase(conn, url: str, ns, *, brokers: int = 0, seconds: float | None = None):
    """sweeper.steady on top of the pending set; brokers=0: the in-process broker fires."""
    await conn.execute(BQ.pending_clear_log)
    await conn.execute(BQ.pending_checkpoint)
    lsn0 = await conn.fetchval(BQ.wal_insert_lsn)
    f0 = await _function_stats(conn)
    res = await steady(
        url,
        ns.steady_rate,
        int(seconds or ns.steady_seconds),
        ns.delay,
        cross=brokers > 0,
        notify=True,
        firing=max(brokers, 1),
        probe=False,
    )
    lsn1 = await conn.fetchval(BQ.wal_insert_lsn)
    await asyncio.sleep(1.1)  # the brokers' sessions flush their function counters on exit
    f1 = await _function_stats(conn)
    wal = stats.wal_delta(lsn0, lsn1)
    return res, stats.per_unit(wal, res["scheduled"]), function_deltas(f0, f1)


async def drain(conn, url: str, timers: int, brokers: int, prefix: str) -> dict:
    """`timers` due at one instant, fire paused while scheduling; `brokers` processes drain."""
    import psutil

    from queen_timers.service import Queen
    from queen_timers.testing.broker import BrokerProcess

    await conn.execute(BQ.pending_clear_log)
    q = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await q.start()
    procs = [BrokerProcess(url) for _ in range(brokers)]
    try:
        await q.switches_set(ADMIN, {"timersFire": False})
        await schedule_due(q, timers, prefix=prefix)
        await asyncio.gather(*(p.start() for p in procs))
        await asyncio.sleep(1.0)
        await q.switches_set(ADMIN, {"timersFire": True})
        got = await wait_count(q.rt.pool, timers, 600)
        span = await conn.fetchrow(BQ.pending_drain_span)
        rss = [psutil.Process(p.pid).memory_info().rss for p in procs]
    finally:
        await asyncio.gather(*(p.kill() for p in procs))
        await q.stop()
    seconds = float(span["last"]) - float(span["first"])
    return {
        "timers": timers,
        "brokers": brokers,
        "delivered": got,
        "drain_s": seconds,
        "timers_per_s": stats.rate(timers, seconds),
        "rss_after": rss,
    }


async def schedules(conn, url: str, seconds: float) -> dict:
    t = Direct(url)
    try:
        rps, lat = await closed_loop(t, 16, 1, seconds)
    finally:
        if t.queen is not None:
            await t.queen.stop()
    await conn.execute(BQ.pending_delete_queue, "bench")
    return {
        "clients": 16,
        "seconds": seconds,
        "requests": len(lat),
        "rps": rps,
        "p50_ms": _ms(lat, 50),
        "p99_ms": _ms(lat, 99),
    }


async def operations(url: str, n: int, tenants: int, queues: int, rounds: int, seed: int) -> dict:
    """Peek, list, count and cancel on random keys of the loaded set, interleaved."""
    import random

    from queen_timers.identity import Identity
    from queen_timers.service import Queen

    ids = _tenants(tenants)
    full = n // (tenants * queues)  # keys present in every (tenant, queue)
    rng = random.Random(seed)
    cells = [(t, q) for t in range(tenants) for q in range(queues)]
    picks = rng.sample(range(full * len(cells)), min(2 * rounds, full * len(cells)))
    read_keys = [(cells[p % len(cells)], p // len(cells)) for p in picks[:rounds]]
    cancel_keys = [(cells[p % len(cells)], p // len(cells)) for p in picks[rounds:]]
    lat: dict[str, list[float]] = {k: [] for k in ("peek", "list", "count", "cancel")}
    statuses: dict[str, int] = {}
    q = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await q.start()
    try:
        for i in range(len(read_keys)):
            (t, qi), j = read_keys[i]
            ident = Identity(tenant=ids[t], subject="bench")
            queue = f"pending-{qi}"
            t0 = time.perf_counter()
            peek = await q.timer_peek(ident, queue, layout_key(j))
            t1 = time.perf_counter()
            # a full page at every N: the page starts at most 100 keys before the queue's end
            start = layout_key(j % (full - 100)) if full > 100 else None
            page = await q.timers_list(ident, queue, after=start, limit=100)
            t2 = time.perf_counter()
            x = rng.randrange(max(full // 100, 1))
            prefix = layout_key(x * 100)[:9] if full >= 100 else "k"
            await q.timers_count(ident, queue, prefix)
            t3 = time.perf_counter()
            if not peek.get("found") or not page["rows"]:
                raise RuntimeError(f"the loaded key {queue}/{layout_key(j)} is not there")
            lat["peek"].append(t1 - t0)
            lat["list"].append(t2 - t1)
            lat["count"].append(t3 - t2)
            if i < len(cancel_keys):
                (t, qi), j = cancel_keys[i]
                ident = Identity(tenant=ids[t], subject="bench")
                t0 = time.perf_counter()
                r = await q.timer_cancel(ident, f"pending-{qi}", layout_key(j))
                lat["cancel"].append(time.perf_counter() - t0)
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    finally:
        await q.stop()
    out: dict[str, Any] = {
        k: {"calls": len(v), "p50_ms": _ms(v, 50), "p99_ms": _ms(v, 99)} for k, v in lat.items()
    }
    out["cancel_statuses"] = statuses
    return out


async def vacuum_after(conn, before: dict) -> dict:
    after = await _table_stats(conn)
    t0 = time.perf_counter()
    await conn.execute(BQ.pending_vacuum)
    vac = (time.perf_counter() - t0) * 1000.0
    av0, av1 = before.get("autovacuum_ms"), after.get("autovacuum_ms")
    return {
        "dead_before_vacuum": after["n_dead_tup"],
        "autovacuum_runs": after["autovacuum_count"] - before["autovacuum_count"],
        "autovacuum_ms": None if av0 is None or av1 is None else av1 - av0,
        "vacuum_ms": vac,
    }


# -- extras at one size ----------------------------------------------------------------------


async def backoff_extra(conn, ns, base: dict) -> dict:
    await conn.execute(BQ.insert_backoff, ns.backoff_timers, await _db_now(conn))
    await conn.execute(BQ.pending_vacuum_analyze)
    with_backoff = await sweeper_calls(conn, ns.repeats)
    await conn.execute(BQ.pending_delete_queue, "bench-backoff")
    await conn.execute(BQ.pending_vacuum)
    return {"backoff_timers": ns.backoff_timers, "without": base, "with": with_backoff}


async def brokers_extra(conn, url: str, ns) -> dict:
    st, wal, fn = await steady_phase(conn, url, ns, brokers=3)
    dr = await drain(conn, url, ns.drain, 3, "x")
    return {"steady": st, "steady_wal_per_timer": wal, "steady_functions": fn, "drain": dr}


async def autovacuum_extra(conn, url: str, ns) -> dict:
    out = {}
    for name, stmt in (("schema", BQ.pending_av_schema), ("defaults", BQ.pending_av_defaults)):
        await conn.execute(stmt)
        await conn.execute(BQ.pending_vacuum)
        s0, z0 = await _table_stats(conn), await _sizes(conn)
        st, wal, _fn = await steady_phase(conn, url, ns, seconds=ns.av_seconds)
        s1, z1 = await _table_stats(conn), await _sizes(conn)
        av0, av1 = s0.get("autovacuum_ms"), s1.get("autovacuum_ms")
        out[name] = {
            "reloptions": await conn.fetchval(BQ.pending_reloptions),
            "seconds": ns.av_seconds,
            "lateness_ms": st["lateness_ms"],
            "delivered": st["delivered"],
            "scheduled": st["scheduled"],
            "autovacuum_runs": s1["autovacuum_count"] - s0["autovacuum_count"],
            "autovacuum_ms": None if av0 is None or av1 is None else av1 - av0,
            "dead_at_end": s1["n_dead_tup"],
            "heap_growth_bytes": z1["heap_bytes"] - z0["heap_bytes"],
            "index_growth_bytes": (z1["pkey_bytes"] + z1["visible_bytes"])
            - (z0["pkey_bytes"] + z0["visible_bytes"]),
            "wal_per_timer": wal,
        }
    await conn.execute(BQ.pending_av_schema)
    return out


# -- one size ----------------------------------------------------------------------------------


def _say(ns, text: str) -> None:
    if not ns.no_progress:
        print(f"pending: {text}", flush=True)


async def measure_size(tgt: Target, n: int, ns) -> dict:
    from queen_timers.db.pool import connect_one

    url = await tgt.database(f"n{n}")
    conn = await connect_one(url)
    try:
        try:
            await conn.execute(await conn.fetchval(BQ.pending_track_functions))
        except Exception as e:  # noqa: BLE001 - a role that may not: no live per-call figures
            _say(ns, f"track_functions not set ({e}); no live probe/claim figures")
        raw: dict[str, Any] = {"n": n}
        _say(ns, f"N={n:,}: load")
        raw["load"] = await load(conn, n, ns.tenants, ns.queues)
        raw["sizes_after_load"] = await _sizes(conn)
        before = await _table_stats(conn)
        _say(ns, f"N={n:,}: boot ({raw['load']['insert_s']:.1f} s to insert)")
        raw["boot"] = await boot(url)
        _say(ns, f"N={n:,}: sweeper calls")
        raw["sweeper"] = await sweeper_calls(conn, ns.repeats)
        _say(ns, f"N={n:,}: steady")
        raw["steady"], raw["steady_wal_per_timer"], raw["steady_functions"] = await steady_phase(
            conn, url, ns
        )
        _say(ns, f"N={n:,}: drain")
        raw["drain"] = await drain(conn, url, ns.drain, 1, "d")
        await conn.execute(BQ.pending_clear_log)
        _say(ns, f"N={n:,}: schedules")
        raw["schedule"] = await schedules(conn, url, ns.schedule_seconds)
        _say(ns, f"N={n:,}: peek, list, count, cancel")
        raw["ops"] = await operations(url, n, ns.tenants, ns.queues, ns.ops, seed=n)
        raw["vacuum"] = await vacuum_after(conn, before)
        raw["sizes_after"] = await _sizes(conn)
        if n == ns.extras_at:
            if "backoff" in ns.extras:
                _say(ns, f"N={n:,}: {ns.backoff_timers:,} timers backing off")
                raw["backoff"] = await backoff_extra(conn, ns, raw["sweeper"])
            if "brokers" in ns.extras:
                _say(ns, f"N={n:,}: three brokers")
                raw["brokers3"] = await brokers_extra(conn, url, ns)
            if "autovacuum" in ns.extras:
                _say(ns, f"N={n:,}: autovacuum, 025 against the defaults")
                raw["autovacuum"] = await autovacuum_extra(conn, url, ns)
        raw["figures"] = figures_of(raw)
        return raw
    finally:
        await conn.close()
        await tgt.drop_database(f"n{n}")


# -- report ------------------------------------------------------------------------------------


def table(sizes: list[int], figs: dict[int, dict]) -> tuple[list[str], list[list[Any]]]:
    lo, hi = sizes[0], sizes[-1]
    headers = ["figure", "unit", *(f"N={n:,}" for n in sizes), f"growth {hi:,} vs {lo:,}"]
    if len(sizes) > 1:
        headers.append(f"within {GOAL}x")
    rows = []
    for f in FIGURES:
        g = growth(f, figs[lo].get(f.key), figs[hi].get(f.key))
        row: list[Any] = [f.label, f.unit, *(figs[n].get(f.key) for n in sizes), g]
        if len(sizes) > 1:
            row.append(None if g is None or not f.goal else g <= GOAL)
        rows.append(row)
    return headers, rows


def _summary(res: Results, sizes: list[int], raws: dict[int, dict], ns) -> None:
    figs = {n: raws[n]["figures"] for n in sizes}
    headers, rows = table(sizes, figs)
    res.section(
        "## Every figure per pending-set size\n\n"
        "Growth = the figure at the largest N over the smallest N's (a cost), or the inverse "
        "(a rate): 1.0 is flat. Sizes grow with N by definition and are not judged.\n\n"
        + md_table(headers, rows, digits=2)
    )
    loads = [
        [
            n,
            raws[n]["load"]["insert_s"],
            raws[n]["load"]["rows_per_s"],
            raws[n]["load"]["vacuum_analyze_s"],
        ]
        for n in sizes
    ]
    res.section(
        "## The load (one INSERT ... SELECT over generate_series, then VACUUM (ANALYZE))\n\n"
        + md_table(["N", "insert s", "rows/s", "vacuum analyze s"], loads)
    )
    fn_rows = []
    for n in sizes:
        for name, d in raws[n]["steady_functions"].items():
            fn_rows.append([n, name, d["calls"], d["ms_per_call"]])
    res.section(
        "## The procedures during steady, as the server timed them (pg_stat_user_functions)\n\n"
        + md_table(["N", "procedure", "calls", "ms per call"], fn_rows, digits=3)
    )
    for n in sizes:
        r = raws[n]
        if "backoff" in r:
            b = r["backoff"]
            res.section(
                f"## {b['backoff_timers']:,} timers backing off beside N={n:,}\n\n"
                + md_table(
                    ["", "claim of 200 ms", "claim buffers", "probe idle ms", "probe buffers"],
                    [
                        [
                            label,
                            b[k]["claim200_ms"],
                            b[k]["claim200_buffers"],
                            b[k]["probe_idle_p50_ms"],
                            b[k]["probe_buffers"],
                        ]
                        for label, k in (("without", "without"), ("with", "with"))
                    ],
                    digits=3,
                )
            )
        if "brokers3" in r:
            b3 = r["brokers3"]
            res.section(
                f"## Three brokers at N={n:,}\n\n"
                + md_table(
                    ["brokers", "steady p50 ms", "steady p99 ms", "drain timers/s"],
                    [
                        [
                            "1 (in-process)",
                            r["steady"]["lateness_ms"]["p50"],
                            r["steady"]["lateness_ms"]["p99"],
                            r["drain"]["timers_per_s"],
                        ],
                        [
                            "3 (processes; NOTIFY from the scheduler)",
                            b3["steady"]["lateness_ms"]["p50"],
                            b3["steady"]["lateness_ms"]["p99"],
                            b3["drain"]["timers_per_s"],
                        ],
                    ],
                )
            )
        if "autovacuum" in r:
            av = r["autovacuum"]
            res.section(
                f"## Autovacuum parameters of queen.log_timers at N={n:,}, steady "
                f"{ns.steady_rate}/s for {ns.av_seconds:g} s each\n\n"
                + md_table(
                    [
                        "parameters",
                        "reloptions",
                        "autovacuum runs",
                        "autovacuum ms",
                        "dead tuples at end",
                        "heap growth MiB",
                        "index growth MiB",
                        "lateness p50 ms",
                        "lateness p99 ms",
                    ],
                    [
                        [
                            k,
                            v["reloptions"],
                            v["autovacuum_runs"],
                            v["autovacuum_ms"],
                            v["dead_at_end"],
                            v["heap_growth_bytes"] / 2**20,
                            v["index_growth_bytes"] / 2**20,
                            v["lateness_ms"]["p50"],
                            v["lateness_ms"]["p99"],
                        ]
                        for k, v in av.items()
                    ],
                    digits=2,
                )
            )


def _plots(res: Results, sizes: list[int], raws: dict[int, dict]) -> None:
    figs = {n: raws[n]["figures"] for n in sizes}
    groups: dict[str, list[Figure]] = {}
    for f in FIGURES:
        groups.setdefault(f.plot, []).append(f)
    for name, members in groups.items():

        def draw(fig, members=members) -> None:
            ax = fig.add_subplot(1, 1, 1)
            for f in members:
                xs = [n for n in sizes if figs[n].get(f.key) is not None]
                ax.plot(xs, [figs[n][f.key] for n in xs], "o-", label=f.label)
            ax.set_xscale("log")
            ax.set_xlabel("pending timers (N, log)")
            ax.set_ylabel(members[0].unit)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend()

        res.plot(f"pending-{name}", draw)

    def draw_growth(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        lo = sizes[0]
        for f in FIGURES:
            if not f.goal:
                continue
            ys = [growth(f, figs[lo].get(f.key), figs[n].get(f.key)) for n in sizes]
            pts = [(n, y) for n, y in zip(sizes, ys) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f.label, lw=1)
        ax.axhline(GOAL, color="red", ls="--", label=f"goal: {GOAL}x")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("pending timers (N, log)")
        ax.set_ylabel(f"growth over N={lo:,} (log; 1 = flat, higher = worse)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=2)

    res.plot("pending-growth", draw_growth)


async def run(ns) -> int:
    sizes = sorted(set(ns.sizes))
    res = Results("pending", ns.out)
    raws: dict[int, dict] = {}
    async with Target("pending", ns.database_url, keep=ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.server_url or tgt.url, tgt.embedded)
        for n in sizes:
            raws[n] = await measure_size(tgt, n, ns)
            line = ", ".join(
                f"{k}={fmt(v, 2)}" for k, v in raws[n]["figures"].items() if v is not None
            )
            _say(ns, f"N={n:,}: {line}")
    res.data["sizes"] = sizes
    res.data["runs"] = {str(n): raws[n] for n in sizes}
    res.data["settings"] = {
        k: getattr(ns, k)
        for k in (
            "steady_rate",
            "steady_seconds",
            "delay",
            "drain",
            "schedule_seconds",
            "ops",
            "repeats",
            "tenants",
            "queues",
            "extras",
            "extras_at",
            "backoff_timers",
            "av_seconds",
        )
    }
    _summary(res, sizes, raws, ns)
    _plots(res, sizes, raws)
    out = res.write()
    print(f"pending: results in {out}")
    return 0


# -- command line ------------------------------------------------------------------------------


def _sizes_arg(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of sizes: {text!r}") from None
    if not out or any(n < 16 for n in out):
        raise argparse.ArgumentTypeError("sizes must be at least 16")
    return out


def _extras_arg(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in out if x not in ("backoff", "brokers", "autovacuum")]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown extras: {', '.join(bad)}")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database-url", default=None, help="server to use (default: embedded)")
    p.add_argument("--out", default=None, help="results root (default: bench/results/)")
    p.add_argument("--keep-db", action="store_true", help="leave the databases in place")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.add_argument(
        "--sizes",
        type=_sizes_arg,
        default=[10_000, 100_000, 1_000_000, 10_000_000],
        help="pending-set sizes N, comma separated (10000,100000,1000000,10000000)",
    )
    p.add_argument("--tenants", type=int, default=4, help="tenants of the loaded set (4)")
    p.add_argument("--queues", type=int, default=4, help="queues per tenant (4)")
    p.add_argument("--steady-rate", type=int, default=500, help="steady timers/s (500)")
    p.add_argument("--steady-seconds", type=float, default=30.0, help="steady seconds (30)")
    p.add_argument("--delay", type=float, default=2.0, help="steady: seconds to due (2)")
    p.add_argument("--drain", type=int, default=20_000, help="timers due at one instant (20000)")
    p.add_argument(
        "--schedule-seconds", type=float, default=5.0, help="seconds of the 16-client loop (5)"
    )
    p.add_argument("--ops", type=int, default=300, help="rounds of peek/list/count/cancel (300)")
    p.add_argument("--repeats", type=int, default=100, help="idle probe and claim calls (100)")
    p.add_argument(
        "--extras",
        type=_extras_arg,
        default=["backoff", "brokers", "autovacuum"],
        help="extra measurements at --extras-at (backoff,brokers,autovacuum; '' for none)",
    )
    p.add_argument(
        "--extras-at", type=int, default=1_000_000, help="size the extras run at (1000000)"
    )
    p.add_argument(
        "--backoff-timers", type=int, default=100_000, help="timers backing off (100000)"
    )
    p.add_argument(
        "--av-seconds",
        type=float,
        default=180.0,
        help="steady seconds per autovacuum parameter set (180: three naptimes)",
    )


async def main(ns: argparse.Namespace) -> int:
    return await run(ns)
