"""The database URL's checks, where the database layer's users look for them (they live in
queen_timers.pgurl, below the settings, which check a URL before anything connects)."""

from ..pgurl import BadDatabaseUrl, Target, parse_database_url, redacted

__all__ = ["BadDatabaseUrl", "Target", "parse_database_url", "redacted"]
