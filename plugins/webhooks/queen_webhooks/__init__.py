"""Delivery of fired messages to HTTP endpoints (docs/guides/webhooks.md).

A delivery plugin of queen-timers (entry-point group `queen_timers.deliveries`): for every
webhook target of every tenant (managed over HTTP, TCP, the CLI and the console; stored by the
core), a loop pops the target's queue like any consumer and sends each message, signed per the
Standard Webhooks spec, with retries, a rate limit and a dead-letter queue (worker.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from queen_timers.service import Queen
from queen_timers.setting_rules import between
from queen_timers.settings import Settings, setting
from queen_timers.transport import own_settings
from queen_timers.webhooks.netguard import Networks, parse_networks

from .metrics import WebhookMetrics
from .recorder import Recorder
from .sender import Sender
from .worker import TargetWorker

__all__ = ["WebhookDelivery", "WebhookSettings"]
__version__ = "0.1.0"

log = logging.getLogger("queen_webhooks")


@dataclasses.dataclass(frozen=True)
class WebhookSettings:
    """The webhook delivery's settings (`queen serve --help` lists them)."""

    webhooks_enabled: bool = setting(
        "QUEEN_WEBHOOKS_ENABLED",
        True,
        "Deliver webhook targets from this broker (every broker that delivers shares the work "
        "through the targets' queues).",
        group="webhooks",
    )
    webhooks_refresh_ms: int = setting(
        "QUEEN_WEBHOOKS_REFRESH_MS",
        1000,
        "How often a broker reads the targets again: a new, changed or deleted target takes "
        "effect within this (ms).",
        group="webhooks",
        check=between(50, 3_600_000),
    )
    webhooks_batch: int = setting(
        "QUEEN_WEBHOOKS_BATCH",
        64,
        "Messages one pop of a target's queue takes; they are sent `concurrency` at a time and "
        "settled in one transaction.",
        group="webhooks",
        check=between(1, 1000),
    )
    webhooks_attempts_kept: int = setting(
        "QUEEN_WEBHOOKS_ATTEMPTS_KEPT",
        1000,
        "Delivery attempts kept per target (the newest) for the CLI and the console.",
        group="webhooks",
        check=between(1, 1_000_000),
    )
    webhooks_response_bytes: int = setting(
        "QUEEN_WEBHOOKS_RESPONSE_BYTES",
        1024,
        "Bytes of a failed answer's body read and kept with the attempt and the dead letter.",
        group="webhooks",
        check=between(0, 65536),
    )


class WebhookDelivery:
    """Starts one TargetWorker per target, and keeps the set in step with the database."""

    name = "webhooks"
    settings_class = WebhookSettings

    def __init__(self, settings: Settings | None = None):
        self.settings = own_settings(WebhookSettings, settings)
        core = settings if settings is not None else Settings()
        self.networks = Networks(parse_networks(core.webhook_allow_networks))
        self.workers: dict[tuple[object, str], TargetWorker] = {}
        self._queen: Queen | None = None
        self._sender: Sender | None = None
        self._metrics: WebhookMetrics | None = None
        self.recorder: Recorder | None = None
        self._task: asyncio.Task[None] | None = None
        # One reconciliation at a time: two at once would both start a worker for a new target.
        self._refreshing = asyncio.Lock()

    async def start(self, queen: Queen) -> None:
        if not self.settings.webhooks_enabled:
            log.info("QUEEN_WEBHOOKS_ENABLED=false: this broker delivers no webhooks")
            return
        self._queen = queen
        self._sender = Sender(self.networks, self.settings.webhooks_response_bytes)
        await self._sender.start()
        self._metrics = WebhookMetrics(queen.metrics_registry)
        self.recorder = Recorder(queen, self.settings.webhooks_attempts_kept)
        self.recorder.start()
        await self.refresh()
        self._task = asyncio.create_task(self._refresh_loop(), name="webhooks:refresh")

    async def refresh(self) -> None:
        """Read the targets now: start, update and stop workers to match."""
        async with self._refreshing:
            await self._reconcile()

    async def _reconcile(self) -> None:
        assert self._queen is not None and self._sender is not None and self._metrics
        assert self.recorder is not None
        found = {(t.tenant, t.name): t for t in await self._queen.webhook_delivery_targets()}
        for key in [k for k in self.workers if k not in found]:
            await self.workers.pop(key).stop(grace_s=5)
        for key, target in found.items():
            worker = self.workers.get(key)
            if worker is not None and worker.target.queue == target.queue:
                worker.update(target)
                continue
            if worker is not None:  # moved to another queue: a new loop, on the new queue
                await self.workers.pop(key).stop(grace_s=5)
            worker = TargetWorker(
                self._queen,
                target,
                self._sender,
                self._metrics,
                batch=self.settings.webhooks_batch,
                recorder=self.recorder,
            )
            self.workers[key] = worker
            worker.start()

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.webhooks_refresh_ms / 1000)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the database away: the workers go on
                log.warning("webhook targets not refreshed: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        workers, self.workers = list(self.workers.values()), {}
        # In-flight attempts end within a target's timeout; a grace of 10 s covers the default.
        await asyncio.gather(*(w.stop(grace_s=10) for w in workers))
        if self.recorder is not None:
            await self.recorder.stop()  # after the workers: their last attempts are written
            self.recorder = None
        if self._sender is not None:
            await self._sender.close()
            self._sender = None
        if self._metrics is not None and self._queen is not None:
            for c in vars(self._metrics).values():
                self._queen.metrics_registry.unregister(c)
            self._metrics = None
