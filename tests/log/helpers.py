"""Small helpers shared by the log tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any


def acks_for(res: Mapping[str, Any], status: str = "completed", **extra) -> list[dict]:
    return [
        {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "leaseId": m["leaseId"],
            "status": status,
            **extra,
        }
        for m in res["messages"]
    ]


def later(seconds: float) -> dt.datetime:
    """An instant `seconds` from now (time travel through the procedures' p_now)."""
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def items(queue: str, n: int, partition: str | None = None, start: int = 0) -> list[dict]:
    out = []
    for i in range(start, start + n):
        it = {"queue": queue, "payload": {"n": i}}
        if partition is not None:
            it["partition"] = partition
        out.append(it)
    return out
