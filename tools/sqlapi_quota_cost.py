"""What the pending-timer cap costs one SQL API schedule (docs/guides/tenants.md cites it).

    python tools/sqlapi_quota_cost.py [--calls 2000] [--connections 8]

On a fresh embedded PostgreSQL (or QUEEN_TEST_DATABASE_URL's server), one broker boots the
schema; then one application role per case, bound to a tenant of its own, calls
queen.timer_schedule_v1 `--calls` times, each in its own transaction (autocommit), new keys:
from one connection, then shared by `--connections` concurrent ones (a capped tenant's SQL
schedules run one transaction at a time on its gate). Cases: an uncapped tenant; capped
tenants whose cap is far above what they hold, with 0 and with 10^4 timers already pending
(the cap's count reads at most min(pending, cap) + 1 index entries). Prints each case's
median and p99 call latency and its calls a second.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import asyncpg

from queen_timers.identity import Identity
from queen_timers.testing.db import TestDatabases
from queen_timers.testing.fixtures import _server_url, started_broker

SCHEDULE = "SELECT queen.timer_schedule_v1($1, $2, $3, $4)"
ADMIN = Identity(tenant=uuid.uuid4(), subject="cost", admin=True)


async def one_case(
    q,
    admin: asyncpg.Connection,
    url: str,
    cap: int | None,
    held: int,
    calls: int,
    connections: int,
) -> tuple[list[float], float]:
    tenant = uuid.uuid4()
    role = f"qt_cost_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE ROLE "{role}" LOGIN')
    await admin.execute(f'GRANT queen_producer TO "{role}"')
    await admin.execute(
        "INSERT INTO queen.timer_producer_roles (role_name, tenant_id) VALUES ($1, $2)",
        role,
        tenant,
    )
    if cap is not None:
        await q.tenant_quota_set(ADMIN, str(tenant), {"maxPending": cap})
    if held:
        await admin.execute(
            "INSERT INTO queen.log_timers (tenant_id, queue, timer_key, deliver_at, txn,"
            " message_id, payload) SELECT $1, 'held', 'h' || i, now() + interval '1 day',"
            " 't', gen_random_uuid(), '\\x00' FROM generate_series(1, $2) i",
            tenant,
            held,
        )
        await admin.execute("VACUUM ANALYZE queen.log_timers")
    apps = [await asyncpg.connect(url, user=role) for _ in range(connections)]

    async def one(n: int, app: asyncpg.Connection) -> list[float]:
        for i in range(50):  # warm the plans
            await app.fetchval(SCHEDULE, "warm", f"w{n}-{i}", 3_600_000, b"x")
        out = []
        for i in range(calls // connections):
            t0 = time.perf_counter()
            await app.fetchval(SCHEDULE, "cost", f"k{n}-{i}", 3_600_000, b"x")
            out.append(time.perf_counter() - t0)
        return out

    try:
        t0 = time.perf_counter()
        lat = [x for part in await asyncio.gather(*map(one, *zip(*enumerate(apps)))) for x in part]
        return lat, time.perf_counter() - t0
    finally:
        for app in apps:
            await app.close()
        await admin.execute(f'DROP ROLE "{role}"')


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=8)
    args = ap.parse_args()
    dbs = TestDatabases(_server_url())
    await dbs.setup()
    url = await dbs.create()
    cases = [
        ("uncapped", None, 0),
        ("capped 10^6, 0 pending", 1_000_000, 0),
        ("capped 10^6, 10^4 pending", 1_000_000, 10_000),
    ]
    try:
        async with started_broker(url, timers_tenant_quota_refresh_ms=0) as q:
            admin = await asyncpg.connect(url)
            try:
                for name, cap, held in cases:
                    for conns in (1, args.connections):
                        lat, took = await one_case(q, admin, url, cap, held, args.calls, conns)
                        lat.sort()
                        p50 = statistics.median(lat) * 1e3
                        p99 = lat[int(0.99 * (len(lat) - 1))] * 1e3
                        print(
                            f"{name:28} conns {conns:2}  calls {len(lat):5}  "
                            f"p50 {p50:6.3f} ms  p99 {p99:6.3f} ms  {len(lat) / took:6.0f}/s"
                        )
            finally:
                await admin.close()
    finally:
        await dbs.drop(url)
        await dbs.teardown()


if __name__ == "__main__":
    asyncio.run(main())
