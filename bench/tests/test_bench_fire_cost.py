"""bench/fire_cost.py: the kinds it rotates through, the fire's step marks, and one small round
on the real server (every kind measured, the instrumented fire still fires exactly once)."""

from __future__ import annotations

import datetime as dt

from bench import fire_cost


def test_kinds_rotate_every_size_by_ctid_then_the_first_by_key():
    assert fire_cost.kinds_of([200, 500]) == [(200, "ctid"), (500, "ctid"), (200, "key")]


def test_step_durations_run_to_the_next_mark():
    t = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    marks = [
        ("1", t),
        ("2a", t + dt.timedelta(milliseconds=2)),
        ("7", t + dt.timedelta(milliseconds=5)),
        ("return", t + dt.timedelta(milliseconds=6)),
    ]
    assert fire_cost.step_durations(marks) == {"1": 0.002, "2a": 0.003, "7": 0.001}


def test_the_instrumented_fire_marks_every_numbered_step():
    text = fire_cost.instrumented_fire()
    assert text.startswith("CREATE OR REPLACE FUNCTION queen.log_timers_fire_v2(")
    for step in ("1", "2", "2a", "2b", "3", "4", "5", "6", "7", "8", "9", "return"):
        assert f"'QSTEP % %', '{step}'" in text, step


async def test_one_small_round_measures_every_kind_and_fires_each_timer_once(db_url, conn):
    res = await fire_cost.one_round(db_url, 600, 3, [50, 100], steps=True)
    per = res["per"]
    assert set(per) == {(50, "ctid"), (100, "ctid"), (50, "key")}
    assert all(per[k] for k in per), per
    for rows in per.values():
        assert all(len(r) == 4 and all(v >= 0 for v in r) for r in rows)
    assert {"1", "2a", "6", "7", "8", "9"} <= set(res["fire_steps"])
    assert await conn.fetchval("SELECT count(*) FROM queen.log_txns") == 600
    assert await conn.fetchval("SELECT count(DISTINCT txn_hash) FROM queen.log_txns") == 600
    assert await conn.fetchval("SELECT count(*) FROM queen.log_timers") == 0
