"""Hypothesis profiles of the property tests (tests/property/), registered by tests/conftest.py
before pytest configures, so ``--hypothesis-profile`` can name them.

``ci`` (the default): derandomized and without an example database, so one tree always runs the
same examples and CI is never red by chance; a failure is reproduced by running the test again
(Hypothesis prints the shrunk example and, with ``print_blob``, an ``@reproduce_failure`` line).
No deadline: the suite shares two cores with other work, and a slow example is not a wrong one.

``bench`` (``HYPOTHESIS_PROFILE=bench`` or ``--hypothesis-profile=bench``, bench/README.md): ten
times the examples from a fresh random seed each run, to look further than CI does; a failure
prints its ``@reproduce_failure`` blob and ``--hypothesis-seed`` reruns the same search.
"""

import os

from hypothesis import HealthCheck, settings

# The ``ci`` examples of a property test: ``EXAMPLES * weight`` (``examples(weight)``).
CI_EXAMPLES = 200
BENCH_FACTOR = 10

settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("bench", max_examples=CI_EXAMPLES * BENCH_FACTOR, derandomize=False, database=None,
                          deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(weight=1.0):
    """``settings`` for a test that runs ``weight`` times the profile's examples (a cheap property
    runs more, an expensive one fewer); applied at import, so the profile is the one loaded here or
    by ``--hypothesis-profile`` before the tests are collected."""
    return settings(max_examples=max(1, int(settings.default.max_examples * weight)))
