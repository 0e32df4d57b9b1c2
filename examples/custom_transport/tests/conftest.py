import sys
from pathlib import Path

import pytest

# The example runs from a checkout without being installed (`python -m pytest` after the
# README's install command); installed, this is the same directory.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytest.register_assert_rewrite("queen_timers.testing.conformance")

from queen_timers.testing.fixtures import *  # noqa: E402, F403 - db_url and friends
