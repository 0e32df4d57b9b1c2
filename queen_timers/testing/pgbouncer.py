"""PgBouncer in transaction mode in front of a test server (Debian package `pgbouncer`), for the
tests that prove the broker works behind a transaction pooler.

It listens on a free loopback port and forwards every database name to the server (a wildcard
entry), so each test's own database is reachable through it: `url_for(db_url)`. PgBouncer
>= 1.21 keeps prepared statements itself when `max_prepared_statements` is set, and this
launcher sets it there (`keeps_prepared_statements`); older ones (Debian 12 ships 1.18) do not,
and a broker in front of them runs with asyncpg's statement cache off.

`QUEEN_TEST_PGBOUNCER` names the binary to run (e.g. a newer build than the distribution's);
without it the one on PATH (or in /usr/sbin) runs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

from .packaged_pg import free_port, server_user

__all__ = ["PgBouncer", "find_pgbouncer", "pgbouncer_version"]

# The first PgBouncer that tracks protocol-level prepared statements (max_prepared_statements).
PREPARED_STATEMENTS_SINCE = (1, 21)

# Server connections per (database, user) pair: the broker's pool (20) plus its sweeper's
# (3) fit, and transaction pooling shares them between brokers. A choice, not measured.
POOL_SIZE = 25

# How long PgBouncer may take to accept connections (s): it starts in milliseconds; generous
# for a loaded shared machine.
START_TIMEOUT_S = 30


def find_pgbouncer() -> str | None:
    chosen = os.environ.get("QUEEN_TEST_PGBOUNCER")
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise RuntimeError(f"QUEEN_TEST_PGBOUNCER={chosen}: not an executable file")
        return chosen
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )


def pgbouncer_version(binary: str) -> tuple[int, int]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    m = re.search(r"PgBouncer (\d+)\.(\d+)", out.stdout)
    if m is None:
        raise RuntimeError(f"cannot read the version of {binary}: {out.stdout!r}")
    return int(m.group(1)), int(m.group(2))


def _server_address(url: str) -> dict[str, str]:
    """host, port, user (and password) of a server URL, socket or TCP, as PgBouncer takes them."""
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    out = {
        "host": parts.hostname or query.get("host", "localhost"),
        "port": str(parts.port or query.get("port", 5432)),
        "user": parts.username or query.get("user", "postgres"),
    }
    if parts.password:
        out["password"] = parts.password
    return out


class PgBouncer:
    def __init__(self, server_url: str, binary: str):
        self.server_url = server_url
        self.binary = binary
        self.version = pgbouncer_version(binary)
        self.keeps_prepared_statements = self.version >= PREPARED_STATEMENTS_SINCE
        self.port = 0
        self.root: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._user = server_user()  # PgBouncer, like PostgreSQL, refuses to run as root

    def url_for(self, db_url: str) -> str:
        """`db_url`'s database, through PgBouncer."""
        name = urllib.parse.urlsplit(db_url).path.lstrip("/")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _config(self) -> str:
        assert self.root is not None
        server = " ".join(f"{k}={v}" for k, v in _server_address(self.server_url).items())
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": "",
            "auth_type": "any",  # every client logs in as the [databases] entry's user
            "pool_mode": "transaction",
            "max_client_conn": "1000",
            "default_pool_size": str(POOL_SIZE),
            "logfile": str(self.root / "pgbouncer.log"),
            "pidfile": str(self.root / "pgbouncer.pid"),
        }
        if self.keeps_prepared_statements:
            settings["max_prepared_statements"] = "200"
        lines = ["[databases]", f"* = {server}", "[pgbouncer]"]
        lines += [f"{k} = {v}" for k, v in settings.items()]
        return "\n".join(lines) + "\n"

    def start(self) -> PgBouncer:
        self.root = Path(tempfile.mkdtemp(prefix="qpb", dir="/tmp"))
        if self._user is not None:
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        self.port = free_port()
        ini = self.root / "pgbouncer.ini"
        ini.write_text(self._config())
        user = self._user.pw_uid if self._user else None
        group = self._user.pw_gid if self._user else None
        # PgBouncer logs every line to stderr too. A pipe nobody reads fills (64 KiB: a burst of
        # terminated server connections logs that much in a second) and PgBouncer then blocks
        # in write(2) for good, answering no one; a file never blocks.
        stderr = self.root / "pgbouncer.stderr"
        with stderr.open("wb") as err_file:
            self._proc = subprocess.Popen(
                [self.binary, str(ini)], user=user, group=group,
                extra_groups=[] if user is not None else None, cwd=self.root,
                stdout=subprocess.DEVNULL, stderr=err_file,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # wait until it accepts connections (or dies)
            if self._proc.poll() is not None:
                err = stderr.read_text()
                log = self.root / "pgbouncer.log"
                err += log.read_text() if log.exists() else ""
                raise RuntimeError(f"pgbouncer exited ({self._proc.returncode}): {err.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pgbouncer did not listen on {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
