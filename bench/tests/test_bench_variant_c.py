"""bench/sql/variant_c.sql replaces the functions the broker calls, so the amplification bench
measures the rejected alternative and not the design under another name. When the broker moves
to a new version of its probe or claim, the variant must follow (it silently measured the design
otherwise)."""

from __future__ import annotations

import re

from bench.amplification import apply_variant
from bench.queries import sql_file
from queen_timers.db import Q
from queen_timers.identity import DEFAULT_TENANT
from queen_timers.service import Queen
from queen_timers.timers import fire, store


def _defined(sql: str) -> set[str]:
    return set(re.findall(r"CREATE OR REPLACE FUNCTION (queen\.\w+)\(", sql))


def test_variant_c_defines_the_probe_and_claim_the_broker_calls():
    defined = _defined(sql_file("variant_c.sql"))
    called = set(re.findall(r"(queen\.\w+)\(", Q.timers_claim + Q.timers_due))
    assert called == defined, (called, defined)


async def test_the_broker_claims_and_fires_through_variant_c(db_url, conn):
    q = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0)
    await q.start()
    try:
        await apply_variant(conn, "C")
        assert await conn.fetchval("SELECT to_regclass('queen.idx_log_timers_deliver')") is not None
        ops = [
            {
                "op": "schedule",
                "queue": "c",
                "timerKey": f"k{i}",
                "delayMs": 0,
                "txn": f"t{i}",
                "payload": "e30=",
            }
            for i in range(5)
        ]
        await store.apply(conn, ops, DEFAULT_TENANT, "bench", None)
        body = await conn.fetchval(
            "SELECT prosrc FROM pg_proc WHERE oid = 'queen.log_timers_claim_v3'::regproc"
        )
        assert "pick AS MATERIALIZED" in body  # variant C's claim, not 025's
        claimed = await fire.claim(q.rt)
        assert len(claimed) == 5 and all(c.tid is not None for c in claimed)
        report = await fire.fire_claimed(q.rt, claimed)
        assert report.fired == 5
        assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
    finally:
        await q.stop()
