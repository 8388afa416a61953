"""Quantities parse exactly, as the API server reads them."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity

from compactor.errors import BadInputError
from compactor.kube import quantity
from compactor.simulation import scenario


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("250m", 250),
        ("0.5", 500),
        ("1.5", 1500),
        ("2", 2000),
        ("1e3", 1_000_000),
        ("100u", 1),
        ("1n", 1),
        ("0", 0),
        ("0.0001", 1),
        ("3900m", 3900),
        (2, 2000),
        (0.25, 250),
    ],
)
def test_cpu_is_read_in_millicores_rounded_up(text: object, millis: int) -> None:
    assert quantity.millis(text) == millis


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("1Gi", 2**30),
        ("1G", 10**9),
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("123Mi", 123 * 2**20),
        ("1.5Ki", 1536),
        ("1k", 1000),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1E", 10**18),
        ("0.5", 1),
        ("13166196Ki", 13166196 * 1024),
        ("1M", 10**6),
        ("1m", 1),
    ],
)
def test_memory_is_read_in_bytes_rounded_up(text: str, units: int) -> None:
    assert quantity.units(text) == units


@pytest.mark.parametrize(
    "text", ["", "abc", "1Qi", "--1", "1.2.3", "-1", "1 Gi", "Infinity", "NaN", None, True, [1], "１", "٣", "1e٣"]
)
def test_anything_else_is_refused_with_the_text_in_the_message(text: object) -> None:
    with pytest.raises(quantity.QuantityError, match=r"quantity|negative|finite"):
        quantity.millis(text)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        pytest.param("1e400", quantity.millis, id="cpu-1e400"),
        pytest.param("1e400", quantity.units, id="memory-1e400"),
        pytest.param("1e9999999999", quantity.units, id="huge-exponent"),
        pytest.param("9223372036854775808", quantity.units, id="one-above-int64"),
        pytest.param("8Ei", quantity.units, id="8Ei-is-2^63"),
        pytest.param("9223372036854775.808", quantity.millis, id="one-thousandth-above-int64-millis"),
        pytest.param("1E18", quantity.millis, id="cpu-of-a-billion-billion-cores"),
    ],
)
def test_quantities_beyond_what_the_api_server_stores_are_refused(text: str, read: Any) -> None:
    with pytest.raises(quantity.QuantityError, match=r"larger than the API server stores"):
        read(text)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("9" * 10_000 + "x", id="a-long-string"),
        pytest.param(["0"] * 2_000, id="a-long-list"),
        pytest.param({"x": {"x": {}}}, id="an-object"),
    ],
)
def test_a_bad_value_is_named_briefly_not_echoed_whole(value: object) -> None:
    with pytest.raises(quantity.QuantityError) as refused:
        quantity.units(value)
    assert len(str(refused.value)) < 120


def test_the_largest_quantities_the_api_server_stores_are_read() -> None:
    assert quantity.units("9223372036854775807") == 2**63 - 1
    assert quantity.millis("9223372036854775.807") == 2**63 - 1
    assert quantity.units("7Ei") == 7 * 2**60


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        pytest.param({"cpu": "1e400", "memory": "1Gi"}, "cpu", id="cpu"),
        pytest.param({"cpu": "1", "memory": "8Ei"}, "memory", id="memory"),
    ],
)
def test_scenario_quantities_have_the_same_bounds(requests: dict[str, str], field: str) -> None:
    with open("examples/scenarios/batch-and-services.json") as stream:
        document = json.load(stream)
    document["daemonSets"][0]["requests"] = requests
    with pytest.raises(BadInputError) as refused:
        scenario.parse(json.dumps(document), source="s.json")
    expected = f"{field}: {requests[field]!r} is larger than the API server stores"
    assert any(expected in problem for problem in refused.value.problems), refused.value.problems


def test_a_deeply_nested_scenario_is_refused_at_once() -> None:
    with pytest.raises(BadInputError, match="not valid JSON"):
        scenario.parse('{"a":' * 100_000 + "1" + "}" * 100_000, source="s.json")


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.from_regex(quantity._SYNTAX, fullmatch=True))
def test_quantities_read_as_the_kubernetes_clients_parse_quantity_reads_them(text: str) -> None:
    try:
        expected = parse_quantity(text)
    except ValueError:  # an exponent too large for Decimal
        with pytest.raises(quantity.QuantityError):
            quantity.units(text)
        return
    if expected < 0 or expected > quantity.MAX_INT64:
        with pytest.raises(quantity.QuantityError):
            quantity.units(text)
    else:
        assert quantity.units(text) == math.ceil(expected)
