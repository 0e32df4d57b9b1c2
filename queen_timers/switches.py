"""Runtime kill switches shared by every broker, stored in queen.system_state.

Keys: `timers_schedule_enabled` (false: schedules and reschedules are refused with
`timers_disabled`; cancel, peek and list are never blocked; existing timers still fire) and
`timers_fire_enabled` (false: the sweeper fires nothing; timers wait, and on resume the backlog
drains oldest first). A missing row means on; a flip naming an unknown key is refused. Every
broker re-reads the rows every `switches_refresh_ms` (500 ms), so a flip on one broker is seen
by every broker within a second; the broker that flips adopts it at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

from .background import cancel_and_wait
from .db.outage import absorbed
from .db.queries import Q
from .errors import QueenError

__all__ = ["SWITCH_KEYS", "SwitchBoard", "Switches"]

log = logging.getLogger("queen_timers.switches")

SWITCH_KEYS = ("timers_schedule_enabled", "timers_fire_enabled")
# wire field (POST body) -> key
_WIRE = {"timersSchedule": "timers_schedule_enabled", "timersFire": "timers_fire_enabled"}


class Switches:
    """The in-process view: what the hot paths read (no database round trip)."""

    def __init__(self) -> None:
        self.timers_schedule_enabled = True
        self.timers_fire_enabled = True

    def adopt(self, rows: dict[str, Any]) -> None:
        sched = rows.get("timers_schedule_enabled", True) is not False
        fire = rows.get("timers_fire_enabled", True) is not False
        if (sched, fire) != (self.timers_schedule_enabled, self.timers_fire_enabled):
            for key, old, new in (
                ("timers_schedule_enabled", self.timers_schedule_enabled, sched),
                ("timers_fire_enabled", self.timers_fire_enabled, fire),
            ):
                if old != new:
                    log.warning("kill switch %s is now %s", key, "ON" if new else "OFF")
            self.timers_schedule_enabled, self.timers_fire_enabled = sched, fire

    def as_wire(self) -> dict[str, bool]:
        return {
            "timersScheduleEnabled": self.timers_schedule_enabled,
            "timersFireEnabled": self.timers_fire_enabled,
        }


class SwitchBoard:
    """Keeps a broker's `Switches` in step with queen.system_state and flips it for operators."""

    def __init__(
        self, pool: asyncpg.Pool, switches: Switches, *, refresh_ms: int, database_url: str
    ):
        self.pool = pool
        self.database_url = database_url  # whose outage a failed refresh belongs to
        self.switches = switches
        self.refresh_ms = refresh_ms
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        rows = await self.pool.fetch(Q.switches_read, list(SWITCH_KEYS))
        self.switches.adopt({r["key"]: r["value"] for r in rows})

    async def start(self) -> None:
        await self.refresh()
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="queen-switches")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        period = max(self.refresh_ms, 50) / 1000.0
        while True:
            await asyncio.sleep(period)
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - keep the last known state
                if not absorbed(self.database_url, exc):
                    log.warning("could not re-read the kill switches: %s", exc)

    async def set(self, changes: Any) -> dict[str, Any]:
        if not isinstance(changes, dict):
            raise QueenError("bad_request", "switches_bad_body", "body must be a JSON object")
        # An unknown key is refused, not skipped: a misspelt switch answered 200 would tell
        # the operator that a pause took effect when nothing was written.
        unknown = sorted(str(k) for k in changes if k not in _WIRE)
        if unknown:
            raise QueenError(
                "bad_request",
                "switches_unknown_key",
                f"unknown kill switch {', '.join(unknown)}; the switches are {', '.join(_WIRE)}",
            )
        wanted = dict(changes)
        if not wanted:
            raise QueenError(
                "bad_request",
                "switches_nothing_to_set",
                "at least one of timersSchedule, timersFire is required",
            )
        for k, v in wanted.items():
            if not isinstance(v, bool):
                raise QueenError("bad_request", "switches_not_boolean", f"{k} must be a boolean")
        async with self.pool.acquire() as conn:
            async with conn.transaction():
                for k, v in wanted.items():
                    await conn.execute(Q.switches_write, _WIRE[k], v)
        await self.refresh()
        out: dict[str, Any] = {**self.switches.as_wire(), "mirrored": True}
        if not self.switches.timers_fire_enabled:
            out["message"] = (
                "timer delivery is PAUSED on every broker: timers are kept and "
                "will fire when timersFire is switched back on"
            )
        else:
            out["message"] = "ok"
        return out
