"""What a web page may make this broker do: the Host, Origin, Content-Type and CORS checks.

Without JWT every caller is admin, and any page the operator visits can send requests to
127.0.0.1: a "simple" cross-origin request (a text/plain or form body, a GET from an <img>)
needs no CORS preflight, and DNS rebinding points a page's own name at 127.0.0.1. So:

* Host: while bound to loopback, the Host header must name a loopback address with the port the
  request arrived on (or a listed proxy name). A rebound page sends its own name and is refused.
* Origin: a route that changes state refuses a request whose Origin is present and neither the
  broker's own (scheme://Host) nor listed; a browser request without Origin that says it is
  cross-site (Sec-Fetch-Site) is refused too, since an <img> pop carries no Origin.
* Content-Type: a route that reads a JSON body takes only application/json, which a page can
  send cross-origin only after a preflight that this module answers for listed origins alone.
* CORS: Access-Control-Allow-Origin echoes a listed origin and nothing else, never `*`.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterable

from aiohttp import web

from queen_timers.errors import QueenError
from queen_timers.transport import is_loopback

__all__ = ["BrowserGuard", "parse_hosts", "parse_origins"]

# Request headers a page may send on a preflighted call: what the official client sends.
ALLOWED_REQUEST_HEADERS = "Authorization, Content-Type"
# How long a browser may cache a preflight answer, in seconds: a choice, not measured.
PREFLIGHT_MAX_AGE_S = 600
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Sec-Fetch-Site values of a request that another site's page made.
_CROSS_SITE = frozenset({"cross-site", "same-site"})


def _items(value: str | Iterable[str]) -> list[str]:
    parts = value.split(",") if isinstance(value, str) else list(value)
    return [p.strip() for p in parts if p.strip()]


def _origin(value: str) -> str:
    """One allowed origin, as a browser serialises it: lower case, no default port, no
    trailing slash. `*` and `null` are refused: each would let any page in."""
    parts = urllib.parse.urlsplit(value.strip().lower())
    if (
        parts.scheme not in _DEFAULT_PORTS
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise ValueError(
            f"not an origin: {value!r} (scheme://host[:port], http or https; '*' and 'null' "
            "are never allowed)"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = parts.port
    return f"{parts.scheme}://{host}" + (
        "" if port in (None, _DEFAULT_PORTS[parts.scheme]) else f":{port}"
    )


def parse_origins(value: str | Iterable[str]) -> frozenset[str]:
    """The allowed-origins setting: comma-separated origins."""
    return frozenset(_origin(v) for v in _items(value))


def parse_hosts(value: str | Iterable[str]) -> frozenset[str]:
    """The allowed-hosts setting: comma-separated host names or addresses, without a port
    (a reverse proxy in front chooses the port)."""
    hosts = set()
    for item in _items(value):
        parsed = _split_host(item)
        if parsed is None or parsed[1] is not None or "/" in item:
            raise ValueError(f"not a host name: {item!r} (a name or address, without a port)")
        hosts.add(parsed[0])
    return frozenset(hosts)


def _split_host(header: str) -> tuple[str, int | None] | None:
    """(name, port) of a Host header; None when it cannot be read."""
    if header.startswith("["):
        name, sep, rest = header[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    else:
        name, _, port_text = header.partition(":")
    if port_text and not port_text.isdigit():
        return None
    return name.lower().rstrip("."), int(port_text) if port_text else None


def _refused(reason: str, detail: str) -> QueenError:
    return QueenError("forbidden", reason, detail, 403)


@dataclasses.dataclass(frozen=True)
class BrowserGuard:
    allowed_origins: frozenset[str] = frozenset()
    allowed_hosts: frozenset[str] = frozenset()
    check_host: bool = True  # the Host check applies while bound to loopback

    # -- Host ----------------------------------------------------------------------------------
    def host(self, request: web.Request) -> None:
        if not self.check_host:
            return
        header = request.headers.get("Host", "")
        parsed = _split_host(header)
        if parsed is not None:
            name, port = parsed
            if name in self.allowed_hosts:
                return  # a reverse proxy's name: the proxy chose the port
            local = request.transport.get_extra_info("sockname") if request.transport else None
            arrived_on = local[1] if local else None
            if is_loopback(name) and (port if port is not None else 80) == arrived_on:
                return
        raise _refused(
            "host_not_allowed",
            f"the Host header {header!r} is not a loopback name with this broker's port: a "
            "page that reaches a loopback broker through another name (DNS rebinding) is "
            "refused; list a reverse proxy's name in QUEEN_HTTP_ALLOWED_HOSTS",
        )

    # -- Origin --------------------------------------------------------------------------------
    def _own_origin(self, request: web.Request) -> str:
        return f"{request.scheme}://{request.headers.get('Host', '')}".lower()

    def origin_allowed(self, request: web.Request, origin: str) -> bool:
        origin = origin.lower()
        return origin in self.allowed_origins or origin == self._own_origin(request)

    def state_change(self, request: web.Request) -> None:
        """Refuse a state-changing request that another site's page made."""
        origin = request.headers.get("Origin")
        if origin is not None:
            if self.origin_allowed(request, origin):
                return
            detail = (
                f"a page of {origin!r} may not call {request.method} {request.path}; list the "
                "origin in QUEEN_HTTP_ALLOWED_ORIGINS to allow it"
            )
        elif request.headers.get("Sec-Fetch-Site", "").lower() in _CROSS_SITE:
            detail = (
                f"a cross-site page may not call {request.method} {request.path} (a request "
                "without an Origin header that the browser marks Sec-Fetch-Site: cross-site)"
            )
        else:
            return  # not a browser's cross-site request: a program, or the operator's tab
        raise _refused("origin_not_allowed", detail)

    # -- Content-Type --------------------------------------------------------------------------
    @staticmethod
    def json_body(request: web.Request) -> None:
        """A body, when there is one, must be application/json (charset, if any, UTF-8)."""
        if not request.body_exists:
            return
        charset = request.charset
        if request.content_type == "application/json" and charset in (None, "utf-8", "utf8"):
            return
        got = request.headers.get("Content-Type")
        raise QueenError(
            "unsupported_media_type",
            "content_type_not_json",
            f"this route reads a JSON body: send Content-Type: application/json (got {got!r})",
            415,
        )

    # -- CORS ----------------------------------------------------------------------------------
    def cors_headers(self, request: web.Request) -> dict[str, str]:
        """What an answer carries for a listed origin; nothing for any other."""
        origin = request.headers.get("Origin")
        if origin is None or origin.lower() not in self.allowed_origins:
            return {}
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": "Retry-After",
            "Vary": "Origin",
        }

    def preflight(self, request: web.Request, methods: Iterable[str]) -> web.Response:
        """The answer to an OPTIONS preflight on a path that serves `methods`."""
        origin = request.headers.get("Origin", "")
        if origin.lower() not in self.allowed_origins:
            raise _refused(
                "origin_not_allowed",
                f"no cross-origin calls from {origin!r}: list the origin in "
                "QUEEN_HTTP_ALLOWED_ORIGINS to allow it",
            )
        return web.Response(
            status=204,
            headers={
                **self.cors_headers(request),
                "Access-Control-Allow-Methods": ", ".join(sorted(methods)),
                "Access-Control-Allow-Headers": ALLOWED_REQUEST_HEADERS,
                "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
            },
        )
