import pytest

from queen_timers.errors import QueenError
from queen_timers.log.queues import DEFAULTS, OPTIONS

CLIENT_DEFAULTS = {
    "leaseTime": 300,
    "retryLimit": 3,
    "priority": 0,
    "delayedProcessing": 0,
    "windowBuffer": 0,
    "maxSize": 0,
    "retentionSeconds": 0,
    "completedRetentionSeconds": 0,
    "encryptionEnabled": False,
}


async def test_configure_answers_effective_options(queen, ident, conn):
    res = await queen.configure_queue(
        ident, "orders", {**CLIENT_DEFAULTS, "leaseTime": 30}, namespace=None, task=None
    )
    assert res["configured"] is True and res["queue"] == "orders"
    assert res["storage"] == "segments" and res["partitionId"] is None
    assert res["options"]["leaseTime"] == 30
    assert res["options"]["retryLimit"] == 3
    assert res["options"]["dedupWindowSeconds"] == 3600  # untouched default
    assert set(res["options"]) == set(OPTIONS)
    row = await conn.fetchrow("SELECT id, lease_time FROM queen.queues WHERE name = 'orders'")
    assert str(row["id"]) == res["queueId"] and row["lease_time"] == 30


async def test_configure_merge_then_replace(queen, ident):
    await queen.configure_queue(ident, "q", {"leaseTime": 10, "retryLimit": 7})
    merged = await queen.configure_queue(ident, "q", {"ttl": 5})
    assert merged["options"]["leaseTime"] == 10 and merged["options"]["ttl"] == 5
    replaced = await queen.configure_queue(ident, "q", {"ttl": 6}, mode="replace")
    assert replaced["options"]["leaseTime"] == DEFAULTS["lease_time"]
    assert replaced["options"]["retryLimit"] == 3 and replaced["options"]["ttl"] == 6


async def test_configure_namespace_task(queen, ident):
    res = await queen.configure_queue(ident, "billing.invoices", {})
    assert (res["namespace"], res["task"]) == ("billing", "invoices")
    res = await queen.configure_queue(ident, "plain", {}, namespace="ns", task="t")
    assert (res["namespace"], res["task"]) == ("ns", "t")


async def test_configure_preserved_by_lazy_push(queen, ident):
    await queen.configure_queue(ident, "q", {"leaseTime": 11})
    await queen.push(ident, [{"queue": "q", "payload": 1}])
    res = await queen.configure_queue(ident, "q", {})
    assert res["options"]["leaseTime"] == 11


@pytest.mark.parametrize(
    "options,reason",
    [
        ({"leaseTme": 3}, "configure_unknown_option"),
        ({"lease_time": 3}, "configure_unknown_option"),
        ({"leaseTime": "30"}, "configure_bad_option"),
        ({"leaseTime": True}, "configure_bad_option"),
        ({"leaseTime": 0}, "configure_bad_option"),
        ({"retryLimit": -1}, "configure_bad_option"),
        ({"retentionEnabled": 1}, "configure_bad_option"),
        ({"leaseTime": 2**31}, "configure_bad_option"),
        ([1, 2], "configure_bad_options"),
    ],
)
async def test_configure_refuses_bad_options_and_writes_nothing(
    queen, ident, conn, options, reason
):
    with pytest.raises(QueenError) as ei:
        await queen.configure_queue(ident, "q", options)
    assert ei.value.status == 400 and ei.value.reason == reason
    assert await conn.fetchval("SELECT count(*) FROM queen.queues") == 0


async def test_configure_bad_queue_and_mode(queen, ident):
    with pytest.raises(QueenError):
        await queen.configure_queue(ident, "", {})
    with pytest.raises(QueenError):
        await queen.configure_queue(ident, "q", {}, mode="upsert")


async def test_encryption_without_key_is_refused(db_url, ident, conn):
    from queen_timers.service import Queen

    q = Queen(database_url=db_url, sweeper=False, retention_interval_ms=0, encryption_key=None)
    await q.start()
    try:
        with pytest.raises(QueenError) as ei:
            await q.configure_queue(ident, "secret", {"encryptionEnabled": True})
        assert ei.value.reason == "encryption_key_missing"
        assert await conn.fetchval("SELECT count(*) FROM queen.queues") == 0
        # turning it off (or leaving it off) needs no key
        await q.configure_queue(ident, "secret", {"encryptionEnabled": False})
    finally:
        await q.stop()


async def test_defaults_mirror_the_schema(conn):
    rows = await conn.fetch(
        "SELECT column_name, column_default FROM information_schema.columns "
        "WHERE table_schema = 'queen' AND table_name = 'queues'"
    )
    defaults = {r["column_name"]: r["column_default"] for r in rows}
    for col, value in DEFAULTS.items():
        assert defaults[col].lower() == str(value).lower(), col
