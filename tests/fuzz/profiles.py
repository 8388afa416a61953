"""Hypothesis profiles of the fuzz suite, and the count of inputs each category tried.

`ci` (the default) is derandomized with bounded examples, so a CI run tries the
same inputs every time and the whole suite stays under a minute. `long` draws
fresh random inputs, twenty times as many, for runs by hand:
`HYPOTHESIS_PROFILE=long python -m pytest tests/fuzz -q`.

The profiles are applied per test (`fuzz_settings`), never loaded globally, so
the planner's property tests keep their own settings in a whole-suite run.
"""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, settings

PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"
PROFILES = {"ci": 1, "long": 20}  # profile -> multiplier of each test's example count

# Seconds any one input may take, whatever it holds; generous for a loaded 2-core machine.
TIME_BOUND_SECONDS = 5.0

settings.register_profile(
    "fuzz-ci",
    derandomize=True,
    database=None,
    deadline=None,  # time is bounded by the tests' own assertion, which names the input
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz-long",
    parent=settings.get_profile("fuzz-ci"),
    derandomize=False,
    print_blob=True,
)

tried: Counter[str] = Counter()
"""Inputs tried per category in this session, shown at the end of the run."""


def profile_name() -> str:
    name = os.environ.get(PROFILE_VARIABLE, "ci")
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: expected one of {', '.join(PROFILES)}")
    return name


def fuzz_settings(examples: int) -> settings:
    """Settings for one fuzz test: `examples` inputs under `ci`, twenty times as many under `long`."""
    name = profile_name()
    return settings(settings.get_profile(f"fuzz-{name}"), max_examples=examples * PROFILES[name])
