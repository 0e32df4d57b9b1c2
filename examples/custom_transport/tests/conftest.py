import pytest

pytest.register_assert_rewrite("queen.testing.conformance")

from queen.testing.fixtures import *  # noqa: E402,F401,F403 - db_url and friends
