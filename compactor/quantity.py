"""Exact Kubernetes quantities as integers: millicores for CPU, whole units for the rest.

Parsing is `kubernetes.utils.parse_quantity` (Decimal, exact); rounding up
matches the API server's `MilliValue()` / `Value()`. The cache matters: a
150,000-pod cluster repeats a few hundred distinct strings.

Bounds are the API server's: "no quantity may represent a number greater
than 2^63-1 in magnitude" (apimachinery `resource.Quantity`), and
`MilliValue()` is an int64 too. A larger value never comes from a cluster;
it is malformed input, refused, not a very big node.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, DecimalException
from functools import lru_cache

from kubernetes.utils import parse_quantity as _parse_quantity


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


# The grammar of resource.Quantity (apimachinery): sign, digits, then an
# exponent or a suffix. parse_quantity is more lenient (it accepts "1 Gi"),
# so the syntax is checked first.
_SYNTAX = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?")


@lru_cache(maxsize=4096)
def _decimal(text: str) -> Decimal:
    if not _SYNTAX.fullmatch(text):
        raise QuantityError(f"{text!r} is not a Kubernetes quantity")
    try:
        value: Decimal = _parse_quantity(text)
    except (ValueError, DecimalException, TypeError) as error:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity") from error
    if not value.is_finite():
        raise QuantityError(f"{text!r} is not a finite quantity")
    if value < 0:
        raise QuantityError(f"{text!r} is negative")
    if value > _MAX_VALUE:
        raise QuantityError(f"{text!r} is larger than the API server stores (2^63-1)")
    return Decimal(value)


MAX_INT64 = 2**63 - 1
_MAX_VALUE = Decimal(MAX_INT64)
_MAX_MILLI_VALUE = Decimal(MAX_INT64) / 1000


def _text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"{value!r} is not a Kubernetes quantity")
    return value if isinstance(value, str) else str(value)


def millis(value: object) -> int:
    """`value` in thousandths, rounded up: "250m" -> 250, "0.5" -> 500, "2" -> 2000."""
    text = _text(value)
    amount = _decimal(text)
    if amount > _MAX_MILLI_VALUE:
        raise QuantityError(f"{text!r} is larger than the API server stores in thousandths (2^63-1)")
    return math.ceil(amount * 1000)


def units(value: object) -> int:
    """`value` in whole units, rounded up: "1Gi" -> 1073741824, "1e3" -> 1000."""
    return math.ceil(_decimal(_text(value)))
