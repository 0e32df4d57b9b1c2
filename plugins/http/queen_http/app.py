"""The aiohttp application: the Queen wire (docs/design/client-wire.md) over
queen_timers.service.Queen.

Every route is declared once in ROUTES; the router and /openapi.json are both built from that
table, so the published description cannot drift from what is served.

Handlers only translate: query strings and JSON bodies in, service calls, JSON out. Every
refusal is a QueenError raised by the service (or by the few wire checks here) and rendered by
one middleware as the flat envelope {"error", "reason", "detail"}, because the official client
reads the code from a flat `error` string and loses it inside a nested object.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import msgspec
from aiohttp import web

from queen_timers.errors import QueenError
from queen_timers.identity import Authenticator, Identity
from queen_timers.service import Queen
from queen_timers.validate import check_name
from queen_timers.wire.admin import (
    DlqDeleteBody,
    DlqDeleted,
    DlqReplayBody,
    DlqReplayed,
    Overview,
    QueuesOverview,
    QueueSummaryAt,
    SwitchesBody,
    SwitchStates,
    TenantQuota,
    TenantQuotaBody,
    TenantQuotaList,
)
from queen_timers.wire.log import (
    AckBatchBody,
    AckBody,
    Acks,
    ConfigureBody,
    DlqPage,
    Error,
    Popped,
    PushBody,
    PushResult,
    TransactionBody,
    TransactionFailure,
    TransactionResult,
)
from queen_timers.wire.resources import (
    ConsumerGroupDeleted,
    ConsumerGroupDetail,
    ConsumerGroupSeek,
    ConsumerGroupSummary,
    GroupedQueues,
    LaggingPartition,
    LogMessage,
    MessageAction,
    MessagesPage,
    PartitionsList,
    QueueDeleted,
    QueueDepth,
    QueueDetail,
    StatusQueues,
    SystemMetrics,
    SystemStatus,
    WorkerMetrics,
)
from queen_timers.wire.schedules import (
    ScheduleBody,
    ScheduleDeleted,
    ScheduleKeyBody,
    ScheduleRun,
    ScheduleSetResult,
    SchedulesPage,
    ScheduleView,
)
from queen_timers.wire.timers import (
    CancelPrefixBody,
    CancelPrefixResult,
    FireNowBody,
    TimerOpsBody,
    TimerPeek,
    TimerResult,
    TimerResults,
    TimersRead,
)
from queen_timers.wire.webhooks import (
    AttemptsPage,
    SecretAdded,
    SecretBody,
    SecretDeleted,
    TargetBody,
    TargetDeleted,
    TargetSetResult,
    TargetsPage,
    TargetView,
)

from .browser_guard import BrowserGuard
from .console import add_console_routes
from .not_here import NOT_HERE, NotHere

__all__ = ["AUTH_KEY", "QUEEN_KEY", "ROUTES", "build_app", "openapi"]

log = logging.getLogger("queen_http")

QUEEN_KEY: web.AppKey[Queen] = web.AppKey("queen", Queen)
AUTH_KEY: web.AppKey[Authenticator] = web.AppKey("authenticator", Authenticator)
MAX_BODY_KEY: web.AppKey[int] = web.AppKey("max_body_bytes", int)
GUARD_KEY: web.AppKey[BrowserGuard] = web.AppKey("browser_guard", BrowserGuard)

Handler = Callable[[web.Request, Identity], Awaitable[web.StreamResponse]]
B = TypeVar("B")


# -- helpers -----------------------------------------------------------------------------------
def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=msgspec.json.encode(data),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(err: QueenError) -> web.Response:
    headers = {"Retry-After": str(err.retry_after)} if err.retry_after is not None else None
    return json_response(err.to_dict(), err.status, headers)


async def read_json(
    request: web.Request, *, code: str = "bad_request", reason: str = "bad_json"
) -> Any:
    """The request body as JSON; None when there is none. The client sends no body at all for
    an empty dict (lease extend), so an empty body is not an error here."""
    raw = await request.read()  # bounded by client_max_size: 413 past the limit
    return decode_json(raw, code=code, reason=reason) if raw else None


def decode_typed(raw: bytes, body_type: type[B]) -> B | None:
    """The body decoded as its queen_timers.wire struct in one pass; None when it is not one.
    The caller then reads it as plain JSON, whose checks answer the refusal with the wire's own
    code (a struct decode names only the first field it trips on, without the code)."""
    try:
        return msgspec.json.decode(raw, type=body_type)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None


def decode_json(raw: bytes, *, code: str = "bad_request", reason: str = "bad_json") -> Any:
    """The one JSON decode of a request body: every decoder failure is the caller's 400.

    msgspec decodes nested arrays and objects recursively and raises RecursionError (not
    DecodeError) once the nesting exhausts the interpreter's recursion limit, which a body of
    about 1,000 `[` under 2 KB does."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        detail = f"the body is not valid JSON: {exc}"
    except RecursionError:
        detail = "the body is not valid JSON for this broker: it nests too deeply to decode"
    raise QueenError(code, reason, detail, 400)


def _bool(q: Any, name: str, default: bool = False) -> bool:
    v = q.get(name)
    if v is None or v == "":
        return default
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise QueenError("bad_request", "bad_parameter", f"{name} must be true or false", 400)


@overload
def _int(q: Any, name: str) -> int | None: ...


@overload
def _int(q: Any, name: str, default: int) -> int: ...


def _int(q: Any, name: str, default: int | None = None) -> int | None:
    v = q.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise QueenError(
            "bad_request", "bad_parameter", f"{name} must be an integer", 400
        ) from None


def _instant(q: Any, name: str, reason: str) -> dt.datetime | None:
    """An ISO 8601 instant from the query (no offset: UTC); None when absent or empty."""
    v = q.get(name)
    if v is None or v == "":
        return None
    try:
        t = dt.datetime.fromisoformat(v)
    except ValueError as exc:
        raise QueenError(
            "bad_request",
            reason,
            f"{name} must be an ISO 8601 instant such as 2030-01-01T00:00:00Z; got {v!r} ({exc})",
            400,
        ) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise QueenError("bad_request", "bad_body", f"{what}: the body must be a JSON object", 400)
    return body


def _queen(request: web.Request) -> Queen:
    return request.app[QUEEN_KEY]


# -- handlers: queues and messages ---------------------------------------------------------------
async def configure(request: web.Request, ident: Identity) -> web.Response:
    body = _object(await read_json(request), "configure")
    # Options arrive nested under "options" (the client) or at the top level (the reference
    # accepts both); nested wins on a clash because it is what the client sends.
    top = {
        k: v for k, v in body.items() if k not in ("queue", "namespace", "task", "options", "mode")
    }
    nested = body.get("options")
    if nested is not None and not isinstance(nested, dict):
        raise QueenError("bad_request", "bad_options", "options must be an object", 400)
    options = {**top, **(nested or {})}
    # the service's own first check, here to hand it the str its signature names
    queue = check_name(body.get("queue"), "queue", "configure_bad_queue")
    res = await _queen(request).configure_queue(
        ident,
        queue,
        options,
        namespace=body.get("namespace"),
        task=body.get("task"),
        mode=body.get("mode") or "merge",
    )
    return json_response(res)


async def push(request: web.Request, ident: Identity) -> web.Response:
    body = _object(await read_json(request), "push")
    items = body.get("items")
    if not isinstance(items, list):
        raise QueenError("bad_request", "push_bad_body", "items must be an array", 400)
    # 201, as the reference answers a push.
    return json_response(await _queen(request).push(ident, items), 201)


async def _pop(
    request: web.Request, ident: Identity, queue: str | None, partition: str | None
) -> web.StreamResponse:
    q = request.query
    if _bool(q, "conflation"):
        # The client raises on a 400 for a conflating pop, which is the honest answer: an empty
        # echo would pretend last-value delivery happened.
        raise QueenError(
            "bad_request",
            "conflation_unsupported",
            "this broker does not implement conflation",
            400,
        )
    res = await _queen(request).pop(
        ident,
        queue,
        partition=partition,
        group=q.get("consumerGroup") or None,
        batch=_int(q, "batch"),
        wait=_bool(q, "wait"),
        timeout_ms=_int(q, "timeout", 30000),
        auto_ack=_bool(q, "autoAck"),
        subscription_mode=q.get("subscriptionMode") or None,
        namespace=q.get("namespace") or None,
        task=q.get("task") or None,
        partitions=_int(q, "partitions", 1),
    )
    if res is None:
        return web.Response(status=204)  # the reference's answer to an empty pop
    return json_response(res)


async def pop_queue(request: web.Request, ident: Identity) -> web.StreamResponse:
    return await _pop(request, ident, request.match_info["queue"], None)


async def pop_partition(request: web.Request, ident: Identity) -> web.StreamResponse:
    mi = request.match_info
    return await _pop(request, ident, mi["queue"], mi["partition"])


async def pop_any(request: web.Request, ident: Identity) -> web.StreamResponse:
    return await _pop(request, ident, None, None)


async def ack(request: web.Request, ident: Identity) -> web.Response:
    item = dict(_object(await read_json(request), "ack"))
    group = item.pop("consumerGroup", None)
    return json_response(await _queen(request).ack(ident, [item], group=group))


async def ack_batch(request: web.Request, ident: Identity) -> web.Response:
    body = _object(await read_json(request), "ack batch")
    acks = body.get("acknowledgments")
    if not isinstance(acks, list):
        raise QueenError("bad_request", "ack_bad_body", "acknowledgments must be an array", 400)
    return json_response(await _queen(request).ack(ident, acks, group=body.get("consumerGroup")))


async def lease_extend(request: web.Request, ident: Identity) -> web.Response:
    # The client sends no body (Content-Length: 0, no Content-Type); nothing is read.
    return json_response(await _queen(request).extend_lease(ident, request.match_info["leaseId"]))


async def dlq(request: web.Request, ident: Identity) -> web.Response:
    q = request.query
    queue = q.get("queue")
    if not queue:
        raise QueenError("bad_request", "dlq_queue_required", "queue is required", 400)
    # A window on failedAt: client-wire §9 names `from` and `to` without a format; ISO 8601,
    # both ends inclusive, is our reading (the service refuses an inverted window).
    res = await _queen(request).dlq(
        ident,
        queue=queue,
        partition=q.get("partition") or None,
        group=q.get("consumerGroup") or None,
        limit=_int(q, "limit", 100),
        offset=_int(q, "offset", 0),
        from_=_instant(q, "from", "dlq_bad_from"),
        to=_instant(q, "to", "dlq_bad_to"),
    )
    return json_response(res)


async def transaction(request: web.Request, ident: Identity) -> web.Response:
    try:
        body = _object(await read_json(request), "transaction")
        h = request.headers
        answer = await _queen(request).transaction(
            ident, body, h.get("traceparent"), h.get("tracestate")
        )
        return json_response(answer)
    except QueenError as err:
        # The transaction failure body: the client raises Exception(body["error"]) on it, and
        # success/results keep it readable by code that inspects the bundle verdict.
        doc = {**err.to_dict(), "success": False, "results": []}
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after is not None else None
        return json_response(doc, err.status, headers)


# -- handlers: timers --------------------------------------------------------------------------
async def timers_apply(request: web.Request, ident: Identity) -> web.Response:
    body = await read_json(request, code="timers_bad_request", reason="timers_bad_body")
    if not isinstance(body, (list, dict)):
        raise QueenError(
            "timers_bad_request",
            "timers_bad_body",
            'the body must be {"operations": [...]} or an array of ops',
            400,
        )
    # the W3C trace context, the schedule span's parent (docs/guides/tracing.md)
    h = request.headers
    results = await _queen(request).timers_apply(
        ident, body, h.get("traceparent"), h.get("tracestate")
    )
    return json_response({"results": results})


async def timers_read(request: web.Request, ident: Identity) -> web.Response:
    # Raw query values, None when absent: the service tells "absent" from "empty" (mode=count
    # refuses any after/limit) and reads an unparseable limit as the default.
    q = request.query
    return json_response(
        await _queen(request).timers_read(
            ident,
            request.match_info["queue"],
            mode=q.get("mode"),
            prefix=q.get("prefix"),
            after=q.get("after"),
            limit=q.get("limit"),
            window=q.get("window"),
        )
    )


async def timer_peek(request: web.Request, ident: Identity) -> web.Response:
    mi = request.match_info
    return json_response(await _queen(request).timer_peek(ident, mi["queue"], mi["timerKey"]))


async def timer_cancel(request: web.Request, ident: Identity) -> web.Response:
    mi = request.match_info
    txn = request.query.get("txn") or None
    return json_response(
        await _queen(request).timer_cancel(ident, mi["queue"], mi["timerKey"], txn)
    )


def _fields(
    body: Any, what: str, required: set[str], optional: frozenset[str] | set[str] = frozenset()
) -> dict[str, Any]:
    """A JSON object body with exactly the named fields (an unknown one is refused, never
    ignored: a misspelt `limt` must not cancel a default-sized batch)."""
    doc = _object(body, what)
    missing, unknown = required - set(doc), set(doc) - required - optional
    if missing or unknown:
        raise QueenError(
            "bad_request",
            "bad_body",
            f"{what}: the body takes {sorted(required)} and optionally {sorted(optional)}"
            + (f"; missing {sorted(missing)}" if missing else "")
            + (f"; unknown {sorted(unknown, key=str)}" if unknown else ""),
            400,
        )
    return doc


async def timer_fire_now(request: web.Request, ident: Identity) -> web.Response:
    raw = await request.read()
    typed = decode_typed(raw, FireNowBody)
    if typed is not None:
        key: Any = typed.timer_key
    else:
        key = _fields(decode_json(raw) if raw else None, "fire now", {"timerKey"})["timerKey"]
    queue = request.match_info["queue"]
    return json_response(await _queen(request).timer_fire_now(ident, queue, key))


async def timers_cancel_prefix(request: web.Request, ident: Identity) -> web.Response:
    raw = await request.read()
    typed = decode_typed(raw, CancelPrefixBody)
    if typed is not None:
        prefix: Any = typed.prefix
        limit: Any = typed.limit
    else:
        body = _fields(decode_json(raw) if raw else None, "cancel-prefix", {"prefix"}, {"limit"})
        prefix, limit = body["prefix"], body.get("limit")
    return json_response(
        await _queen(request).timers_cancel_prefix(
            ident, request.match_info["queue"], prefix, limit=limit
        )
    )


async def schedule_set(request: web.Request, ident: Identity) -> web.Response:
    body = decode_json(await request.read())
    return json_response(await _queen(request).schedule_set(ident, body))


async def schedules_list(request: web.Request, ident: Identity) -> web.Response:
    q = request.query
    return json_response(
        await _queen(request).schedules_list(
            ident,
            request.match_info["queue"],
            prefix=q.get("prefix"),
            after=q.get("after"),
            limit=_int(q, "limit"),
        )
    )


def _schedule_key(request: web.Request, named: str | None) -> str:
    return named if named is not None else request.match_info["scheduleKey"]


def _schedule_peek(named: str | None = None) -> Handler:
    """Peek of the catch-all key, or of the schedule whose key is an action's name (`pause`,
    `resume`, `run`), which the catch-all route also serves; those routes exist so that
    /openapi.json lists every method an action's path answers."""

    async def handle(request: web.Request, ident: Identity) -> web.Response:
        q = request.query
        return json_response(
            await _queen(request).schedule_peek(
                ident,
                request.match_info["queue"],
                _schedule_key(request, named),
                count=_int(q, "count"),
                runs=_int(q, "runs"),
            )
        )

    return handle


def _schedule_delete(named: str | None = None) -> Handler:
    async def handle(request: web.Request, ident: Identity) -> web.Response:
        return json_response(
            await _queen(request).schedule_delete(
                ident, request.match_info["queue"], _schedule_key(request, named)
            )
        )

    return handle


def _schedule_action(name: str) -> Handler:
    """POST /api/v1/schedules/{queue}/<action> {scheduleKey}: pause, resume, run now."""

    async def handle(request: web.Request, ident: Identity) -> web.Response:
        raw = await request.read()
        typed = decode_typed(raw, ScheduleKeyBody)
        if typed is not None:
            key: Any = typed.schedule_key
        else:
            key = _fields(decode_json(raw) if raw else None, name, {"scheduleKey"})["scheduleKey"]
        call = getattr(_queen(request), name)
        return json_response(await call(ident, request.match_info["queue"], key))

    return handle


async def webhook_target_set(request: web.Request, ident: Identity) -> web.Response:
    body = decode_json(await request.read())
    return json_response(await _queen(request).webhook_target_set(ident, body))


async def webhook_targets_list(request: web.Request, ident: Identity) -> web.Response:
    q = request.query
    return json_response(
        await _queen(request).webhook_targets_list(
            ident, after=q.get("after"), limit=_int(q, "limit")
        )
    )


async def webhook_target_get(request: web.Request, ident: Identity) -> web.Response:
    return json_response(
        await _queen(request).webhook_target_get(ident, request.match_info["name"])
    )


async def webhook_target_delete(request: web.Request, ident: Identity) -> web.Response:
    name = request.match_info["name"]
    return json_response(await _queen(request).webhook_target_delete(ident, name))


def _webhook_pause(op: str) -> Handler:
    async def handle(request: web.Request, ident: Identity) -> web.Response:
        call = getattr(_queen(request), op)
        return json_response(await call(ident, request.match_info["name"]))

    return handle


async def webhook_secret_add(request: web.Request, ident: Identity) -> web.Response:
    raw = await request.read()
    secret: Any = None
    if raw.strip():
        typed = decode_typed(raw, SecretBody)
        if typed is not None:
            secret = typed.secret
        else:
            doc = _fields(decode_json(raw), "webhook_secret_add", set(), {"secret"})
            secret = doc.get("secret")
    name = request.match_info["name"]
    return json_response(await _queen(request).webhook_secret_add(ident, name, secret=secret))


async def webhook_secret_delete(request: web.Request, ident: Identity) -> web.Response:
    m = request.match_info
    return json_response(
        await _queen(request).webhook_secret_delete(ident, m["name"], m["secretId"])
    )


async def webhook_attempts(request: web.Request, ident: Identity) -> web.Response:
    q = request.query
    return json_response(
        await _queen(request).webhook_attempts(
            ident,
            request.match_info["name"],
            webhook_id=q.get("webhookId") or None,
            before=_int(q, "before"),
            limit=_int(q, "limit"),
        )
    )


def _named_key(action: str) -> tuple[Handler, Handler]:
    """Peek and cancel of the timer whose key is the action's name (`fire`, `cancel-prefix`):
    the catch-all key routes serve that key on GET and DELETE, and so do these, which exist so
    that /openapi.json lists every method the action's path answers."""

    async def peek(request: web.Request, ident: Identity) -> web.Response:
        queue = request.match_info["queue"]
        return json_response(await _queen(request).timer_peek(ident, queue, action))

    async def cancel(request: web.Request, ident: Identity) -> web.Response:
        queue, txn = request.match_info["queue"], request.query.get("txn") or None
        return json_response(await _queen(request).timer_cancel(ident, queue, action, txn))

    slug = action.replace("-", "_")
    peek.__name__, cancel.__name__ = f"timer_peek_{slug}", f"timer_cancel_{slug}"
    return peek, cancel


_PEEK_FIRE, _CANCEL_FIRE = _named_key("fire")
_PEEK_CANCEL_PREFIX, _CANCEL_CANCEL_PREFIX = _named_key("cancel-prefix")


# -- handlers: the operator's views ------------------------------------------------------------
async def resources_overview(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).overview(ident))


async def resources_queues(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).queues_overview(ident))


async def resources_queue(request: web.Request, ident: Identity) -> web.Response:
    queue, prefix = request.match_info["queue"], request.query.get("prefix")
    return json_response(await _queen(request).queue_summary(ident, queue, prefix))


# -- handlers: the official client's admin surface (docs/guides/official-client.md) ------------
async def resources_namespaces(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).resources_namespaces(ident))


async def resources_tasks(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).resources_tasks(ident))


async def resources_partitions(request: web.Request, ident: Identity) -> web.Response:
    queue = request.query.get("queue") or None
    return json_response(await _queen(request).resources_partitions(ident, queue))


async def queue_depth(request: web.Request, ident: Identity) -> web.Response:
    group = request.query.get("group") or None
    queue = request.match_info["queue"]
    return json_response(await _queen(request).queue_depth(ident, queue, group))


async def queue_delete(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).queue_delete(ident, request.match_info["queue"]))


async def status(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).status(ident))


async def status_queues(request: web.Request, ident: Identity) -> web.Response:
    q = request.query
    return json_response(
        await _queen(request).status_queues(
            ident,
            limit=_int(q, "limit", 100),
            offset=_int(q, "offset", 0),
            namespace=q.get("namespace") or None,
            task=q.get("task") or None,
        )
    )


async def queue_detail(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).queue_detail(ident, request.match_info["queue"]))


async def messages_list(request: web.Request, ident: Identity) -> web.Response:
    q = request.query
    return json_response(
        await _queen(request).messages_list(
            ident,
            q.get("queue") or None,  # type: ignore[arg-type]  # the service refuses None
            partition=q.get("partition") or None,
            status=q.get("status") or None,
            limit=_int(q, "limit"),
            offset=_int(q, "offset"),
        )
    )


def _message_ref(request: web.Request) -> tuple[str, str]:
    mi = request.match_info
    return mi["partitionId"], mi["transactionId"]


async def message_get(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).message_get(ident, *_message_ref(request)))


async def message_delete(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).message_delete(ident, *_message_ref(request)))


async def message_retry(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).message_retry(ident, *_message_ref(request)))


async def system_metrics(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).system_metrics(ident))


async def worker_metrics(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).worker_metrics(ident))


async def stats_refresh(request: web.Request, ident: Identity) -> web.Response:
    # The reference recomputes stored statistics; this broker stores none (every figure is
    # read at the call), so there is nothing to refresh and the answer says so.
    return json_response(
        {"success": True, "message": "statistics are computed at each read; nothing to refresh"}
    )


async def consumer_groups_list(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).consumer_groups_list(ident))


async def consumer_group_get(request: web.Request, ident: Identity) -> web.Response:
    group = request.match_info["group"]
    return json_response(await _queen(request).consumer_group_get(ident, group))


async def consumer_groups_lagging(request: web.Request, ident: Identity) -> web.Response:
    min_lag = _int(request.query, "minLagSeconds", 60)
    return json_response(await _queen(request).consumer_groups_lagging(ident, min_lag))


async def consumer_group_delete(request: web.Request, ident: Identity) -> web.Response:
    mi = request.match_info
    metadata = _bool(request.query, "deleteMetadata", True)
    return json_response(
        await _queen(request).consumer_group_delete(ident, mi["group"], mi["queue"], metadata)
    )


async def consumer_group_seek(request: web.Request, ident: Identity) -> web.Response:
    mi = request.match_info
    # The client sends no body for empty options: refused below as "no target".
    raw = await read_json(request)
    body = _fields({} if raw is None else raw, "seek", set(), {"toEnd", "timestamp"})
    to_end = body.get("toEnd", False)
    return json_response(
        await _queen(request).consumer_group_seek(
            ident, mi["group"], mi["queue"], to_end=to_end, timestamp=body.get("timestamp")
        )
    )


def _not_here(entry: NotHere) -> Handler:
    async def refuse(request: web.Request, ident: Identity) -> web.Response:
        raise QueenError("not_implemented", entry.reason, entry.detail, 410)

    refuse.__name__ = f"not_here_{entry.reason}_{entry.method.lower()}"
    return refuse


async def dlq_replay(request: web.Request, ident: Identity) -> web.Response:
    body = _fields(await read_json(request), "dlq replay", {"items", "mode"}, {"delayMs"})
    return json_response(
        await _queen(request).dlq_replay(
            ident, body["items"], body["mode"], delay_ms=body.get("delayMs")
        )
    )


async def dlq_delete(request: web.Request, ident: Identity) -> web.Response:
    body = _fields(await read_json(request), "dlq delete", {"items"})
    return json_response(await _queen(request).dlq_delete(ident, body["items"]))


# -- handlers: operations ----------------------------------------------------------------------
async def switches_get(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).switches_get(ident))


async def switches_set(request: web.Request, ident: Identity) -> web.Response:
    body = _object(await read_json(request), "kv-timers")
    return json_response(await _queen(request).switches_set(ident, body))


async def tenant_quota_get(request: web.Request, ident: Identity) -> web.Response:
    tenant = request.match_info["tenant"]
    return json_response(await _queen(request).tenant_quota_get(ident, tenant))


async def tenant_quota_set(request: web.Request, ident: Identity) -> web.Response:
    body = _object(await read_json(request), "tenant quota")
    tenant = request.match_info["tenant"]
    return json_response(await _queen(request).tenant_quota_set(ident, tenant, body))


async def tenant_quotas_list(request: web.Request, ident: Identity) -> web.Response:
    return json_response(await _queen(request).tenant_quotas_list(ident))


async def health(request: web.Request, ident: Identity) -> web.Response:
    return json_response({"status": "ok"})


async def ready(request: web.Request, ident: Identity) -> web.Response:
    if await _queen(request).ready():
        return json_response({"ready": True})
    raise QueenError(
        "not_ready",
        "database_unavailable",
        "the database is unreachable or its schema is not applied",
        503,
        retry_after=1,
    )


async def metrics(request: web.Request, ident: Identity) -> web.Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    if not ident.admin:  # broker-wide figures: an admin token when JWT is on (no JWT: admin)
        raise QueenError("forbidden", "admin_required", "/metrics needs an admin identity", 403)

    text = generate_latest(_queen(request).metrics_registry)
    return web.Response(body=text, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def metrics_prometheus(request: web.Request, ident: Identity) -> web.Response:
    # The reference broker's Prometheus route; /metrics answers the same text here.
    return await metrics(request, ident)


async def openapi_doc(request: web.Request, ident: Identity) -> web.Response:
    return json_response(openapi())


# -- the route table ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    where: str  # "path", "query" or "header"
    description: str
    type: str = "string"


# One documented answer: (status, description) or (status, description, type), the type a
# queen_timers.wire type (its schema is generated) or, for what is not JSON, a JSON Schema.
# Without a type a refusal is the envelope and any other answer a JSON object.
Answer = tuple[int, str] | tuple[int, str, Any]


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    path: str  # aiohttp syntax; {name:regex} becomes {name} in OpenAPI
    handler: Handler
    summary: str
    tag: str
    params: tuple[Param, ...] = ()
    body: str | None = None  # description of the JSON body, None when it takes none
    body_type: Any = None  # the queen_timers.wire type of the body
    responses: tuple[Answer, ...] = ((200, "JSON object"),)
    auth: bool = True
    # Whether a call changes state, so that another site's page may not make it. None: what
    # the method says (POST and DELETE do); a pop is a GET that claims messages.
    writes: bool | None = None
    # The operation of Queen the route serves (queen_timers.wire.OPERATIONS), if any.
    operation: str | None = None

    @property
    def changes_state(self) -> bool:
        return self.method not in ("GET", "HEAD") if self.writes is None else self.writes


_Q = Param("queue", "path", "queue name")
_TARGET = Param("name", "path", "webhook target name")
_KEY = Param("timerKey", "path", "timer key; may contain '/' (catch-all segment)")
_TXN = Param("txn", "query", "echoed back on absent")
_POP = (
    Param("batch", "query", "most messages to deliver (absent: the broker's default)", "integer"),
    Param("wait", "query", "long-poll until a message arrives or timeout", "boolean"),
    Param("timeout", "query", "long-poll limit in ms (default 30000)", "integer"),
    Param("consumerGroup", "query", "consumer group (absent: queue mode)"),
    Param("autoAck", "query", "commit at delivery (no lease)", "boolean"),
    Param("subscriptionMode", "query", "new or all, for a new consumer group"),
    Param("partitions", "query", "partitions one pop may sweep (default 1)", "integer"),
    Param("namespace", "query", "namespace filter"),
    Param("task", "query", "task filter"),
)
_PID = Param("partitionId", "path", "partition UUID")
_TXID = Param("transactionId", "path", "transaction id")
# The caller's W3C trace context: the parent of the schedule span, stored with each timer
# (with the [otel] extra; docs/guides/tracing.md).
_TRACE_HEADERS = (
    Param("traceparent", "header", "W3C traceparent: the schedule span's parent"),
    Param("tracestate", "header", "W3C tracestate, with traceparent"),
)
_ERR: Answer = (400, "the request is refused: the flat error envelope {error, reason, detail}")
_POPPED: tuple[Answer, ...] = (
    (200, "{messages: [...], leaseId, ...}", Popped),
    (204, "nothing to deliver"),
    _ERR,
)

_SKEY = Param("scheduleKey", "path", "schedule key; may contain '/' (catch-all segment)")
_SCHEDULE_PEEK = (
    Param("count", "query", "next occurrences to list, 0..100 (default 5)", "integer"),
    Param("runs", "query", "ledger rows to list, 0..100 (default 20)", "integer"),
)
_SCHEDULE_PEEKED: tuple[Answer, ...] = (
    (200, "the schedule with next and runs", ScheduleView),
    _ERR,
    (404, "schedule_not_found"),
)
_SCHEDULE_DELETED: tuple[Answer, ...] = (
    (200, "{queue, scheduleKey, deleted}", ScheduleDeleted),
    _ERR,
)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/configure",
        configure,
        "Create or configure a queue",
        "queues",
        body="{queue, namespace?, task?, options: {...}, mode?: merge|replace}",
        body_type=ConfigureBody,
        responses=((200, "the effective configuration"), _ERR),
        operation="configure_queue",
    ),
    Route(
        "POST",
        "/api/v1/push",
        push,
        "Push messages (results aligned with items)",
        "messages",
        body="{items: [{queue, partition?, payload|data, transactionId?}]}",
        body_type=PushBody,
        responses=(
            (201, "array of {index, message_id, transaction_id, status}", list[PushResult]),
            _ERR,
        ),
        operation="push",
    ),
    Route(
        "GET",
        "/api/v1/pop/queue/{queue}",
        pop_queue,
        "Pop from a queue (long-poll)",
        "messages",
        (_Q, *_POP),
        responses=_POPPED,
        writes=True,
        operation="pop",
    ),
    Route(
        "GET",
        "/api/v1/pop/queue/{queue}/partition/{partition}",
        pop_partition,
        "Pop from one partition (long-poll)",
        "messages",
        (_Q, Param("partition", "path", "partition name"), *_POP),
        responses=_POPPED,
        writes=True,
        operation="pop",
    ),
    Route(
        "GET",
        "/api/v1/pop",
        pop_any,
        "Pop by namespace/task (long-poll)",
        "messages",
        _POP,
        responses=_POPPED,
        writes=True,
        operation="pop",
    ),
    Route(
        "POST",
        "/api/v1/ack",
        ack,
        "Acknowledge one message",
        "messages",
        body="{transactionId, partitionId, status, error?, consumerGroup?, leaseId?}",
        body_type=AckBody,
        responses=((200, "array with one ack result", Acks), _ERR),
        operation="ack",
    ),
    Route(
        "POST",
        "/api/v1/ack/batch",
        ack_batch,
        "Acknowledge many messages",
        "messages",
        body="{acknowledgments: [...], consumerGroup?}",
        body_type=AckBatchBody,
        responses=((200, "array of ack results, in request order", Acks), _ERR),
        operation="ack",
    ),
    Route(
        "POST",
        "/api/v1/lease/{leaseId}/extend",
        lease_extend,
        "Renew a lease (empty body)",
        "messages",
        (Param("leaseId", "path", "lease id"),),
        responses=((200, "{leaseId, success, renewed, newExpiresAt}"), _ERR),
        operation="extend_lease",
    ),
    Route(
        "GET",
        "/api/v1/dlq",
        dlq,
        "List dead-lettered messages",
        "messages",
        (
            Param("queue", "query", "queue name (required)"),
            Param("partition", "query", "partition filter"),
            Param("consumerGroup", "query", "consumer group filter"),
            Param("limit", "query", "page size (default 100)", "integer"),
            Param("offset", "query", "page offset (default 0)", "integer"),
            Param("from", "query", "failedAt at or after this ISO 8601 instant (no offset: UTC)"),
            Param("to", "query", "failedAt at or before this ISO 8601 instant (no offset: UTC)"),
        ),
        responses=((200, "{messages: [...], total}", DlqPage), _ERR),
        operation="dlq",
    ),
    Route(
        "POST",
        "/api/v1/transaction",
        transaction,
        "Atomic bundle of pushes and acks, with a timers rider",
        "messages",
        body="{operations: [...], requiredLeases?: [...], timers?: [timer ops]}",
        params=_TRACE_HEADERS,
        body_type=TransactionBody,
        responses=(
            (200, "{transactionId, success, results: [...]}", TransactionResult),
            (400, "{error, reason, detail, success: false, results: []}", TransactionFailure),
            (403, "timers_disabled (the rider, while scheduling is paused)"),
        ),
        operation="transaction",
    ),
    Route(
        "POST",
        "/api/v1/timers",
        timers_apply,
        "Schedule, reschedule or cancel timers",
        "timers",
        body='{"operations": [op, ...]} or [op, ...]',
        body_type=TimerOpsBody,
        params=_TRACE_HEADERS,
        responses=(
            (200, "{results: [...]} aligned with the ops", TimerResults),
            _ERR,
            (403, "timer_horizon_exceeded"),
            (503, "timers_disabled / timers_unavailable (Retry-After)"),
        ),
        operation="timers_apply",
    ),
    Route(
        "GET",
        "/api/v1/timers/{queue}",
        timers_read,
        "List timers (keyset) or count them",
        "timers",
        (
            _Q,
            Param("after", "query", "exclusive keyset cursor (timerKey)"),
            Param("limit", "query", "page size, clamped to 1..1000 (default 100)", "integer"),
            Param("mode", "query", "list (default), count or histogram"),
            Param(
                "prefix",
                "query",
                "with mode=count: the key prefix; with mode=histogram: only the keys that "
                "start with it",
            ),
            Param("window", "query", "with mode=histogram: hour, day (default) or 90d"),
        ),
        responses=(
            (
                200,
                "{rows, truncated, nextAfter} (each row with state: waiting | claimed | "
                "backing_off, and retryAt when backing_off), {count}, or the histogram "
                "{queue, window, bucketMs, from, to, buckets: [{start, count}], overdue, later, "
                "pending}",
                TimersRead,
            ),
            _ERR,
        ),
        operation="timers_read",
    ),
    # POST beside the catch-all GET/DELETE of one key: a timer key may hold '/', so these
    # name the key in the body; `.../fire` and `.../cancel-prefix` are no key's POST.
    Route(
        "POST",
        "/api/v1/timers/{queue}/fire",
        timer_fire_now,
        "Fire one timer now (a reschedule to now keeping message id, txn and payload)",
        "timers",
        (_Q,),
        body="{timerKey}",
        body_type=FireNowBody,
        responses=(
            (
                200,
                "{ok, status: rescheduled|absent|too_late, queue, timerKey, txn?, messageId?, "
                "deliverAt?}",
                TimerResult,
            ),
            _ERR,
            (503, "timers_disabled: scheduling is paused (Retry-After)"),
        ),
        operation="timer_fire_now",
    ),
    Route(
        "POST",
        "/api/v1/timers/{queue}/cancel-prefix",
        timers_cancel_prefix,
        "Cancel one bounded batch of timers by key prefix (call again while remaining)",
        "timers",
        (_Q,),
        body="{prefix, limit?: 1..10000 (default 1000)}",
        body_type=CancelPrefixBody,
        responses=(
            (200, "{queue, prefix, cancelled, absent, tooLate, remaining}", CancelPrefixResult),
            _ERR,
        ),
        operation="timers_cancel_prefix",
    ),
    *(
        Route(
            method,
            f"/api/v1/timers/{{queue}}/{action}",
            handler,
            f"{verb} the timer whose key is '{action}' (as the catch-all key route does)",
            "timers",
            (_Q, _TXN) if method == "DELETE" else (_Q,),
            responses=(
                (200, "as the catch-all key route answers", TimerPeek)
                if method == "GET"
                else (200, "as the catch-all key route answers", TimerResult),
                _ERR,
            ),
            operation="timer_cancel" if method == "DELETE" else "timer_peek",
        )
        for action, pairs in (
            ("fire", (("GET", _PEEK_FIRE, "Peek"), ("DELETE", _CANCEL_FIRE, "Cancel"))),
            (
                "cancel-prefix",
                (
                    ("GET", _PEEK_CANCEL_PREFIX, "Peek"),
                    ("DELETE", _CANCEL_CANCEL_PREFIX, "Cancel"),
                ),
            ),
        )
        for method, handler, verb in pairs
    ),
    Route(
        "GET",
        "/api/v1/timers/{queue}/{timerKey:.+}",
        timer_peek,
        "Peek one timer",
        "timers",
        (_Q, _KEY),
        responses=(
            (
                200,
                "{found: true, ...the timer, payload} (with state and retryAt beside the "
                "reference's fields) or {found: false, queue, timerKey}",
                TimerPeek,
            ),
            _ERR,
        ),
        operation="timer_peek",
    ),
    Route(
        "DELETE",
        "/api/v1/timers/{queue}/{timerKey:.+}",
        timer_cancel,
        "Cancel one timer (never blocked by a switch)",
        "timers",
        (_Q, _KEY, _TXN),
        responses=(
            (200, "{ok, status: cancelled|absent|too_late, queue, timerKey, txn}", TimerResult),
            _ERR,
        ),
        operation="timer_cancel",
    ),
    Route(
        "POST",
        "/api/v1/webhooks/targets",
        webhook_target_set,
        "Create or replace a webhook target (a generated secret is shown once)",
        "webhooks",
        body="{name, queue, url, method?, headers?, timeoutMs?, maxAttempts?, maxAgeMs?, "
        "backoffMs?, maxBackoffMs?, concurrency?, ratePerS?, paused?, secret?}",
        body_type=TargetBody,
        responses=(
            (200, "{status: created|updated, target, secret?}", TargetSetResult),
            _ERR,
            (409, "webhook_queue_taken: the queue has a target already"),
        ),
        operation="webhook_target_set",
    ),
    Route(
        "GET",
        "/api/v1/webhooks/targets",
        webhook_targets_list,
        "List the tenant's webhook targets (keyset, by name)",
        "webhooks",
        (
            Param("after", "query", "exclusive keyset cursor (target name)"),
            Param("limit", "query", "page size 1..1000 (default 1000)", "integer"),
        ),
        responses=((200, "{targets, truncated, nextAfter}", TargetsPage), _ERR),
        operation="webhook_targets_list",
    ),
    Route(
        "GET",
        "/api/v1/webhooks/targets/{name}",
        webhook_target_get,
        "One webhook target (its secrets by id only)",
        "webhooks",
        (_TARGET,),
        responses=((200, "the target", TargetView), _ERR, (404, "webhook_target_not_found")),
        operation="webhook_target_get",
    ),
    Route(
        "DELETE",
        "/api/v1/webhooks/targets/{name}",
        webhook_target_delete,
        "Delete a webhook target and its secrets (its queue stays)",
        "webhooks",
        (_TARGET,),
        responses=((200, "{name, deleted}", TargetDeleted), _ERR),
        operation="webhook_target_delete",
    ),
    *(
        Route(
            "POST",
            f"/api/v1/webhooks/targets/{{name}}/{action}",
            _webhook_pause(op),
            summary,
            "webhooks",
            (_TARGET,),
            responses=((200, "the target", TargetView), _ERR, (404, "webhook_target_not_found")),
            operation=op,
        )
        for action, op, summary in (
            ("pause", "webhook_target_pause", "Pause a webhook target (messages wait)"),
            ("resume", "webhook_target_resume", "Resume a paused webhook target"),
        )
    ),
    Route(
        "POST",
        "/api/v1/webhooks/targets/{name}/secrets",
        webhook_secret_add,
        "Add a signing secret (rotation); without one, a generated secret is shown once",
        "webhooks",
        (_TARGET,),
        body="{secret?}",
        body_type=SecretBody,
        responses=(
            (200, "{target, id, createdAt, value?}", SecretAdded),
            _ERR,
            (404, "webhook_target_not_found"),
        ),
        operation="webhook_secret_add",
    ),
    Route(
        "DELETE",
        "/api/v1/webhooks/targets/{name}/secrets/{secretId}",
        webhook_secret_delete,
        "Remove a signing secret (the last one stays)",
        "webhooks",
        (_TARGET, Param("secretId", "path", "the secret's id")),
        responses=(
            (200, "{target, id, deleted}", SecretDeleted),
            _ERR,
            (404, "webhook_target_not_found"),
        ),
        operation="webhook_secret_delete",
    ),
    Route(
        "GET",
        "/api/v1/webhooks/targets/{name}/attempts",
        webhook_attempts,
        "A webhook target's newest delivery attempts",
        "webhooks",
        (
            _TARGET,
            Param("webhookId", "query", "only this message's attempts"),
            Param("before", "query", "exclusive keyset cursor (attempt id)", "integer"),
            Param("limit", "query", "page size 1..1000 (default 100)", "integer"),
        ),
        responses=(
            (200, "{target, attempts, nextBefore}", AttemptsPage),
            _ERR,
            (404, "webhook_target_not_found"),
        ),
        operation="webhook_attempts",
    ),
    Route(
        "POST",
        "/api/v1/schedules",
        schedule_set,
        "Create or replace a recurring schedule",
        "schedules",
        body="{queue, scheduleKey, cron | everyMs, zone?, startAt?, endAt?, payload, "
        "partition?, jitterMs?, catchUp?: skip|once|all, catchUpCap?, paused?}",
        body_type=ScheduleBody,
        responses=(
            (200, "{status: created|updated, schedule}", ScheduleSetResult),
            _ERR,
            (503, "timers_disabled: scheduling is paused (Retry-After)"),
        ),
        operation="schedule_set",
    ),
    Route(
        "GET",
        "/api/v1/schedules/{queue}",
        schedules_list,
        "List one queue's schedules (keyset, by key prefix)",
        "schedules",
        (
            _Q,
            Param("prefix", "query", "literal scheduleKey prefix"),
            Param("after", "query", "exclusive keyset cursor (scheduleKey)"),
            Param("limit", "query", "page size 1..1000 (default 100)", "integer"),
        ),
        responses=((200, "{schedules, truncated, nextAfter}", SchedulesPage), _ERR),
        operation="schedules_list",
    ),
    *(
        Route(
            "POST",
            f"/api/v1/schedules/{{queue}}/{action}",
            _schedule_action(op),
            summary,
            "schedules",
            (_Q,),
            body="{scheduleKey}",
            body_type=ScheduleKeyBody,
            responses=((200, answer_text, answer), _ERR, (404, "schedule_not_found")),
            operation=op,
        )
        for action, op, summary, answer_text, answer in (
            ("pause", "schedule_pause", "Pause a schedule", "the schedule", ScheduleView),
            ("resume", "schedule_resume", "Resume a schedule", "the schedule", ScheduleView),
            (
                "run",
                "schedule_run_now",
                "Run a schedule once now (the cadence does not move)",
                "{queue, scheduleKey, runAt, status, txn?, messageId?}",
                ScheduleRun,
            ),
        )
    ),
    *(
        route
        for action in ("pause", "resume", "run")
        for route in (
            Route(
                "GET",
                f"/api/v1/schedules/{{queue}}/{action}",
                _schedule_peek(action),
                f"Peek the schedule whose key is '{action}' (as the catch-all key route does)",
                "schedules",
                (_Q, *_SCHEDULE_PEEK),
                responses=_SCHEDULE_PEEKED,
                operation="schedule_peek",
            ),
            Route(
                "DELETE",
                f"/api/v1/schedules/{{queue}}/{action}",
                _schedule_delete(action),
                f"Delete the schedule whose key is '{action}' (as the catch-all key route does)",
                "schedules",
                (_Q,),
                responses=_SCHEDULE_DELETED,
                operation="schedule_delete",
            ),
        )
    ),
    Route(
        "GET",
        "/api/v1/schedules/{queue}/{scheduleKey:.+}",
        _schedule_peek(),
        "Peek a schedule: its next occurrences (UTC and local) and its last runs",
        "schedules",
        (_Q, _SKEY, *_SCHEDULE_PEEK),
        responses=_SCHEDULE_PEEKED,
        operation="schedule_peek",
    ),
    Route(
        "DELETE",
        "/api/v1/schedules/{queue}/{scheduleKey:.+}",
        _schedule_delete(),
        "Delete a schedule and its pending occurrence",
        "schedules",
        (_Q, _SKEY),
        responses=_SCHEDULE_DELETED,
        operation="schedule_delete",
    ),
    Route(
        "GET",
        "/api/v1/resources/overview",
        resources_overview,
        "The tenant at a glance: queues, messages, timers, dead letters, brokers, switches",
        "resources",
        responses=((200, "Overview", Overview),),
        operation="overview",
    ),
    Route(
        "GET",
        "/api/v1/resources/queues",
        resources_queues,
        "Every queue of the tenant with log and timer counts",
        "resources",
        responses=((200, "{queues: [QueueSummary], at}", QueuesOverview),),
        operation="queues_overview",
    ),
    Route(
        "GET",
        "/api/v1/resources/queues/{queue}",
        resources_queue,
        "One queue's log and timer counts",
        "resources",
        (
            _Q,
            Param("prefix", "query", "timer counts of the keys that start with it only"),
        ),
        responses=((200, "QueueSummary", QueueSummaryAt), (404, "queue_not_found"), _ERR),
        operation="queue_summary",
    ),
    Route(
        "DELETE",
        "/api/v1/resources/queues/{queue}",
        queue_delete,
        "Delete a queue with its messages, partitions, cursors, dead letters and pending "
        "timers, in one transaction (admin)",
        "resources",
        (_Q,),
        responses=(
            (
                200,
                "{deleted, existed, queue, partitions, messages, timers, deadLetters}",
                QueueDeleted,
            ),
            _ERR,
            (403, "admin_required"),
        ),
        operation="queue_delete",
    ),
    Route(
        "GET",
        "/api/v1/resources/queues/{queue}/depth",
        queue_depth,
        "Per-partition backlog of one queue, for queue mode or one consumer group",
        "resources",
        (_Q, Param("group", "query", "consumer group (absent: queue mode)")),
        responses=(
            (
                200,
                "{queue, group, pending, partitionsPending, conflation, effectivePending, "
                "partitions}",
                QueueDepth,
            ),
            (404, "queue_not_found"),
            _ERR,
        ),
        operation="queue_depth",
    ),
    Route(
        "GET",
        "/api/v1/resources/namespaces",
        resources_namespaces,
        "The tenant's queues summed by namespace",
        "resources",
        responses=(
            (200, "{namespaces: [{namespace, queues, partitions, messages}]}", GroupedQueues),
        ),
        operation="resources_namespaces",
    ),
    Route(
        "GET",
        "/api/v1/resources/tasks",
        resources_tasks,
        "The tenant's queues summed by task",
        "resources",
        responses=((200, "{tasks: [{task, queues, partitions, messages}]}", GroupedQueues),),
        operation="resources_tasks",
    ),
    Route(
        "GET",
        "/api/v1/resources/partitions",
        resources_partitions,
        "Every partition of the tenant's queues (or of one queue)",
        "resources",
        (Param("queue", "query", "queue name (absent: every queue)"),),
        responses=((200, "{partitions: [...]}", PartitionsList), _ERR),
        operation="resources_partitions",
    ),
    Route(
        "GET",
        "/api/v1/status",
        status,
        "The status page: queues, messages, leases, dead letters and timers, measured now",
        "status",
        responses=(
            (
                200,
                "{timeRange, throughput, queues, messages, leases, deadLetterQueue, timers, "
                "workers, statsAge}",
                SystemStatus,
            ),
        ),
        operation="status",
    ),
    Route(
        "GET",
        "/api/v1/status/queues",
        status_queues,
        "A page of the tenant's queues with their counts",
        "status",
        (
            Param("limit", "query", "page size (default 100)", "integer"),
            Param("offset", "query", "page offset (default 0)", "integer"),
            Param("namespace", "query", "namespace filter"),
            Param("task", "query", "task filter"),
        ),
        responses=(
            (200, "{queues: [...], pagination: {limit, offset, total}}", StatusQueues),
            _ERR,
        ),
        operation="status_queues",
    ),
    Route(
        "GET",
        "/api/v1/status/queues/{queue}",
        queue_detail,
        "One queue: configuration, partitions with counts and cursor, totals, timers",
        "status",
        (_Q,),
        responses=(
            (200, "{queue, partitions, totals, timers}", QueueDetail),
            (404, "queue_not_found"),
            _ERR,
        ),
        operation="queue_detail",
    ),
    Route(
        "GET",
        "/api/v1/messages",
        messages_list,
        "The newest messages of one queue, newest first, without data",
        "messages",
        (
            Param("queue", "query", "queue name (required)"),
            Param("partition", "query", "partition filter"),
            Param("status", "query", "pending, processing or completed (queue mode)"),
            Param("limit", "query", "page size, 1..1000 (default 200)", "integer"),
            Param("offset", "query", "messages to skip (default 0)", "integer"),
        ),
        responses=((200, "{messages: [...], pagination: {limit, offset}}", MessagesPage), _ERR),
        operation="messages_list",
    ),
    Route(
        "GET",
        "/api/v1/messages/{partitionId}/{transactionId}",
        message_get,
        "One message with its data (found by transaction id within the dedup window)",
        "messages",
        (_PID, _TXID),
        responses=((200, "the message with data", LogMessage), (404, "message_not_found"), _ERR),
        operation="message_get",
    ),
    Route(
        "DELETE",
        "/api/v1/messages/{partitionId}/{transactionId}",
        message_delete,
        "Delete a message's dead letters (a message of the log: 410 log_is_append_only)",
        "messages",
        (_PID, _TXID),
        responses=(
            (200, "{success, partitionId, transactionId, message, deadLetters}", MessageAction),
            (404, "dead_letter_not_found"),
            (410, "log_is_append_only"),
            _ERR,
        ),
        operation="message_delete",
    ),
    Route(
        "POST",
        "/api/v1/messages/{partitionId}/{transactionId}/retry",
        message_retry,
        "Push a message's dead letters back into their queue (a message of the log: 410)",
        "messages",
        (_PID, _TXID),
        responses=(
            (200, "{success, partitionId, transactionId, message, deadLetters}", MessageAction),
            (404, "dead_letter_not_found"),
            (410, "log_is_append_only"),
            _ERR,
        ),
        operation="message_retry",
    ),
    Route(
        "GET",
        "/api/v1/analytics/system-metrics",
        system_metrics,
        "This broker's process now: CPU time, peak memory, database pool (admin)",
        "system",
        responses=(
            (200, "one point of the reference's series", SystemMetrics),
            (403, "admin_required"),
        ),
        operation="system_metrics",
    ),
    Route(
        "GET",
        "/api/v1/analytics/worker-metrics",
        worker_metrics,
        "The brokers alive on this database and this broker's recent fire (admin)",
        "system",
        responses=(
            (200, "{timeRange, timeSeries, workers}", WorkerMetrics),
            (403, "admin_required"),
        ),
        operation="worker_metrics",
    ),
    Route(
        "POST",
        "/api/v1/stats/refresh",
        stats_refresh,
        "Refresh statistics: nothing to do, every figure is read at the call",
        "status",
        responses=((200, "{success: true, message}"),),
    ),
    Route(
        "GET",
        "/api/v1/consumer-groups",
        consumer_groups_list,
        "The tenant's named consumer groups, one row per (group, queue)",
        "consumer groups",
        responses=(
            (
                200,
                "[{name, topics, queueName, members, partitionsWithLag, totalLag, maxTimeLag, "
                "state, subscriptionMode, subscriptionTimestamp, subscriptionCreatedAt}]",
                list[ConsumerGroupSummary],
            ),
        ),
        operation="consumer_groups_list",
    ),
    Route(
        "GET",
        "/api/v1/consumer-groups/lagging",
        consumer_groups_lagging,
        "Partitions of named groups whose oldest unconsumed message is older than a bound",
        "consumer groups",
        (Param("minLagSeconds", "query", "the bound in seconds (default 60)", "integer"),),
        responses=((200, "[{consumer_group, queue_name, ...}]", list[LaggingPartition]), _ERR),
        operation="consumer_groups_lagging",
    ),
    Route(
        "GET",
        "/api/v1/consumer-groups/{group}",
        consumer_group_get,
        "One group's partitions per queue ({} when there is no such group)",
        "consumer groups",
        (Param("group", "path", "consumer group"),),
        responses=((200, "{queue: {partitions: [...]}}", ConsumerGroupDetail), _ERR),
        operation="consumer_group_get",
    ),
    Route(
        "DELETE",
        "/api/v1/consumer-groups/{group}/queues/{queue}",
        consumer_group_delete,
        "Forget a group on one queue: its cursors, leases and (deleteMetadata) subscription",
        "consumer groups",
        (
            Param("group", "path", "consumer group"),
            _Q,
            Param("deleteMetadata", "query", "also its subscription (default true)", "boolean"),
        ),
        responses=(
            (
                200,
                "{success, consumerGroup, queueName, deletedPartitions, metadataDeleted}",
                ConsumerGroupDeleted,
            ),
            _ERR,
        ),
        operation="consumer_group_delete",
    ),
    Route(
        "POST",
        "/api/v1/consumer-groups/{group}/queues/{queue}/seek",
        consumer_group_seek,
        "Move a group's cursors on one queue to the end, or to an instant",
        "consumer groups",
        (Param("group", "path", "consumer group"), _Q),
        body="{toEnd: true} or {timestamp: ISO 8601}",
        responses=(
            (
                200,
                "{success, consumerGroup, queueName, seekToEnd, targetTimestamp, "
                "partitionsUpdated}",
                ConsumerGroupSeek,
            ),
            _ERR,
        ),
        operation="consumer_group_seek",
    ),
    *(
        Route(
            e.method,
            e.path,
            _not_here(e),
            f"Not served here: {e.reason}",
            "not served",
            tuple(Param(n, "path", n) for n in re.findall(r"\{(\w+)\}", e.path)),
            responses=((410, f"not_implemented / {e.reason}"),),
            # a refusal changes nothing, whatever the method
            writes=False,
        )
        for e in NOT_HERE
    ),
    Route(
        "POST",
        "/api/v1/dlq/replay",
        dlq_replay,
        "Replay dead letters: push again, or schedule as a timer",
        "messages",
        body="{items: [{transactionId, partitionId}], mode: push|schedule, delayMs?}",
        body_type=DlqReplayBody,
        responses=(
            (200, "{mode, results: [{index, status: replayed|absent|failed, count}]}", DlqReplayed),
            _ERR,
        ),
        operation="dlq_replay",
    ),
    Route(
        "POST",
        "/api/v1/dlq/delete",
        dlq_delete,
        "Delete dead letters",
        "messages",
        body="{items: [{transactionId, partitionId}]}",
        body_type=DlqDeleteBody,
        responses=((200, "{results: [{index, status: deleted|absent, count}]}", DlqDeleted), _ERR),
        operation="dlq_delete",
    ),
    Route(
        "GET",
        "/api/v1/system/kv-timers",
        switches_get,
        "Read the kill switches",
        "system",
        responses=((200, "{timersScheduleEnabled, timersFireEnabled, ...}", SwitchStates),),
        operation="switches_get",
    ),
    Route(
        "POST",
        "/api/v1/system/kv-timers",
        switches_set,
        "Flip kill switches (admin); an unknown key is refused",
        "system",
        body="{timersSchedule?: bool, timersFire?: bool}",
        body_type=SwitchesBody,
        responses=(
            (200, "{timersScheduleEnabled, timersFireEnabled, mirrored, message}", SwitchStates),
            _ERR,
            (403, "admin_required"),
        ),
        operation="switches_set",
    ),
    Route(
        "GET",
        "/api/v1/system/tenants",
        tenant_quotas_list,
        "The default limits and every tenant with an override (admin)",
        "system",
        responses=(
            (200, "{defaults, tenants: [TenantQuota]}", TenantQuotaList),
            _ERR,
            (403, "admin_required"),
        ),
        operation="tenant_quotas_list",
    ),
    Route(
        "GET",
        "/api/v1/system/tenants/{tenant}/quota",
        tenant_quota_get,
        "A tenant's limits and pending count (its own, or any with admin)",
        "system",
        (Param("tenant", "path", "tenant UUID"),),
        responses=((200, "TenantQuota", TenantQuota), _ERR, (403, "admin_required")),
        operation="tenant_quota_get",
    ),
    Route(
        "PUT",
        "/api/v1/system/tenants/{tenant}/quota",
        tenant_quota_set,
        'Override a tenant\'s limits (admin): a value, "unlimited", or null for the default',
        "system",
        (Param("tenant", "path", "tenant UUID"),),
        body="{maxPending?, writesPerSec?, burst?}",
        body_type=TenantQuotaBody,
        responses=((200, "TenantQuota", TenantQuota), _ERR, (403, "admin_required")),
        operation="tenant_quota_set",
    ),
    Route(
        "GET",
        "/health",
        health,
        "Process is up",
        "system",
        responses=((200, "{status: ok}"),),
        auth=False,
    ),
    Route(
        "GET",
        "/ready",
        ready,
        "Database reachable and schema applied",
        "system",
        responses=((200, "{ready: true}"), (503, "not_ready (Retry-After)")),
        auth=False,
    ),
    Route(
        "GET",
        "/metrics",
        metrics,
        "Prometheus metrics (admin: with JWT on, an admin bearer token)",
        "system",
        responses=(
            (200, "Prometheus text exposition", {"type": "string"}),
            (401, "missing_token | invalid_token"),
            (403, "admin_required"),
        ),
    ),
    Route(
        "GET",
        "/metrics/prometheus",
        metrics_prometheus,
        "The same Prometheus metrics, on the reference broker's route",
        "system",
        responses=(
            (200, "Prometheus text exposition", {"type": "string"}),
            (401, "missing_token | invalid_token"),
            (403, "admin_required"),
        ),
    ),
    Route("GET", "/openapi.json", openapi_doc, "This description", "system", auth=False),
)

# What openapi() adds to a route's own answers, from what the route is: every route is behind
# the Host check, a state-changing one behind the Origin check, a body behind Content-Type.
_HOST_REFUSAL = "host_not_allowed: a Host that is not a loopback name with this port"
_ORIGIN_REFUSAL = "origin_not_allowed: another site's page (Origin / Sec-Fetch-Site)"
_RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}},
}


def _openapi_path(path: str) -> str:
    # {name:regex} -> {name}; our regexes hold no braces.
    return re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)


def _answers(r: Route) -> dict[int, tuple[str, Any]]:
    """Every status the route may answer, with its type: its own, then what its checks add."""
    out: dict[int, tuple[str, Any]] = {}

    def add(status: int, text: str, schema: Any = None) -> None:
        if status in out:
            old_text, old_schema = out[status]
            out[status] = (f"{old_text}; {text}", old_schema or schema)
        else:
            out[status] = (text, schema)

    for answer in r.responses:
        add(*answer)
    if r.body is not None:
        add(400, "the body is not valid JSON")
        add(413, "payload_too_large: the body is over QUEEN_HTTP_MAX_BODY_BYTES")
        add(415, "unsupported_media_type: a body that is not application/json")
    if r.auth:
        add(401, "unauthorized: a missing or invalid token (when JWT is configured)")
        add(503, "unavailable: the database is away (Retry-After)")
    add(403, _HOST_REFUSAL)
    if r.changes_state:
        add(403, _ORIGIN_REFUSAL)
    return out


_REF = "#/components/schemas/{name}"
_OBJECT: dict[str, Any] = {"type": "object"}


def _wire_types() -> list[Any]:
    """Every queen_timers.wire type the routes name, bodies and answers, the envelope first."""
    types: list[Any] = [Error]
    for r in ROUTES:
        named = [r.body_type, *(a[2] for a in r.responses if len(a) == 3)]
        types.extend(t for t in named if t is not None and not isinstance(t, dict))
    return list(dict.fromkeys(types))  # once each, in order


def _response(status: int, text: str, schema: dict[str, Any] | None, r: Route) -> dict[str, Any]:
    doc: dict[str, Any] = {"description": text}
    if status == 204:
        return doc
    if schema is None:
        schema = {"$ref": _REF.format(name="Error")} if status >= 400 else _OBJECT
    is_text = r.handler in (metrics, metrics_prometheus)
    media = "text/plain" if is_text and status == 200 else "application/json"
    doc["content"] = {media: {"schema": schema}}
    if status == 503:
        doc["headers"] = _RETRY_AFTER
    return doc


def openapi() -> dict[str, Any]:
    """The OpenAPI document of ROUTES, its schemas generated from the queen_timers.wire types
    the routes name (msgspec.json.schema_components), so they are the service's own."""
    types = _wire_types()
    generated, components = msgspec.json.schema_components(types, ref_template=_REF)
    schema_of = dict(zip(types, generated, strict=True))

    def schema(t: Any) -> dict[str, Any] | None:
        if t is None or isinstance(t, dict):
            return t
        found: dict[str, Any] = schema_of[t]
        return found

    paths: dict[str, dict[str, Any]] = {}
    for r in ROUTES:
        op: dict[str, Any] = {
            "operationId": r.handler.__name__,
            "summary": r.summary,
            "tags": [r.tag],
            "parameters": [
                {
                    "name": p.name,
                    "in": p.where,
                    "required": p.where == "path",
                    "description": p.description,
                    "schema": {"type": p.type},
                }
                for p in r.params
            ],
            "responses": {
                str(status): _response(status, text, schema(t), r)
                for status, (text, t) in sorted(_answers(r).items())
            },
        }
        if r.body is not None:
            op["requestBody"] = {
                "description": r.body,
                "required": True,
                "content": {"application/json": {"schema": schema(r.body_type) or {}}},
            }
        if r.auth:
            op["security"] = [{"bearer": []}, {}]
        paths.setdefault(_openapi_path(r.path), {})[r.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "queen-timers HTTP transport (Queen wire)", "version": "1"},
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
        "paths": paths,
    }


# -- the application ---------------------------------------------------------------------------
_NOT_FOUND = {
    404: ("not_found", "route_not_found"),
    405: ("method_not_allowed", "method_not_allowed"),
    413: ("payload_too_large", "body_too_large"),
}


_Next = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_middleware(request: web.Request, handler: _Next) -> web.StreamResponse:
    guard = request.app[GUARD_KEY]
    response = await _answer(request, handler, guard)
    response.headers.update(guard.cors_headers(request))
    return response


async def _answer(request: web.Request, handler: _Next, guard: BrowserGuard) -> web.StreamResponse:
    """The answer before its CORS headers: every refusal is the flat envelope."""
    try:
        guard.host(request)
        if _is_preflight(request):
            allowed = request.match_info.http_exception
            if isinstance(allowed, web.HTTPMethodNotAllowed):  # the path exists
                return guard.preflight(request, allowed.allowed_methods)
        limit = request.app[MAX_BODY_KEY]
        if request.content_length is not None and request.content_length > limit:
            # Refused from the header alone, before a byte of the body is read.
            raise QueenError(
                "payload_too_large",
                "body_too_large",
                f"the body is {request.content_length} bytes; the limit is {limit}",
                413,
            )
        return await handler(request)
    except QueenError as err:
        return error_response(err)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code, reason = _NOT_FOUND.get(exc.status, ("http_error", f"http_{exc.status}"))
        detail = exc.text if exc.status == 413 else f"{exc.reason}: {request.method} {request.path}"
        # A 405 names the methods the path serves (RFC 9110 requires Allow on it).
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return json_response({"error": code, "reason": reason, "detail": detail}, exc.status, allow)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json_response(
            {
                "error": "internal_error",
                "reason": "internal_error",
                "detail": "unexpected server error (logged)",
            },
            500,
        )


def _is_preflight(request: web.Request) -> bool:
    return (
        request.method == "OPTIONS"
        and "Origin" in request.headers
        and "Access-Control-Request-Method" in request.headers
    )


def _wrap(route: Route) -> _Next:
    """The route's handler behind its browser checks and, unless it is open, authentication."""
    handler = route.handler
    changes_state, reads_json = route.changes_state, route.body is not None

    async def guarded(request: web.Request) -> web.StreamResponse:
        guard = request.app[GUARD_KEY]
        if changes_state:
            guard.state_change(request)
        if reads_json:
            guard.json_body(request)
        if not route.auth:
            return await handler(request, None)  # type: ignore[arg-type]
        header = request.headers.get("Authorization")
        token = None
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer":
                token = value.strip() or None
        ident = request.app[AUTH_KEY].identify(token)
        return await handler(request, ident)

    return guarded


def build_app(
    queen: Queen,
    authenticator: Authenticator,
    *,
    max_body_bytes: int = 64 * 1024 * 1024,
    guard: BrowserGuard | None = None,
) -> web.Application:
    app = web.Application(middlewares=[errors_middleware], client_max_size=max_body_bytes)
    app[QUEEN_KEY] = queen
    app[AUTH_KEY] = authenticator
    app[MAX_BODY_KEY] = max_body_bytes
    app[GUARD_KEY] = guard if guard is not None else BrowserGuard()
    for r in ROUTES:
        app.router.add_route(r.method, r.path, _wrap(r))
    add_console_routes(app)  # static files: no token, but behind the middleware's Host check
    return app
