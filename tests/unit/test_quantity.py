"""Quantities parse exactly, as the API server reads them."""

from __future__ import annotations

import pytest

from compactor import quantity


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


@pytest.mark.parametrize("text", ["", "abc", "1Qi", "--1", "1.2.3", "-1", "1 Gi", "Infinity", "NaN", None, True, [1]])
def test_anything_else_is_refused_with_the_text_in_the_message(text: object) -> None:
    with pytest.raises(quantity.QuantityError, match=r"quantity|negative|finite"):
        quantity.millis(text)
