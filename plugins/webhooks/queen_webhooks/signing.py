"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
`{webhook-id}.{webhook-timestamp}.{body}`, sent as `v1,<base64>`, one per active secret and
separated by spaces, so a receiver that holds any one of a target's secrets verifies the
message while the secrets rotate."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

from queen_timers.webhooks.secrets import parse

__all__ = ["keys", "signature"]


def keys(secrets: Iterable[str]) -> tuple[bytes, ...]:
    """The HMAC keys of `whsec_` secrets: decoded once per target, not per attempt."""
    return tuple(parse(s) for s in secrets)


def signature(keys: Iterable[bytes], webhook_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    parts = []
    for key in keys:
        mac = hmac.new(key, signed, hashlib.sha256).digest()
        parts.append("v1," + base64.b64encode(mac).decode())
    return " ".join(parts)
