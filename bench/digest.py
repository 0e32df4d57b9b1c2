"""Digest of the newest result of each scenario, as the Markdown of bench/RESULTS.md.

    queen bench digest [results-root] > bench/RESULTS.md.new

Reads bench/results/*/result.json (the newest run of soak-ramp, soak, amplification and
peers) and prints the tables; the prose around them is written by whoever ran the benches.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .env import REPO_ROOT
from .report import fmt, md_table

__all__ = ["digest", "newest"]


def newest(root: Path, scenario: str) -> dict | None:
    runs = sorted(p for p in root.glob(f"*-{scenario}") if (p / "result.json").exists())
    if not runs:
        return None
    doc = json.loads((runs[-1] / "result.json").read_text())
    doc["_dir"] = str(
        runs[-1].relative_to(REPO_ROOT) if runs[-1].is_relative_to(REPO_ROOT) else runs[-1]
    )
    return doc


def _rate(v) -> str:
    return "not reached in the steps run" if v is None else f"{fmt(v)} timers/s"


def _pct(v):
    return None if v is None else v * 100


def _meta(doc: dict) -> str:
    m = doc["meta"]
    pg = m.get("postgres", {})
    load = m["machine"].get("load_avg_at_start")
    commit = str(m["git"].get("commit"))[:10]
    return (
        f"{m['started_utc'][:16]}Z, `{m['command']}`, commit {commit}"
        f", {m['machine']['cores_logical']} cores, load at start "
        f"{', '.join(f'{x:.1f}' for x in load) if load else '?'}, "
        f"{pg.get('version', '?').split(' on ')[0]}"
    )


def soak_table(doc: dict) -> str:
    rows = []
    for s in doc["steps"]:
        lat = s["lateness_ms"]
        cpu = s.get("cpu_cores") or {}
        rows.append(
            [
                s["label"],
                s["scheduled_rate"],
                lat["p50"],
                lat["p99"],
                _pct(s.get("av_time_share")),
                _pct(s.get("av_table_cpu_share_of_pg")),
                (s.get("table_delta") or {}).get("autovacuum_count"),
                s.get("av_ms_per_run"),
                s.get("n_dead_tup_max"),
                _pct(s.get("hot_ratio")),
                _pct(s.get("same_page_ratio")),
                s.get("wal_bytes_per_timer"),
                cpu.get("broker"),
                s.get("cpu_cores_pg_total"),
                "yes" if s["kept_up"] else "no: " + s["verdict"],
            ]
        )
    return md_table(
        [
            "rate",
            "sched/s",
            "late p50 ms",
            "late p99 ms",
            "AV busy on log_timers %",
            "AV on log_timers % of PG CPU",
            "autovacuums",
            "ms per autovacuum",
            "dead tuples max",
            "HOT %",
            "same-page %",
            "WAL B/timer",
            "broker cores",
            "PG cores",
            "kept up",
        ],
        rows,
        digits=1,
    )


def digest(root: Path) -> str:
    out = []
    ramp = newest(root, "soak-ramp")
    if ramp:
        h = ramp["headline"]
        out += [
            f"### Soak, ramp ({_meta(ramp)})",
            "",
            soak_table(ramp),
            "",
            f"- autovacuum on queen.log_timers enters the profile at: "
            f"{_rate(h['autovacuum_enters_profile_at_rate'])}",
            f"- lateness p99 first doubles at: {_rate(h['lateness_p99_doubles_at_rate'])}",
            f"- highest rate kept up: {_rate(h['max_rate_kept_up'])}",
            f"- results: `{ramp['_dir']}`",
            "",
        ]
    soak = newest(root, "soak")
    if soak:
        out += [
            f"### Soak, fixed rate ({_meta(soak)})",
            "",
            soak_table(soak),
            "",
            f"- results: `{soak['_dir']}`",
            "",
        ]
    amp = newest(root, "amplification")
    if amp:
        rows, srows, brows = [], [], []
        for v, d in amp["variants"].items():
            p = d["phases"]
            w = p["wal_bytes_per_timer"]
            rows.append(
                [
                    v,
                    w["schedule"],
                    w["claim"],
                    w["fire"],
                    w["total_without_vacuum"],
                    w["vacuum"],
                    _pct(p["claim_hot_ratio"]),
                    _pct(p.get("claim_same_page_ratio")),
                    p["sizes"]["after_schedule"]["heap_bytes"] / 2**20,
                ]
            )
            s = d["sustained"]
            srows.append(
                [
                    v,
                    s["scheduled_rate"],
                    s["wal_bytes_per_timer"],
                    _pct(s.get("hot_ratio")),
                    _pct(s.get("same_page_ratio")),
                    s.get("heap_bytes_max", 0) / 2**20,
                    s.get("heap_bytes_end", 0) / 2**20,
                    s.get("index_bytes_max", 0) / 2**20,
                    s.get("index_bytes_end", 0) / 2**20,
                    s.get("n_dead_tup_max"),
                    (s.get("table_delta") or {}).get("autovacuum_count"),
                    _pct(s.get("av_time_share")),
                ]
            )
            for b in d["backoff"]:
                brows.append(
                    [v, b["k"], b["probe_ms"], b["claim_ms"], b["pass_ms"], b["pass_buffers"]]
                )
        cfg = amp["config"]
        out += [
            f"### Amplification ({_meta(amp)})",
            "",
            f"WAL bytes per timer by phase ({cfg['timers']:,} timers due at once, autovacuum "
            "off during the phases):",
            "",
            md_table(
                [
                    "variant",
                    "schedule",
                    "claim",
                    "fire",
                    "total",
                    "VACUUM after",
                    "claim HOT %",
                    "claim same-page %",
                    "heap MiB after schedule",
                ],
                rows,
            ),
            "",
            f"Sustained {cfg['sustain_rate']}/s for {cfg['sustain_seconds']:g} s "
            "(one broker firing, schema autovacuum settings):",
            "",
            md_table(
                [
                    "variant",
                    "sched/s",
                    "WAL B/timer",
                    "HOT %",
                    "same-page %",
                    "heap MiB max",
                    "heap MiB end",
                    "index MiB max",
                    "index MiB end",
                    "dead tuples max",
                    "autovacuums",
                    "AV busy %",
                ],
                srows,
            ),
            "",
            f"One probe + claim pass with K timers in backoff and {cfg['due']} due (median "
            f"of {cfg['repeats']}):",
            "",
            md_table(
                ["variant", "K", "probe ms", "claim ms", "pass ms", "pass buffers"], brows, digits=2
            ),
            "",
        ]
        for v, t in amp.get("trade", {}).items():
            out.append(
                f"- {v}: K={t['k_high']:,} vs K={t['k_low']:,}: buffers "
                f"x{fmt(t['buffers_ratio'], 2)}, time x{fmt(t['ms_ratio'], 2)}"
            )
        out += [f"- results: `{amp['_dir']}`", ""]
    peers = newest(root, "peers")
    if peers:
        out += [f"### Peers ({_meta(peers)})", ""]
        for w, rows in peers["workloads"].items():
            t = []
            for s, r in rows.items():
                if r.get("skipped"):
                    t.append([s, "skipped: " + r["skipped"], None, None, None, None, None])
                    continue
                ge = ">= " if r.get("censored") else ""
                lat = r["lateness_ms"]
                t.append(
                    [
                        s,
                        f"{r['delivered']:,}/{r['scheduled']:,}",
                        r["throughput"],
                        r.get("throughput_vs_floor"),
                        (ge + fmt(lat["p50"], 1)) if lat["p50"] is not None else None,
                        (ge + fmt(lat["p99"], 1)) if lat["p99"] is not None else None,
                        r.get("p99_vs_floor"),
                    ]
                )
            out += [
                f"{w}:",
                "",
                md_table(
                    [
                        "system",
                        "delivered",
                        "per s",
                        "x floor",
                        "late p50 ms",
                        "late p99 ms",
                        "p99 x floor",
                    ],
                    t,
                    digits=2,
                ),
                "",
            ]
        out += [f"- results: `{peers['_dir']}`", ""]
    return "\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", nargs="?", default=None, help="results root (default: bench/results/)")


def main(ns: argparse.Namespace) -> int:
    print(digest(Path(ns.root) if ns.root else REPO_ROOT / "bench" / "results"))
    return 0
