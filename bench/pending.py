"""pending: what every cost of the broker does as the pending set grows, 10^4 to 10^7 timers.

    queen bench pending [--sizes 10000,100000,1000000,10000000] [--steady-seconds 30]
                        [--extras backoff,brokers,autovacuum] [--extras-at 1000000]
                        [--rounds 10] [--phase-rounds 2] [--keep-data DIR]
                        [--shared-buffers 6GB] [--warm]

All sizes run in ONE invocation on one server, alternated, so the ratio between two sizes is
read from one run at the same moments: every size is loaded first (bench/sql/q_pending.sql,
pending_load), each into its own database; then the per-call figures (the sweeper's probe
and claim called directly, peek / list / count / cancel, 16-client single-op schedules) in
--rounds short rounds that visit every size, in order in even rounds and reversed in odd
ones, and boot + steady (`queen bench sweeper steady`'s run) + a drain in --phase-rounds such
rounds. A figure pools the samples of all its rounds. --keep-data DIR keeps the server and
each size's load as a template database for the next run. The extras at --extras-at:
timers backing off beside the set, three broker processes, and autovacuum under 025's
parameters against PostgreSQL's defaults.

What each phase does, what each figure means and the current numbers:
docs/guides/pending-set.md. Output: the harness's result.json and summary.md, one PNG per
figure against N on a log axis, and growth.png (every figure over its value at the smallest
size).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from . import harness, stats
from .env import Target, fetchrow, runtime
from .harness import Results, fmt, md_table
from .queries import BQ
from .sweeper import ADMIN, schedule_due, steady, wait_count
from .transport_schedule import Direct, closed_loop

__all__ = ["FIGURES", "Figure", "add_arguments", "figures_of", "growth", "layout_key", "main"]

GOAL = 1.5  # the bound: a figure at the largest N within 1.5x of the smallest N's
PAYLOAD = b'{"orderId":"9f1c2e","amount":4200,"currency":"EUR","note":"expiry of the order"}'
SWEEPER_FUNCTIONS = [
    "log_timers_due_v1",
    "log_timers_claim_v3",
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
        "claim_live_ms": (live.get("log_timers_claim_v3") or {}).get("ms_per_call"),
        "wal_per_timer": raw["steady_wal_per_timer"],
        "autovacuum_ms": raw["vacuum"]["autovacuum_ms"],
        "vacuum_ms": raw["vacuum"]["vacuum_ms"],
        "rss_idle_mb": raw["boot"]["rss_idle"] / mib,
        "rss_drain_mb": dr["rss_after"][0] / mib if dr.get("rss_after") else None,
        "boot_s": raw["boot"]["boot_s"],
        "heap_bytes_per_timer": harness.per_unit(sz["heap_bytes"], n),
        "index_bytes_per_timer": harness.per_unit(sz["pkey_bytes"] + sz["visible_bytes"], n),
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
            "ms_per_call": harness.per_unit(t1 - t0, calls),
        }
    return out


async def load(conn, n: int, tenants: int, queues: int) -> dict:
    ids = _tenants(tenants)
    now = await _db_now(conn)
    t0 = time.perf_counter()
    await conn.execute(BQ.pending_load, n, ids, queues, now, PAYLOAD)
    t1 = time.perf_counter()
    await conn.execute(BQ.vacuum_analyze_timers)
    t2 = time.perf_counter()
    await conn.execute(BQ.checkpoint)
    count = await conn.fetchval(BQ.timers_pending)
    if count != n:
        raise RuntimeError(f"loaded {count} pending timers, wanted {n}")
    return {
        "insert_s": t1 - t0,
        "rows_per_s": n / max(t1 - t0, 1e-9),
        "vacuum_analyze_s": t2 - t1,
        "tenants": [str(i) for i in ids],
        "queues": queues,
    }


async def boot_broker(url: str):
    """A broker process started until it serves, and left idle 2 s (a few sweeper cycles):
    ({boot_s, rss_idle}, the broker, still running)."""
    import psutil  # type: ignore[import-untyped]

    from queen_timers.testing.broker import BrokerProcess

    b = BrokerProcess(url)
    t0 = time.perf_counter()
    await b.start()
    boot_s = time.perf_counter() - t0
    try:
        await asyncio.sleep(2.0)
        rss = psutil.Process(b.pid).memory_info().rss
    except BaseException:
        await b.kill()
        raise
    return {"boot_s": boot_s, "rss_idle": rss}, b


async def _idle_probe_and_claim(conn) -> tuple[float, float]:
    """One probe and one claim over all 64 shards with nothing due, as the sweeper calls them:
    their seconds."""
    from queen_timers.timers import store

    t0 = time.perf_counter()
    await store.due(conn, None, None, 2000)
    t1 = time.perf_counter()
    got = await store.claim(conn, None, None, 30000, 200, 50)
    t2 = time.perf_counter()
    if got:
        raise RuntimeError("the idle claim found due rows")
    return t1 - t0, t2 - t1


async def sweeper_calls(conn, repeats: int) -> dict:
    """The probe and the claim called as the sweeper calls them, with nothing due, then a
    200-row claim over 200 due rows (rolled back each time): sweeper_visit on its own."""
    st = SizeState(n=0, url="", conn=conn, tenants=0)
    await sweeper_visit(st, 1, 0)  # plans the procedures' statements: not counted
    st.probe.clear()
    st.claim.clear()
    st.idle_plans.clear()
    await sweeper_visit(st, repeats, max(repeats // 5, 3))
    return sweeper_figures(st)


async def steady_phase(
    conn, url: str, ns, *, brokers: int = 0, seconds: float | None = None, samples: bool = False
):
    """sweeper.steady on top of the pending set; brokers=0: the in-process broker fires."""
    await conn.execute(BQ.pending_clear_log)
    await conn.execute(BQ.checkpoint)
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
        samples=samples,
    )
    lsn1 = await conn.fetchval(BQ.wal_insert_lsn)
    await asyncio.sleep(1.1)  # the brokers' sessions flush their function counters on exit
    f1 = await _function_stats(conn)
    wal = stats.wal_delta(lsn0, lsn1)
    res["wal_bytes"] = wal
    return res, harness.per_unit(wal, res["scheduled"]), function_deltas(f0, f1)


async def drain(
    conn, url: str, timers: int, brokers: int, prefix: str, boot_first: bool = False
) -> dict:
    """`timers` due at one instant, fire paused while scheduling; `brokers` processes drain.
    `boot_first`: one broker, started (and its boot and idle RSS measured, "boot") once fire
    is paused and before anything is due, so that the boot's broker is the drain's."""
    import psutil

    from queen_timers.service import Queen
    from queen_timers.testing.broker import BrokerProcess

    await conn.execute(BQ.pending_clear_log)
    # What a slow drain needs to be told apart (2026-12-02: a second drain at 10^4 ran 23-31 s
    # in two runs and was not reproduced since, bench/RESULTS.md): the table's state before it
    # (dead versions, autovacuum and autoanalyze counts, the planner's row count), where the
    # server's time went (calls and ms of the probe, the claim, the fire) and what the brokers
    # warned about (failed fires).
    table_before = await _table_stats(conn)
    f0 = await _function_stats(conn)
    q = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await q.start()
    procs = [] if boot_first else [BrokerProcess(url) for _ in range(brokers)]
    booted = None
    warnings: list[str] = []
    try:
        await q.switches_set(ADMIN, {"timersFire": False})
        if boot_first:
            booted, b = await boot_broker(url)
            procs.append(b)
        await schedule_due(q, timers, prefix=prefix)
        if not boot_first:
            await asyncio.gather(*(p.start() for p in procs))
        await asyncio.sleep(1.0)
        await q.switches_set(ADMIN, {"timersFire": True})
        got = await wait_count(runtime(q).pool, timers, 600)
        span = await conn.fetchrow(BQ.drain_span)
        rss = [psutil.Process(p.pid).memory_info().rss for p in procs]
    finally:
        await asyncio.gather(*(p.kill() for p in procs))
        await q.stop()
        warnings = [ln for p in procs for ln in p.output if " WARNING " in ln or " ERROR " in ln]
    seconds = float(span["last"]) - float(span["first"])
    table_after = await _table_stats(conn)  # its 1.1 s: the killed brokers' counters flushed
    return {
        "timers": timers,
        "brokers": brokers,
        "delivered": got,
        "drain_s": seconds,
        "timers_per_s": harness.rate(timers, seconds),
        "rss_after": rss,
        "table_before": table_before,
        "table_after": table_after,
        "functions": function_deltas(f0, await _function_stats(conn)),
        "broker_warnings": warnings[-20:],
        **({"boot": booted} if booted else {}),
    }


def op_keys(n: int, tenants: int, queues: int, rounds: int, seed: int):
    """The keys the ops rounds read and cancel: `rounds` random keys to read and as many
    others to cancel, drawn once per size so that the rounds split over visits draw the same
    keys as one pass would."""
    import random

    full = n // (tenants * queues)  # keys present in every (tenant, queue)
    rng = random.Random(seed)
    cells = [(t, q) for t in range(tenants) for q in range(queues)]
    picks = rng.sample(range(full * len(cells)), min(2 * rounds, full * len(cells)))
    read_keys = [(cells[p % len(cells)], p // len(cells)) for p in picks[:rounds]]
    cancel_keys = [(cells[p % len(cells)], p // len(cells)) for p in picks[rounds:]]
    return full, rng, read_keys, cancel_keys


async def operations_chunk(q, st: SizeState, count: int) -> dict[str, list[float]]:
    """`count` rounds of peek, list, count (and cancel while cancel keys last), from where the
    size's previous visit stopped; the latencies are added to st.lat and returned."""
    from queen_timers.identity import Identity

    ids = _tenants(st.tenants)
    full = st.full
    got: dict[str, list[float]] = {k: [] for k in ("peek", "list", "count", "cancel")}
    for i in range(st.ops_done, min(st.ops_done + count, len(st.read_keys))):
        (t, qi), j = st.read_keys[i]
        ident = Identity(tenant=ids[t], subject="bench")
        queue = f"pending-{qi}"
        t0 = time.perf_counter()
        peek = await q.timer_peek(ident, queue, layout_key(j))
        t1 = time.perf_counter()
        # a full page at every N: the page starts at most 100 keys before the queue's end
        start = layout_key(j % (full - 100)) if full > 100 else None
        page = await q.timers_list(ident, queue, after=start, limit=100)
        t2 = time.perf_counter()
        x = st.rng.randrange(max(full // 100, 1))
        prefix = layout_key(x * 100)[:9] if full >= 100 else "k"
        await q.timers_count(ident, queue, prefix)
        t3 = time.perf_counter()
        if not peek.get("found") or not page["rows"]:
            raise RuntimeError(f"the loaded key {queue}/{layout_key(j)} is not there")
        got["peek"].append(t1 - t0)
        got["list"].append(t2 - t1)
        got["count"].append(t3 - t2)
        if i < len(st.cancel_keys):
            (t, qi), j = st.cancel_keys[i]
            ident = Identity(tenant=ids[t], subject="bench")
            t0 = time.perf_counter()
            r = await q.timer_cancel(ident, f"pending-{qi}", layout_key(j))
            got["cancel"].append(time.perf_counter() - t0)
            st.statuses[r["status"]] = st.statuses.get(r["status"], 0) + 1
    st.ops_done = min(st.ops_done + count, len(st.read_keys))
    for k, v in got.items():
        st.lat[k].extend(v)
    return got


def operations_result(st: SizeState) -> dict:
    out: dict[str, Any] = {
        k: {"calls": len(v), "p50_ms": harness.ms(v, 50), "p99_ms": harness.ms(v, 99)}
        for k, v in st.lat.items()
    }
    out["cancel_statuses"] = dict(st.statuses)
    return out


async def vacuum_after(conn, before: dict) -> dict:
    after = await _table_stats(conn)
    t0 = time.perf_counter()
    await conn.execute(BQ.vacuum_timers)
    vac = (time.perf_counter() - t0) * 1000.0
    av0, av1 = before.get("autovacuum_ms"), after.get("autovacuum_ms")
    return {
        "dead_before_vacuum": after["n_dead_tup"],
        "autovacuum_runs": after["autovacuum_count"] - before["autovacuum_count"],
        "autovacuum_ms": None if av0 is None or av1 is None else av1 - av0,
        "vacuum_ms": vac,
    }


# -- extras at one size ----------------------------------------------------------------------


async def backoff_extra(conn, ns) -> dict:
    base = await sweeper_calls(conn, ns.repeats)  # without them, just before: the same minute
    await conn.execute(BQ.insert_backoff, ns.backoff_timers, await _db_now(conn))
    await conn.execute(BQ.vacuum_analyze_timers)
    with_backoff = await sweeper_calls(conn, ns.repeats)
    await conn.execute(BQ.pending_delete_queue, "bench-backoff")
    await conn.execute(BQ.vacuum_timers)
    return {"backoff_timers": ns.backoff_timers, "without": base, "with": with_backoff}


async def brokers_extra(conn, url: str, ns) -> dict:
    st, wal, fn = await steady_phase(conn, url, ns, brokers=3)
    dr = await drain(conn, url, ns.drain, 3, "x")
    return {"steady": st, "steady_wal_per_timer": wal, "steady_functions": fn, "drain": dr}


async def autovacuum_extra(conn, url: str, ns) -> dict:
    out = {}
    for name, stmt in (("schema", BQ.pending_av_schema), ("defaults", BQ.pending_av_defaults)):
        await conn.execute(stmt)
        await conn.execute(BQ.vacuum_timers)
        s0, z0 = await _table_stats(conn), await _sizes(conn)
        st, wal, _fn = await steady_phase(conn, url, ns, seconds=ns.av_seconds)
        s1, z1 = await _table_stats(conn), await _sizes(conn)
        av0, av1 = s0.get("autovacuum_ms"), s1.get("autovacuum_ms")
        out[name] = {
            "reloptions": await conn.fetchval(BQ.timers_reloptions),
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


# -- the sizes, loaded first, then measured alternated ------------------------------------------


def _say(ns, text: str) -> None:
    if not ns.no_progress:
        print(f"pending: {text}", flush=True)


def alternated(sizes: list[int], rounds: int) -> list[tuple[int, int]]:
    """The (round, size) visits of an alternated measurement: the sizes in order in even
    rounds and reversed in odd ones (A B, B A, A B, ...), so a drift of the machine's load
    over the run lands on every size alike (a linear drift cancels over each pair)."""
    out: list[tuple[int, int]] = []
    for r in range(rounds):
        out.extend((r, n) for n in (sizes if r % 2 == 0 else sizes[::-1]))
    return out


def _chunks(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal whole parts (the first ones larger)."""
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


@dataclass
class SizeState:
    """One size's database and everything measured on it across its visits."""

    n: int
    url: str
    conn: Any
    tenants: int
    full: int = 0
    rng: Any = None
    read_keys: list = field(default_factory=list)
    cancel_keys: list = field(default_factory=list)
    ops_done: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    lat: dict[str, list[float]] = field(
        default_factory=lambda: {k: [] for k in ("peek", "list", "count", "cancel")}
    )
    probe: list[float] = field(default_factory=list)
    claim: list[float] = field(default_factory=list)
    idle_plans: list[dict] = field(default_factory=list)
    claim_plans: list[dict] = field(default_factory=list)
    due_plans: list[dict] = field(default_factory=list)
    sched_lat: list[float] = field(default_factory=list)
    sched_s: float = 0.0
    visits: list[dict] = field(default_factory=list)
    boots: list[dict] = field(default_factory=list)
    steadies: list[dict] = field(default_factory=list)
    functions: list[dict] = field(default_factory=list)
    drains: list[dict] = field(default_factory=list)
    queen: Any = None


# What a kept template holds and when it is stale: the load's shape, the load statement and
# payload, and the schema's stamp (queen.system_state); timers fall due from one day after it.
TEMPLATE_MAX_AGE_H = 20.0


def template_name(n: int) -> str:
    return f"queen_bench_pending_tpl_{n}"


def load_fingerprint(n: int, ns) -> dict:
    import hashlib

    digest = hashlib.sha256(BQ.pending_load.encode() + b"\0" + PAYLOAD).hexdigest()[:12]
    return {"n": n, "tenants": ns.tenants, "queues": ns.queues, "load": digest}


async def _template_state(admin, tgt: Target, n: int, ns) -> tuple[dict | None, str | None]:
    """(what the template's comment says, why it cannot be reused or None)."""
    from queen_timers.db.migrate import read_stamp, schema_stamp
    from queen_timers.db.pool import connect_one

    from .env import with_database

    tpl = template_name(n)
    note = await admin.fetchval(BQ.pending_template_note, tpl)
    if note is None:
        exists = await admin.fetchval(BQ.pending_template_exists, tpl)
        return None, "half made (no note)" if exists else "not loaded yet"
    info = json.loads(note)
    if info.get("fingerprint") != load_fingerprint(n, ns):
        return info, f"another load ({info.get('fingerprint')})"
    conn = await connect_one(with_database(tgt.server_url or "", tpl))
    try:
        stamp = await read_stamp(conn)
        now = await conn.fetchval(BQ.now_epoch)
    finally:
        await conn.close()
    installed = schema_stamp()["digest"]
    if stamp is None or stamp.get("digest") != installed:
        return info, f"schema changed ({(stamp or {}).get('digest')} loaded, {installed} now)"
    age_h = (now - info["loaded_at"]) / 3600.0
    if age_h > TEMPLATE_MAX_AGE_H:
        return info, f"loaded {age_h:.0f} h ago: its first timers fall due 24 h after the load"
    return info, None


async def prepare(tgt: Target, n: int, ns) -> tuple[str, dict]:
    """The size's working database (its URL) with N pending timers, and what it took: loaded
    into it, or (--keep-data) copied from a kept template, loaded first when missing or stale."""
    import asyncpg

    from queen_timers.db.pool import connect_one

    from .env import with_database

    if not ns.keep_data:
        url = await tgt.database(f"n{n}")
        conn = await connect_one(url)
        try:
            _say(ns, f"N={n:,}: load")
            return url, {"action": "loaded", **await load(conn, n, ns.tenants, ns.queues)}
        finally:
            await conn.close()
    tpl = template_name(n)
    admin = await asyncpg.connect(tgt.server_url)
    try:
        info, stale = await _template_state(admin, tgt, n, ns)
        action = "reused"
        if stale is not None:
            action = "loaded" if info is None else "reloaded"
            _say(ns, f"N={n:,}: load into template {tpl} ({stale})")
            await admin.execute(f'DROP DATABASE IF EXISTS "{tpl}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{tpl}"')
            tpl_url = with_database(tgt.server_url or "", tpl)
            await tgt.apply_schema(tpl_url)
            conn = await connect_one(tpl_url)
            try:
                ld = await load(conn, n, ns.tenants, ns.queues)
                loaded_at = await conn.fetchval(BQ.now_epoch)
            finally:
                await conn.close()
            info = {"fingerprint": load_fingerprint(n, ns), "loaded_at": loaded_at, "load": ld}
            # the note last: a template without it is a load that did not finish
            await admin.execute(f"COMMENT ON DATABASE \"{tpl}\" IS '{json.dumps(info)}'")
        else:
            _say(ns, f"N={n:,}: reuse template {tpl}")
    finally:
        await admin.close()
    assert info is not None
    t0 = time.perf_counter()
    url = await tgt.database(f"n{n}", migrate=False, template=tpl)
    out = {
        "action": action,
        "why": stale,
        "template": tpl,
        "loaded_at": dt.datetime.fromtimestamp(info["loaded_at"], dt.UTC).isoformat(),
        "copy_s": time.perf_counter() - t0,
        **info["load"],
    }
    return url, out


async def sweeper_visit(st: SizeState, idle: int, claims: int) -> None:
    """`idle` probe and claim calls with nothing due (the sweeper's idle pass), one EXPLAIN of
    the idle probe, then `claims` 200-row claims over 200 due rows (rolled back; one more
    first, not counted, which touches the new rows), the rows deleted after."""

    conn = st.conn
    for _ in range(idle):
        p, c = await _idle_probe_and_claim(conn)
        st.probe.append(p)
        st.claim.append(c)
    st.idle_plans.append(
        harness.explained(await conn.fetchval(BQ.explain_due, await _db_now(conn)))
    )
    await conn.execute(BQ.insert_due, 200, await _db_now(conn))
    try:
        for i in range(claims + 1):
            at = await _db_now(conn)
            tr = conn.transaction()
            await tr.start()
            try:
                claim_plan = harness.explained(await conn.fetchval(BQ.explain_claim, at, 200))
            finally:
                await tr.rollback()
            due_plan = harness.explained(await conn.fetchval(BQ.explain_due, at))
            if i:
                st.claim_plans.append(claim_plan)
                st.due_plans.append(due_plan)
    finally:
        await conn.execute(BQ.pending_delete_queue, "bench-due")


async def calls_visit(st: SizeState, idle: int, claims: int, ops: int, seconds: float) -> dict:
    """One visit of the per-call figures to a size: the sweeper's calls, `ops` rounds of
    peek / list / count / cancel, `seconds` of 16-client single-op schedules (deleted
    after). Returns the visit's own p50s (the per-visit record)."""
    p0, c0 = len(st.probe), len(st.claim)
    await sweeper_visit(st, idle, claims)
    got = await operations_chunk(st.queen, st, ops)
    t = Direct(st.url)
    t.queen = st.queen  # the size's service, opened once for every visit
    t0 = time.perf_counter()
    _rps, lat = await closed_loop(t, 16, 1, seconds)
    st.sched_s += time.perf_counter() - t0
    st.sched_lat.extend(lat)
    await st.conn.execute(BQ.pending_delete_queue, "bench")
    return {
        "probe_idle_p50_ms": harness.ms(st.probe[p0:], 50),
        "claim_idle_p50_ms": harness.ms(st.claim[c0:], 50),
        **{f"{k}_p50_ms": harness.ms(v, 50) for k, v in got.items()},
        "schedule_p50_ms": harness.ms(lat, 50),
        "schedule_rps": len(lat) / seconds if seconds > 0 else None,
    }


async def phases_visit(st: SizeState, ns) -> None:
    """One visit of the long phases to a size, one broker on its database at a time: steady
    (the in-process broker), then a broker process's boot and idle RSS, the same process
    draining after (one start less per visit)."""
    res, _wal, fn = await steady_phase(st.conn, st.url, ns, samples=True)
    st.steadies.append(res)
    st.functions.append(fn)
    d = await drain(st.conn, st.url, ns.drain, 1, "d", boot_first=True)
    st.boots.append(d.pop("boot"))
    st.drains.append(d)
    await st.conn.execute(BQ.pending_clear_log)


def _sum_functions(runs: list[dict]) -> dict[str, dict]:
    out = {}
    for name in SWEEPER_FUNCTIONS:
        calls = sum(r[name]["calls"] for r in runs)
        ms = sum(r[name]["ms"] for r in runs)
        out[name] = {"calls": calls, "ms": ms, "ms_per_call": harness.per_unit(ms, calls)}
    return out


def sweeper_figures(st: SizeState) -> dict[str, Any]:
    """The sweeper's calls over every visit: percentiles of the timed calls, medians of the
    EXPLAINed ones."""

    def med(plans: list[dict], key: str) -> float | None:
        return harness.median([p[key] for p in plans])

    return {
        "repeats": len(st.probe),
        "probe_idle_p50_ms": harness.ms(st.probe, 50),
        "probe_idle_p99_ms": harness.ms(st.probe, 99),
        "claim_idle_p50_ms": harness.ms(st.claim, 50),
        "claim_idle_p99_ms": harness.ms(st.claim, 99),
        "probe_buffers": med(st.idle_plans, "buffers"),
        "probe_with_due_ms": med(st.due_plans, "ms"),
        "probe_with_due_buffers": med(st.due_plans, "buffers"),
        "claim200_ms": med(st.claim_plans, "ms"),
        "claim200_buffers": med(st.claim_plans, "buffers"),
        "claim200_read": med(st.claim_plans, "read"),
    }


def pooled(st: SizeState) -> dict[str, Any]:
    """The size's raw measurements in the shape figures_of reads, from every visit's samples
    pooled: percentiles over all samples, rates as the sum over the sum, medians of the
    single-sample figures (boot, RSS, the EXPLAINed calls)."""
    late = [x for r in st.steadies for x in r.pop("lateness_samples_ms")]
    scheduled = sum(r["scheduled"] for r in st.steadies)
    wal = sum(r["wal_bytes"] for r in st.steadies)
    timers = sum(d["timers"] for d in st.drains)
    drain_s = sum(d["drain_s"] for d in st.drains)
    return {
        "boot": {
            "boot_s": harness.median([b["boot_s"] for b in st.boots]),
            "rss_idle": harness.median([b["rss_idle"] for b in st.boots]),
            "runs": st.boots,
        },
        "sweeper": sweeper_figures(st),
        "steady": {
            "runs": len(st.steadies),
            "scheduled": scheduled,
            "delivered": sum(r["delivered"] for r in st.steadies),
            "early": sum(r["early"] for r in st.steadies),
            "lateness_ms": {
                "p50": harness.percentile(late, 50),
                "p99": harness.percentile(late, 99),
                "max": max(late) if late else None,
            },
            "per_run": st.steadies,
        },
        "steady_wal_per_timer": harness.per_unit(wal, scheduled),
        "steady_functions": _sum_functions(st.functions),
        "drain": {
            "timers": timers,
            "brokers": 1,
            "delivered": sum(d["delivered"] for d in st.drains),
            "drain_s": drain_s,
            "timers_per_s": harness.rate(timers, drain_s),
            "rss_after": [harness.median([d["rss_after"][0] for d in st.drains])],
            "per_run": st.drains,
        },
        "schedule": {
            "clients": 16,
            "seconds": st.sched_s,
            "requests": len(st.sched_lat),
            "rps": harness.rate(len(st.sched_lat), st.sched_s),
            "p50_ms": harness.ms(st.sched_lat, 50),
            "p99_ms": harness.ms(st.sched_lat, 99),
        },
        "ops": operations_result(st),
        "visits": st.visits,
    }


async def measure(tgt: Target, sizes: list[int], ns, order: list[dict]) -> dict[int, dict]:
    """Every size loaded (or copied from its template) first, each into its own database;
    then the per-call figures in --rounds alternated rounds and the long phases in
    --phase-rounds alternated rounds; then per size the vacuum, the sizes, the extras."""
    from queen_timers.db.pool import connect_one
    from queen_timers.service import Queen

    raws: dict[int, dict] = {}
    states: dict[int, SizeState] = {}
    try:
        for n in sizes:
            url, ld = await prepare(tgt, n, ns)
            conn = await connect_one(url)
            states[n] = SizeState(n=n, url=url, conn=conn, tenants=ns.tenants)
            try:
                await conn.execute(await conn.fetchval(BQ.pending_track_functions))
            except Exception as e:  # noqa: BLE001 - a role that may not: no live per-call figures
                _say(ns, f"track_functions not set ({e}); no live probe/claim figures")
            raws[n] = {"n": n, "load": ld, "sizes_after_load": await _sizes(conn)}
            if ns.warm:
                t0 = time.perf_counter()
                await conn.fetchval(BQ.pending_warm_heap)
                ld["warm_s"] = time.perf_counter() - t0
                _say(ns, f"N={n:,}: heap read into shared_buffers in {ld['warm_s']:.1f} s")
            if ld["action"] != "reused":
                _say(ns, f"N={n:,}: {ld['insert_s']:.1f} s to insert")
        await states[sizes[0]].conn.execute(BQ.checkpoint)  # the loads' WAL out first
        before = {n: await _table_stats(st.conn) for n, st in states.items()}

        # per-call figures: short visits, alternated
        rounds = ns.rounds
        idle = _chunks(ns.repeats, rounds)
        claims = _chunks(max(ns.repeats // 5, 3), rounds)
        ops = _chunks(ns.ops, rounds)
        for n, st in states.items():
            st.full, st.rng, st.read_keys, st.cancel_keys = op_keys(
                n, ns.tenants, ns.queues, ns.ops, seed=n
            )
            st.queen = Queen(database_url=st.url, sweeper=False, retention_interval_ms=0)
            await st.queen.start()
            await sweeper_visit(st, 1, 0)  # plans the procedures' statements: not counted
            st.probe.clear()
            st.claim.clear()
            st.idle_plans.clear()
        try:
            _say(ns, f"per-call figures, {rounds} alternated rounds")
            for r, n in alternated(sizes, rounds):
                st = states[n]
                v = await calls_visit(
                    st, max(idle[r], 1), max(claims[r], 1), ops[r], ns.schedule_seconds / rounds
                )
                st.visits.append({"round": r, **v})
                order.append({"phase": "calls", "round": r, "n": n, "at": time.time()})
        finally:
            for st in states.values():
                if st.queen is not None:
                    await st.queen.stop()
                    st.queen = None

        # the long phases: one broker per database at a time, alternated
        for r, n in alternated(sizes, ns.phase_rounds):
            _say(ns, f"N={n:,}: boot, steady, drain (round {r + 1} of {ns.phase_rounds})")
            await phases_visit(states[n], ns)
            order.append({"phase": "steady+drain", "round": r, "n": n, "at": time.time()})

        for n, st in states.items():
            raws[n].update(pooled(st))
            raws[n]["vacuum"] = await vacuum_after(st.conn, before[n])
            raws[n]["sizes_after"] = await _sizes(st.conn)
            if n == ns.extras_at:
                await extras(st.conn, st.url, ns, raws[n])
            raws[n]["figures"] = figures_of(raws[n])
            line = ", ".join(
                f"{k}={fmt(v, 2)}" for k, v in raws[n]["figures"].items() if v is not None
            )
            _say(ns, f"N={n:,}: {line}")
        return raws
    finally:
        for n, st in states.items():
            await st.conn.close()
            await tgt.drop_database(f"n{n}")


async def extras(conn, url: str, ns, raw: dict) -> None:
    n = raw["n"]
    if "backoff" in ns.extras:
        _say(ns, f"N={n:,}: {ns.backoff_timers:,} timers backing off")
        raw["backoff"] = await backoff_extra(conn, ns)
    if "brokers" in ns.extras:
        _say(ns, f"N={n:,}: three brokers")
        raw["brokers3"] = await brokers_extra(conn, url, ns)
    if "autovacuum" in ns.extras:
        _say(ns, f"N={n:,}: autovacuum, 025 against the defaults")
        raw["autovacuum"] = await autovacuum_extra(conn, url, ns)


# -- report ------------------------------------------------------------------------------------


def _summary(res: Results, sizes: list[int], raws: dict[int, dict], ns) -> None:
    """The table of every figure per size with its growth (the harness's summary table),
    then the load, the alternation, the procedures' server time and the extras."""
    lo, hi = sizes[0], sizes[-1]
    for f in FIGURES:
        vals = {f"N={n:,}": raws[n]["figures"].get(f.key) for n in sizes}
        g = growth(f, vals[f"N={lo:,}"], vals[f"N={hi:,}"])
        within = None if g is None or not f.goal or len(sizes) < 2 else g <= GOAL
        res.row(f.label, unit=f.unit, **vals, **{f"growth {hi:,} vs {lo:,}": g}, within=within)
    res.section(
        f"Growth = the figure at N={hi:,} over N={lo:,}'s (a cost), or the inverse (a rate): 1.0 "
        f"is flat, `within` says whether it is at most {GOAL}x. Sizes grow with N by "
        "definition and are not judged."
    )
    loads = [[n, *(raws[n]["load"].get(k) for k in LOAD_COLUMNS)] for n in sizes]
    res.section("## The load\n\n" + md_table(["N", *LOAD_COLUMNS], loads))
    sb = res.data.get("server", {})
    order = " ".join(f"{o['n']:,}" for o in res.data.get("order", []) if o["phase"] != "calls")
    res.section(
        f"shared_buffers = {sb.get('shared_buffers')}"
        + ("; each heap read into shared_buffers before the rounds (--warm)" if ns.warm else "")
        + f"; per-call figures over {ns.rounds} alternated rounds, boot + steady + drain over "
        f"{ns.phase_rounds} (visits: {order})."
    )
    fn_rows = [
        [n, name, d["calls"], d["ms_per_call"]]
        for n in sizes
        for name, d in raws[n]["steady_functions"].items()
    ]
    res.section(
        "## The procedures during steady, as the server timed them (pg_stat_user_functions)\n\n"
        + md_table(["N", "procedure", "calls", "ms per call"], fn_rows, digits=3)
    )
    for n in sizes:
        r = raws[n]
        if "backoff" in r:
            b = r["backoff"]
            sw = ("claim200_ms", "claim200_buffers", "probe_idle_p50_ms", "probe_buffers")
            rows = [[k, *(b[k][x] for x in sw)] for k in ("without", "with")]
            res.section(
                f"## {b['backoff_timers']:,} timers backing off beside N={n:,}\n\n"
                + md_table(["", *sw], rows, digits=3)
            )
        if "brokers3" in r:
            rows = [
                [label, x["steady"]["lateness_ms"]["p50"], x["steady"]["lateness_ms"]["p99"],
                 x["drain"]["timers_per_s"]]
                for label, x in (("1 (in-process)", r), ("3 processes", r["brokers3"]))
            ]  # fmt: skip
            res.section(
                f"## Three brokers at N={n:,}\n\n"
                + md_table(["brokers", "steady p50 ms", "steady p99 ms", "drain /s"], rows)
            )
        if "autovacuum" in r:
            av = ("reloptions", "autovacuum_runs", "autovacuum_ms", "dead_at_end",
                  "heap_growth_bytes", "index_growth_bytes")  # fmt: skip
            rows = [
                [k, *(v[x] for x in av), v["lateness_ms"]["p50"], v["lateness_ms"]["p99"]]
                for k, v in r["autovacuum"].items()
            ]
            res.section(
                f"## Autovacuum of queen.log_timers at N={n:,}, {ns.steady_rate}/s for "
                f"{ns.av_seconds:g} s each\n\n"
                + md_table(["parameters", *av, "p50 ms", "p99 ms"], rows, digits=2)
            )


LOAD_COLUMNS = ("action", "loaded_at", "insert_s", "rows_per_s", "vacuum_analyze_s", "copy_s")


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
    if ns.keep_data and ns.database_url:
        raise SystemExit("--keep-data keeps an embedded server's directory: no --database-url")
    if ns.shared_buffers and ns.database_url:
        raise SystemExit("--shared-buffers sizes the embedded server: no --database-url")
    from queen_timers.db.embedded import SERVER_CONF

    res = Results("pending", ns)
    order: list[dict] = []
    # The embedded server's own setting unless --shared-buffers says otherwise (a kept data
    # directory sized by an earlier run goes back to it).
    shared_buffers = (
        None if ns.database_url else (ns.shared_buffers or SERVER_CONF["shared_buffers"])
    )
    async with Target(
        "pending",
        ns.database_url,
        keep=ns.keep_db,
        migrate=False,
        data_dir=ns.keep_data,
        shared_buffers=shared_buffers,
    ) as tgt:
        await res.record_server(tgt.server_url or tgt.url, tgt.embedded)
        import asyncpg

        admin = await asyncpg.connect(tgt.server_url)
        try:
            sb = await fetchrow(admin, BQ.pending_shared_buffers)
        finally:
            await admin.close()
        res.data["server"] = {
            "shared_buffers": sb["shown"],
            "shared_buffers_bytes": int(sb["bytes"]),
            "kept_data_dir": str(ns.keep_data) if ns.keep_data else None,
        }
        _say(ns, f"shared_buffers = {sb['shown']}")
        raws = await measure(tgt, sizes, ns, order)
    res.data["sizes"] = sizes
    res.data["prepared"] = {str(n): raws[n]["load"]["action"] for n in sizes}
    res.data["order"] = order
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
            "rounds",
            "phase_rounds",
            "tenants",
            "queues",
            "extras",
            "extras_at",
            "backoff_timers",
            "av_seconds",
            "shared_buffers",
            "warm",
        )
    }
    _summary(res, sizes, raws, ns)
    _plots(res, sizes, raws)
    res.finish()
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


def _size_arg(text: str) -> str:
    from .env import SIZE

    if not SIZE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a PostgreSQL size such as 6GB or 512MB: {text!r}")
    return text


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return v


def _extras_arg(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in out if x not in ("backoff", "brokers", "autovacuum")]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown extras: {', '.join(bad)}")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep-data",
        metavar="DIR",
        default=None,
        help="run the embedded server in DIR and keep it: each size's load is kept there as a "
        "template database (queen_bench_pending_tpl_<N>) and the next run with the same DIR "
        "copies it (CREATE DATABASE ... TEMPLATE, seconds) instead of loading again. A "
        "template is stale, and loaded again, when the schema changed (the stamp in its "
        "queen.system_state against this checkout's migrations), when --tenants, --queues, "
        "the load statement or the payload changed, or when it was loaded more than "
        f"{TEMPLATE_MAX_AGE_H:g} h ago (its first timers fall due a day after the load). "
        "Remove DIR to free the disk (10^7: ~4.7 GB per copy). DIR: at most 90 characters "
        "(the socket lives in it), and under directories the server's user can enter",
    )
    p.add_argument(
        "--shared-buffers",
        metavar="SIZE",
        type=_size_arg,
        default=None,
        help="the embedded server's shared_buffers, a PostgreSQL size (6GB), restarted to "
        "apply it (default: the embedded server's own, 256MB); recorded in the output",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="after the load or copy, read each size's heap into shared_buffers, as a server "
        "that has run long enough with a cache sized for its set holds it (pair with "
        "--shared-buffers larger than the heap; without --warm a copied template starts cold)",
    )
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
        "--rounds",
        type=_positive,
        default=10,
        help="alternated rounds the per-call figures are split over: each round visits "
        "every size, in order, then reversed in the next (10)",
    )
    p.add_argument(
        "--phase-rounds",
        type=_positive,
        default=2,
        help="alternated rounds of boot + steady + drain, each at full length (2: A B B A)",
    )
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
