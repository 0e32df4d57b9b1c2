"""Queen timers: scheduled messages on PostgreSQL."""

from .errors import QueenError
from .identity import DEFAULT_TENANT, Identity
from .service import Queen
from .settings import Settings
from .sqlapi import TimerRefused, cancel, cancel_sync, schedule, schedule_sync

__all__ = [
    "DEFAULT_TENANT",
    "Identity",
    "Queen",
    "QueenError",
    "Settings",
    "TimerRefused",
    "__version__",
    "cancel",
    "cancel_sync",
    "schedule",
    "schedule_sync",
]

__version__ = "0.1.0"
