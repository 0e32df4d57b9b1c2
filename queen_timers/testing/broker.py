"""Run `queen serve` as a separate process, for multi-broker tests and benchmarks."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
from collections.abc import Mapping

__all__ = ["BrokerProcess"]


def _die_with_parent() -> None:
    """Linux: the broker gets SIGKILL when the test process dies, so an interrupted test run
    leaves no orphan broker behind (an orphan would keep polling a dropped database)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class BrokerProcess:
    """A broker subprocess on `database_url`. `start()` returns once it serves."""

    def __init__(
        self,
        database_url: str,
        *,
        env: Mapping[str, str] | None = None,
        transports: tuple[str, ...] = ("none",),
        args: tuple[str, ...] = (),
    ):
        self.database_url = database_url
        self.env = dict(env or {})
        self.transports = transports
        self.args = args
        self.proc: asyncio.subprocess.Process | None = None
        self.output: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def start(self, timeout: float = 60.0) -> BrokerProcess:
        env = {
            **os.environ,
            "QUEEN_DATABASE_URL": self.database_url,
            "QUEEN_RETENTION_INTERVAL_MS": "0",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        cmd = [sys.executable, "-m", "queen_timers", "serve"]
        for t in self.transports:
            cmd += ["--transport", t]
        cmd += list(self.args)
        self.proc = await asyncio.create_subprocess_exec(
            *cmd,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        ready: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(ready))
        try:
            await asyncio.wait_for(ready, timeout)
        except BaseException as exc:  # a timeout, a crash or a cancellation: reap it either way
            await self.kill()
            raise RuntimeError("broker did not start:\n" + "\n".join(self.output[-40:])) from exc
        return self

    async def _read(self, ready: asyncio.Future[bool]) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.output.append(line)
            if "queen: serving" in line and not ready.done():
                ready.set_result(True)
        if not ready.done():
            ready.set_exception(RuntimeError("broker exited"))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def signal(self, sig: int, timeout: float = 30.0) -> int | None:
        """Send `sig`; wait for the exit unless it is SIGSTOP/SIGCONT."""
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def terminate(self, timeout: float = 30.0) -> int | None:
        return await self.signal(signal.SIGTERM, timeout)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5)
            except (TimeoutError, Exception):  # noqa: BLE001 - best effort
                self._reader.cancel()

    async def __aenter__(self) -> BrokerProcess:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.kill()
