"""`queen tenants` (queen_timers/cli/tenants_cmd.py): set, show and list through the service, as
an installed command (its own process, like an operator's shell)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid


async def queen(db_url: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "queen_timers",
        "tenants",
        *args,
        "--database-url",
        db_url,
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_set_show_list(db_url, conn):
    tenant = str(uuid.uuid4())
    rc, out, err = await queen(
        db_url, "set", tenant, "--max-pending", "7", "--writes-per-sec", "2.5"
    )
    assert rc == 0, err
    view = json.loads(out)
    assert (view["maxPending"], view["writesPerSec"], view["burst"]) == (7, 2.5, 3)
    row = await conn.fetchrow(
        "SELECT * FROM queen.tenant_quotas WHERE tenant_id = $1", uuid.UUID(tenant)
    )
    assert (row["max_pending"], row["writes_per_sec"], row["write_burst"]) == (7, 2.5, None)

    rc, out, _ = await queen(db_url, "set", tenant, "--max-pending", "unlimited", "--burst", "9")
    assert rc == 0
    assert json.loads(out)["overrides"] == {
        "maxPending": "unlimited",
        "writesPerSec": 2.5,
        "burst": 9,
    }

    rc, out, _ = await queen(db_url, "show", tenant)
    assert rc == 0 and json.loads(out)["maxPending"] is None

    rc, out, _ = await queen(db_url, "list")
    assert rc == 0 and [t["tenant"] for t in json.loads(out)["tenants"]] == [tenant]

    # a refusal is one line on stderr naming its reason, exit code 1, and changes nothing
    rc, _, err = await queen(db_url, "set", "not-a-uuid", "--burst", "1")
    assert rc == 1 and err.startswith("queen: tenant_invalid: "), err
    rc, _, err = await queen(db_url, "set", tenant)
    assert rc == 1 and err.startswith("queen: quota_nothing_to_set: "), err

    rc, _, _ = await queen(
        db_url,
        "set",
        tenant,
        "--max-pending",
        "default",
        "--writes-per-sec",
        "default",
        "--burst",
        "default",
    )
    assert rc == 0
    assert await conn.fetchval("SELECT count(*) FROM queen.tenant_quotas") == 0
