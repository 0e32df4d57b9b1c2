import pytest

pytest.register_assert_rewrite("queen_timers.testing.conformance")

from queen_timers.testing.fixtures import *  # noqa: E402, F403 - db_url and friends
