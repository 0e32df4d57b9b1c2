"""peers: the same two workloads through our broker and through its peers, same PostgreSQL.

Workloads: burst (N timers due at one instant, scheduled ahead of it) and steady (R timers/s
for S seconds, each due d seconds after scheduling). Systems, each on its own fresh database
of the same server, one after the other:
- floor: a hand-written asyncpg claim+delete loop on a table of the staging table's shape
  (bench/peer_drivers/floor_driver.py);
- queen: one `queen serve --transport none` process fires; the bench schedules through
  `Queen.timers_apply`; delivery = the log segment's created_at;
- procrastinate: deferred jobs with schedule_at, two workers (bench/.peers/procrastinate/.venv,
  pip);
- pgboss: jobs with startAfter, one work() loop (bench/.peers/node_modules, npm);
- pgqueuer: jobs with execute_after, one QueueManager on one connection, batch size 100, its
  autovacuum profile (bench/.peers/pgqueuer/.venv, pip).
Each peer is installed on demand, the first time a run names it (--no-install skips it).
Lateness = delivery instant - due instant; throughput of a burst = delivered / (last delivery -
due instant); of the steady run = delivered / (last - first delivery). Ratios are to the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from . import harness
from .cpuprobe import CpuProbe
from .env import Target
from .harness import REPO_ROOT, Results, fmt
from .load import Scheduler, read_lateness, wait_drained

__all__ = ["run", "workload_figures"]

PEERS_DIR = REPO_ROOT / "bench" / ".peers"
DRIVERS = REPO_ROOT / "bench" / "peer_drivers"
BURST_MARGIN_S = 10.0  # the burst's due instant is this far after its scheduling starts
PGBOSS_SPEC = "pg-boss@10"  # the major the driver was written against
PGQUEUER_SPEC = "pgqueuer>=1.6,<2"  # the release the driver was written against: 1.6.0
QUEUE = "bench-peers"
SYSTEMS = ("floor", "queen", "pgboss", "procrastinate", "pgqueuer")  # a run's default, in order


def conn_parts(url: str) -> dict:
    p = urllib.parse.urlsplit(url)
    q = dict(urllib.parse.parse_qsl(p.query))
    return {
        "host": q.get("host") or p.hostname or "localhost",
        "port": int(q.get("port") or p.port or 5432),
        "user": urllib.parse.unquote(p.username or q.get("user") or "postgres"),
        "password": urllib.parse.unquote(p.password or q.get("password") or ""),
        "database": p.path.lstrip("/") or q.get("dbname") or "postgres",
    }


def conninfo(url: str) -> str:
    c = conn_parts(url)
    parts = [
        f"host={c['host']}",
        f"port={c['port']}",
        f"user={c['user']}",
        f"dbname={c['database']}",
    ]
    if c["password"]:
        parts.append(f"password={c['password']}")
    return " ".join(parts)


# Python peers: system -> (what pip installs, the module that proves it is there). Each lives
# in a venv of its own, bench/.peers/<system>/.venv, so that their dependencies never meet.
PIP_PEERS = {
    "procrastinate": (["procrastinate"], "procrastinate"),
    "pgqueuer": ([PGQUEUER_SPEC, "asyncpg"], "pgqueuer"),
}


def peer_python(system: str) -> Path:
    """The interpreter of a Python peer's own venv."""
    return PEERS_DIR / system / ".venv" / "bin" / "python"


def peer_command(system: str) -> list[str]:
    """The command line that runs a Python peer's driver (its config JSON is appended)."""
    return [str(peer_python(system)), str(DRIVERS / f"{system}_driver.py")]


def ensure_pip_peer(system: str, install: bool) -> tuple[list[str] | None, str]:
    """The driver's command line of a Python peer, installing the peer into its venv first
    when it is missing (unless `install` is false); or None and the reason."""
    packages, module = PIP_PEERS[system]
    py = peer_python(system)
    venv = py.parents[1]
    ok = (
        py.exists()
        and subprocess.run([str(py), "-c", f"import {module}"], capture_output=True).returncode == 0
    )
    if ok:
        return peer_command(system), "installed"
    where = venv.relative_to(REPO_ROOT)
    if not install:
        return None, f"{system} not installed in {where} (--no-install)"
    print(f"bench: installing {' '.join(packages)} into {where} (pip) ...", flush=True)
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"could not create a venv: {r.stderr.strip()[-300:]}"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", *packages], capture_output=True, text=True
    )
    if r.returncode != 0:
        return None, f"pip install {' '.join(packages)} failed: {r.stderr.strip()[-300:]}"
    return peer_command(system), "installed now"


def ensure_pgboss(install: bool) -> tuple[str | None, str]:
    node = shutil.which("node")
    if node is None:
        return None, "Node.js not found on PATH"
    if (PEERS_DIR / "node_modules" / "pg-boss" / "package.json").exists():
        return node, "installed"
    if not install:
        return None, "pg-boss not installed in bench/.peers (--no-install)"
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm not found on PATH"
    print(f"bench: installing {PGBOSS_SPEC} into bench/.peers (npm) ...", flush=True)
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    pkg = PEERS_DIR / "package.json"
    if not pkg.exists():
        pkg.write_text('{"name": "queen-bench-peers", "private": true, "version": "0.0.0"}\n')
    r = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", PGBOSS_SPEC],
        cwd=PEERS_DIR,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        return None, f"npm install {PGBOSS_SPEC} failed: {r.stderr.strip()[-300:]}"
    return node, "installed now"


async def _driver(cmd: list[str], cfg: dict, timeout: float, env: dict | None = None) -> dict:
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        json.dumps(cfg),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(REPO_ROOT),
        env={**os.environ, **(env or {})},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout + 60.0)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {
            "scheduled": cfg["n"],
            "delivered": 0,
            "pairs": [],
            "errors": ["driver did not exit"],
        }
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if not lines:
        return {
            "scheduled": cfg["n"],
            "delivered": 0,
            "pairs": [],
            "errors": [f"driver exit {proc.returncode}: {err.decode()[-500:]}"],
        }
    try:
        return json.loads(lines[-1])
    except ValueError as e:
        return {
            "scheduled": cfg["n"],
            "delivered": 0,
            "pairs": [],
            "errors": [f"driver output unreadable: {e}"],
        }


async def _queen(url: str, cfg: dict, timeout: float) -> dict:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.service import Queen
    from queen_timers.testing.broker import BrokerProcess

    broker = BrokerProcess(url)
    await broker.start()
    queen = Queen(database_url=url, sweeper=False, retention_interval_ms=0)
    await queen.start()
    sched = Scheduler(queen, Identity(subject="bench"), QUEUE, batch=256)
    errors: list[str] = []
    t_begin = time.time()
    try:
        n = cfg["n"]
        if cfg["workload"] == "burst":
            left = n
            while left > 0:
                delay_ms = max(0.0, (cfg["due"] - time.time()) * 1000.0)
                chunk = [
                    sched.ops(min(256, left - i), delay_ms, "b")
                    for i in range(0, min(1024, left), 256)
                ]
                await asyncio.gather(*(sched.apply(c) for c in chunk))
                left -= sum(len(c) for c in chunk)
        else:
            await sched.paced(cfg["rate"], cfg["seconds"], cfg["delay"], "s")
        conn = await connect_one(url)
        try:
            left = await wait_drained(conn, QUEUE, timeout)
            if left:
                errors.append(f"timeout: {left} pending")
            fired = await read_lateness(conn, QUEUE, t_begin, sched.deliver)
        finally:
            await conn.close()
    finally:
        await queen.stop()
        await broker.terminate()
    errors += sched.errors[:5]
    return {
        "scheduled": sched.scheduled,
        "delivered": len(fired),
        "pairs": list(fired.values()),
        "errors": errors,
    }


def workload_figures(pairs: list, scheduled: int, workload: str, due: float | None) -> dict:
    """Throughput and lateness of one system on one workload, from (due, delivered) pairs."""
    late = [(at - d) * 1000.0 for d, at in pairs]
    lat = harness.summarize(late)
    if not pairs:
        return {
            "scheduled": scheduled,
            "delivered": 0,
            "throughput": None,
            "lateness_ms": lat,
            "early": 0,
        }
    last = max(at for _, at in pairs)
    first = min(at for _, at in pairs)
    if workload == "burst":
        thr = harness.rate(len(pairs), last - (due if due is not None else first))
    else:
        thr = harness.rate(len(pairs), last - first)
    # Not all delivered within the timeout: the percentiles cover the delivered ones only and
    # are lower bounds of the truth (the missing ones are later than every one counted).
    return {
        "scheduled": scheduled,
        "delivered": len(pairs),
        "throughput": thr,
        "lateness_ms": lat,
        "early": sum(1 for x in late if x < -1.0),
        "censored": len(pairs) < scheduled,
    }


def machine_figures(probe: CpuProbe, pairs: list) -> dict:
    """What the CPU probe saw while one system ran one workload: the share of the run the
    machine itself ran slow, the share of the timers that waited through such a window (or the
    100 ms after one), and the lateness of the others."""
    if not probe.ran:
        return {}
    late = [(at - d) * 1000.0 for d, at in pairs]
    share, clear = probe.split([(d, at) for d, at in pairs], late, wall=True)
    return {
        "machine_slow_pct": probe.summary()["slow_share_pct"],
        "in_slow_windows_pct": 100.0 * share,
        "lateness_clear_ms": harness.summarize(clear),
    }


def with_ratios(rows: dict) -> dict:
    """Ratios to the floor: throughput (system / floor) and lateness p50/p99 (system / floor)."""
    floor = rows.get("floor")
    for r in rows.values():
        if floor is None or r.get("skipped"):
            continue
        ft, st = floor.get("throughput"), r.get("throughput")
        r["throughput_vs_floor"] = (st / ft) if ft and st else None
        for q in ("p50", "p99"):
            fl = floor["lateness_ms"].get(q)
            sl = r["lateness_ms"].get(q)
            r[f"{q}_vs_floor"] = (sl / fl) if fl and sl is not None and fl > 0 else None
    return rows


async def run(ns) -> int:
    systems = [s.strip() for s in ns.systems.split(",") if s.strip()]
    res = Results("peers", ns)
    install = not ns.no_install
    available: dict[str, tuple[list[str] | None, dict, str]] = {}
    for s in systems:
        if s == "floor":
            available[s] = ([sys.executable, "-m", "bench.peer_drivers.floor_driver"], {}, "")
        elif s in PIP_PEERS:
            cmd, why = ensure_pip_peer(s, install)
            available[s] = (cmd, {}, why)
        elif s == "pgboss":
            node, why = ensure_pgboss(install)
            available[s] = (
                [node, str(DRIVERS / "pgboss_driver.cjs")] if node else None,
                {"NODE_PATH": str(PEERS_DIR / "node_modules")},
                why,
            )
        elif s == "queen":
            available[s] = (["(in-process)"], {}, "")
        else:
            print(f"bench: unknown system {s!r}")
            return 2
    for s, (cmd, _, why) in available.items():
        if cmd is None:
            print(f"bench: skipping {s}: {why}")
    workloads = [
        ("burst", {"n": ns.burst}),
        (
            "steady",
            {
                "n": int(ns.steady_rate * ns.steady_seconds),
                "rate": ns.steady_rate,
                "seconds": ns.steady_seconds,
                "delay": ns.delay,
            },
        ),
    ]
    results: dict[str, dict] = {}
    async with Target("peers", ns.database_url, ns.keep_db, migrate=False) as tgt:
        await res.record_server(tgt.server, tgt.embedded)
        for wname, base in workloads:
            rows: dict[str, dict] = {}
            for s in systems:
                cmd, env, why = available[s]
                if cmd is None:
                    rows[s] = {"skipped": why}
                    continue
                url = await tgt.database(f"{wname}_{s}")
                cfg = {"workload": wname, "timeout": ns.peer_timeout, **base}
                if wname == "burst":
                    cfg["due"] = time.time() + BURST_MARGIN_S
                print(f"bench: peers {wname} on {s} ...", flush=True)
                t0 = time.monotonic()
                with CpuProbe(enabled=getattr(ns, "cpu_probe", False)) as probe:
                    if s == "queen":
                        out = await _queen(url, cfg, ns.peer_timeout)
                    else:
                        c = conn_parts(url)
                        cfg.update(
                            {
                                "url": url,
                                "conninfo": conninfo(url),
                                "host": c["host"],
                                "port": c["port"],
                                "user": c["user"],
                                "database": c["database"],
                            }
                        )
                        if c["password"]:
                            cfg["password"] = c["password"]
                        out = await _driver(cmd, cfg, ns.peer_timeout, env)
                fig = workload_figures(
                    out.get("pairs") or [], out.get("scheduled", 0), wname, cfg.get("due")
                )
                fig.update(machine_figures(probe, out.get("pairs") or []))
                fig["errors"] = out.get("errors", [])
                fig["settings"] = out.get("settings")
                fig["wall_s"] = time.monotonic() - t0
                rows[s] = fig
                lat = fig["lateness_ms"]
                clear = (fig.get("lateness_clear_ms") or {}).get("p99")
                print(
                    f"bench:   delivered {fig['delivered']:,}/{fig['scheduled']:,}, "
                    f"{fig['throughput'] or 0:,.0f}/s, p50 {lat['p50'] or 0:.1f} ms, "
                    f"p99 {lat['p99'] or 0:.1f} ms"
                    + (f" (clear of slow windows {clear:.1f} ms)" if clear is not None else "")
                    + f" {fig['errors'] or ''}",
                    flush=True,
                )
            results[wname] = with_ratios(rows)
    res.data["config"] = {
        "systems": systems,
        "burst": ns.burst,
        "steady_rate": ns.steady_rate,
        "steady_seconds": ns.steady_seconds,
        "delay": ns.delay,
        "burst_margin_s": BURST_MARGIN_S,
    }
    res.data["workloads"] = results
    _summary(res, results, ns)
    res.finish()
    return 0


def _summary(res: Results, results: dict, ns) -> None:
    res.section(
        "## Systems\n\n"
        "- floor: asyncpg, one loop, claim (FOR UPDATE SKIP LOCKED, 500 rows) + delete + record "
        "in one statement, on a table of queen.log_timers' shape (+ an index on visible_at)\n"
        "- queen: one `queen serve --transport none` process fires (sweeper defaults); the "
        "bench schedules through `Queen.timers_apply`; delivery = log segment created_at\n"
        "- procrastinate: two workers in one process (a worker fetches one job per round "
        "trip), concurrency 10 each, fetch_job_polling_interval 1 s (default 5 s), "
        "LISTEN/NOTIFY on, jobs deleted when done; delivery = task start\n"
        "- pgqueuer: one QueueManager on one asyncpg connection (LISTEN and dequeues), the "
        "producer on another, batch_size 100 (default 10), its autovacuum profile (`pgq "
        "autovac`), durable tables; due = the job's execute_after; delivery = handler call\n"
        "- pgboss: one work() loop, batchSize 1000 (default 1), pollingIntervalSeconds 0.5 "
        "(its minimum; default 2); delivery = handler call\n"
        "- a system that did not deliver everything within --peer-timeout shows `>=` "
        "lateness: the percentiles of the delivered ones, lower bounds of the truth\n"
        "- machine slow % = the share of a system's run in which bench/cpuprobe.py found the "
        "machine's own CPUs at a third of their speed or less (or taken by the host); timers "
        "in slow windows % = the timers whose wait overlapped such a window or the 100 ms "
        "after it; late p99 clear of slow windows = the others' (empty without --cpu-probe)\n"
    )
    res.section(
        f"Burst: {ns.burst:,} timers due at one instant. Steady: {ns.steady_rate}/s for "
        f"{ns.steady_seconds:g} s, each due {ns.delay:g} s after scheduling."
    )
    for w, rows in results.items():
        for s, r in rows.items():
            if r.get("skipped"):
                res.row(f"{w}: {s}", errors="skipped: " + r["skipped"])
                continue
            lat, clear = r["lateness_ms"], r.get("lateness_clear_ms") or {}
            ge = ">= " if r.get("censored") else ""
            res.row(
                f"{w}: {s}",
                delivered=f"{r['delivered']:,}/{r['scheduled']:,}",
                **{"per s": r["throughput"], "x floor": r.get("throughput_vs_floor")},
                **{f"late {k} ms": _ge(ge, lat[k]) for k in ("p50", "p99", "max")},
                **{"p50 x floor": r.get("p50_vs_floor"), "p99 x floor": r.get("p99_vs_floor")},
                **{"late p99 clear ms": _ge(ge, clear.get("p99"))},
                **{"in slow windows %": r.get("in_slow_windows_pct")},
                **{"machine slow %": r.get("machine_slow_pct")},
                errors="; ".join(r.get("errors") or []) or None,
            )


def _ge(prefix: str, v: float | None) -> object:
    return v if not prefix or v is None else prefix + fmt(v, 2)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"systems to run ({','.join(SYSTEMS)})",
    )
    p.add_argument("--burst", type=int, default=20000, help="timers due at one instant (20000)")
    p.add_argument("--steady-rate", type=int, default=500, help="steady timers/s (500)")
    p.add_argument(
        "--steady-seconds", type=float, default=30.0, help="seconds of the steady workload (30)"
    )
    p.add_argument(
        "--delay", type=float, default=2.0, help="steady workload: seconds from schedule to due (2)"
    )
    p.add_argument(
        "--no-install",
        action="store_true",
        help="never install a missing peer; skip it with the reason",
    )
    p.add_argument(
        "--peer-timeout",
        type=float,
        default=120.0,
        help="seconds a peer may take to drain one workload before it is "
        "stopped and reported as not drained (120)",
    )
    p.add_argument(
        "--cpu-probe",
        action="store_true",
        help="run bench/cpuprobe.py beside each system's run (off by default: ~5%% of each core)",
    )


async def main(ns: argparse.Namespace) -> int:
    return await run(ns)
