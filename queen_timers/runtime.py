"""What every core module needs at run time: built complete, once, by Queen.start, and passed
down; nothing is set on it afterwards."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

import asyncpg

from .crypto import Cipher
from .db.pooler import Link
from .db.reads import Reads
from .fairshare import TenantShare
from .firewindow import FireWindow
from .metrics import Metrics
from .notify import Notifier, NullNotifier
from .quotas import TenantQuotas
from .settings import Settings
from .switches import Switches
from .wake import WakeHub

__all__ = ["Runtime"]


@dataclasses.dataclass(frozen=True)
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    database_url: str
    hub: WakeHub
    # the at-rest cipher of payloads; None: QUEEN_ENCRYPTION_KEY unset
    cipher: Cipher | None
    # cross-broker wake-ups; a NullNotifier where QUEEN_SWEEPER_NOTIFY=false
    notifier: Notifier | NullNotifier
    metrics: Metrics
    # the kill switches, kept current by the service's SwitchBoard
    switches: Switches
    # direct, or through a pooler: every pool the broker opens follows it
    link: Link
    # per-tenant limits of schedules (quotas.py), started by the service
    quotas: TenantQuotas
    # this broker's recent fire (timers/s, lag percentiles), fed by its sweeper
    fire_window: FireWindow
    # pooled connections each tenant's timer writes hold (the fair share, fairshare.py)
    tenant_share: TenantShare
    # the operator's reads: a replica's pool (QUEEN_READ_DATABASE_URL), else `pool`
    reads: Reads

    def pushed(self, tenant: uuid.UUID, queues: Iterable[str]) -> None:
        """After a commit that appended to `queues`: wake local long-polls and peers."""
        for q in set(queues):
            self.hub.queue_pushed(tenant, q)
            self.notifier.queue_pushed(tenant, q)

    def timers_scheduled(self, earliest_epoch: float) -> None:
        """After a commit that scheduled timers, the earliest deliver_at (epoch seconds): wakes
        the local sweeper if that is before its deadline, and peers through NOTIFY."""
        self.hub.timer_due(earliest_epoch)
        self.notifier.timer_scheduled(earliest_epoch)
