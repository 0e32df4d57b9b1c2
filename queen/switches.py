"""Runtime kill switches shared by every broker, stored in queen.system_state.

Keys: `timers_schedule_enabled` (false: schedules and reschedules are refused with
`timers_disabled`; cancel, peek and list are never blocked; existing timers still fire) and
`timers_fire_enabled` (false: the sweeper fires nothing; timers wait). A missing row means on;
unknown keys are ignored. Each broker re-reads the rows every `switches_refresh_ms`, so a flip
on one broker reaches every broker within a second.
"""

from __future__ import annotations

__all__ = ["Switches", "SWITCH_KEYS"]

SWITCH_KEYS = ("timers_schedule_enabled", "timers_fire_enabled")


class Switches:
    def __init__(self) -> None:
        self.timers_schedule_enabled = True
        self.timers_fire_enabled = True

    def adopt(self, rows: dict[str, object]) -> None:
        self.timers_schedule_enabled = rows.get("timers_schedule_enabled", True) is not False
        self.timers_fire_enabled = rows.get("timers_fire_enabled", True) is not False
