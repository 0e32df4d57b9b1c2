"""The 100 ms sampler: what PostgreSQL and the processes around it are doing, over time.

Each sample holds the WAL insert position, the staging table's statistics counters and
sizes, the autovacuum workers of the server and the table each is on, and the CPU spent since
the previous sample by the broker process(es), the bench process itself, and PostgreSQL's
processes split into client backends, autovacuum workers and background processes (by pid,
with psutil; see bench.stats.attribute_cpu for how exited workers are accounted).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import harness, stats
from .queries import BQ

__all__ = ["Sampler", "av_table_of", "classify_pg_process", "stats_settled"]

SAMPLE_INTERVAL_S = 0.1  # the brief's cadence; a sample costs ~1-3 ms of one backend


def classify_pg_process(cmdline: str) -> str:
    """'autovacuum' | 'backend' | 'background' from a PostgreSQL process title."""
    c = cmdline.lower()
    if "autovacuum worker" in c:
        return "autovacuum"
    for bg in (
        "autovacuum launcher",
        "checkpointer",
        "background writer",
        "walwriter",
        "wal writer",
        "logical replication",
        "io worker",
        "walsender",
        "archiver",
        "stats collector",
        "walsummarizer",
        "startup",
        "syslogger",
    ):
        if bg in c:
            return "background"
    return "backend"


def av_table_of(worker: dict) -> str | None:
    """The table an autovacuum worker is on: the progress view's, else its query text."""
    if worker.get("table"):
        return worker["table"]
    q = (worker.get("query") or "").strip()
    prefix = "autovacuum:"
    if not q.lower().startswith(prefix):
        return None
    rest = q[len(prefix) :].strip()
    for verb in ("VACUUM ANALYZE ", "VACUUM ", "ANALYZE ", "BRIN summarize "):
        if rest.upper().startswith(verb.upper()):
            rest = rest[len(verb) :]
            break
    return rest.split(" (", 1)[0].strip() or None


def _app_pid(app: str) -> int | None:
    """The process id in a queen application_name (queen:<pid>:<role>)."""
    parts = app.split(":")
    if len(parts) >= 2 and parts[0] == "queen":
        try:
            return int(parts[1])
        except ValueError:
            return None
    return None


class _ProcCpu:
    def __init__(self, pids: Iterable[int]):
        import psutil  # type: ignore[import-untyped]  # only where CPU is read

        self.procs: dict = {}
        for p in pids:
            try:
                self.procs[p] = psutil.Process(p)
            except psutil.Error:
                pass
        self.last: dict[int, float] = {}

    def delta(self) -> float:
        """CPU seconds of these processes (and their live children) since the last call."""
        import psutil

        tot = 0.0
        for pid, p in list(self.procs.items()):
            try:
                cur = sum(p.cpu_times()[:2])
                for ch in p.children(recursive=True):
                    try:
                        cur += sum(ch.cpu_times()[:2])
                    except psutil.Error:
                        pass
            except psutil.Error:
                continue
            tot += cur - self.last.get(pid, cur)
            self.last[pid] = cur
        return max(tot, 0.0)


class Sampler:
    """`async with Sampler(url, table, postmaster_pid, broker_pids) as s:` samples every
    100 ms into `s.samples` until the block exits. `mark` adds a label to later samples (the
    rate step) and `extra` returns live counters of the load generator to record."""

    def __init__(
        self,
        connect: Callable,
        table: str,
        postmaster_pid: int | None,
        broker_pids: Iterable[int] = (),
        extra: Callable[[], dict] | None = None,
        interval: float = SAMPLE_INTERVAL_S,
    ):
        self._connect = connect
        self.table = table
        self.interval = interval
        self.samples: list[dict] = []
        self.label: str | None = None
        self._extra = extra
        self._broker = _ProcCpu(broker_pids)
        self._self = _ProcCpu([os.getpid()])
        import psutil

        self._pm = None
        if postmaster_pid:
            try:
                self._pm = psutil.Process(postmaster_pid)
            except psutil.Error:
                self._pm = None
        self._prev: dict[int, tuple[float, str]] = {}
        self._prev_reaped = 0.0
        self._prev_time = 0.0
        self._task: asyncio.Task | None = None
        self._conn: Any = None
        self.t0 = 0.0

    def add_broker_pid(self, pid: int) -> None:
        import psutil

        try:
            self._broker.procs[pid] = psutil.Process(pid)
        except psutil.Error:
            pass

    def mark(self, label: str | None) -> None:
        self.label = label

    def _pg_cpu(self) -> tuple[dict[int, tuple[float, str]], float, dict[int, float]]:
        import psutil

        cur: dict[int, tuple[float, str]] = {}
        born: dict[int, float] = {}
        if self._pm is None:
            return cur, 0.0, born
        try:
            t = self._pm.cpu_times()
            reaped = t.children_user + t.children_system
            children = self._pm.children()
        except psutil.Error:
            return cur, self._prev_reaped, born
        for ch in children:
            try:
                with ch.oneshot():
                    ct = ch.cpu_times()
                    title = " ".join(ch.cmdline()) or ch.name()
                    cur[ch.pid] = (ct.user + ct.system, classify_pg_process(title))
                    if ch.pid not in self._prev:
                        born[ch.pid] = ch.create_time()
            except psutil.Error:
                pass
        return cur, reaped, born

    async def _sample_once(self) -> None:
        row = await self._conn.fetchrow(BQ.sample, self.table)
        now = time.time()
        cur, reaped, born = self._pg_cpu()
        att = stats.attribute_cpu(self._prev, cur, self._prev_reaped, reaped, self._prev_time, born)
        first = not self._prev_time
        dt = now - self._prev_time if not first else 0.0
        av = []
        for w in row["av"] or []:
            av.append(
                {"pid": w["pid"], "db": w["db"], "table": av_table_of(w), "phase": w.get("phase")}
            )
        av_on_table = stats.pids_cpu(
            self._prev,
            cur,
            self._prev_time,
            born,
            [w["pid"] for w in av if w["table"] == self.table],
        )
        # client backends by whose connection they are (application_name queen:<pid>:<role>):
        # the broker processes' (the fire) and this process's pool (the schedules)
        apps = {b["pid"]: b.get("app") or "" for b in row["backends"] or []}
        fire_pids = [p for p, a in apps.items() if _app_pid(a) in self._broker.procs]
        sched_pids = [p for p, a in apps.items() if a == f"queen:{os.getpid()}:pool"]
        fire_cpu = stats.pids_cpu(self._prev, cur, self._prev_time, born, fire_pids)
        sched_cpu = stats.pids_cpu(self._prev, cur, self._prev_time, born, sched_pids)
        self._prev, self._prev_reaped, self._prev_time = cur, reaped, now
        s = {
            "t": now - self.t0,
            "ts": row["ts"],
            "label": self.label,
            "lsn": stats.parse_lsn(row["lsn"]),
            "tab": row["tab"] or {},
            "heap_bytes": row["heap_bytes"],
            "index_bytes": row["index_bytes"],
            "av": av,
            "av_ms_all": row["av_ms_all_tables"],
            "dt": dt,
            "cpu": {
                "broker": self._broker.delta(),
                "bench": self._self.delta(),
                "pg_backends": 0.0 if first else att.backends,
                "pg_autovacuum": 0.0 if first else att.autovacuum + att.exited,
                "pg_autovacuum_table": 0.0 if first else av_on_table,
                "pg_backends_fire": 0.0 if first else fire_cpu,
                "pg_backends_schedule": 0.0 if first else sched_cpu,
                "pg_background": 0.0 if first else att.background,
            },
        }
        if self._extra is not None:
            s["load"] = self._extra()
        self.samples.append(s)

    async def _run(self) -> None:
        nxt = time.monotonic()
        while True:
            try:
                await self._sample_once()
            except (OSError, ConnectionError) as e:  # the server went away: stop sampling
                print(f"bench: sampler stopped: {e}")
                return
            nxt += self.interval
            delay = nxt - time.monotonic()
            if delay < 0:  # fell behind (a loaded machine): skip, do not burst
                nxt = time.monotonic()
                delay = 0
            await asyncio.sleep(delay)

    async def __aenter__(self) -> Sampler:
        self._conn = await self._connect()
        self.t0 = time.time()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self._conn is not None:
            await self._conn.close()


def window(
    samples: list[dict],
    label: str | None = None,
    t_from: float | None = None,
    t_to: float | None = None,
) -> list[dict]:
    """The samples of one step (by label) and/or time window (seconds since the start)."""
    out = []
    for s in samples:
        if label is not None and s.get("label") != label:
            continue
        if t_from is not None and s["t"] < t_from:
            continue
        if t_to is not None and s["t"] > t_to:
            continue
        out.append(s)
    return out


def aggregate(samples: list[dict], table: str) -> dict:
    """Per-window figures: CPU (cores) by process kind, autovacuum shares, WAL rate, counter
    deltas of the table and sizes at the end."""
    if not samples:
        return {}
    wall = sum(s["dt"] for s in samples)
    cpu = {k: sum(s["cpu"][k] for s in samples) for k in samples[0]["cpu"]}
    # pg_autovacuum_table is a part of pg_autovacuum, pg_backends_fire/_schedule parts of
    # pg_backends: not added again
    pg_total = cpu["pg_backends"] + cpu["pg_autovacuum"] + cpu["pg_background"]
    first, last = samples[0], samples[-1]
    tab_delta = {
        k: stats.counter_delta(first["tab"], last["tab"], k)
        for k in (
            "n_tup_ins",
            "n_tup_upd",
            "n_tup_hot_upd",
            "n_tup_del",
            "n_tup_newpage_upd",
            "autovacuum_count",
            "autoanalyze_count",
        )
    }
    has_newpage = "n_tup_newpage_upd" in (last["tab"] or {})
    span = last["ts"] - first["ts"]
    # PostgreSQL >= 18: milliseconds autovacuum spent on the table (counted when a run ends)
    exact = None
    av_ms = None
    if "total_autovacuum_time" in (last["tab"] or {}) and span > 0:
        av_ms = max(
            (last["tab"].get("total_autovacuum_time") or 0.0)
            - (first["tab"].get("total_autovacuum_time") or 0.0),
            0.0,
        )
        exact = av_ms / 1000.0 / span
    sampled = stats.av_table_share(samples, table)
    # every table of the database (PostgreSQL >= 18): the workers this database occupies
    exact_all = None
    if last.get("av_ms_all") is not None and first.get("av_ms_all") is not None and span > 0:
        exact_all = max(last["av_ms_all"] - first["av_ms_all"], 0.0) / 1000.0 / span
    return {
        "samples": len(samples),
        "seconds": span,
        "cpu_cores": {k: stats.cpu_cores(v, wall) for k, v in cpu.items()},
        "cpu_cores_pg_total": stats.cpu_cores(pg_total, wall),
        "av_cpu_share_of_pg": (cpu["pg_autovacuum"] / pg_total) if pg_total > 0 else None,
        "av_table_cpu_share_of_pg": (cpu.get("pg_autovacuum_table", 0.0) / pg_total)
        if pg_total > 0
        else None,
        "av_sample_share": sampled,
        "av_time_share_exact": exact,
        # the share of wall time autovacuum works on the table: exact when the server counts
        # it (PostgreSQL >= 18), else from the 100 ms samples
        "av_time_share": exact if exact is not None else sampled,
        "av_ms_total": av_ms,
        "av_time_share_all_tables_exact": exact_all,
        "av_ms_per_run": (av_ms / tab_delta["autovacuum_count"])
        if av_ms is not None and tab_delta["autovacuum_count"]
        else None,
        "av_mean_workers_on_table": stats.av_mean_workers(samples, table),
        "av_mean_workers_any": stats.av_mean_workers(samples),
        "wal_bytes": last["lsn"] - first["lsn"],
        "wal_bytes_per_s": harness.rate(last["lsn"] - first["lsn"], span),
        "table_delta": tab_delta,
        "hot_ratio": stats.hot_ratio(tab_delta["n_tup_upd"], tab_delta["n_tup_hot_upd"]),
        "same_page_ratio": stats.same_page_ratio(
            tab_delta["n_tup_upd"], tab_delta["n_tup_newpage_upd"] if has_newpage else None
        ),
        "n_dead_tup_max": max((s["tab"].get("n_dead_tup") or 0) for s in samples),
        "n_dead_tup_mean": sum((s["tab"].get("n_dead_tup") or 0) for s in samples) / len(samples),
        "heap_bytes_end": last["heap_bytes"],
        "index_bytes_end": last["index_bytes"],
        "heap_bytes_max": max(s["heap_bytes"] for s in samples),
        "index_bytes_max": max(s["index_bytes"] for s in samples),
    }


async def stats_settled(seconds: float = 1.2) -> None:
    """Backends flush their statistics counters at most once a second (PostgreSQL >= 15):
    wait that long before reading a counter delta that must be complete."""
    await asyncio.sleep(seconds)
