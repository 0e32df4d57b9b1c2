"""The fire's side of recurring schedules: which claimed timers are schedule occurrences, and
what each one's fire does (deliver or skip it, and which occurrence comes next).

A claimed row is an occurrence when its key is `schedule:next:<scheduleKey>` (the cadence) or
`schedule:run:<instant>:<scheduleKey>` (a run-now) and its txn is the occurrence's
`sched:<scheduleId>@<instant>`. The broker computes the next instant (cron, zone, DST: see
recurrence.py) from the definition it reads here; the fire procedure stages it only if the
schedule still has that definition's generation (migrations/033_schedules.sql), so a definition
changed meanwhile is never advanced by a stale computation.

Catch-up. An occurrence fired later than QUEEN_SCHEDULES_MISFIRE_GRACE_MS after its due time is
missed; the occurrences whose instant is already before `now - grace` were missed with it. Then:
* `skip`: the missed occurrence is not delivered (ledger: skipped); the next is the first not
  missed;
* `once`: it is delivered, as the one message of the missed run; the next is the first not
  missed;
* `all` (cap C): every missed occurrence is delivered, oldest first, but no more than the C most
  recent ones: an occurrence older than those is skipped and the chain jumps to them.
A pause is an outage too: resume stages the pending instant again, and its fire applies this.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from ..db import Conn
from . import schedule_store
from .recurrence import Recurrence, RecurrenceError, iso, jitter_offset_ms, parse_instant
from .store import ClaimedTimer

__all__ = [
    "CADENCE_PREFIX",
    "RUN_PREFIX",
    "OccurrencePlan",
    "cadence_key",
    "parse_key",
    "plan",
    "recurrence_of",
    "run_key",
]

CADENCE_PREFIX = "schedule:next:"
RUN_PREFIX = "schedule:run:"
_ISO_LEN = len("2030-01-01T00:00:00.000Z")

Key = tuple[uuid.UUID, str, str]  # (tenant, queue, timer key)


def cadence_key(schedule_key: str) -> str:
    return CADENCE_PREFIX + schedule_key


def run_key(schedule_key: str, at: dt.datetime) -> str:
    return f"{RUN_PREFIX}{iso(at)}:{schedule_key}"


def parse_key(timer_key: str) -> tuple[str, str] | None:
    """(kind, scheduleKey) of an occurrence's timer key: kind `cadence` or `run`; else None."""
    if timer_key.startswith(CADENCE_PREFIX):
        return "cadence", timer_key[len(CADENCE_PREFIX) :]
    if timer_key.startswith(RUN_PREFIX):
        rest = timer_key[len(RUN_PREFIX) :]
        if len(rest) > _ISO_LEN and rest[_ISO_LEN] == ":":
            return "run", rest[_ISO_LEN + 1 :]
    return None


def _instant_of_txn(txn: str, sid: uuid.UUID, kind: str) -> tuple[str, dt.datetime] | None:
    """(kind, instant) from an occurrence's txn: `sched:<id>@<instant>` (cadence),
    `@run:<instant>` (run now), `@seed:<instant>` (the SQL API's seed: the broker computes the
    first occurrence); None when the txn is not this schedule's."""
    head = f"sched:{sid}@"
    if not txn.startswith(head):
        return None
    rest = txn[len(head) :]
    if kind == "run":
        if not rest.startswith("run:"):
            return None
        rest = rest[4:]
    elif rest.startswith("seed:"):
        kind, rest = "seed", rest[5:]
    try:
        return kind, parse_instant(rest)
    except ValueError:
        return None


def recurrence_of(row: Any) -> Recurrence:
    """The cadence of a schedule row (queen.schedules, or the fire's read of it)."""
    return Recurrence(
        cron=row["cron"],
        every_ms=None if row["every_ms"] is None else int(row["every_ms"]),
        zone_name=row["zone"],
        anchor=row["anchor_at"],
        start_at=row["start_at"],
        end_at=row["end_at"],
    )


@dataclasses.dataclass
class OccurrencePlan:
    """What the fire does with the occurrences of one claim. `items` are the rows to deliver
    (with what the fire procedure needs to stage the next), by (tenant, queue, timer key);
    `skip` the rows to drop without delivering (each with its claim token)."""

    items: dict[Key, dict[str, Any]] = dataclasses.field(default_factory=dict)
    skip: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def skipped_keys(self) -> set[Key]:
        return {(uuid.UUID(i["tenant"]), i["queue"], i["timerKey"]) for i in self.skip}


async def plan(
    conn: Conn, claimed: Sequence[ClaimedTimer], now: dt.datetime | None, grace_ms: int
) -> OccurrencePlan | None:
    """The plan for the occurrences among `claimed`; None when there are none (the fire is then
    exactly the timer fire, with no extra statement)."""
    found = [(t, p) for t in claimed if (p := parse_key(t.timer_key)) is not None]
    if not found:
        return None
    rows = await schedule_store.for_fire(
        conn, [t.tenant for t, _ in found], [t.queue for t, _ in found], [p[1] for _, p in found]
    )
    defs = {(r["tenant_id"], r["queue"], r["schedule_key"]): r for r in rows}
    at_now = now if now is not None else dt.datetime.now(dt.UTC)
    out = OccurrencePlan()
    for t, (kind, skey) in found:
        s = defs.get((t.tenant, t.queue, skey))
        if s is None:
            continue  # deleted: an ordinary timer now
        parsed = _instant_of_txn(t.txn, s["schedule_id"], kind)
        if parsed is None:
            continue  # not this schedule's occurrence (a timer that borrowed the key)
        kind, instant = parsed
        item: dict[str, Any] = {
            "tenant": str(t.tenant),
            "queue": t.queue,
            "scheduleKey": skey,
            "timerKey": t.timer_key,
            "kind": kind,
            "at": None if kind == "seed" else iso(instant),
            "due": t.deliver_at.isoformat(),
            "messageId": str(t.message_id),
            "generation": int(s["generation"]),
        }
        deliver = kind != "seed"  # a seed is never delivered: it only starts the cadence
        if kind != "run":
            try:
                if kind == "seed":
                    nxt = recurrence_of(s).next_after(max(at_now, instant))
                else:
                    deliver, nxt = _next(s, instant, t.deliver_at, at_now, grace_ms)
            except RecurrenceError:
                nxt = None  # a definition this build cannot read (the SQL API's): stop here
            if nxt is not None:
                due = nxt + dt.timedelta(
                    milliseconds=jitter_offset_ms(s["schedule_id"], nxt, int(s["jitter_ms"]))
                )
                item.update(nextAt=iso(nxt), nextDueAt=due.isoformat())
        if deliver:
            out.items[(t.tenant, t.queue, t.timer_key)] = item
        else:
            out.skip.append({**item, "token": str(t.token)})
    return out


def _next(
    s: Any, instant: dt.datetime, due: dt.datetime, now: dt.datetime, grace_ms: int
) -> tuple[bool, dt.datetime | None]:
    """(deliver this occurrence?, the next one to stage) by the catch-up policy."""
    rec = recurrence_of(s)
    grace = dt.timedelta(milliseconds=grace_ms)
    if now - due <= grace:
        return True, rec.next_after(instant)
    horizon = now - grace  # occurrences before it are missed too
    first_live = rec.next_after(max(instant, horizon - dt.timedelta(milliseconds=1)))
    policy = s["catch_up"]
    if policy == "skip":
        return False, first_live
    if policy == "once":
        return True, first_live
    cap = int(s["catch_up_cap"])
    later = rec.recent(horizon, instant, cap)
    if len(later) < cap:  # this one and the missed after it are at most `cap`
        return True, rec.next_after(instant)
    return False, later[0]  # older than the `cap` most recent missed: skipped
