"""`queen schedules ...` as a person runs it: set, list, peek, pause, resume, run, delete."""

from __future__ import annotations

from .helpers import queen, queen_json


def test_schedules_round_trip(db_url):
    db = ("--database-url", db_url)
    made = queen_json(
        "schedules", "set", "reports", "daily", "--cron", "0 9 * * 1-5",
        "--zone", "Europe/Paris", "--payload", "hello", "--jitter", "1000", *db,
    )  # fmt: skip
    assert made["status"] == "created" and made["schedule"]["zone"] == "Europe/Paris"
    listed = queen("schedules", "list", "reports", *db).stdout
    assert "daily" in listed and "0 9 * * 1-5" in listed
    text = queen("schedules", "peek", "reports", "daily", "--next", "2", *db).stdout
    assert "next occurrences" in text and "09:00:00+0" in text
    assert "paused" in queen("schedules", "pause", "reports", "daily", *db).stdout
    assert "resumed" in queen("schedules", "resume", "reports", "daily", *db).stdout
    ran = queen_json("schedules", "run", "reports", "daily", *db)
    assert ran["status"] == "scheduled"
    too_fast = queen("schedules", "set", "reports", "f", "--every", "5", "--payload", "x", *db,
                     check=False)  # fmt: skip
    assert too_fast.returncode != 0 and "schedule_too_frequent" in too_fast.stderr
    assert "deleted" in queen("schedules", "delete", "reports", "daily", *db).stdout
    gone = queen("schedules", "delete", "reports", "daily", *db, check=False)
    assert gone.returncode == 1
