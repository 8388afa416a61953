"""Fuzz: hostile configurations from every source (COMPACTOR_CONFIG, --config FILE, Firestore).

Each input is the example configuration with one thing broken (a value of the
wrong type or range, a missing or unknown key, unicode, deep nesting, a key given
twice) or a hostile estafette default in the environment. Whatever it is, the
configuration either loads and the planner runs with it, or is refused with a
ConfigError whose every problem names its source and, for a broken field, the
field's path; `plan --config` exits 2 with one `error:` line per problem. Never
another exception, never longer than the time bound.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from compactor import cli, report
from compactor.core import planner
from compactor.errors import ConfigError
from compactor.gcp import firestore
from compactor.settings import config as config_source
from tests.builders import NOW
from tests.fuzz import mutations, profiles
from tests.fuzz.mutations import Json, Mutation
from tests.fuzz.test_snapshot_fuzz import NAME, small_list
from tests.integration.firestore_emulator import FirestoreEmulator, firestore_emulator  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "config.json"
ESTAFETTE_VARIABLES = sorted(config_source.ENV_DEFAULTS)


@functools.cache
def example_config() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return document


@functools.cache
def config_paths() -> list[mutations.Path]:
    return mutations.paths(example_config())


@functools.cache
def small_snapshot() -> Any:
    from compactor.kube import snapshot

    return snapshot.read_stream(io.BytesIO(mutations.encode(small_list(), pretty=True)), name=NAME)


@st.composite
def broken_configs(draw: st.DrawFn) -> Mutation:
    places = config_paths()
    return draw(mutations.mutations_at(places[draw(st.integers(0, len(places) - 1))]))


def encode_with_duplicate(document: Json, path: mutations.Path, first: Json) -> str:
    """JSON text of `document` whose object at path[:-1] names path[-1] twice: `first`, then the real value."""

    def write(value: Json, here: mutations.Path) -> str:
        if isinstance(value, dict):
            members = [f"{json.dumps(key)}: {write(item, (*here, key))}" for key, item in value.items()]
            if here == path[:-1]:
                members.insert(0, f"{json.dumps(path[-1])}: {json.dumps(first)}")
            return "{" + ", ".join(members) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(write(item, (*here, index)) for index, item in enumerate(value)) + "]"
        return json.dumps(value)

    return write(document, ())


def dotted(path: mutations.Path) -> list[str]:
    """The prefixes of a path as pydantic's locations print them: nodePools.default-pool.minNodes."""
    return [".".join(str(part) for part in path[:end]) for end in range(1, len(path) + 1)]


def assert_names_source_and_field(error: ConfigError, source: str, path: mutations.Path | None) -> None:
    problems = error.problems
    assert problems and all(isinstance(p, str) and p.strip() for p in problems), problems
    text = "\n".join(problems)
    assert "Traceback" not in text
    assert all(source in problem for problem in problems) or "environment" in error.message, (
        f"a problem does not name its source {source}: {text}"
    )
    if path is None:
        return
    whole_document = ("not valid JSON", "must be a JSON object", "(top level)", "given twice")
    named = any(prefix in text for prefix in dotted(path)) or any(words in text for words in whole_document)
    assert named, f"no problem names {'.'.join(map(str, path))}: {text}"


def plans_with(loaded: config_source.Config) -> None:
    result = planner.plan(small_snapshot(), loaded, now=NOW)
    report.to_json(result)


@profiles.fuzz_settings(examples=400)
@given(mutation=broken_configs())
def test_a_broken_configuration_in_the_environment_loads_or_names_the_field(mutation: Mutation) -> None:
    profiles.tried["config"] += 1
    text = mutations.encode(mutations.apply(example_config(), mutation)).decode()
    started = time.monotonic()
    try:
        loaded = config_source.load({config_source.ENV_CONFIG: text})
    except ConfigError as error:
        assert_names_source_and_field(error, config_source.ENV_CONFIG, mutation.path)
    else:
        plans_with(loaded)
    elapsed = time.monotonic() - started
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{mutation.describe()} took {elapsed:.1f} s"


@profiles.fuzz_settings(examples=100)
@given(data=st.data())
def test_a_key_given_twice_anywhere_in_the_configuration_is_refused_naming_it(data: st.DataObject) -> None:
    profiles.tried["config"] += 1
    objects = [path for path in config_paths() if isinstance(_at(example_config(), path), dict)]
    holder = data.draw(st.sampled_from([(), *objects]))
    keys = sorted(_at(example_config(), holder))
    key = data.draw(st.sampled_from(keys))
    first = data.draw(mutations.hostile_scalars())
    text = encode_with_duplicate(example_config(), (*holder, key), first)
    with pytest.raises(ConfigError) as refused:
        config_source.load({config_source.ENV_CONFIG: text})
    assert repr(key) in refused.value.message and "twice" in refused.value.message, refused.value.problems


def _at(document: Json, path: mutations.Path) -> Json:
    for part in path:
        document = document[part]
    return document


ESTAFETTE_VALUES = st.one_of(
    st.sampled_from(["300", " 60 ", "0", "-1", "0x10", "1_000", "٣", "1e3", "9" * 30, "9" * 5000, "abc", "3.5"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=12),
)


@profiles.fuzz_settings(examples=200)
@given(variable=st.sampled_from(ESTAFETTE_VARIABLES), value=ESTAFETTE_VALUES)
def test_a_hostile_estafette_default_loads_or_names_the_variable(variable: str, value: str) -> None:
    profiles.tried["config"] += 1
    text = json.dumps({"nodePools": {"default-pool": {"enabled": True, "scaleDownCPURequestRatioLimit": 0.7}}})
    started = time.monotonic()
    try:
        loaded = config_source.load({config_source.ENV_CONFIG: text, variable: value})
    except ConfigError as error:
        assert_every_problem_names(error, variable)
    else:
        plans_with(loaded)
    assert time.monotonic() - started < profiles.TIME_BOUND_SECONDS


def assert_every_problem_names(error: ConfigError, what: str) -> None:
    assert error.problems and all(what in problem for problem in error.problems), error.problems


@pytest.fixture(scope="module")
def small_snapshot_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz-config") / "snapshot.json"
    path.write_bytes(mutations.encode(small_list(), pretty=True))
    return path


def run_plan_command(arguments: list[str]) -> tuple[int, str]:
    """`python -m compactor ...` in this process: (exit code, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(arguments)
    return code, stderr.getvalue()


@profiles.fuzz_settings(examples=100)
@given(mutation=broken_configs())
def test_plan_with_a_broken_config_file_exits_0_or_2_with_error_lines(
    mutation: Mutation, small_snapshot_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    profiles.tried["config-file"] += 1
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_bytes(mutations.encode(mutations.apply(example_config(), mutation), pretty=True))
    started = time.monotonic()
    code, stderr = run_plan_command(
        ["plan", "--snapshot", str(small_snapshot_file), "--config", str(path), "--now", "2026-11-21T12:00:00Z"]
    )
    elapsed = time.monotonic() - started
    assert code in (0, 2), (code, stderr)
    if code == 2:
        lines = stderr.strip().splitlines()
        assert lines and all(line.startswith("error: ") for line in lines), stderr
        assert str(path) in stderr, stderr
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{mutation.describe()} took {elapsed:.1f} s"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/dev/zero", id="endless"),
        pytest.param("/dev/null", id="empty"),
        pytest.param("/", id="a-directory"),
        pytest.param("/nonexistent/config.json", id="missing"),
    ],
)
def test_plan_with_a_config_path_that_is_no_file_exits_2(path: str, small_snapshot_file: Path) -> None:
    profiles.tried["config-file"] += 1
    started = time.monotonic()
    code, stderr = run_plan_command(["plan", "--snapshot", str(small_snapshot_file), "--config", path])
    assert code == 2, (code, stderr)
    assert stderr.startswith("error: ") and path in stderr, stderr
    assert time.monotonic() - started < profiles.TIME_BOUND_SECONDS


# Firestore stores int64, doubles, strings, booleans, null, arrays and maps; what it refuses
# to store cannot reach node-compactor from there, so those inputs are rejected, not tried.
def firestore_values() -> st.SearchStrategy[Json]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(mutations.UNICODE_STRINGS[:6]),
        st.text(max_size=8),
    )
    return st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(min_size=1, max_size=6), scalars))


@st.composite
def firestore_documents(draw: st.DrawFn) -> tuple[dict[str, Any], mutations.Path]:
    """The example configuration as the document's fields, one value replaced."""
    document = json.loads(json.dumps(example_config()))
    places = [path for path in config_paths() if not any(isinstance(part, int) for part in path)]
    path = places[draw(st.integers(0, len(places) - 1))]
    return mutations.apply(document, Mutation(path, "replace", draw(firestore_values()))), path


@pytest.mark.emulator
@profiles.fuzz_settings(examples=20)
@given(case=firestore_documents())
def test_a_broken_firestore_document_loads_or_names_the_field(
    case: tuple[dict[str, Any], mutations.Path],
    firestore_emulator: FirestoreEmulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud import firestore as firestore_client

    fields, path = case
    profiles.tried["config-firestore"] += 1
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", firestore_emulator.project)
    monkeypatch.delenv("GCLOUD_PROJECT", raising=False)
    name = f"fuzz/{profiles.tried['config-firestore']}"
    try:
        firestore_client.Client(project=firestore_emulator.project).document(name).set(fields)
    except (ValueError, TypeError, OverflowError):
        reject()  # Firestore would not store it
    source = f"firestore:{name}"
    started = time.monotonic()
    try:
        loaded = config_source.load(
            {config_source.ENV_FIRESTORE_DOCUMENT: name}, read_firestore=firestore.read_config_document
        )
    except ConfigError as error:
        if error.message.startswith(source):
            assert_names_source_and_field(error, source, path)
        else:
            _assert_names_document(error, name, path)
    else:
        plans_with(loaded)
    assert time.monotonic() - started < 15  # one Firestore read, inside its own 10 s deadline


def _assert_names_document(error: ConfigError, name: str, path: mutations.Path) -> None:
    """Refused by the Firestore adapter before parsing: the document and the field are named."""
    text = "\n".join(error.problems)
    assert name in text, text
    assert any(prefix in text for prefix in dotted(path)) or "field" in text, text


@pytest.mark.emulator
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"nodePools": 1.8446744073709552e19}, "nodePools", id="a-whole-double-beyond-int64"),
        pytest.param({"nodePools": {"p": {"minNodes": 1e300}}}, "nodePools.p.minNodes", id="a-huge-double"),
        pytest.param({"nodePools": {"p": {"minNodes": float("nan")}}}, "nodePools.p.minNodes", id="nan"),
    ],
)
def test_a_firestore_number_no_configuration_holds_is_refused_naming_the_field(
    fields: dict[str, Any],
    field: str,
    firestore_emulator: FirestoreEmulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud import firestore as firestore_client

    profiles.tried["config-firestore"] += 1
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", firestore_emulator.project)
    monkeypatch.delenv("GCLOUD_PROJECT", raising=False)
    name = f"fuzz-numbers/{field.replace('.', '-')}"
    firestore_client.Client(project=firestore_emulator.project).document(name).set(fields)
    with pytest.raises(ConfigError) as refused:
        config_source.load({config_source.ENV_FIRESTORE_DOCUMENT: name}, read_firestore=firestore.read_config_document)
    assert any(field in problem for problem in refused.value.problems), refused.value.problems
