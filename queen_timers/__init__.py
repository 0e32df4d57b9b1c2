"""Queen timers: scheduled messages on PostgreSQL."""

from .errors import QueenError
from .identity import DEFAULT_TENANT, Identity
from .settings import Settings

__all__ = ["DEFAULT_TENANT", "Identity", "Queen", "QueenError", "Settings", "__version__"]

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Queen":  # lazy: importing the package must not import asyncpg eagerly
        from .service import Queen

        return Queen
    raise AttributeError(name)
