"""What every core module needs at run time, built once by the service and passed down."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import asyncpg

from .crypto import Cipher
from .settings import Settings
from .wake import WakeHub

if TYPE_CHECKING:
    from .metrics import Metrics
    from .notify import Notifier

__all__ = ["Runtime"]


@dataclasses.dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    database_url: str
    hub: WakeHub
    cipher: Cipher | None = None
    notifier: "Notifier | None" = None
    metrics: "Metrics | None" = None
    extras: dict[str, Any] = dataclasses.field(default_factory=dict)

    def pushed(self, tenant, queues) -> None:
        """After a commit that appended to `queues`: wake local long-polls and peers."""
        for q in set(queues):
            self.hub.queue_pushed(tenant, q)
            if self.notifier is not None:
                self.notifier.queue_pushed(tenant, q)
