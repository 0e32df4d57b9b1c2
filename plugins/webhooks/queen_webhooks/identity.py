"""A delivery's identity across attempts.

The first attempt of a message sends `webhook-id: msg_<message id>`. A retry is a timer the
delivery stages into the target's queue (timers/fire.py delivers it no earlier than its wait);
its transactionId carries what the next attempt must know:
`wh:<attempt>:<first attempt, ms since the epoch>:<webhook id>`. The message id of a retry is
new, its webhook-id is the first one's: a receiver dedupes on it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

__all__ = ["Delivery", "of_message", "retry_key", "retry_txn"]

_RETRY = re.compile(r"^wh:(\d{1,3}):(\d{1,15}):(msg_[0-9a-f-]{1,64})$")


@dataclasses.dataclass(frozen=True)
class Delivery:
    webhook_id: str
    attempt: int
    first_ms: int


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def of_message(message_id: str, txn: str | None, created_at: str) -> Delivery:
    m = _RETRY.match(txn or "")
    if m is not None:
        return Delivery(m.group(3), int(m.group(1)), int(m.group(2)))
    return Delivery(f"msg_{message_id}", 1, _ms(created_at))


def retry_txn(d: Delivery) -> str:
    """The txn of the attempt after `d`."""
    return f"wh:{d.attempt + 1}:{d.first_ms}:{d.webhook_id}"


def retry_key(target: str, d: Delivery) -> str:
    """The timer key of the attempt after `d`: unique per target, message and attempt."""
    return f"webhook-retry:{target}:{d.webhook_id}:{d.attempt + 1}"
