"""`queen serve` says, once ready, where each transport listens, where the data lives, a curl
line to paste, and how to stop it; and each of those is true."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from queen_timers.db.embedded import _postmaster_running
from queen_timers.db.url import redacted

from .helpers import Serving, queen_json, short_dir

pytestmark = pytest.mark.slow


def test_the_banner_is_true_and_its_curl_line_works():
    with short_dir() as root:
        d = root / "pg"
        ports = ("--http-port", "0", "--tcp-port", "0", "--linejson-port", "0")
        with Serving("--data-dir", str(d), *ports) as broker:
            assert broker.lines[0].startswith("queen: serving (pid ")
            http = broker.field("http")
            assert http.startswith("http://127.0.0.1:")
            host, port = broker.field("tcp").rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30):
                pass  # it listens where it says
            assert broker.field("data") == f"embedded PostgreSQL in {d}"
            share = broker.field("share")
            assert share.startswith("QUEEN_DATABASE_URL='postgresql://")
            pid = str(broker.proc.pid)
            assert broker.field("stop") == f"Ctrl-C, or kill -TERM {pid}"

            curl = broker.field("try")
            assert curl.startswith(f"curl -s {http}/api/v1/timers ")
            out = subprocess.run(curl, shell=True, capture_output=True, text=True, timeout=60)
            assert json.loads(out.stdout)["results"][0]["status"] == "scheduled"

            # The shared URL is what another command (or broker) uses.
            url = share.split("=", 1)[1].split("'")[1]
            peek = queen_json("timers", "peek", "demo", "hello", "--database-url", url)
            assert peek["found"]
            assert broker.stop() == 0
        assert not _postmaster_running(d)


def test_the_banner_of_a_database_url_hides_its_password(db_url):
    assert redacted("postgresql://app:s3cret@db:5432/queen") == "postgresql://app:***@db:5432/queen"
    assert redacted(db_url) == db_url or ":***@" in redacted(db_url)
    with Serving("--transport", "none", QUEEN_DATABASE_URL=db_url) as broker:
        assert broker.field("data") == redacted(db_url)
        assert "no transports" in broker.lines[1]
        with pytest.raises(AssertionError):
            broker.field("share")  # nothing embedded to share
        assert broker.stop() == 0
