"""soak: schedule and fire at a fixed rate R through the real broker, sampled every 100 ms.

Setup (stated in every summary): the fire runs in `--brokers` separate `queen serve
--transport none` processes (the real broker: service, sweeper, notifier); the bench process
schedules through the service facade of an in-process `Queen` with its sweeper off (what a
transport calls), so the broker's CPU is the sweeper's alone. Each timer is due `--delay`
seconds after its schedule, so the staging table holds about R * delay rows.

Ramp mode steps R up and stops after the first step the broker does not keep up with
(bench.stats.step_verdict states the definition). It reports:
- the rate at which autovacuum on queen.log_timers enters the profile (bench.stats:
  a worker seen on the table in > 5% of samples, or autovacuum > 5% of PostgreSQL CPU);
- the rate at which fire lateness p99 first doubles against the lowest step;
- the mean number of autovacuum workers the table occupies at each step.

With `--cpu-probe`, the CPU probe (bench/cpuprobe.py) runs through the steps: each
step also reports the share of its timers whose wait overlapped a window where the machine
itself ran slow (or the 100 ms after one), and the lateness of the others.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from . import harness, stats
from .cpuprobe import CpuProbe
from .env import Target
from .harness import Results
from .load import Scheduler, read_lateness, wait_drained
from .sampler import Sampler, aggregate, window

__all__ = ["run"]

TABLE = "queen.log_timers"
QUEUE = "bench-soak"
RAMP_STEP_S = 70.0  # > autovacuum_naptime (60 s): every step spans one launcher visit
FIXED_S = 180.0  # three autovacuum_naptime periods of steady state


async def run(ns) -> int:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.service import Queen
    from queen_timers.testing.broker import BrokerProcess

    rates = list(ns.rates) if ns.ramp else [ns.rate]
    step_s = ns.duration or (RAMP_STEP_S if ns.ramp else FIXED_S)
    res = Results("soak-ramp" if ns.ramp else "soak", ns)
    ident = Identity(subject="bench")
    async with Target("soak", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        env = {}
        if ns.sweeper_parallelism:
            env["QUEEN_SWEEPER_PARALLELISM"] = str(ns.sweeper_parallelism)
        brokers = [BrokerProcess(tgt.url, env=env) for _ in range(max(1, ns.brokers))]
        await asyncio.gather(*(b.start() for b in brokers))
        queen = Queen(database_url=tgt.url, sweeper=False, retention_interval_ms=0)
        await queen.start()
        sched = Scheduler(
            queen,
            ident,
            QUEUE,
            batch=ns.batch,
            partitions=ns.partitions,
            payload_bytes=ns.payload_bytes,
        )
        steps: list[dict] = []
        t_begin = time.time()
        t_mono = time.monotonic()
        sampler = Sampler(
            lambda: connect_one(tgt.url, role="bench-sampler"),
            TABLE,
            tgt.postmaster_pid(),
            [b.pid for b in brokers],
            extra=lambda: {"scheduled": sched.scheduled},
        )
        # With --cpu-probe: the windows where the machine itself ran slow, through the steps.
        probe = CpuProbe(enabled=getattr(ns, "cpu_probe", False))
        try:
            with probe:
                async with sampler:
                    for i, rate in enumerate(rates):
                        label = f"{rate}/s"
                        sampler.mark(label)
                        res.say(f"step {label} for {step_s:g} s")
                        load = await sched.paced(rate, step_s, ns.delay, f"r{i}-")
                        load["label"] = label
                        steps.append(load)
                        if ns.ramp and i + 1 < len(rates):
                            verdict = await _quick_verdict(tgt.url, load, ns.delay)
                            if verdict is not None:
                                res.say(f"{label}: not kept up ({verdict}); ramp stops here")
                                break
                            if time.monotonic() - t_mono + step_s > ns.budget:
                                res.say(f"the next step passes --budget {ns.budget:g} s; stop")
                                break
                    sampler.mark("drain")
                    left = await _drain(tgt.url, ns.delay + 30.0)
        finally:
            await queen.stop()
            await asyncio.gather(*(b.terminate() for b in brokers), return_exceptions=True)
        conn = await connect_one(tgt.url)
        try:
            fired = await read_lateness(conn, QUEUE, t_begin, sched.deliver)
        finally:
            await conn.close()
    analysis = analyse(steps, sampler.samples, fired, ns.delay, probe=probe)
    res.data.update(
        {
            "config": {
                "rates": rates,
                "step_seconds": step_s,
                "delay_s": ns.delay,
                "brokers": ns.brokers,
                "batch": ns.batch,
                "sweeper_parallelism": ns.sweeper_parallelism,
                "partitions": ns.partitions,
                "payload_bytes": ns.payload_bytes,
                "ramp": ns.ramp,
            },
            "scheduled": sched.scheduled,
            "refused": sched.refused,
            "schedule_errors": sched.errors[:20],
            "fired": len(fired),
            "pending_at_end": left,
            **analysis,
            "samples": sampler.samples,
        }
    )
    _write_summary(res, analysis, ns, step_s, sched, len(fired), left)
    res.finish()
    return 0


async def _quick_verdict(url: str, load: dict, delay: float) -> str | None:
    """During a ramp: did the step's generator reach its rate, and is the table not growing
    beyond what the rate explains (a backlog)? Full verdicts are computed after the run."""
    from queen_timers.db.pool import connect_one

    if (load["scheduled_rate"] or 0) < 0.95 * load["offered_rate"]:
        return f"load generator reached {load['scheduled_rate'] or 0:.0f}/s"
    conn = await connect_one(url)
    try:
        from .queries import BQ

        pending = await conn.fetchval(BQ.timers_pending_queue, QUEUE)
    finally:
        await conn.close()
    expected = load["offered_rate"] * delay
    if pending > expected + load["offered_rate"]:  # more than one second of backlog
        return f"{pending} timers pending, about {expected:.0f} expected"
    return None


async def _drain(url: str, timeout: float) -> int:
    from queen_timers.db.pool import connect_one

    conn = await connect_one(url)
    try:
        return await wait_drained(conn, QUEUE, timeout)
    finally:
        await conn.close()


def analyse(
    steps: list[dict],
    samples: list[dict],
    fired: dict[bytes, tuple[float, float]],
    delay: float,
    probe: CpuProbe | None = None,
) -> dict:
    """Per-step figures and the three headline rates, from the load, samples and lateness.
    With a `probe` that ran: each step's share of the time the machine ran slow, the share of
    its timers that waited through such a window (or the 100 ms after one), and the lateness
    of the others."""
    out_steps = []
    for st in steps:
        start, end = st["start_epoch"], st["end_epoch"]
        # timers due in this step's window, and their lateness (ms)
        due = [(d, f) for d, f in fired.values() if start <= d < end]
        late = [(f - d) * 1000.0 for d, f in due]
        due_by = [(d, f) for d, f in due if d < end - 1.0]
        fired_by_end = sum(1 for d, f in due_by if f <= end)
        lat = harness.summarize(late)
        machine = {}
        if probe is not None and probe.ran:
            share, clear = probe.split(due, late, wall=True)
            machine = {
                "cpu_slow_pct": 100.0
                * probe.slow_seconds(start, end, wall=True)
                / max(end - start, 1e-9),
                "timers_in_slow_windows_pct": 100.0 * share,
                "lateness_clear_ms": harness.summarize(clear),
            }
        agg = aggregate(window(samples, label=st["label"]), TABLE)
        verdict = stats.step_verdict(
            st["offered_rate"], st["scheduled_rate"], len(due_by), fired_by_end, lat["p99"]
        )
        out_steps.append(
            {
                "label": st["label"],
                "rate": st["offered_rate"],
                "scheduled": st["scheduled"],
                "scheduled_rate": st["scheduled_rate"],
                "due_in_step": len(due),
                "early": sum(1 for x in late if x < 0),
                "lateness_ms": lat,
                "kept_up": verdict.kept_up,
                "verdict": verdict.reason,
                "wal_bytes_per_timer": harness.per_unit(agg.get("wal_bytes", 0), st["scheduled"]),
                **machine,
                **agg,
            }
        )
    rates = [s["rate"] for s in out_steps]
    p99s = [s["lateness_ms"]["p99"] for s in out_steps]
    shares = [s.get("av_time_share") for s in out_steps]
    cpu_sh = [s.get("av_table_cpu_share_of_pg") for s in out_steps]
    kept = [s["rate"] for s in out_steps if s["kept_up"]]
    # Linear extrapolation (labelled as such in the summary): autovacuum seconds spent on the
    # table per timer over the whole run, and the rate at which that would keep autovacuum busy
    # on the table AV_SAMPLE_SHARE of the time.
    av_ms = sum(s.get("av_ms_total") or 0.0 for s in out_steps)
    n_timers = sum(s["scheduled"] for s in out_steps)
    av_us_per_timer = harness.per_unit(av_ms * 1000.0, n_timers) if av_ms > 0 else None
    extrapolated = (stats.AV_SAMPLE_SHARE / (av_us_per_timer / 1e6)) if av_us_per_timer else None
    return {
        "steps": out_steps,
        "headline": {
            "av_us_per_timer": av_us_per_timer,
            "extrapolated_profile_entry_rate": extrapolated,
            "autovacuum_enters_profile_at_rate": stats.profile_entry(rates, shares, cpu_sh),
            "lateness_p99_doubles_at_rate": stats.first_doubling(rates, p99s),
            "max_rate_kept_up": max(kept) if kept else None,
            # one worker at a time vacuums a table, so the busy share IS the mean number of
            # workers it occupies
            "mean_av_workers_on_table_by_rate": {
                s["label"]: s.get("av_time_share") for s in out_steps
            },
            "definitions": {
                "autovacuum_in_profile": "autovacuum works on queen.log_timers more than "
                f"{stats.AV_SAMPLE_SHARE:.0%} of the step's wall time "
                "(exact: pg_stat_user_tables.total_autovacuum_time on "
                "PostgreSQL >= 18; else the share of 100 ms samples "
                "showing a worker on it), or autovacuum workers on it "
                f"burn more than {stats.AV_CPU_SHARE:.0%} of all "
                "PostgreSQL CPU in the step",
                "mean_av_workers": "time-average of autovacuum workers on the table = its "
                "autovacuum busy share (a table is vacuumed by one worker at "
                "a time)",
                "p99_doubles": "first step whose fire-lateness p99 is at least twice the lowest "
                "step's (baseline floored at 5 ms)",
                "kept_up": "generator reached >= 95% of the rate, >= 99% of timers due in the "
                "step (until 1 s before its end) fired by its end, lateness p99 <= 1 s",
                "lateness": "segment created_at (clock_timestamp in the fire transaction) minus "
                "deliverAt, both PostgreSQL's clock; attributed to the step in which "
                "the timer was due",
            },
        },
    }


def _write_summary(
    res: Results, a: dict, ns, step_s: float, sched: Scheduler, fired: int, left: int
) -> None:
    h = a["headline"]
    par = (
        f" with QUEEN_SWEEPER_PARALLELISM={ns.sweeper_parallelism}"
        if ns.sweeper_parallelism
        else ""
    )
    us_per = "-" if h["av_us_per_timer"] is None else f"{h['av_us_per_timer']:.2f}"
    x = h["extrapolated_profile_entry_rate"]
    extra = "-" if x is None else f"{x:,.0f} timers/s"
    res.section(
        f"## Setup\n\nFire: {ns.brokers} `queen serve --transport none` process(es)"
        f"{par}. Schedules: "
        f"the bench process, through `Queen.timers_apply` (sweeper off), {ns.batch} ops per "
        f"call, up to 4 calls in flight. Each timer due {ns.delay:g} s after its schedule; "
        f"{step_s:g} s per step; payload ~{ns.payload_bytes} B; {ns.partitions} partition(s) "
        f"of queue `{QUEUE}`.\n\nScheduled {sched.scheduled:,}, fired and found in the log "
        f"{fired:,}, still pending after the drain {left}, refused {sched.refused}, "
        f"schedule errors {len(sched.errors)}."
    )
    for s in a["steps"]:
        lat, clear = s["lateness_ms"], s.get("lateness_clear_ms") or {}
        cpu, rate = s.get("cpu_cores", {}), s["scheduled_rate"]
        res.row(
            s["label"],
            **{
                "sched/s": rate,
                "late p50 ms": lat["p50"],
                "late p99 ms": lat["p99"],
                "late max ms": lat["max"],
                "late p99 ms clear of slow windows": clear.get("p99"),
                "timers in slow windows %": s.get("timers_in_slow_windows_pct"),
                "machine slow %": s.get("cpu_slow_pct"),
                "AV busy on table % (exact)": _pct(s.get("av_time_share_exact")),
                "AV seen on table % samples": _pct(s.get("av_sample_share")),
                "AV on table % PG CPU": _pct(s.get("av_table_cpu_share_of_pg")),
                "AV all % PG CPU": _pct(s.get("av_cpu_share_of_pg")),
                "AV workers on table (mean)": s.get("av_time_share"),
                "AV workers, all tables (mean)": s.get("av_time_share_all_tables_exact"),
                "autovacuums": (s.get("table_delta") or {}).get("autovacuum_count"),
                "ms per autovacuum": s.get("av_ms_per_run"),
                "HOT %": _pct(s.get("hot_ratio")),
                "same-page %": _pct(s.get("same_page_ratio")),
                "dead tup max": s.get("n_dead_tup_max"),
                "WAL B/timer": s.get("wal_bytes_per_timer"),
                "broker cores": cpu.get("broker"),
                "PG cores (fire)": cpu.get("pg_backends_fire"),
                "PG cores (schedule)": cpu.get("pg_backends_schedule"),
                "PG cores (all)": s.get("cpu_cores_pg_total"),
                "AV cores": cpu.get("pg_autovacuum"),
                "bench cores": cpu.get("bench"),
                "broker µs/timer": _us(cpu.get("broker"), rate),
                "PG fire µs/timer": _us(cpu.get("pg_backends_fire"), rate),
                "kept up": "yes" if s["kept_up"] else f"no: {s['verdict']}",
            },
        )
    res.section(
        "## Headline\n\n"
        f"- autovacuum on `queen.log_timers` enters the profile at: "
        f"**{_r(h['autovacuum_enters_profile_at_rate'])}** "
        f"({h['definitions']['autovacuum_in_profile']})\n"
        f"- fire lateness p99 first doubles at: **{_r(h['lateness_p99_doubles_at_rate'])}** "
        f"({h['definitions']['p99_doubles']})\n"
        f"- autovacuum time on the table per timer over the whole run: {us_per} µs; linear "
        "extrapolation of the rate at which autovacuum would be busy on the table "
        f"{stats.AV_SAMPLE_SHARE:.0%} of the time: {extra} (an extrapolation, not a "
        "measurement)\n"
        f"- highest rate kept up: **{_r(h['max_rate_kept_up'])}** "
        f"({h['definitions']['kept_up']})\n"
        "- mean autovacuum workers on the table per step: "
        + ", ".join(
            f"{k}: {v:.3f}" if v is not None else f"{k}: -"
            for k, v in h["mean_av_workers_on_table_by_rate"].items()
        )
        + f" ({h['definitions']['mean_av_workers']})"
        + f"\n- lateness: {h['definitions']['lateness']}\n"
        "- CPU in cores (1.0 = one core busy). PG cores (fire) = the backends of the broker "
        "process(es); (schedule) = the backends of the bench's scheduling pool; (all) = every "
        "PostgreSQL process. AV cores include PostgreSQL processes that exited during the step "
        "(in this bench: autovacuum workers). Everything shares the same 2 cores.\n"
        "- machine slow % = the share of the step in which bench/cpuprobe.py found the "
        "machine's own CPUs running at a third of their speed or less (or taken by the host); "
        "timers in slow windows % = the timers whose wait overlapped such a window or the "
        "100 ms after it; late p99 clear of slow windows = the others' (empty without "
        "--cpu-probe).\n"
    )


def _us(cores, rate):
    """CPU microseconds per timer from cores at a rate."""
    return None if cores is None or not rate else cores * 1e6 / rate


def _pct(v):
    return None if v is None else v * 100


def _r(v) -> str:
    return "not reached in the steps run" if v is None else f"{v:,.0f} timers/s"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=int, default=500, help="timers/s in fixed mode (500)")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds of a fixed-rate run, or of each ramp step (fixed: 180; "
        "ramp: 70, more than autovacuum_naptime so that every step can "
        "see a vacuum)",
    )
    p.add_argument(
        "--delay", type=float, default=2.0, help="seconds from schedule to deliver_at (2)"
    )
    p.add_argument("--ramp", action="store_true", help="step the rate up (see --rates)")
    p.add_argument(
        "--rates",
        type=harness.positive_ints,
        default=[250, 500, 1000, 2000, 3000, 4000, 6000, 8000],
        help="ramp steps, comma separated (250,500,1000,2000,3000,4000,6000,8000); "
        "the ramp "
        "stops at the first step the broker does not keep up with",
    )
    p.add_argument("--brokers", type=int, default=1, help="broker processes that fire (1)")
    p.add_argument(
        "--budget",
        type=float,
        default=500.0,
        help="ramp: start no step that would end later than this many seconds "
        "after the first (500, so the default run stays under 10 minutes)",
    )
    p.add_argument(
        "--sweeper-parallelism",
        type=int,
        default=None,
        help="QUEEN_SWEEPER_PARALLELISM of the broker process(es) (their default)",
    )
    p.add_argument(
        "--batch", type=int, default=100, help="schedule ops per timers_apply call (100)"
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="destination partitions the timers are spread over (1)",
    )
    p.add_argument("--payload-bytes", type=int, default=100, help="payload size (100)")
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py through the steps (off by default: ~5%% of each core)",
    )


async def main(ns: argparse.Namespace) -> int:
    return await run(ns)
