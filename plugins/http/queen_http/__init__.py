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

import dataclasses
import logging
from typing import Any

from aiohttp import web

from queen_timers.identity import Authenticator
from queen_timers.settings import Settings, at_least, between, host_name, setting, text_format
from queen_timers.transport import is_loopback, own_settings, warn_if_open

from .app import ROUTES, build_app, openapi
from .browser_guard import BrowserGuard, parse_hosts, parse_origins

__all__ = ["ROUTES", "HttpSettings", "HttpTransport", "__version__", "build_app", "openapi"]

__version__ = "0.1.0"

log = logging.getLogger("queen_http")


@dataclasses.dataclass(frozen=True)
class HttpSettings:
    """The HTTP transport's settings (`queen serve --help` lists them)."""

    http_host: str = setting(
        "QUEEN_HTTP_HOST",
        "127.0.0.1",
        "Address the HTTP transport listens on (beyond loopback: configure JWT auth).",
        group="http",
        check=host_name(),
    )
    http_port: int = setting(
        "QUEEN_HTTP_PORT",
        6632,
        "Port of the HTTP transport (0: any free port).",
        group="http",
        check=between(0, 65535, "a TCP port; 0: any free one"),
    )
    http_max_body_bytes: int = setting(
        "QUEEN_HTTP_MAX_BODY_BYTES",
        64 * 1024 * 1024,
        "Largest request body; a larger one is answered 413 before it is read whole.",
        group="http",
        check=at_least(1),
    )
    http_access_log: bool = setting(
        "QUEEN_HTTP_ACCESS_LOG",
        False,
        "Log every request (off by default: a log line per request is a cost at "
        "thousands of requests per second).",
        group="http",
    )
    http_allowed_origins: frozenset[str] = setting(
        "QUEEN_HTTP_ALLOWED_ORIGINS",
        frozenset(),
        "Comma-separated origins (scheme://host[:port]) whose web pages may call the API "
        "cross-origin: they get CORS answers and may change state. Empty: only the broker's "
        "own pages. '*' is refused.",
        group="http",
        check=text_format(
            "comma-separated origins, scheme://host[:port] (http or https)",
            parse_origins,
        ),
        parse=parse_origins,
        default_doc="(none)",
    )
    http_allowed_hosts: frozenset[str] = setting(
        "QUEEN_HTTP_ALLOWED_HOSTS",
        frozenset(),
        "Comma-separated host names accepted in the Host header besides loopback ones while "
        "listening on loopback, e.g. a reverse proxy's public name (any other name is refused "
        "against DNS rebinding).",
        group="http",
        check=text_format("comma-separated host names or addresses, without a port", parse_hosts),
        parse=parse_hosts,
        default_doc="(none)",
    )


class HttpTransport:
    name = "http"
    settings_class = HttpSettings

    def __init__(self, settings: Settings | None = None):
        cfg = own_settings(HttpSettings, settings)
        self.host = cfg.http_host
        self.port = cfg.http_port
        self.max_body_bytes = cfg.http_max_body_bytes
        self.access_log = cfg.http_access_log
        # Parsed again: a value given in code (not from the environment) skips the parser.
        self.allowed_origins = parse_origins(cfg.http_allowed_origins)
        self.allowed_hosts = parse_hosts(cfg.http_allowed_hosts)
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
        warn_if_open(log, "HTTP transport", self.host, auth)
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
