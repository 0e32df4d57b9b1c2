"""The loss of the database machine: a primary SIGKILLed mid-fire, its standby promoted.

Three brokers in this process share one multi-host URL (primary first, then the standby,
`target_session_attrs=read-write`) while a client schedules timers and the sweepers fire them.
Once half the timers are scheduled, at the next point the code signals (a fire statement is
next) every process of the primary's cluster gets SIGKILL, and the client schedules the rest
through the outage; the test then promotes the standby, as a failover manager
would, and waits for every timer it was told of to reach the log.

Exactly once is counted, not hoped for: every txn the client was told of is in the new
primary's log exactly once. A call the outage hits answers 503 with Retry-After (never 500)
and the client retries it with the same ops and the same txns, so a write whose outcome was
unknown is retried safely. None early: nothing fires before the earliest instant the client
asked for (the first attempt's start plus its delay; a retry may move a timer later, never
earlier).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import random
import time
from collections import Counter
from typing import Any

import asyncpg
import pytest

from queen_timers.db import faults
from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.log.frames import txn_hash
from queen_timers.service import Queen
from queen_timers.testing.replication import ReplicaPair, replica_pair

pytestmark = pytest.mark.slow

IDENT = Identity(subject="scheduler")
BROKERS = 3
TIMERS = 20_000
CHUNK = 256  # the most ops one call takes
# Asynchronous replication: calls acknowledged while the WAL does not ship, before the kill.
HELD_CHUNKS = 4


@pytest.fixture(params=[True, False], ids=["sync", "async"])
async def pair(request):
    async with replica_pair(synchronous=request.param) as p:
        yield p


class _KillPrimary:
    """The fault hook: once armed, SIGKILL the primary at the next arrival at `timers.fire`."""

    def __init__(self, pair: ReplicaPair):
        self.pair = pair
        self.armed = False
        self.killed = asyncio.Event()
        self.kill_at = 0.0

    async def __call__(self, point: str, conn: object) -> None:
        if point != "timers.fire" or not self.armed or self.killed.is_set():
            return
        self.pair.kill_primary()
        self.kill_at = time.time()
        self.killed.set()


@dataclasses.dataclass
class _Client:
    """What the scheduling client was told: each txn's earliest deliver instant (epoch s),
    the refusals ("status reason"), when each call was answered, and (asynchronous) the txns
    acknowledged while the WAL did not ship."""

    acked: dict[str, float] = dataclasses.field(default_factory=dict)
    answers: Counter[str] = dataclasses.field(default_factory=Counter)
    answered_at: list[float] = dataclasses.field(default_factory=list)
    unshipped: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Outcome:
    client: _Client
    kill_at: float
    promoted_at: float
    first_ack_after_kill: float | None


def _ops() -> list[dict[str, Any]]:
    rnd = random.Random(27)
    return [
        {
            "op": "schedule",
            "queue": f"q{i % 4}",
            "timerKey": f"k{i}",
            "delayMs": rnd.uniform(300, 5000),
            "txn": f"txn-{i}",
            "payload": base64.b64encode(b"x").decode(),
        }
        for i in range(TIMERS)
    ]


async def _schedule_all(brokers: list[Queen], killer: _KillPrimary, client: _Client) -> None:
    ops = _ops()
    chunks = [ops[i : i + CHUNK] for i in range(0, TIMERS, CHUNK)]
    kill_before = len(chunks) // 2
    hold_from = None if killer.pair.synchronous else kill_before - HELD_CHUNKS
    for n, chunk in enumerate(chunks):
        if n == hold_from:
            # Asynchronous: from here the WAL does not ship, so the primary alone holds the
            # next HELD_CHUNKS calls' schedules (and any fire meanwhile) when it dies.
            await killer.pair.hold_wal()
        if n == kill_before:
            # Half are scheduled and firing: the primary dies at the next fire, and the rest
            # is scheduled through the outage and onto the promoted standby.
            killer.armed = True
            await killer.killed.wait()
        started = time.time()
        while True:
            try:
                results = await brokers[n % BROKERS].timers_apply(IDENT, chunk)
                break
            except QueenError as e:
                client.answers[f"{e.status} {e.reason}"] += 1
                assert e.status == 503 and e.retry_after, (e.status, e.code, e.reason)
                await asyncio.sleep(0.05)  # the client's retry (Retry-After is 1 s; we hurry)
        client.answered_at.append(time.time())
        assert all(r["ok"] for r in results), [r for r in results if not r["ok"]][:3]
        for op in chunk:
            client.acked[op["txn"]] = started + op["delayMs"] / 1000
            if hold_from is not None and hold_from <= n < kill_before:
                client.unshipped.add(op["txn"])


async def _run(pair: ReplicaPair) -> Outcome:
    killer = _KillPrimary(pair)
    client = _Client()
    brokers = [Queen(database_url=pair.url, retention_interval_ms=0) for _ in range(BROKERS)]
    for b in brokers:
        await b.start()
    previous, faults.hook = faults.hook, killer
    try:
        scheduling = asyncio.create_task(_schedule_all(brokers, killer, client))
        killed = asyncio.create_task(killer.killed.wait())
        await asyncio.wait({scheduling, killed}, timeout=120, return_when="FIRST_COMPLETED")
        if not killed.done():  # the scheduling failed (its error says why), or nothing fired
            killed.cancel()
            if scheduling.done():
                scheduling.result()
            scheduling.cancel()
            raise AssertionError("the primary was never killed: nothing fired in 120 s")
        await asyncio.to_thread(pair.promote)
        promoted_at = time.time()
        await asyncio.wait_for(scheduling, timeout=300)
        await _wait_fired(pair.url)
    finally:
        faults.hook = previous
        for b in brokers:
            await b.stop()
    after = [t for t in client.answered_at if t > killer.kill_at]
    return Outcome(
        client, killer.kill_at, promoted_at, after[0] - killer.kill_at if after else None
    )


async def _wait_fired(url: str, timeout: float = 180) -> None:
    """Until no timer waits on the new primary (every one it holds has fired; one the outage
    lost was never there), polling for that row count, with a generous bound."""
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + timeout
        while await conn.fetchval("SELECT count(*) FROM queen.log_timers"):
            assert time.monotonic() < deadline, "timers still waiting on the new primary"
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def _log(url: str) -> dict[object, list[dt.datetime]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT t.txn_hash, s.created_at FROM queen.log_txns t "
            "JOIN queen.log_segments s ON s.partition_id = t.partition_id "
            ' AND t."offset" BETWEEN s.base_offset AND s.end_offset'
        )
    finally:
        await conn.close()
    out: dict[object, list[dt.datetime]] = {}
    for r in rows:
        out.setdefault(r["txn_hash"], []).append(r["created_at"])
    return out


async def test_a_primary_lost_mid_fire(pair: ReplicaPair, record_property):
    out = await _run(pair)
    log = await _log(pair.url)
    fired = {txn: log.get(txn_hash(txn), []) for txn in out.client.acked}
    lost = [t for t, at in fired.items() if not at]
    doubled = [t for t, at in fired.items() if len(at) > 1]
    early = [t for t, at in fired.items() if at and at[0].timestamp() < out.client.acked[t]]
    after_kill = sorted(at[0].timestamp() for at in fired.values() if at)
    first_fire = next((t for t in after_kill if t > out.promoted_at), None)
    figures = {
        "replication": "sync" if pair.synchronous else "async",
        "acked": len(out.client.acked),
        "lost": len(lost),
        "acked_unshipped": len(out.client.unshipped),
        "doubled": len(doubled),
        "early": len(early),
        "refused": dict(out.client.answers),
        "kill_to_first_schedule_s": out.first_ack_after_kill,
        "promotion_s": round(out.promoted_at - out.kill_at, 3),
        "promotion_to_first_fire_s": first_fire and round(first_fire - out.promoted_at, 3),
    }
    for k, v in figures.items():
        record_property(k, v)
    print(figures)
    assert len(out.client.acked) == TIMERS
    assert not doubled, f"{len(doubled)} timers delivered twice"
    assert not early, f"{len(early)} timers delivered early"
    assert all(a.startswith("503 ") for a in out.client.answers), out.client.answers
    if pair.synchronous:
        # Every commit the client heard of was on the standby first: nothing is lost.
        assert not lost, f"{len(lost)} acknowledged timers lost"
    else:
        # The declared price: exactly what was acknowledged while the WAL did not ship.
        assert len(out.client.unshipped) == HELD_CHUNKS * CHUNK
        assert set(lost) == out.client.unshipped
    assert first_fire is not None, "nothing fired on the promoted standby"
