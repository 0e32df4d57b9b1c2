"""Errors a person can act on (issue 15, part 4): one line on stderr naming the cause and the
setting to change, a non-zero exit, no traceback; --log-level DEBUG adds the traceback."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from queen_timers.db.embedded import _postmaster_running

from .helpers import failure_line, queen, short_dir

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "url", ["postgres//nohost/db", "http://localhost/db", "postgresql://u@localhost:notaport/db"]
)
def test_a_malformed_database_url(url):
    r = queen("status", check=False, QUEEN_DATABASE_URL=url)
    line = failure_line(r)
    assert line.startswith(f"queen: --database-url / QUEEN_DATABASE_URL = {url}: must be ")
    assert "postgresql://user:password@host:5432/dbname" in line and r.returncode == 2


def test_debug_adds_the_traceback():
    r = queen("--log-level", "DEBUG", "status", check=False, QUEEN_DATABASE_URL="postgres//x")
    assert r.returncode != 0 and "Traceback" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1].startswith("queen: --database-url")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once it is closed


@pytest.mark.parametrize("command", [["status"], ["timers", "list", "q"], ["migrate"]])
def test_a_database_refusing_connections_is_named_by_host_and_port(command):
    port = _closed_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    line = failure_line(queen(*command, "--database-url", url, check=False))
    assert f"127.0.0.1:{port}" in line and "refuses connections" in line
    assert "QUEEN_DATABASE_URL (--database-url)" in line


def test_an_unknown_log_level():
    r = queen("--log-level", "LOUD", "status", check=False)
    line = failure_line(r)
    assert r.returncode == 2
    assert "--log-level 'LOUD'" in line and "DEBUG, INFO, WARNING" in line


def test_a_data_directory_that_is_a_file():
    with short_dir() as root:
        (root / "file").write_text("not a directory")
        line = failure_line(queen("migrate", "--data-dir", str(root / "file" / "pg"), check=False))
        assert f"{root / 'file'} is not a directory" in line and "--data-dir" in line


def test_a_data_directory_holding_something_else():
    with short_dir() as root:
        (root / "pg").mkdir()
        (root / "pg" / "photos.zip").write_text("x")
        line = failure_line(queen("serve", "--data-dir", str(root / "pg"), check=False))
        assert "not a PostgreSQL data directory (photos.zip)" in line and "--data-dir" in line
        assert not (root / "pg" / "PG_VERSION").exists()  # nothing initialised over it


@pytest.fixture
def read_only_dir():
    """A directory this process cannot write: a mode bit for a user, a read-only file system
    for root (who passes every mode check)."""
    with short_dir() as root:
        d = root / "ro"
        d.mkdir()
        if os.geteuid() != 0:
            d.chmod(0o555)
            yield d
            d.chmod(0o755)
            return
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(d)], capture_output=True
        )
        if r.returncode != 0:
            pytest.skip(f"root cannot mount a read-only tmpfs here: {r.stderr!r}")
        try:
            yield d
        finally:
            subprocess.run(["umount", str(d)], check=True)


def test_a_read_only_data_directory(read_only_dir):
    line = failure_line(queen("migrate", "--data-dir", str(read_only_dir), check=False))
    assert "read-only" in line and "--data-dir (QUEEN_DATA_DIR)" in line
    line = failure_line(queen("migrate", "--data-dir", str(read_only_dir / "pg"), check=False))
    assert "cannot create the data directory" in line and "--data-dir" in line


def test_a_read_command_on_a_stopped_embedded_server_says_how_to_start_it():
    with short_dir() as root:
        d = root / "pg"
        line = failure_line(queen("timers", "list", "q", "--data-dir", str(d), check=False))
        assert f"no embedded PostgreSQL is running in {d}" in line
        assert f"queen serve --data-dir {d}" in line and "--database-url" in line
        assert not d.exists()  # a read command launches nothing


def test_a_database_without_the_schema(pg_server_url):
    # The server's own maintenance database has no queen schema.
    line = failure_line(queen("switches", "show", "--database-url", pg_server_url, check=False))
    assert "has no queen schema" in line and "queen migrate" in line


@pytest.mark.parametrize(("transport", "flag"), [("http", "--http-port"), ("tcp", "--tcp-port")])
def test_a_port_in_use_names_its_flag_and_stops_what_was_started(transport, flag):
    with short_dir() as root, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--http-port": "0", "--tcp-port": "0", flag: str(port)}
        args = [a for kv in ports.items() for a in kv]
        # http starts before tcp: a busy TCP port also stops the HTTP transport it follows
        r = queen(
            "serve", "--data-dir", str(root / "pg"), "--transport", "http", "--transport",
            "tcp", *args, check=False,
        )  # fmt: skip
        line = failure_line(r)
        assert f"the {transport} transport cannot listen on 127.0.0.1:{port}" in line
        assert "already in use" in line and flag in line
        assert (root / "pg" / "PG_VERSION").exists()  # the embedded server had started...
        assert not _postmaster_running(root / "pg")  # ...and was stopped
