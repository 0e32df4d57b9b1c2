"""The connection types every database call is written against.

A pooled connection is a `PoolConnectionProxy`, which asyncpg's stubs do not make a subtype of
`Connection` (it forwards by attribute); code that runs on either takes `Conn`.
"""

from __future__ import annotations

from typing import TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

__all__ = ["Conn"]

Conn: TypeAlias = asyncpg.Connection | PoolConnectionProxy
