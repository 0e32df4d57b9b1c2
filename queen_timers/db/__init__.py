"""The database layer: the embedded PostgreSQL, the pool, the migrations, named queries."""

from .conn import Conn
from .embedded import EmbeddedPostgres
from .migrate import apply_migrations, migration_files
from .pool import MIN_SERVER_VERSION, check_server_version, connect_pool
from .queries import Q

__all__ = [
    "MIN_SERVER_VERSION",
    "Conn",
    "EmbeddedPostgres",
    "Q",
    "apply_migrations",
    "check_server_version",
    "connect_pool",
    "migration_files",
]
