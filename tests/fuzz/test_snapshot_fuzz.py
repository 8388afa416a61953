"""Fuzz: hostile snapshot files through `snapshot.read_stream` and `python -m compactor plan`.

Each input is a real cluster (the example snapshot, or one spelled with the fake
API server's builders) with one thing broken: a value of the wrong type, a missing
field, an odd quantity, unicode, a huge list or deep nesting. Whatever it is, the
reader either accepts the file and the planner plans it, or refuses it with a
SnapshotError naming the object and the field; never another exception, never
longer than the time bound.
"""

from __future__ import annotations

import functools
import io
import os
import subprocess
import sys
import time
from decimal import Decimal, DecimalException
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactor import report
from compactor.core import planner
from compactor.errors import SnapshotError
from compactor.kube import snapshot
from tests.builders import NOW, make_config
from tests.fakeapi import builders as k8s
from tests.fuzz import mutations, profiles
from tests.fuzz.mutations import Json, Mutation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "offpeak-snapshot.json"
NAME = "fuzz-snapshot.json"
# Beyond this a quantity cannot be a Kubernetes quantity at all (int64 units); the reader must refuse it.
INT64 = 2**63 - 1


@functools.cache
def example_list() -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(EXAMPLE.read_bytes())
    return document


@functools.cache
def small_list() -> dict[str, Any]:
    """A small cluster in the builders' spelling: taints, tolerations, volumes, affinity, a PDB."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": "2026-11-21T11:00:00Z"}),
            k8s.node("n2", taints=[k8s.taint("dedicated", "batch")]),
            k8s.pod("web-1", node="n1", cpu="300m", memory="256Mi", labels={"app": "web"}),
            k8s.pod(
                "db-0",
                node="n2",
                owner_kind="StatefulSet",
                cpu="1",
                volumes=[k8s.persistent_volume_claim("data", "data-db-0"), k8s.empty_dir("tmp")],
                tolerations=[k8s.toleration("dedicated", "batch")],
            ),
            k8s.pod("fluentbit-n1", namespace="kube-system", node="n1", owner_kind="DaemonSet", cpu="50m"),
            k8s.pdb("web", match_labels={"app": "web"}, disruptions_allowed=1),
        ],
    }


BASES = {"example": example_list, "small": small_list}


# Fields the reader interprets: half of the mutations land on one of them, so that few
# examples are spent on fields it rightly ignores (images, uids, ...).
READ_FIELDS = frozenset(
    {
        "metadata", "name", "namespace", "labels", "annotations", "ownerReferences", "creationTimestamp",
        "spec", "status", "allocatable", "requests", "overhead", "containers", "initContainers", "resources",
        "volumes", "tolerations", "taints", "affinity", "nodeSelector", "conditions", "selector", "matchLabels",
        "matchExpressions", "disruptionsAllowed", "unschedulable", "nodeName", "phase", "priority", "ports",
        "topologySpreadConstraints", "kind", "items",
    }
)  # fmt: skip


@functools.cache
def item_paths(base: str) -> list[mutations.Path]:
    return mutations.paths(BASES[base]())


@functools.cache
def read_paths(base: str) -> list[mutations.Path]:
    return [
        path
        for path in item_paths(base)
        if any(part in READ_FIELDS for part in path[-2:] if isinstance(part, str)) or len(path) <= 3
    ]


@st.composite
def broken_snapshots(draw: st.DrawFn) -> tuple[str, Mutation, bool]:
    """(base, mutation, pretty): small to print; the file is written by the test."""
    base = draw(st.sampled_from(sorted(BASES)))
    places = read_paths(base) if draw(st.booleans()) else item_paths(base)
    mutation = draw(mutations.mutations_at(places[draw(st.integers(0, len(places) - 1))]))
    pretty = draw(st.booleans())  # kubectl's indented layout takes the fast path, any other ijson
    return base, mutation, pretty


def mutated_object(base: str, mutation: Mutation) -> dict[str, Any] | None:
    """The item the mutation broke, as it was before; None for the List's own fields."""
    path = mutation.path
    if len(path) >= 2 and path[0] == "items" and isinstance(path[1], int):
        item: dict[str, Any] = BASES[base]()["items"][path[1]]
        return item
    return None


def assert_names_the_problem(error: SnapshotError, base: str, mutation: Mutation, *, exact: bool = False) -> None:
    """Every problem is a readable line; one names the object and the field (or, `exact`, the very field)."""
    problems = error.problems
    assert problems and all(isinstance(p, str) and p.strip() for p in problems), problems
    text = "\n".join(problems)
    assert "Traceback" not in text
    if NAME in text:
        return  # refused as a whole file (not JSON, not a List), with the place in it
    item = mutated_object(base, mutation)
    if item is None:
        assert "items" in text, f"the List-level problem does not say where: {text}"
        return
    index = mutation.path[1]
    field_path = mutation.path[2:]
    prefixes = [mutations.kubernetes_path(field_path[:end]) for end in range(1, len(field_path) + 1)]
    if exact:
        prefixes = prefixes[-1:]
    says_where = f"items[{index}]" in text or any(prefix in text for prefix in prefixes)
    assert says_where, f"no problem names the field ({mutations.kubernetes_path(field_path)}): {text}"
    names_object = f"items[{index}]" in text or item["kind"] in text
    assert names_object, f"no problem names the object: {text}"


# What each suffix multiplies by, written out here apart from compactor.kube.quantity.
SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    **{f"{prefix}i": Decimal(2) ** (10 * (power + 1)) for power, prefix in enumerate("KMGTPE")},
}


def impossible_quantity(value: Json) -> bool:
    """A value no API server stores as a quantity: outside the grammar, or beyond int64 whole units."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False  # other types are the reader's type checks, judged by the error message
    if isinstance(value, str) and mutations.QUANTITY_GRAMMAR.fullmatch(value) is None:
        return True
    text = str(value)
    match = mutations.QUANTITY_GRAMMAR.fullmatch(text)
    if match is None:
        return False  # a float's repr such as "1e+16": judged by the reader alone
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix not in SUFFIXES:  # a decimal exponent, "e3"
            magnitude = Decimal(number) * Decimal(10) ** int(suffix[1:])
        else:
            magnitude = Decimal(number) * SUFFIXES[suffix]
    except DecimalException:  # an exponent beyond what Decimal holds, either way
        return int(suffix[1:]) > 0
    return abs(magnitude) > INT64


def at_quantity(mutation: Mutation) -> bool:
    parents = {"allocatable", "requests", "overhead"}
    return len(mutation.path) >= 2 and mutation.path[-2] in parents and mutation.action == "replace"


@profiles.fuzz_settings(examples=500)
@given(case=broken_snapshots())
def test_a_broken_snapshot_is_planned_or_refused_with_the_object_and_field(case: tuple[str, Mutation, bool]) -> None:
    base, mutation, pretty = case
    data = mutations.encode(mutations.apply(BASES[base](), mutation), pretty=pretty)
    profiles.tried["snapshot"] += 1
    started = time.monotonic()
    try:
        cluster = snapshot.read_stream(io.BytesIO(data), name=NAME)
    except SnapshotError as error:
        assert_names_the_problem(error, base, mutation)
    else:
        assert not (at_quantity(mutation) and impossible_quantity(mutation.value)), (
            f"accepted a quantity no API server can hold: {mutation.describe()}"
        )
        result = planner.plan(cluster, make_config(), now=NOW)
        report.to_json(result)
        report.to_table(result)
    elapsed = time.monotonic() - started
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{mutation.describe()} took {elapsed:.1f} s"


def plan_command(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compactor", "plan", "--snapshot", str(path), "--now", "2026-11-21T03:00:00Z"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def assert_exit_2_with_a_clear_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), result.stderr
    for word in expected:
        assert word in result.stderr, f"{word!r} not in {result.stderr}"


def example_with(path: mutations.Path, value: Json) -> bytes:
    return mutations.encode(mutations.apply(example_list(), Mutation(path, "replace", value)), pretty=True)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            lambda: example_with(("items", 0, "status", "allocatable", "cpu"), "1e400"),
            ("gke-shop-prod-default-pool-8c1f-0k2b", "status.allocatable.cpu"),
            id="cpu-1e400",
        ),
        pytest.param(lambda: b'{"x":' * 100_000 + b"null" + b"}" * 100_000, (), id="nested-100000"),
        pytest.param(
            lambda: b'{"kind": "List", "items": [' + b'{"x":' * 100_000 + b"null" + b"}" * 100_000 + b"]}",
            (),
            id="nested-100000-in-items",
        ),
        pytest.param(lambda: b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, ("not valid JSON",), id="binary"),
        pytest.param(lambda: (ROOT / "examples" / "config.json").read_bytes(), ("List",), id="a-config-file"),
        pytest.param(lambda: b"", ("empty",), id="empty"),
        pytest.param(
            lambda: example_with(("items", 20, "spec", "containers", 0, "resources", "requests"), ["250m"]),
            ("Pod", "spec.containers[0].resources.requests"),
            id="requests-a-list",
        ),
    ],
)
def test_plan_exits_2_with_an_error_line_on_a_broken_snapshot(
    tmp_path: Path, content: Any, expected: tuple[str, ...]
) -> None:
    profiles.tried["snapshot-cli"] += 1
    path = tmp_path / "snapshot.json"
    path.write_bytes(content())
    started = time.monotonic()
    result = plan_command(path)
    elapsed = time.monotonic() - started
    assert_exit_2_with_a_clear_error(result, *expected)
    assert elapsed < 10, f"took {elapsed:.1f} s"


QUANTITY_PARENTS = frozenset({"allocatable", "requests", "overhead"})


@functools.cache
def quantity_paths(base: str) -> list[mutations.Path]:
    return [path for path in item_paths(base) if len(path) >= 2 and path[-2] in QUANTITY_PARENTS]


def quantities() -> st.SearchStrategy[Json]:
    return st.one_of(
        st.sampled_from(mutations.ODD_QUANTITIES),
        st.from_regex(mutations.QUANTITY_GRAMMAR, fullmatch=True),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet="0123456789.eEkKmMGgTPi+- ", max_size=12),
    )


@st.composite
def odd_quantities(draw: st.DrawFn) -> tuple[str, Mutation, bool]:
    base = draw(st.sampled_from(sorted(BASES)))
    places = quantity_paths(base)
    path = places[draw(st.integers(0, len(places) - 1))]
    return base, Mutation(path, "replace", draw(quantities())), draw(st.booleans())


@profiles.fuzz_settings(examples=300)
@given(case=odd_quantities())
def test_an_odd_quantity_is_refused_with_the_object_and_field_or_planned(case: tuple[str, Mutation, bool]) -> None:
    base, mutation, pretty = case
    profiles.tried["snapshot"] += 1
    data = mutations.encode(mutations.apply(BASES[base](), mutation), pretty=pretty)
    started = time.monotonic()
    try:
        cluster = snapshot.read_stream(io.BytesIO(data), name=NAME)
    except SnapshotError as error:
        assert_names_the_problem(error, base, mutation, exact=True)
    else:
        assert not impossible_quantity(mutation.value), (
            f"accepted a quantity no API server can hold: {mutation.describe()}"
        )
        result = planner.plan(cluster, make_config(), now=NOW)
        report.to_json(result)
    elapsed = time.monotonic() - started
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{mutation.describe()} took {elapsed:.1f} s"
