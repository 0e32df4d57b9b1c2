"""The official `queen-mq` 2.6.0 Python client against `queen serve`, end to end.

The client also imports as `queen`, so it runs in a venv of its own, cached under /tmp by
version so reruns skip the install. The broker is a real `queen serve` subprocess on this
test's database with the sweeper on, so timers fire as they would in production.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CLIENT_VERSION = "2.6.0"
VENV = Path(f"/tmp/queen-mq-{CLIENT_VERSION}-venv")
SCRIPT = Path(__file__).with_name("official_client_script.py")

pytestmark = pytest.mark.slow


def _client_python() -> Path:
    py = VENV / "bin" / "python"
    marker = VENV / ".installed"  # written last: a half-made venv is rebuilt
    if not (marker.exists() and py.exists()):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"queen-mq=={CLIENT_VERSION}",
            ],
            check=True,
            timeout=300,
        )
        marker.write_text(CLIENT_VERSION)
    return py


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"queen serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("queen serve never became ready")


def test_official_client_end_to_end(db_url, tmp_path):
    py = _client_python()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "QUEEN_DATABASE_URL": db_url,
        "QUEEN_HTTP_HOST": "127.0.0.1",
        "QUEEN_HTTP_PORT": str(port),
        "QUEEN_SWEEPER": "true",
    }
    for k in ("QUEEN_JWT_SECRET", "QUEEN_JWT_PUBLIC_KEY"):
        env.pop(k, None)
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "queen_timers", "serve", "--transport", "http"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_ready(url, proc)
        client_env = {k: v for k, v in os.environ.items() if not k.startswith("QUEEN_")}
        run = subprocess.run(
            [str(py), str(SCRIPT), url], env=client_env, capture_output=True, text=True, timeout=180
        )
        log.seek(0)
        assert run.returncode == 0 and "ALL OK" in run.stdout, (
            f"client script failed\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr[-4000:]}"
            f"\n--- server log\n{log.read()[-4000:]}"
        )
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
