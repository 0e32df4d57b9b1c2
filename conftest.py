"""Hypothesis profiles of every test directory (CI runs `python -m pytest` from this one).

`ci`, the default, makes a run the same on every machine: examples come from a seed derived
from each test (derandomize), no example database carries failures over from an earlier run,
and the example count is fixed. It has no deadline: the properties that touch PostgreSQL run
at the database's pace, which a shared machine varies far more than any deadline would allow.
`dev` (HYPOTHESIS_PROFILE=dev) draws random examples, more of them, and keeps the failures it
finds in .hypothesis/ so the next run tries them first.
"""

from __future__ import annotations

import os

from hypothesis import settings

# Sized so that every property together stays well under a minute on the 2-core CI machine
# (measured: see the commit that sets it).
CI_MAX_EXAMPLES = 60
DEV_MAX_EXAMPLES = 600

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, max_examples=CI_MAX_EXAMPLES
)
settings.register_profile("dev", deadline=None, max_examples=DEV_MAX_EXAMPLES)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
