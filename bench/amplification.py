"""amplification: what the non-HOT claim costs, and what it buys.

Variants of the staging table, each on its own bench database (never a broker's):
  A  the design: index (shard, visible_at), fillfactor 70 (migrations/025 as is);
  B  the same index, fillfactor 100 (bench/sql/q_amp.sql, then VACUUM FULL);
  C  the rejected alternative: index (shard, deliver_at) and a probe and claim that filter
     leased rows themselves (bench/sql/variant_c.sql); the claim can then be HOT.
A variant is (re)applied after every boot on its database, since a boot re-applies 025.

Three measurements per variant:
1. phases: N timers scheduled (due at once), claimed, fired, then the table vacuumed, one phase
   after the other with autovacuum off on the timer and log tables and a CHECKPOINT first;
   WAL bytes per timer of each phase = WAL insert position delta / N; HOT share of the
   claim's updates from pg_stat_user_tables (read after the 1 s statistics flush).
2. sustained: a broker process fires while the bench schedules at a fixed rate (autovacuum
   on, defaults of the schema), sampled every 100 ms: WAL per timer, HOT ratio, heap and index
   growth, dead tuples, autovacuum runs.
3. backoff: K timers in permanent backoff (due long ago, claimed_until an hour ahead, token
   NULL) plus a few due ones; one probe (log_timers_due_v1) and one claim (log_timers_claim_v3,
   200 rows) measured with EXPLAIN (ANALYZE, BUFFERS) inside a transaction rolled back, the
   table vacuumed between repetitions so each sees the same state. Median of the repetitions.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import time

from . import harness, stats
from .env import Target, fetchrow, runtime
from .harness import Results, md_records
from .load import Scheduler, wait_drained
from .queries import BQ, sql_file
from .sampler import Sampler, aggregate, stats_settled

__all__ = ["VARIANTS", "run"]

TABLE = "queen.log_timers"
QUEUE = "bench-amp"
VARIANTS = {
    "A": "index (shard, visible_at), fillfactor 70 (the design)",
    "B": "index (shard, visible_at), fillfactor 100",
    "C": "index (shard, deliver_at), claim filters leased rows (rejected alternative)",
}


async def apply_variant(conn, variant: str) -> None:
    if variant == "B":
        await conn.execute(BQ.variant_b_fillfactor)
        await conn.execute(BQ.vacuum_full_timers)
    elif variant == "C":
        await conn.execute(sql_file("variant_c.sql"))


async def run(ns) -> int:
    from queen_timers.db.pool import connect_one

    variants = [v.strip().upper() for v in ns.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        print(f"bench: unknown variant(s) {bad}; known: {', '.join(VARIANTS)}")
        return 2
    res = Results("amplification", ns)
    out: dict[str, dict] = {v: {"description": VARIANTS[v]} for v in variants}
    async with Target("amp", ns.database_url, ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.server, tgt.embedded)
        for v in variants:
            url = await tgt.database(v.lower())
            res.say(f"variant {v}: phases ({ns.timers:,} timers)")
            out[v]["phases"] = await measure_phases(url, v, ns.timers)
            res.say(f"variant {v}: sustained {ns.sustain_rate}/s for {ns.sustain_seconds:g} s")
            out[v]["sustained"] = await measure_sustained(tgt, url, v, ns)
            res.say(f"variant {v}: backoff K={ns.backoff}")
            out[v]["backoff"] = await measure_backoff(url, v, ns.backoff, ns.due, ns.repeats)
            conn = await connect_one(url)
            try:
                out[v]["reloptions"] = await conn.fetchval(BQ.timers_reloptions)
                out[v]["indexes"] = await conn.fetchval(BQ.timers_indexes)
            finally:
                await conn.close()
    res.data["config"] = {
        "variants": variants,
        "timers": ns.timers,
        "sustain_seconds": ns.sustain_seconds,
        "sustain_rate": ns.sustain_rate,
        "backoff_k": ns.backoff,
        "due": ns.due,
        "repeats": ns.repeats,
    }
    res.data["variants"] = out
    res.data["trade"] = trade_verdict(out)
    _summary(res, out, ns)
    res.finish()
    return 0


async def measure_phases(url: str, variant: str, n: int) -> dict:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.service import Queen
    from queen_timers.timers import fire

    queen = Queen(database_url=url, sweeper=False, sweeper_notify=False, retention_interval_ms=0)
    await queen.start()  # boots: re-applies 025, so the variant goes on after it
    conn = await connect_one(url)
    try:
        await apply_variant(conn, variant)
        await conn.execute(BQ.autovacuum_off)
        await conn.execute(BQ.checkpoint)
        sched = Scheduler(queen, Identity(subject="bench"), QUEUE, batch=256)
        lsn = [await conn.fetchval(BQ.wal_insert_lsn)]
        t0 = time.perf_counter()
        left = n
        while left > 0:  # 256 ops per call (the per-call maximum), 4 calls in flight
            chunk = [
                sched.ops(min(256, left - i), 0.0, "p") for i in range(0, min(1024, left), 256)
            ]
            await asyncio.gather(*(sched.apply(b) for b in chunk))
            left -= sum(len(c) for c in chunk)
        t_sched = time.perf_counter() - t0
        lsn.append(await conn.fetchval(BQ.wal_insert_lsn))
        await stats_settled(1.5)
        st = [await conn.fetchrow(BQ.table_stats, TABLE)]
        sizes_sched = await fetchrow(conn, BQ.relation_sizes, TABLE)
        rt = runtime(queen)
        shards = list(range(64))
        claimed_batches = []
        t0 = time.perf_counter()
        total = 0
        while total < sched.scheduled:
            got = await fire.claim(rt, shards=shards, max_rows=200)
            if not got:
                break
            claimed_batches.append(got)
            total += len(got)
        t_claim = time.perf_counter() - t0
        lsn.append(await conn.fetchval(BQ.wal_insert_lsn))
        await stats_settled(1.5)
        st.append(await conn.fetchrow(BQ.table_stats, TABLE))
        t0 = time.perf_counter()
        fired = 0
        for b in claimed_batches:
            rep = await fire.fire_claimed(rt, b)
            fired += getattr(rep, "fired", 0)
        t_fire = time.perf_counter() - t0
        lsn.append(await conn.fetchval(BQ.wal_insert_lsn))
        await stats_settled(1.5)
        st.append(await conn.fetchrow(BQ.table_stats, TABLE))
        sizes_fired = await fetchrow(conn, BQ.relation_sizes, TABLE)
        t0 = time.perf_counter()
        await conn.execute(BQ.vacuum_timers)
        t_vac = time.perf_counter() - t0
        lsn.append(await conn.fetchval(BQ.wal_insert_lsn))
        sizes_vac = await fetchrow(conn, BQ.relation_sizes, TABLE)
        await conn.execute(BQ.autovacuum_on)
    finally:
        await conn.close()
        await queen.stop()
    return phase_figures(
        n=sched.scheduled,
        claimed=total,
        fired=fired,
        lsn=lsn,
        st=st,
        seconds={"schedule": t_sched, "claim": t_claim, "fire": t_fire, "vacuum": t_vac},
        sizes={
            "after_schedule": dict(sizes_sched),
            "after_fire": dict(sizes_fired),
            "after_vacuum": dict(sizes_vac),
        },
    )


def phase_figures(
    *, n: int, claimed: int, fired: int, lsn: list, st: list, seconds: dict, sizes: dict
) -> dict:
    """WAL per timer by phase from four+one WAL positions, and the claim's HOT share from the
    table counters read after scheduling (st[0]), claiming (st[1]) and firing (st[2])."""
    names = ["schedule", "claim", "fire", "vacuum"]
    wal = {k: stats.wal_delta(lsn[i], lsn[i + 1]) for i, k in enumerate(names)}
    per = {k: harness.per_unit(v, n) for k, v in wal.items()}
    per["total_without_vacuum"] = harness.per_unit(wal["schedule"] + wal["claim"] + wal["fire"], n)
    per["total_with_vacuum"] = harness.per_unit(sum(wal.values()), n)
    s0, s1, s2 = (dict(x) if x is not None else {} for x in st[:3])
    upd = stats.counter_delta(s0, s1, "n_tup_upd")
    hot = stats.counter_delta(s0, s1, "n_tup_hot_upd")
    newpage = (
        stats.counter_delta(s0, s1, "n_tup_newpage_upd") if "n_tup_newpage_upd" in s1 else None
    )
    return {
        "timers": n,
        "claimed": claimed,
        "fired": fired,
        "wal_bytes": wal,
        "wal_bytes_per_timer": per,
        "claim_updates": upd,
        "claim_hot_updates": hot,
        "claim_hot_ratio": stats.hot_ratio(upd, hot),
        "claim_same_page_ratio": stats.same_page_ratio(upd, newpage),
        "fire_deletes": stats.counter_delta(s1, s2, "n_tup_del"),
        "seconds": seconds,
        "sizes": sizes,
    }


async def measure_sustained(tgt: Target, url: str, variant: str, ns) -> dict:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.service import Queen
    from queen_timers.testing.broker import BrokerProcess

    broker = BrokerProcess(url)
    await broker.start()
    queen = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await queen.start()
    conn = await connect_one(url)
    try:
        await apply_variant(conn, variant)  # after both boots
        # every variant starts the sustained run from an empty, rewritten table
        await conn.execute(BQ.vacuum_full_timers)
        await conn.execute(BQ.checkpoint)
        sched = Scheduler(queen, Identity(subject="bench"), QUEUE)
        sampler = Sampler(
            lambda: connect_one(url, role="bench-sampler"),
            TABLE,
            tgt.postmaster_pid(),
            [broker.pid],
        )
        async with sampler:
            load = await sched.paced(ns.sustain_rate, ns.sustain_seconds, 2.0, "s")
            left = await wait_drained(conn, QUEUE, 40.0)
            await stats_settled(1.5)
    finally:
        await conn.close()
        await queen.stop()
        await broker.terminate()
    samples = sampler.samples
    agg = aggregate(samples, TABLE)
    first = samples[0] if samples else {"heap_bytes": 0, "index_bytes": 0}
    return {
        "rate": ns.sustain_rate,
        "seconds": ns.sustain_seconds,
        "scheduled": load["scheduled"],
        "scheduled_rate": load["scheduled_rate"],
        "pending_after_drain": left,
        "wal_bytes_per_timer": harness.per_unit(agg.get("wal_bytes", 0), load["scheduled"]),
        "heap_bytes_start": first["heap_bytes"],
        "index_bytes_start": first["index_bytes"],
        **agg,
        "series": [
            {
                "t": s["t"],
                "heap": s["heap_bytes"],
                "index": s["index_bytes"],
                "dead": (s["tab"] or {}).get("n_dead_tup"),
                "av": sum(1 for w in s["av"] if w.get("table") == TABLE),
            }
            for s in samples[::5]
        ],
    }


async def measure_backoff(
    url: str, variant: str, ks: list[int], due: int, repeats: int
) -> list[dict]:
    from queen_timers.db.pool import connect_one

    conn = await connect_one(url)
    out = []
    try:
        if variant == "C":  # idempotent; B's fillfactor and A need nothing after a boot
            await apply_variant(conn, variant)
        for k in ks:
            now = dt.datetime.fromtimestamp(await conn.fetchval(BQ.now_epoch), dt.UTC)
            await conn.execute(BQ.truncate_timers)
            if k:
                await conn.execute(BQ.insert_backoff, k, now)
            await conn.execute(BQ.insert_due, due, now)
            await conn.execute(BQ.vacuum_analyze_timers)
            probes, claims, walls = [], [], []
            for _ in range(repeats):
                await conn.execute(BQ.vacuum_timers)
                at = dt.datetime.fromtimestamp(await conn.fetchval(BQ.now_epoch), dt.UTC)
                tr = conn.transaction()
                await tr.start()
                try:
                    t0 = time.perf_counter()
                    p = harness.explained(await conn.fetchval(BQ.explain_due, at))
                    c = harness.explained(await conn.fetchval(BQ.explain_claim, at, 200))
                    walls.append((time.perf_counter() - t0) * 1000.0)
                finally:
                    await tr.rollback()
                probes.append(p)
                claims.append(c)
            out.append(backoff_figures(k, probes, claims, walls))
    finally:
        await conn.close()
    return out


def backoff_figures(k: int, probes: list[dict], claims: list[dict], walls: list[float]) -> dict:
    med = harness.median
    return {
        "k": k,
        "repeats": len(probes),
        "probe_ms": med([p["ms"] for p in probes]),
        "probe_buffers": med([p["buffers"] for p in probes]),
        "claim_ms": med([c["ms"] for c in claims]),
        "claim_buffers": med([c["buffers"] for c in claims]),
        "claim_rows": med([c["rows"] or 0 for c in claims]),
        "pass_ms": med([p["ms"] + c["ms"] for p, c in zip(probes, claims)]),
        "pass_buffers": med([p["buffers"] + c["buffers"] for p, c in zip(probes, claims)]),
        "pass_wall_ms": med(walls),
    }


def trade_verdict(out: dict) -> dict:
    """Does the cost of a pass grow with K? Ratio of the largest K's pass to K=0's, per
    variant, in buffers (deterministic) and in ms."""
    v = {}
    for name, d in out.items():
        rows = d.get("backoff") or []
        if len(rows) < 2:
            continue
        lo, hi = rows[0], rows[-1]
        v[name] = {
            "k_low": lo["k"],
            "k_high": hi["k"],
            "buffers_ratio": stats.growth_ratio(lo["pass_buffers"], hi["pass_buffers"]),
            "ms_ratio": stats.growth_ratio(lo["pass_ms"], hi["pass_ms"]),
        }
    return v


def _summary(res: Results, out: dict, ns) -> None:
    res.section(
        "## Variants\n\n"
        + "\n".join(
            f"- **{v}**: {d['description']}. Applied: `{d.get('indexes')}`; reloptions "
            f"`{d.get('reloptions')}`"
            for v, d in out.items()
        )
    )
    mib = 2**20
    phases = []
    for v, d in out.items():
        p, w = d["phases"], d["phases"]["wal_bytes_per_timer"]
        phases.append(
            {
                "variant": v,
                "schedule B": w["schedule"],
                "claim B": w["claim"],
                "fire B": w["fire"],
                "total B": w["total_without_vacuum"],
                "then VACUUM B": w["vacuum"],
                "claim HOT %": (p["claim_hot_ratio"] or 0) * 100,
                "claim same-page %": _pct(p.get("claim_same_page_ratio")),
                "heap MiB after schedule": p["sizes"]["after_schedule"]["heap_bytes"] / mib,
                "index MiB after schedule": p["sizes"]["after_schedule"]["index_bytes"] / mib,
                "index MiB after fire": p["sizes"]["after_fire"]["index_bytes"] / mib,
            }
        )
    res.section(
        f"## WAL per timer, by phase ({ns.timers:,} timers due at once; autovacuum off, "
        "CHECKPOINT first)\n\n" + md_records(phases)
    )
    sustained = []
    for v, d in out.items():
        s = d["sustained"]
        sustained.append(
            {
                "variant": v,
                "sched/s": s["scheduled_rate"],
                "WAL B/timer": s["wal_bytes_per_timer"],
                "HOT %": _pct(s.get("hot_ratio")),
                "same-page %": _pct(s.get("same_page_ratio")),
                **{
                    f"{what} MiB {at}": s.get(f"{what}_bytes_{at}", 0) / mib
                    for what in ("heap", "index")
                    for at in ("start", "max", "end")
                },
                "dead tup max": s.get("n_dead_tup_max"),
                "autovacuums": (s.get("table_delta") or {}).get("autovacuum_count"),
                "AV busy on table % of time": _pct(s.get("av_time_share")),
            }
        )
    res.section(
        f"## Sustained run ({ns.sustain_rate}/s for {ns.sustain_seconds:g} s, each due 2 s "
        "later, one broker process firing, schema autovacuum settings)\n\n" + md_records(sustained)
    )
    keys = ("probe_ms", "probe_buffers", "claim_ms", "claim_buffers", "claim_rows", "pass_ms",
            "pass_buffers")  # fmt: skip
    backoff = [
        {"variant": v, "K": b["k"], **{k: b[k] for k in keys}}
        for v, d in out.items()
        for b in d["backoff"]
    ]
    res.section(
        f"## The backoff trade: one probe + one claim pass with K timers in backoff and "
        f"{ns.due} due (median of {ns.repeats}, EXPLAIN ANALYZE BUFFERS, rolled back)\n\n"
        + md_records(backoff, digits=2)
    )
    tv = res.data.get("trade", {})
    lines = []
    for v, t in tv.items():
        lines.append(
            f"- {v}: K={t['k_high']:,} vs K={t['k_low']:,}: buffers x"
            f"{t['buffers_ratio'] or 0:.2f}, time x{t['ms_ratio'] or 0:.2f}"
        )
    res.section("## Does the pass cost grow with K?\n\n" + "\n".join(lines))


def _pct(v):
    return None if v is None else v * 100


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variants", default="A,B,C", help="variants to run (A,B,C)")
    p.add_argument("--timers", type=int, default=20000, help="timers per phase measurement (20000)")
    p.add_argument(
        "--sustain-seconds",
        type=float,
        default=75.0,
        help="seconds of the sustained schedule+fire run per variant (75: more "
        "than autovacuum_naptime, so autovacuum visits each variant)",
    )
    p.add_argument(
        "--sustain-rate", type=int, default=1000, help="timers/s of the sustained run (1000)"
    )
    p.add_argument(
        "--backoff",
        type=harness.ints,
        default=[0, 1000, 10000, 100000],
        help="K values: timers in permanent backoff (0,1000,10000,100000)",
    )
    p.add_argument(
        "--due",
        type=int,
        default=200,
        help="due timers the claim pass finds besides the backoff rows (200)",
    )
    p.add_argument(
        "--repeats", type=int, default=15, help="claim passes measured per (variant, K) (15)"
    )


async def main(ns: argparse.Namespace) -> int:
    return await run(ns)
