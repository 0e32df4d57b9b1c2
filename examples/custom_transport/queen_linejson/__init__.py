"""An example transport plugin: one JSON object per line over TCP, asyncio streams only.

The wire, kept as small as a wire can be:
    -> {"token": "<JWT or null>"}                         first line: who is calling
    <- {"ok": true, "tenant": "..."} | {"ok": false, "error": {...}}
    -> {"op": "timers_apply", "args": {"body": [...]}}     then one request per line
    <- {"ok": true, "result": ...} | {"ok": false, "status": 400, "error": {...}}

Requests on one connection are answered in order (no pipelining: that is what queen-tcp is
for). `op` names a method of queen_timers.service.Queen, `args` its keyword arguments minus the
identity, which comes from the token and never from a request. JSON has no timestamp: an
instant (dlq's `from_` / `to`) travels as ISO 8601 text with its offset.

What every transport does, and this file shows:
  * declare its settings (a frozen dataclass of `setting(...)` fields, its `settings_class`)
    so `queen serve --help` lists them, and read them with queen_timers.transport.own_settings;
  * build the identity with queen_timers.identity.Authenticator from the service's settings,
    warn when it listens beyond loopback without authentication
    (queen_timers.transport.warn_if_open), and end the identity at `Identity.expires_at` when
    it is kept for a connection;
  * call only queen_timers.service.Queen, and render QueenError (code, reason, detail, status);
  * `start` returns once it accepts, `stop` is safe before start and twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import logging
import time
from typing import Any

from queen_timers.errors import QueenError
from queen_timers.identity import Authenticator
from queen_timers.settings import Settings, setting
from queen_timers.transport import own_settings, warn_if_open

__all__ = ["OPERATIONS", "LineJsonSettings", "LineJsonTransport", "__version__"]

__version__ = "0.1.0"

log = logging.getLogger("queen_linejson")

OPERATIONS = frozenset(
    {
        "configure_queue",
        "push",
        "pop",
        "ack",
        "extend_lease",
        "dlq",
        "transaction",
        "timers_apply",
        "timer_cancel",
        "timer_peek",
        "timers_list",
        "timers_count",
        "switches_get",
        "switches_set",
    }
)
# The arguments that are instants, read back from their ISO 8601 text.
INSTANTS = {"dlq": ("from_", "to")}


def _instant(value: Any) -> Any:
    # Text that is not an instant goes on as it is: the service refuses it (a 400 naming it).
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            pass
    return value


@dataclasses.dataclass(frozen=True)
class LineJsonSettings:
    # Port 0 by default: an example must never collide with a real transport's port.
    linejson_host: str = setting(
        "QUEEN_LINEJSON_HOST",
        "127.0.0.1",
        "Address of the example line-JSON transport.",
        group="linejson",
    )
    linejson_port: int = setting(
        "QUEEN_LINEJSON_PORT",
        0,
        "Port of the example line-JSON transport (0: any free port).",
        group="linejson",
    )


class LineJsonTransport:
    name = "linejson"
    settings_class = LineJsonSettings

    def __init__(self, settings: Settings | None = None):
        cfg = own_settings(LineJsonSettings, settings)
        self.host, self.port = cfg.linejson_host, cfg.linejson_port
        self._server: asyncio.AbstractServer | None = None

    async def start(self, queen: Any) -> None:
        self._queen = queen
        self._auth = Authenticator(queen.settings)
        warn_if_open(log, "line-JSON transport", self.host, self._auth)
        self._server = await asyncio.start_server(self._connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def send(doc: dict) -> None:
            writer.write(json.dumps(doc).encode() + b"\n")

        try:
            hello = json.loads(await reader.readline() or b"{}")
            token = hello.get("token")
            try:
                ident = self._auth.identify(token)
            except QueenError as err:
                send({"ok": False, "status": err.status, "error": err.to_dict()})
                await writer.drain()
                return
            send({"ok": True, "tenant": str(ident.tenant)})
            await writer.drain()
            while line := await reader.readline():
                req = json.loads(line)
                try:
                    if ident.expires_at is not None and time.time() >= ident.expires_at:
                        # The connection outlived its token: answer what the token gets now.
                        ident = self._auth.identify(token)
                    op, args = req.get("op"), req.get("args") or {}
                    if op not in OPERATIONS:
                        raise QueenError(
                            "bad_request", "unknown_operation", f"unknown operation {op!r}", 404
                        )
                    if isinstance(args, dict):
                        for name in INSTANTS.get(op, ()):
                            if name in args:
                                args[name] = _instant(args[name])
                    result = await getattr(self._queen, op)(ident, **args)
                    send({"ok": True, "result": result})
                except QueenError as err:
                    send(
                        {
                            "ok": False,
                            "status": err.status,
                            "error": err.to_dict(),
                            "retryAfter": err.retry_after,
                        }
                    )
                except TypeError as exc:  # wrong arguments for the operation
                    send(
                        {
                            "ok": False,
                            "status": 400,
                            "error": QueenError("bad_request", "bad_arguments", str(exc)).to_dict(),
                        }
                    )
                await writer.drain()
        except (ConnectionError, json.JSONDecodeError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
