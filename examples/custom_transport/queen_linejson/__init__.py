"""An example transport plugin: one JSON object per line over TCP, asyncio streams only.

The wire, kept as small as a wire can be:
    -> {"token": "<JWT or null>"}                         first line: who is calling
    <- {"ok": true, "tenant": "..."} | {"ok": false, "error": {...}}
    -> {"op": "timers_apply", "args": {"body": [...]}}     then one request per line
    <- {"ok": true, "result": ...} | {"ok": false, "status": 400, "error": {...}}

A line that is not one JSON object (nested too deeply to decode included) is answered 400
`bad_line` and the connection goes on: the newline still marks where the next request starts.
A line past LINE_LIMIT is discarded up to its newline and answered 413 `line_too_long`.

Requests on one connection are answered in order (no pipelining: that is what queen-tcp is
for). `op` names an operation of queen_timers.wire.OPERATIONS (a method of
queen_timers.service.Queen), `args` the map of its arguments struct, served through
queen_timers.transport.call; the identity comes from the token and never from a request.
JSON has no timestamp: an instant (dlq's `from_` / `to`) travels as ISO 8601 text with its
offset.

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
from queen_timers.service import Queen
from queen_timers.settings import Settings, between, host_name, setting
from queen_timers.transport import call, own_settings, warn_if_open
from queen_timers.wire import OPERATIONS

__all__ = ["OPERATIONS", "LineJsonSettings", "LineJsonTransport", "__version__"]

__version__ = "0.1.0"

log = logging.getLogger("queen_linejson")

# The longest request line read (asyncio's default stream limit, named).
LINE_LIMIT = 64 * 1024
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
        check=host_name(),
    )
    linejson_port: int = setting(
        "QUEEN_LINEJSON_PORT",
        0,
        "Port of the example line-JSON transport (0: any free port).",
        group="linejson",
        check=between(0, 65535, "a TCP port; 0: any free one"),
    )


class LineJsonTransport:
    name = "linejson"
    settings_class = LineJsonSettings

    def __init__(self, settings: Settings | None = None):
        cfg = own_settings(LineJsonSettings, settings)
        self.host, self.port = cfg.linejson_host, cfg.linejson_port
        self._server: asyncio.AbstractServer | None = None

    async def start(self, queen: Queen) -> None:
        self._queen = queen
        self._auth = Authenticator(queen.settings)
        warn_if_open(log, "line-JSON transport", self.host, self._auth)
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=LINE_LIMIT
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def send(doc: dict[str, Any]) -> None:
            writer.write(json.dumps(doc).encode() + b"\n")

        def refuse(err: QueenError) -> None:
            send(
                {
                    "ok": False,
                    "status": err.status,
                    "error": err.to_dict(),
                    "retryAfter": err.retry_after,
                }
            )

        try:
            try:
                hello = decode_line(await read_line(reader) or b"{}")
                token = hello.get("token")
                ident = self._auth.identify(token)
            except QueenError as err:
                refuse(err)
                await writer.drain()
                return
            send({"ok": True, "tenant": str(ident.tenant)})
            await writer.drain()
            while True:
                try:
                    line = await read_line(reader)
                    if not line:
                        break
                    req = decode_line(line)
                    if ident.expires_at is not None and time.time() >= ident.expires_at:
                        # The connection outlived its token: answer what the token gets now.
                        ident = self._auth.identify(token)
                    name, args = req.get("op"), req.get("args") or {}
                    if isinstance(args, dict) and isinstance(name, str):
                        for arg in INSTANTS.get(name, ()):
                            if arg in args:
                                args[arg] = _instant(args[arg])
                    # dispatched through queen_timers.wire.OPERATIONS, as TCP is
                    result = await call(self._queen, ident, name, args)
                    send({"ok": True, "result": result})
                except QueenError as err:
                    refuse(err)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def read_line(reader: asyncio.StreamReader) -> bytes:
    """The next line (b"" at the end of the stream). A line past the stream's limit is
    discarded up to its newline, a buffer at a time, and refused (413): the next line is still
    found, and no unread input is left to turn the close into a reset."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:  # the last line, without its newline
        return exc.partial
    except asyncio.LimitOverrunError as exc:
        skip = exc.consumed
    while True:
        await reader.readexactly(skip)
        try:
            await reader.readuntil(b"\n")
            break
        except asyncio.IncompleteReadError:
            break
        except asyncio.LimitOverrunError as exc:
            skip = exc.consumed
    raise QueenError(
        "payload_too_large", "line_too_long", f"a request line is at most {LINE_LIMIT} bytes", 413
    )


def decode_line(line: bytes) -> dict[str, Any]:
    """The one decode of a request line: a JSON object, or the 400 as a QueenError.

    json raises RecursionError (not a JSONDecodeError) on a line nested deeper than the
    interpreter's recursion limit, and UnicodeDecodeError on bytes that are not UTF-8; each is
    the sender's fault, so each is the 400."""
    try:
        doc = json.loads(line)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        why = f"not JSON: {exc}"
    except RecursionError:
        why = "nested too deeply to decode"
    else:
        if isinstance(doc, dict):
            return doc
        why = f"a JSON {type(doc).__name__}, not an object"
    raise QueenError(
        "bad_request", "bad_line", f"a request is one JSON object per line; this is {why}"
    )
