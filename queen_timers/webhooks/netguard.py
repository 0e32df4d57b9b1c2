"""Which addresses a webhook may reach: never loopback, link-local, private, shared, multicast
or reserved ranges, unless QUEEN_WEBHOOK_ALLOW_NETWORKS names them.

A broker inside a private network would otherwise let a tenant make it call the metadata
service of its cloud (169.254.169.254), the database, or any internal admin page: the classic
server-side request forgery. The target's URL is checked when it is stored (a literal address,
or `localhost`), and every address its host resolves to is checked again before each
connection, so a name that re-resolves to a private address later is still refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from ..setting_rules import ip_networks

__all__ = ["Blocked", "Networks", "check_url", "parse_networks"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Blocked(ValueError):
    """A URL or an address a webhook may not reach; the text says why."""


def parse_networks(text: str) -> tuple[Network, ...]:
    """QUEEN_WEBHOOK_ALLOW_NETWORKS: CIDRs (or single addresses), separated by commas."""
    return ip_networks(text)


def _public(addr: Address) -> bool:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return _public(addr.ipv4_mapped)
    return addr.is_global and not addr.is_multicast


class Networks:
    """The allow-list: an address is reachable when it is public or inside one of `allowed`."""

    def __init__(self, allowed: Iterable[Network] = ()):
        self.allowed = tuple(allowed)

    def check(self, address: str) -> None:
        try:
            addr = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            raise Blocked(f"{address!r} is not an IP address") from None
        if _public(addr) or any(addr in net for net in self.allowed):
            return
        raise Blocked(
            f"{addr} is a loopback, private, link-local or reserved address; a webhook may reach "
            "it only when QUEEN_WEBHOOK_ALLOW_NETWORKS names it"
        )


def check_url(url: str, networks: Networks) -> tuple[str, int]:
    """(host, port) of a target URL that is http(s), carries no credentials, and whose host is
    not a refused literal address or `localhost`. A host name is resolved and checked at each
    delivery, not here: its addresses may change."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Blocked(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Blocked("the URL's scheme must be http or https")
    if parts.username is not None or parts.password is not None:
        raise Blocked("the URL may not carry credentials; send them in headers")
    host = parts.hostname
    if not host:
        raise Blocked("the URL names no host")
    if parts.fragment:
        raise Blocked("the URL may not carry a fragment")
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            networks.check("127.0.0.1")
    else:
        networks.check(host)
    return host, port if port is not None else (443 if parts.scheme == "https" else 80)
