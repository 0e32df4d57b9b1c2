"""Queen timers: scheduled messages on PostgreSQL."""

from .errors import QueenError
from .identity import DEFAULT_TENANT, Identity
from .service import Queen
from .settings import Settings

__all__ = ["DEFAULT_TENANT", "Identity", "Queen", "QueenError", "Settings", "__version__"]

__version__ = "0.1.0"
