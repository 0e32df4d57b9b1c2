"""queen-http: the HTTP transport of queen-timers, speaking the Queen wire so the official
`queen-mq` client works unchanged.

Registered under the entry-point group `queen_timers.transports` as `http`. Started with
AppRunner/TCPSite, so it runs inside any asyncio program:

    t = HttpTransport(settings)
    await t.start(queen)   # returns once the socket accepts
    ...
    await t.stop()
"""

from __future__ import annotations

import logging
import os
from typing import Any

from aiohttp import web

from queen_timers.identity import Authenticator
from queen_timers.settings import Setting, Settings, parse_bool

from .app import ROUTES, build_app, openapi
from .browser_guard import BrowserGuard, is_loopback, parse_hosts, parse_origins

__all__ = ["ROUTES", "SETTINGS", "HttpTransport", "build_app", "openapi"]

log = logging.getLogger("queen_http")

SETTINGS: list[Setting] = [
    Setting(
        "http_host",
        "QUEEN_HTTP_HOST",
        "127.0.0.1",
        "Address the HTTP transport listens on (beyond loopback: configure JWT auth).",
        str,
        "http",
    ),
    Setting(
        "http_port",
        "QUEEN_HTTP_PORT",
        6632,
        "Port of the HTTP transport (0: any free port).",
        int,
        "http",
    ),
    Setting(
        "http_max_body_bytes",
        "QUEEN_HTTP_MAX_BODY_BYTES",
        64 * 1024 * 1024,
        "Largest request body; a larger one is answered 413 before it is read whole.",
        int,
        "http",
    ),
    Setting(
        "http_access_log",
        "QUEEN_HTTP_ACCESS_LOG",
        False,
        "Log every request (off by default: a log line per request is a cost at "
        "thousands of requests per second).",
        parse_bool,
        "http",
    ),
    Setting(
        "http_allowed_origins",
        "QUEEN_HTTP_ALLOWED_ORIGINS",
        frozenset(),
        "Comma-separated origins (scheme://host[:port]) whose web pages may call the API "
        "cross-origin: they get CORS answers and may change state. Empty: only the broker's "
        "own pages. '*' is refused.",
        parse_origins,
        "http",
        default_doc="(none)",
    ),
    Setting(
        "http_allowed_hosts",
        "QUEEN_HTTP_ALLOWED_HOSTS",
        frozenset(),
        "Comma-separated host names accepted in the Host header besides loopback ones while "
        "listening on loopback, e.g. a reverse proxy's public name (any other name is refused "
        "against DNS rebinding).",
        parse_hosts,
        "http",
        default_doc="(none)",
    ),
]


def own_settings(settings: Settings, declared: list[Setting]) -> dict[str, Any]:
    """This transport's settings. A Settings built without our declarations (a program that
    constructs the transport by hand) falls back to the environment and defaults."""
    out = {}
    for s in declared:
        try:
            out[s.name] = getattr(settings, s.name)
        except AttributeError:
            out[s.name] = s.resolve({}, os.environ)
    return out


class HttpTransport:
    name = "http"
    settings = SETTINGS

    def __init__(self, settings: Settings | None = None):
        cfg = own_settings(settings if settings is not None else Settings(), SETTINGS)
        self.host: str = cfg["http_host"]
        self.port: int = cfg["http_port"]
        self.max_body_bytes: int = cfg["http_max_body_bytes"]
        self.access_log: bool = cfg["http_access_log"]
        # Parsed again: a value given in code (not from the environment) skips the parser.
        self.allowed_origins: frozenset[str] = parse_origins(cfg["http_allowed_origins"])
        self.allowed_hosts: frozenset[str] = parse_hosts(cfg["http_allowed_hosts"])
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self, queen: Any) -> None:
        if self._runner is not None:
            return
        # Identity is broker-wide policy: verified with the service's settings, so every
        # transport of one broker accepts the same tokens.
        auth = Authenticator(queen.settings)
        if not auth.enabled and not is_loopback(self.host):
            log.warning(
                "HTTP transport listens on %s without authentication: every caller is "
                "the default tenant with admin rights; set QUEEN_JWT_SECRET or "
                "QUEEN_JWT_PUBLIC_KEY",
                self.host,
            )
        guard = BrowserGuard(
            allowed_origins=self.allowed_origins,
            allowed_hosts=self.allowed_hosts,
            check_host=is_loopback(self.host),
        )
        app = build_app(queen, auth, max_body_bytes=self.max_body_bytes, guard=guard)
        # handler_cancellation: a client that hangs up during a long-poll cancels its pop.
        # Without it the parked pop would live on, claim the next message for nobody and
        # hold it under lease until the lease expires.
        runner = web.AppRunner(
            app, access_log=log if self.access_log else None, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        if self.port == 0:
            self.port = runner.addresses[0][1]
        log.info("HTTP transport listening on %s", self.url)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
