"""The operator's commands, run as a person runs them (a subprocess) against a real database:
--json for what they answer, the table for what a person reads."""

from __future__ import annotations

import uuid

import pytest

from queen_timers.cli.timers_cmd import list_with_prefix, parse_delay

from .helpers import queen, queen_json

pytestmark = pytest.mark.slow


def _schedule(db_url: str, queue: str, key: str, *extra: str) -> dict:
    out = queen_json(
        "timers", "schedule", queue, key, "--delay", "1h", "--payload", f"p-{key}",
        "--database-url", db_url, *extra,
    )  # fmt: skip
    return out[0]


def test_version_names_the_core_and_its_transports():
    out = queen("--version").stdout
    assert out.startswith("queen-timers ")
    assert "http" in out and "tcp" in out


def test_schedule_list_peek_count_cancel_round_trip(db_url):
    assert _schedule(db_url, "orders", "o-1")["status"] == "scheduled"
    assert _schedule(db_url, "orders", "o-2")["status"] == "scheduled"
    assert _schedule(db_url, "orders", "p-1")["status"] == "scheduled"

    page = queen_json("timers", "list", "orders", "--database-url", db_url)
    assert [r["timerKey"] for r in page["rows"]] == ["o-1", "o-2", "p-1"]

    first = queen_json("timers", "list", "orders", "--limit", "2", "--database-url", db_url)
    assert [r["timerKey"] for r in first["rows"]] == ["o-1", "o-2"]
    assert first["truncated"] and first["nextAfter"] == "o-2"
    rest = queen_json("timers", "list", "orders", "--after", "o-2", "--database-url", db_url)
    assert [r["timerKey"] for r in rest["rows"]] == ["p-1"] and not rest["truncated"]

    only_o = queen_json("timers", "list", "orders", "--prefix", "o-", "--database-url", db_url)
    assert [r["timerKey"] for r in only_o["rows"]] == ["o-1", "o-2"]

    peek = queen_json("timers", "peek", "orders", "o-1", "--database-url", db_url)
    assert peek["found"] and peek["producerSub"] == "queen-cli"
    text = queen("timers", "peek", "orders", "o-1", "--database-url", db_url).stdout
    assert "p-o-1" in text  # the payload, decoded for a person

    assert queen_json("timers", "count", "orders", "--prefix", "o", "--database-url", db_url) == {
        "count": 2
    }
    out = queen_json("timers", "cancel", "orders", "o-1", "gone", "--database-url", db_url)
    assert [r["status"] for r in out] == ["cancelled", "absent"]
    table = queen("timers", "list", "orders", "--database-url", db_url).stdout
    assert "o-2" in table and "o-1" not in table and "2 timer(s)" in table


async def test_list_and_peek_say_when_a_backing_off_timer_is_retried(db_url, conn):
    _schedule(db_url, "orders", "b")
    _schedule(db_url, "orders", "w")
    # As a failed fire leaves it: deliver_at kept (now past), parked until its retry.
    await conn.execute(
        "UPDATE queen.log_timers SET deliver_at = now() - interval '1 minute', attempts = 2,"
        " last_error = 'permanent: boom', claimed_until = now() + interval '10 minutes'"
        " WHERE timer_key = 'b'"
    )
    rows = queen_json("timers", "list", "orders", "--database-url", db_url)["rows"]
    retry_at = rows[0]["retryAt"]
    assert (rows[0]["state"], rows[1]["state"], rows[1]["retryAt"]) == (
        "backing_off",
        "waiting",
        None,
    )
    assert retry_at > rows[0]["deliverAt"]
    # Wide enough that the table does not fold the cell.
    table = queen("timers", "list", "orders", "--database-url", db_url, COLUMNS="250").stdout
    assert f"backing_off, retry at {retry_at}" in table
    text = queen("timers", "peek", "orders", "b", "--database-url", db_url).stdout
    assert f"state        backing_off, retry at {retry_at}\n" in text
    text = queen("timers", "peek", "orders", "w", "--database-url", db_url).stdout
    assert "state        waiting\n" in text


def test_tenant_flag_scopes_every_command(db_url):
    other = str(uuid.uuid4())
    _schedule(db_url, "orders", "mine")
    _schedule(db_url, "orders", "theirs", "--tenant", other)
    mine = queen_json("timers", "list", "orders", "--database-url", db_url)
    theirs = queen_json("timers", "list", "orders", "--tenant", other, "--database-url", db_url)
    assert [r["timerKey"] for r in mine["rows"]] == ["mine"]
    assert [r["timerKey"] for r in theirs["rows"]] == ["theirs"]


def test_switches_show_and_set(db_url):
    shown = queen_json("switches", "show", "--database-url", db_url)
    assert shown == {"timersScheduleEnabled": True, "timersFireEnabled": True}
    out = queen_json("switches", "set", "--timers-fire", "off", "--database-url", db_url)
    assert out["timersFireEnabled"] is False and "PAUSED" in out["message"]
    text = queen("switches", "show", "--database-url", db_url).stdout
    assert "timersFireEnabled      OFF (paused)" in text
    queen("switches", "set", "--timers-fire", "on", "--database-url", db_url)
    assert queen_json("switches", "show", "--database-url", db_url)["timersFireEnabled"]


def test_dlq_list_of_an_empty_queue(db_url):
    out = queen_json("dlq", "list", "orders", "--database-url", db_url)
    assert out["messages"] == [] and out["total"] == 0
    assert (
        "0 of 0 dead letter(s)" in queen("dlq", "list", "orders", "--database-url", db_url).stdout
    )


def test_migrate_prints_what_it_applied_and_nothing_about_the_sweeper(db_url):
    r = queen("migrate", "--database-url", db_url)
    assert "001_log_schema.sql" in r.stdout and "schema digest" in r.stdout
    assert "sweeper" not in (r.stdout + r.stderr).lower()


async def test_prefix_pages_follow_each_other_without_a_gap(queen, ident):
    # Keys around the prefix in byte order: the prefix itself, keys after it, a key that
    # sorts between (o-/ < o-0 ... < o-~), one after the range, and one before.
    keys = ["o-", "o-1", "o-2", "o-3", "o-~", "o.", "n-9", "o"]
    ops = [
        {"op": "schedule", "queue": "q", "timerKey": k, "delayMs": 3_600_000,
         "payload": "aGk=", "txn": k}
        for k in keys
    ]  # fmt: skip
    assert all(r["ok"] for r in await queen.timers_apply(ident, ops))
    seen, after = [], None
    while True:
        page = await list_with_prefix(queen, ident, "q", "o-", after=after, limit=2)
        seen += [r["timerKey"] for r in page["rows"]]
        assert len(page["rows"]) <= 2
        if not page["truncated"]:
            break
        after = page["nextAfter"]
    assert seen == ["o-", "o-1", "o-2", "o-3", "o-~"]
    assert "payload" not in (await list_with_prefix(queen, ident, "q", "o-"))["rows"][0]


@pytest.mark.parametrize(
    ("text", "ms"), [("1500", 1500), ("250ms", 250), ("30s", 30_000), ("5m", 300_000),
                     ("2h", 7_200_000), ("1d", 86_400_000), ("-5s", -5000)]
)  # fmt: skip
def test_delay_units(text, ms):
    assert parse_delay(text) == ms


def test_cancel_by_prefix_loops_the_bounded_batches_to_the_end(db_url):
    for k in ("job-1", "job-2", "keep"):
        _schedule(db_url, "jobs", k)
    out = queen_json("timers", "cancel", "jobs", "--prefix", "job-", "--database-url", db_url)
    assert out == {"queue": "jobs", "prefix": "job-", "cancelled": 2, "absent": 0, "tooLate": 0}
    left = queen_json("timers", "list", "jobs", "--database-url", db_url)
    assert [r["timerKey"] for r in left["rows"]] == ["keep"]
    assert left["rows"][0]["state"] == "waiting"


async def _dead_letter_the_timer(db_url: str, queue: str, key: str) -> None:
    """Exhaust a timer's attempts and send it through the fire's dead-letter procedure, as a
    sweeper does after its last failed fire."""
    import asyncpg

    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute(
            "UPDATE queen.log_timers SET attempts = 5, last_error = 'permanent: boom'"
            " WHERE queue = $1 AND timer_key = $2",
            queue,
            key,
        )
        tenant = await conn.fetchval(
            "SELECT tenant_id FROM queen.log_timers WHERE queue = $1 AND timer_key = $2",
            queue,
            key,
        )
        res = await conn.fetchval(
            "SELECT queen.log_timers_dlq_v2($1::uuid[], $2::text[], $3::text[], $4::jsonb[],"
            " 5, now())::text",
            [tenant],
            [queue],
            [key],
            ['{"k": 1}'],
        )
        assert '"archived": 1' in res
    finally:
        await conn.close()


async def test_dlq_list_names_the_timer_of_a_timers_dead_letter(db_url):
    _schedule(db_url, "orders", "invoice/42")
    await _dead_letter_the_timer(db_url, "orders", "invoice/42")
    out = queen_json("dlq", "list", "orders", "--database-url", db_url)
    [m] = out["messages"]
    assert m["timerKey"] == "invoice/42" and m["consumerGroup"] == "__timer__"
    text = queen("dlq", "list", "orders", "--database-url", db_url).stdout
    assert "timer" in text and "invoice/42" in text
