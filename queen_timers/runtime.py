"""What every core module needs at run time: built once by the service and passed down."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

import asyncpg

from .crypto import Cipher
from .db.pooler import Link
from .fairshare import TenantShare
from .firewindow import FireWindow
from .metrics import Metrics
from .notify import Notifier
from .quotas import TenantQuotas
from .settings import Settings
from .switches import Switches
from .wake import WakeHub

__all__ = ["Runtime"]


@dataclasses.dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    database_url: str
    hub: WakeHub
    cipher: Cipher | None = None
    notifier: Notifier | None = None
    metrics: Metrics | None = None
    switches: Switches = dataclasses.field(default_factory=Switches)
    # direct, or through a pooler: every pool the broker opens follows it
    link: Link = dataclasses.field(default_factory=Link)
    # per-tenant limits of schedules (quotas.py); None until the service starts it
    quotas: TenantQuotas | None = None
    # this broker's recent fire (timers/s, lag percentiles), fed by its sweeper
    fire_window: FireWindow = dataclasses.field(default_factory=FireWindow)
    # pooled connections each tenant's timer writes hold (timers/locks.py: the fair share)
    tenant_share: TenantShare = dataclasses.field(default_factory=TenantShare)

    def pushed(self, tenant: uuid.UUID, queues: Iterable[str]) -> None:
        """After a commit that appended to `queues`: wake local long-polls and peers."""
        for q in set(queues):
            self.hub.queue_pushed(tenant, q)
            if self.notifier is not None:
                self.notifier.queue_pushed(tenant, q)

    def timers_scheduled(self, earliest_epoch: float) -> None:
        """After a commit that scheduled timers, the earliest deliver_at (epoch seconds): wakes
        the local sweeper if that is before its deadline, and peers through NOTIFY."""
        self.hub.timer_due(earliest_epoch)
        if self.notifier is not None:
            self.notifier.timer_scheduled(earliest_epoch)
