"""The disk's commit latency: what every durable commit waits for, before any of our code.

    python bench/fsync.py [--dir DIR] [--seconds 10] [--bytes 16384]

Appends `--bytes` to a file in DIR (default: the system temporary directory, on the same
disk as the embedded PostgreSQL's data directory on the test rig) and calls fdatasync, the
default `wal_sync_method` of PostgreSQL on Linux, every 2 ms for `--seconds`; prints the
distribution. A schedule and a fire each end in one such flush of the WAL, so this tail is a
floor under their latency tails (the p99 goals of issues 4 and 5), whatever the broker does.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--bytes", type=int, default=16384)
    args = p.parse_args(argv)
    fd, path = tempfile.mkstemp(dir=args.dir, prefix="queen-fsync-")
    lat: list[float] = []
    try:
        data = os.urandom(args.bytes)
        end = time.monotonic() + args.seconds
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

    print(
        f"# python bench/fsync.py --dir {args.dir} --seconds {args.seconds:g} --bytes {args.bytes}"
    )
    print(
        f"{n} fdatasync calls of {args.bytes} bytes: p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms,"
        f" p99.9 {q(0.999):.2f} ms, max {lat[-1]:.2f} ms; over 5 ms: "
        f"{sum(1 for x in lat if x > 5) / n:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
