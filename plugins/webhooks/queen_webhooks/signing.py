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

__all__ = ["signature"]


def signature(secrets: Iterable[str], webhook_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    parts = []
    for secret in secrets:
        mac = hmac.new(parse(secret), signed, hashlib.sha256).digest()
        parts.append("v1," + base64.b64encode(mac).decode())
    return " ".join(parts)
