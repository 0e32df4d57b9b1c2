"""JSON Schemas of the Queen wire's bodies, for the route table (queen_http.app.ROUTES) and so
for /openapi.json.

They describe the shapes the service validates (docs/design/client-wire.md), not every rule:
a body that matches may still be refused (a name too long, a delay past the horizon, an unknown
lease), and every refusal is the ERROR envelope. Objects leave extra properties open where the wire
does (the reference ignores them, or the service refuses them with its own code), except the
kill-switch body, where an unknown key is refused by name.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACKS",
    "ACK_BATCH_BODY",
    "ACK_BODY",
    "CANCEL_PREFIX_BODY",
    "CONFIGURE_BODY",
    "DLQ_DELETE_BODY",
    "DLQ_REPLAY_BODY",
    "ERROR",
    "FIRE_NOW_BODY",
    "OBJECT",
    "OVERVIEW",
    "POP",
    "PUSHED",
    "PUSH_BODY",
    "QUEUES_OVERVIEW",
    "QUEUE_SUMMARY",
    "SWITCHES",
    "SWITCHES_BODY",
    "TENANT_QUOTA",
    "TENANT_QUOTA_BODY",
    "TIMERS_BODY",
    "TIMER_COUNTS",
    "TIMER_PEEK",
    "TIMER_READ",
    "TIMER_RESULTS",
    "TRANSACTION_BODY",
    "TRANSACTION_FAILURE",
    "TRANSACTION_RESULT",
]

Schema = dict[str, Any]

_TEXT: Schema = {"type": "string"}
_OPTIONAL_TEXT: Schema = {"type": ["string", "null"]}
_COUNT: Schema = {"type": "integer", "minimum": 0}
# The wire's instants: UTC, microseconds, "2026-12-02T01:54:42.498633Z".
_INSTANT: Schema = {"type": "string", "format": "date-time"}
OBJECT: Schema = {"type": "object"}

ERROR: Schema = {
    "type": "object",
    "description": "The flat error envelope of every refusal.",
    "required": ["error", "reason", "detail"],
    "properties": {"error": _TEXT, "reason": _TEXT, "detail": _TEXT},
}

# -- queues and messages -----------------------------------------------------------------------
CONFIGURE_BODY: Schema = {
    "type": "object",
    "required": ["queue"],
    "properties": {
        "queue": _TEXT,
        "namespace": _OPTIONAL_TEXT,
        "task": _OPTIONAL_TEXT,
        "options": {"type": ["object", "null"]},
        "mode": {"enum": ["merge", "replace", None]},
    },
}

_PUSH_ITEM: Schema = {
    "type": "object",
    "required": ["queue"],
    "properties": {
        "queue": _TEXT,
        "partition": _OPTIONAL_TEXT,
        "payload": {},
        "data": {},
        "transactionId": _OPTIONAL_TEXT,
    },
}
PUSH_BODY: Schema = {
    "type": "object",
    "required": ["items"],
    "properties": {"items": {"type": "array", "items": _PUSH_ITEM}},
}
PUSHED: Schema = {"type": "array", "items": {"type": "object", "required": ["status"]}}

POP: Schema = {
    "type": "object",
    "required": ["messages"],
    "properties": {"messages": {"type": "array", "items": OBJECT}},
}

_ACK: Schema = {
    "type": "object",
    "required": ["transactionId", "partitionId"],
    "properties": {
        "transactionId": _TEXT,
        "partitionId": _TEXT,
        "status": _TEXT,
        "error": _OPTIONAL_TEXT,
        "leaseId": _OPTIONAL_TEXT,
    },
}
ACK_BODY: Schema = {
    **_ACK,
    "properties": {**_ACK["properties"], "consumerGroup": _OPTIONAL_TEXT},
}
ACK_BATCH_BODY: Schema = {
    "type": "object",
    "required": ["acknowledgments"],
    "properties": {
        "acknowledgments": {"type": "array", "items": _ACK},
        "consumerGroup": _OPTIONAL_TEXT,
    },
}
ACKS: Schema = {"type": "array", "items": OBJECT}

# -- timers ------------------------------------------------------------------------------------
_TIMER_OP: Schema = {
    "type": "object",
    "required": ["op", "queue", "timerKey"],
    "properties": {
        "op": {"enum": ["schedule", "reschedule", "cancel"]},
        "queue": _TEXT,
        "timerKey": _TEXT,
        "partition": _OPTIONAL_TEXT,
        "delayMs": {"type": "integer"},
        "txn": _TEXT,
        "payload": {"type": "string", "description": "base64 of the message bytes"},
        "payloadZstd": {"type": "boolean"},
        "encrypted": {"type": "boolean"},
    },
}
_TIMER_OPS: Schema = {"type": "array", "items": _TIMER_OP}
TIMERS_BODY: Schema = {
    "oneOf": [
        {"type": "object", "required": ["operations"], "properties": {"operations": _TIMER_OPS}},
        _TIMER_OPS,
    ]
}
TIMER_RESULTS: Schema = {
    "type": "object",
    "required": ["results"],
    "properties": {"results": {"type": "array", "items": OBJECT}},
}

# A pending timer as peek and list render it (queen._log_timer_json_v1). The reference's fields
# (docs/design/timers-contract.md §2.8) are required; `state` and `retryAt` are ours, beside them.
_TIMER_FIELDS: Schema = {
    "queue": _TEXT,
    "timerKey": _TEXT,
    "partition": _TEXT,
    "deliverAt": {**_INSTANT, "description": "kept from the schedule while a fire backs off"},
    "txn": _OPTIONAL_TEXT,
    "messageId": _TEXT,
    "payloadZstd": {"type": "boolean"},
    "encrypted": {"type": "boolean"},
    "producerSub": _OPTIONAL_TEXT,
    "attempts": _COUNT,
    "lastError": _OPTIONAL_TEXT,
    "claimed": {"type": "boolean"},
    "createdAt": _INSTANT,
    "updatedAt": _INSTANT,
    "state": {
        "enum": ["waiting", "claimed", "backing_off"],
        "description": "not in the reference: claimed while a fire is in progress, backing_off "
        "after a failed fire until retryAt",
    },
    "retryAt": {
        "type": ["string", "null"],
        "format": "date-time",
        "description": "not in the reference: when a backing_off timer is retried; null in "
        "the other states",
    },
}
_TIMER_REQUIRED = [
    "queue",
    "timerKey",
    "partition",
    "deliverAt",
    "txn",
    "messageId",
    "payloadZstd",
    "encrypted",
    "producerSub",
    "attempts",
    "lastError",
    "claimed",
    "createdAt",
    "updatedAt",
]
_TIMER_ROW: Schema = {"type": "object", "required": _TIMER_REQUIRED, "properties": _TIMER_FIELDS}
TIMER_PEEK: Schema = {
    "oneOf": [
        {
            "type": "object",
            "required": ["found", *_TIMER_REQUIRED, "payload"],
            "properties": {
                "found": {"const": True},
                **_TIMER_FIELDS,
                "payload": {"type": "string", "description": "base64, as stored"},
            },
        },
        {
            "type": "object",
            "description": "no such pending timer: fired, cancelled or never scheduled",
            "required": ["found", "queue", "timerKey"],
            "properties": {"found": {"const": False}, "queue": _TEXT, "timerKey": _TEXT},
        },
    ]
}
TIMER_READ: Schema = {
    "anyOf": [
        {
            "type": "object",
            "description": "mode=list: one keyset page",
            "required": ["rows", "truncated", "nextAfter"],
            "properties": {
                "rows": {"type": "array", "items": _TIMER_ROW},
                "truncated": {"type": "boolean"},
                "nextAfter": _OPTIONAL_TEXT,
            },
        },
        {
            "type": "object",
            "description": "mode=count",
            "required": ["count"],
            "properties": {"count": _COUNT},
        },
        {
            "type": "object",
            "description": "mode=histogram",
            "required": ["window", "bucketMs", "buckets", "overdue", "later", "pending"],
        },
    ]
}

# -- the transaction wire ----------------------------------------------------------------------
TRANSACTION_BODY: Schema = {
    "type": "object",
    "required": ["operations"],
    "properties": {
        "operations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"enum": ["push", "ack"]}},
            },
        },
        "requiredLeases": {"type": "array", "items": _TEXT},
        "timers": _TIMER_OPS,
    },
}
TRANSACTION_RESULT: Schema = {
    "type": "object",
    "required": ["success", "results"],
    "properties": {"success": {"type": "boolean"}, "results": {"type": "array"}},
}
TRANSACTION_FAILURE: Schema = {
    **ERROR,
    "description": "The envelope, with the bundle's verdict beside it.",
    "required": [*ERROR["required"], "success", "results"],
    "properties": {
        **ERROR["properties"],
        "success": {"const": False},
        "results": {"type": "array", "maxItems": 0},
    },
}

# -- operations --------------------------------------------------------------------------------
SWITCHES_BODY: Schema = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {"timersSchedule": {"type": "boolean"}, "timersFire": {"type": "boolean"}},
}
SWITCHES: Schema = {
    "type": "object",
    "required": ["timersScheduleEnabled", "timersFireEnabled"],
    "properties": {
        "timersScheduleEnabled": {"type": "boolean"},
        "timersFireEnabled": {"type": "boolean"},
    },
}

_LIMIT = {"oneOf": [{"type": "integer", "minimum": 0}, {"const": "unlimited"}, {"type": "null"}]}
TENANT_QUOTA_BODY: Schema = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {
        "maxPending": _LIMIT,
        "writesPerSec": {
            "oneOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"const": "unlimited"},
                {"type": "null"},
            ]
        },
        "burst": {"oneOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
    },
}
TENANT_QUOTA: Schema = {
    "type": "object",
    "required": ["tenant", "maxPending", "writesPerSec", "burst", "overrides", "overQuota"],
    "properties": {
        "tenant": {"type": "string"},
        "maxPending": {"type": ["integer", "null"]},
        "writesPerSec": {"type": ["number", "null"]},
        "burst": {"type": "integer"},
        "overrides": {"type": "object"},
        "pending": {"type": ["integer", "null"]},
        "admittedSinceMeasured": {"type": "integer"},
        "overQuota": {"type": "boolean"},
    },
}

# -- the operator's views and actions (issue 16) -------------------------------------------------

TIMER_COUNTS: Schema = {
    "type": "object",
    "required": [
        "pending",
        "dueNextMinute",
        "dueNextHour",
        "dueNextDay",
        "overdue",
        "oldestOverdueMs",
        "backingOff",
        "claimed",
    ],
    "properties": {
        "pending": _COUNT,
        "pendingExact": {
            "type": "boolean",
            "description": "false past the broker's cap (100,000): pending is then a lower bound",
        },
        "dueNextMinute": _COUNT,
        "dueNextHour": _COUNT,
        "dueNextDay": _COUNT,
        "overdue": {**_COUNT, "description": "deliverAt before now, in any state"},
        "oldestOverdueMs": {
            "type": ["integer", "null"],
            "description": "how late the earliest overdue timer is",
        },
        "backingOff": {**_COUNT, "description": "waiting out a backoff after failed fires"},
        "claimed": {**_COUNT, "description": "held by a fire in progress"},
    },
}

QUEUE_SUMMARY: Schema = {
    "type": "object",
    "required": ["name", "partitions", "messages", "timers", "deadLetters"],
    "properties": {
        "name": _TEXT,
        "id": _OPTIONAL_TEXT,
        "namespace": _OPTIONAL_TEXT,
        "task": _OPTIONAL_TEXT,
        "createdAt": _OPTIONAL_TEXT,
        "partitions": _COUNT,
        "messages": {
            "type": "object",
            "properties": {"total": _COUNT, "pending": _COUNT, "processing": _COUNT},
        },
        "timers": TIMER_COUNTS,
        "deadLetters": _COUNT,
    },
}

QUEUES_OVERVIEW: Schema = {
    "type": "object",
    "required": ["queues", "at"],
    "properties": {"queues": {"type": "array", "items": QUEUE_SUMMARY}, "at": _INSTANT},
}

OVERVIEW: Schema = {
    "type": "object",
    "required": ["queues", "timers", "deadLetters", "brokers", "switches", "thisBroker"],
    "properties": {
        "queues": _COUNT,
        "partitions": _COUNT,
        "namespaces": _COUNT,
        "tasks": _COUNT,
        "messages": OBJECT,
        "timers": TIMER_COUNTS,
        "deadLetters": _COUNT,
        "brokers": {
            "type": "object",
            "properties": {
                "alive": _COUNT,
                "list": {
                    "type": "array",
                    "description": "admin tokens only (empty otherwise)",
                    "items": {
                        "type": "object",
                        "properties": {
                            "applicationName": _TEXT,
                            "pid": {"type": ["integer", "null"]},
                            "backendStart": _INSTANT,
                            "clientAddr": _OPTIONAL_TEXT,
                        },
                    },
                },
            },
        },
        "switches": OBJECT,
        "thisBroker": {
            "type": "object",
            "properties": {
                "windowSeconds": _COUNT,
                "firedPerSec": {"type": "number"},
                "fireLagP50Ms": {"type": ["number", "null"]},
                "fireLagP99Ms": {"type": ["number", "null"]},
            },
        },
        "timestamp": _INSTANT,
        "at": _INSTANT,
    },
}

FIRE_NOW_BODY: Schema = {
    "type": "object",
    "required": ["timerKey"],
    "additionalProperties": False,
    "properties": {"timerKey": _TEXT},
}

CANCEL_PREFIX_BODY: Schema = {
    "type": "object",
    "required": ["prefix"],
    "additionalProperties": False,
    "properties": {
        "prefix": {**_TEXT, "description": "literal (% and _ mean themselves), 1..128 bytes"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000},
    },
}

_DLQ_ITEMS: Schema = {
    "type": "array",
    "minItems": 1,
    "maxItems": 1000,
    "items": {
        "type": "object",
        "required": ["transactionId", "partitionId"],
        "additionalProperties": False,
        "properties": {"transactionId": _TEXT, "partitionId": {**_TEXT, "format": "uuid"}},
    },
}

DLQ_REPLAY_BODY: Schema = {
    "type": "object",
    "required": ["items", "mode"],
    "additionalProperties": False,
    "properties": {
        "items": _DLQ_ITEMS,
        "mode": {"enum": ["push", "schedule"]},
        "delayMs": {"type": "integer", "minimum": 0, "description": "mode schedule only"},
    },
}

DLQ_DELETE_BODY: Schema = {
    "type": "object",
    "required": ["items"],
    "additionalProperties": False,
    "properties": {"items": _DLQ_ITEMS},
}
