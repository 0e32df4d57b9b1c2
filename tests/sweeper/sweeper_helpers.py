"""Shared helpers of the sweeper's real-time tests."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from collections import Counter

from queen_timers.log.frames import txn_hash

UTC = dt.UTC


def schedule_op(
    queue: str,
    key: str,
    delay_ms: float,
    txn: str | None = None,
    partition: str | None = None,
    payload=None,
) -> dict:
    op = {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": txn or f"txn-{queue}-{key}",
        "payload": base64.b64encode(
            json.dumps(payload if payload is not None else key).encode()
        ).decode(),
    }
    if partition:
        op["partition"] = partition
    return op


def parse_ts(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


async def schedule_many(queen, ident, ops: list[dict], chunk: int = 256) -> list[dict]:
    out = []
    for i in range(0, len(ops), chunk):
        out.extend(await queen.timers_apply(ident, ops[i : i + chunk]))
    assert all(r["ok"] for r in out), [r for r in out if not r["ok"]][:3]
    return out


async def delivered(conn) -> dict:
    """txn_hash -> list of the created_at of each log frame carrying it (the fire commit)."""
    rows = await conn.fetch(
        "SELECT t.txn_hash, s.created_at FROM queen.log_txns t "
        "JOIN queen.log_segments s ON s.partition_id = t.partition_id "
        ' AND t."offset" BETWEEN s.base_offset AND s.end_offset'
    )
    out: dict = {}
    for r in rows:
        out.setdefault(r["txn_hash"], []).append(r["created_at"])
    return out


async def wait_delivered(conn, n: int, timeout: float = 60.0) -> dict:
    """Wait (polling the log every 50 ms, the event being "a row appeared") until n distinct
    txns are in the log."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while True:
        got = await conn.fetchval("SELECT count(DISTINCT txn_hash) FROM queen.log_txns")
        if got >= n or loop.time() - t0 > timeout:
            return await delivered(conn)
        await asyncio.sleep(0.05)


def assert_exactly_once(results: list[dict], log: dict) -> None:
    hashes = [txn_hash(r["txn"]) for r in results]
    counts = Counter({h: len(log.get(h, [])) for h in hashes})
    missing = [h for h, c in counts.items() if c == 0]
    doubled = [h for h, c in counts.items() if c > 1]
    assert not missing, f"{len(missing)} timers never delivered"
    assert not doubled, f"{len(doubled)} timers delivered more than once"
    assert sum(len(v) for v in log.values()) == len(results)


def lateness_ms(results: list[dict], log: dict) -> list[float]:
    return [
        (log[txn_hash(r["txn"])][0] - parse_ts(r["deliverAt"])).total_seconds() * 1000
        for r in results
    ]
