"""The data directory `queen serve` last ran its embedded PostgreSQL in, remembered for the
`queen` commands that come after it.

`queen serve --data-dir X` writes X to a one-line file in the user's state directory
($XDG_STATE_HOME/queen/data-dir, ~/.local/state/queen/data-dir when XDG_STATE_HOME is unset),
so `queen timers list` in another shell finds that broker without being told again. A command
uses the remembered directory only when nothing names a database and its PostgreSQL is running
(see connect.py for the whole order).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

__all__ = ["recall", "remember", "state_file"]

log = logging.getLogger("queen_timers.cli")


def state_file() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "queen" / "data-dir"


def remember(data_dir: Path) -> Path | None:
    """Record `data_dir` (absolute) as the last one served; the file, or None when it cannot be
    written (a read-only home does not stop a broker: the commands then need --data-dir)."""
    path = state_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole then renamed: a command reading at that moment sees the old directory
        # or the new one, never half a path.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".data-dir.")
        with os.fdopen(fd, "w") as f:
            f.write(f"{Path(data_dir).absolute()}\n")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot remember the data directory in %s: %s", path, exc)
        return None
    return path


def recall() -> Path | None:
    """The remembered data directory, or None when none is (or the file cannot be read)."""
    try:
        text = state_file().read_text().strip()
    except OSError:
        return None
    return Path(text) if text else None
