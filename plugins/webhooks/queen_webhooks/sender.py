"""One HTTP attempt: aiohttp with no redirects, a total timeout, a bounded read of the answer,
and every address the host resolves to checked against the allow-list before a connection is
made (queen_timers.webhooks.netguard)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from queen_timers.webhooks.netguard import Blocked, Networks, check_url

__all__ = ["Answer", "Sender"]


class BlockedAddress(OSError):
    """Raised by the resolver: aiohttp hands an OSError back as the connection's failure."""


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int | None  # None: no HTTP answer
    latency_ms: int
    error: str | None  # what went wrong, with an excerpt of the answer's body
    retry_after: str | None
    blocked: bool = False  # the address is refused: permanent


class _GuardedResolver(AbstractResolver):
    def __init__(self, networks: Networks):
        self._inner = ThreadedResolver()
        self._networks = networks

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for r in found:
            try:
                self._networks.check(r["host"])
            except Blocked as exc:
                raise BlockedAddress(f"{host} resolves to {r['host']}: {exc}") from None
        return found

    async def close(self) -> None:
        await self._inner.close()


class Sender:
    def __init__(self, networks: Networks, excerpt_bytes: int):
        self._networks = networks
        self._excerpt = excerpt_bytes
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(
            resolver=_GuardedResolver(self._networks), limit=0, ttl_dns_cache=10
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            headers={"user-agent": "queen-webhooks"},
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout_ms: int
    ) -> Answer:
        assert self._session is not None, "Sender.start first"
        t0 = time.perf_counter()

        def took() -> int:
            return int((time.perf_counter() - t0) * 1000)

        try:
            check_url(url, self._networks)  # a literal address never reaches the resolver
        except Blocked as exc:
            return Answer(None, took(), f"refused: {exc}", None, blocked=True)
        try:
            async with self._session.request(
                method,
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout_ms / 1000),
            ) as resp:
                excerpt = await resp.content.read(self._excerpt)
                error = None
                if not 200 <= resp.status < 300:
                    text = excerpt.decode("utf-8", "replace")
                    error = f"HTTP {resp.status}: {text}" if text else f"HTTP {resp.status}"
                return Answer(resp.status, took(), error, resp.headers.get("retry-after"))
        except aiohttp.ClientConnectorError as exc:
            cause: Any = exc.os_error
            if isinstance(cause, BlockedAddress):
                return Answer(None, took(), f"refused: {cause}", None, blocked=True)
            return Answer(None, took(), f"connection failed: {exc}", None)
        except TimeoutError:
            return Answer(None, took(), f"no answer within {timeout_ms} ms", None)
        except (aiohttp.ClientError, asyncio.IncompleteReadError, OSError) as exc:
            return Answer(None, took(), f"{type(exc).__name__}: {exc}", None)
