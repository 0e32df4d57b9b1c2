"""The schedule routes over HTTP: create, list, peek (catch-all key), pause, resume, run now,
delete, and the flat error envelope of a refusal."""

from __future__ import annotations

import base64

from queen_timers.timers import fire


async def test_a_schedule_over_http(http, queen):
    payload = base64.b64encode(b'{"r": 1}').decode()
    body = {
        "queue": "reports",
        "scheduleKey": "daily/summary",
        "cron": "0 9 * * 1-5",
        "zone": "Europe/Paris",
        "payload": payload,
        "jitterMs": 1000,
    }
    async with http.post("/api/v1/schedules", json=body) as r:
        assert r.status == 200, await r.text()
        made = await r.json()
    assert made["status"] == "created" and made["schedule"]["zone"] == "Europe/Paris"

    async with http.get("/api/v1/schedules/reports", params={"prefix": "daily/"}) as r:
        page = await r.json()
    assert [s["scheduleKey"] for s in page["schedules"]] == ["daily/summary"]

    async with http.get("/api/v1/schedules/reports/daily/summary", params={"count": 3}) as r:
        view = await r.json()
    assert len(view["next"]) == 3
    assert all(o["local"].endswith(("+01:00", "+02:00")) for o in view["next"])
    assert all(o["local"][11:16] == "09:00" for o in view["next"])

    key = {"scheduleKey": "daily/summary"}
    async with http.post("/api/v1/schedules/reports/pause", json=key) as r:
        assert (await r.json())["paused"] is True
    async with http.post("/api/v1/schedules/reports/resume", json=key) as r:
        assert (await r.json())["paused"] is False
    async with http.post("/api/v1/schedules/reports/run", json=key) as r:
        ran = await r.json()
    assert ran["status"] == "scheduled" and ran["txn"].startswith("sched:")
    assert (await fire.drain(queen.rt)).fired == 1  # the run-now, due at once

    async with http.post("/api/v1/schedules", json={**body, "cron": "nope"}) as r:
        assert r.status == 400
        err = await r.json()
    assert err["error"] == "schedules_bad_request" and err["reason"] == "schedule_bad_cron"
    async with http.post("/api/v1/schedules/reports/pause", json={"scheduleKey": "x"}) as r:
        assert r.status == 404 and (await r.json())["error"] == "schedule_not_found"

    async with http.delete("/api/v1/schedules/reports/daily/summary") as r:
        assert (await r.json())["deleted"] is True
    async with http.get("/api/v1/schedules/reports/daily/summary") as r:
        assert r.status == 404
