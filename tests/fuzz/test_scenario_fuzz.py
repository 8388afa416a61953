"""Fuzz: hostile scenario files for `python -m compactor simulate --scenario`.

Each input is an example scenario with one thing broken. It is read into a
simulation setup or refused with a BadInputError whose every problem names the
file; never another exception, never longer than the time bound. (The day is
not simulated: reading is what the file decides.)
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from compactor.errors import BadInputError
from compactor.simulation import scenario
from tests.fuzz import mutations, profiles
from tests.fuzz.mutations import Mutation

ROOT = Path(__file__).resolve().parents[2]
# The scenarios among the examples (config-*.json are configurations for --config).
SCENARIOS = sorted(path.name for path in (ROOT / "examples" / "scenarios").glob("*.json") if "config" not in path.name)
NAME = "fuzz-scenario.json"


@functools.cache
def example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "examples" / "scenarios" / name).read_text())
    return document


@functools.cache
def places(name: str) -> list[mutations.Path]:
    return mutations.paths(example(name))


@st.composite
def broken_scenarios(draw: st.DrawFn) -> tuple[str, Mutation]:
    name = draw(st.sampled_from(SCENARIOS))
    found = places(name)
    return name, draw(mutations.mutations_at(found[draw(st.integers(0, len(found) - 1))]))


@profiles.fuzz_settings(examples=200)
@given(case=broken_scenarios())
def test_a_broken_scenario_is_read_or_refused_naming_the_file(case: tuple[str, Mutation]) -> None:
    name, mutation = case
    profiles.tried["scenario"] += 1
    text = mutations.encode(mutations.apply(example(name), mutation))
    started = time.monotonic()
    try:
        scenario.parse(text, source=NAME)
        event("read")
    except BadInputError as error:
        event("refused")
        assert_every_problem_names_the_file(error)
    elapsed = time.monotonic() - started
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{mutation.describe()} took {elapsed:.1f} s"


def assert_every_problem_names_the_file(error: BadInputError) -> None:
    assert error.problems and all(NAME in problem for problem in error.problems), error.problems


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(("deployments", 0, "replicas"), -1, id="negative-replicas"),
        pytest.param(("deployments", 0, "replicas"), 2**31, id="replicas-beyond-int32"),
        pytest.param(("deployments", 0, "replicas"), "9" * 400, id="replicas-of-400-digits"),
        pytest.param(("deployments", 8, "replicas", "peak"), 2**40, id="peak-beyond-int32"),
    ],
)
def test_replicas_beyond_what_a_controller_holds_are_refused_naming_the_field(
    path: mutations.Path, value: mutations.Json
) -> None:
    profiles.tried["scenario"] += 1
    text = mutations.encode(mutations.apply(example("diurnal-web.json"), Mutation(path, "replace", value)))
    with pytest.raises(BadInputError) as refused:
        scenario.parse(text, source=NAME)
    assert f"deployments.{path[1]}.replicas" in "\n".join(refused.value.problems)
