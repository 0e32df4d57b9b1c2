"""The disk's commit latency: what every durable commit waits for, before any of our code.

    queen bench <scenario> --fsync      (measured before the scenario runs)

Appends 16 KiB to a file in the system temporary directory (on the same disk as the embedded
PostgreSQL's data directory on the test rig) and calls fdatasync, the default
`wal_sync_method` of PostgreSQL on Linux, every 2 ms for 10 s; prints the distribution. A
schedule and a fire each end in one such flush of the WAL, so this tail is a floor under their
latency tails (the p99 goals of issues 4 and 5), whatever the broker does.
"""

from __future__ import annotations

import os
import tempfile
import time


def measure(directory: str | None = None, seconds: float = 10.0, nbytes: int = 16384) -> str:
    """fdatasync's latency in `directory` (default: the temporary directory), as one line."""
    directory = directory or tempfile.gettempdir()
    fd, path = tempfile.mkstemp(dir=directory, prefix="queen-fsync-")
    lat: list[float] = []
    try:
        data = os.urandom(nbytes)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.write(fd, data)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1000.0)
            time.sleep(0.002)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    n = len(lat)

    def q(x: float) -> float:
        return lat[min(n - 1, int(n * x))]

    return (
        f"fsync floor ({directory}): {n} fdatasync calls of {nbytes} bytes: "
        f"p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms, p99.9 {q(0.999):.2f} ms, "
        f"max {lat[-1]:.2f} ms; over 5 ms: "
        f"{sum(1 for x in lat if x > 5) / n:.1%}"
    )
