"""Exact Kubernetes quantities as integers: millicores for CPU, whole units for the rest.

Parsing is `kubernetes.utils.parse_quantity` (Decimal, exact); rounding up
matches the API server's `MilliValue()` / `Value()`. The cache matters: a
150,000-pod cluster repeats a few hundred distinct strings.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from kubernetes.utils import parse_quantity as _parse_quantity


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


@lru_cache(maxsize=4096)
def _decimal(text: str) -> Decimal:
    try:
        value = _parse_quantity(text)
    except (ValueError, InvalidOperation, TypeError) as error:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity") from error
    if not value.is_finite():
        raise QuantityError(f"{text!r} is not a finite quantity")
    if value < 0:
        raise QuantityError(f"{text!r} is negative")
    return value


def _text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"{value!r} is not a Kubernetes quantity")
    return value if isinstance(value, str) else str(value)


def millis(value: object) -> int:
    """`value` in thousandths, rounded up: "250m" -> 250, "0.5" -> 500, "2" -> 2000."""
    return math.ceil(_decimal(_text(value)) * 1000)


def units(value: object) -> int:
    """`value` in whole units, rounded up: "1Gi" -> 1073741824, "1e3" -> 1000."""
    return math.ceil(_decimal(_text(value)))
