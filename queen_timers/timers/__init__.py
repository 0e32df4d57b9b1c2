"""Timers: scheduled messages staged in queen.log_timers and fired into the log exactly once.

ops (validation before the database), store (the stored procedures), pack (segments, outside
any transaction), fire (probe / claim / fire_claimed / release / drain), and backoff (what a
failed fire costs, by the failure classes of queen_timers.db.errors). The sweeper loop lives in
sweeper.py.
"""

from .fire import ClaimedTimer, FireReport, Probe, claim, drain, fire_claimed, probe, release

__all__ = [
    "ClaimedTimer",
    "FireReport",
    "Probe",
    "claim",
    "drain",
    "fire_claimed",
    "probe",
    "release",
]
