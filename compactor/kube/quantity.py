"""Exact Kubernetes quantities as integers: millicores for CPU, whole units for the rest.

Parsing is that of `kubernetes.utils.parse_quantity` (Decimal, exact),
written out here so that `plan --snapshot` need not import the Kubernetes
client (0.3 s of every run); a test holds the two to the same answers.
Rounding up matches the API server's `MilliValue()` / `Value()`. The cache
matters: a 150,000-pod cluster repeats a few hundred distinct strings.

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


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


# The grammar of resource.Quantity (apimachinery): sign, digits, then an
# exponent or a suffix. parse_quantity is more lenient (it accepts "1 Gi"),
# so the syntax is checked first. Digits are ASCII only, as apimachinery's
# parseQuantityString reads them ('0' to '9'); Decimal would also take "１" or "٣".
_SYNTAX = re.compile(r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>[eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?", re.ASCII)
# Powers of the suffixes: base 1000 for n, u, m, k, M, G, T, P, E; base 1024 for Ki ... Ei.
_EXPONENTS = {"n": -3, "u": -2, "m": -1, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


@lru_cache(maxsize=4096)
def _decimal(text: str) -> Decimal:
    match = _SYNTAX.fullmatch(text)
    if match is None:
        raise QuantityError(f"{_shown(text)} is not a Kubernetes quantity")
    try:
        value = _parse(match["number"], match["suffix"])
    except DecimalException as error:
        raise QuantityError(f"{_shown(text)} is not a Kubernetes quantity") from error
    if not value.is_finite():
        raise QuantityError(f"{_shown(text)} is not a finite quantity")
    if value < 0:
        raise QuantityError(f"{_shown(text)} is negative")
    if value > _MAX_VALUE:
        raise QuantityError(f"{_shown(text)} is larger than the API server stores (2^63-1)")
    return Decimal(value)


def _parse(number: str, suffix: str | None) -> Decimal:
    """As `kubernetes.utils.parse_quantity` computes it, for text that matched `_SYNTAX`."""
    if suffix is None:
        return Decimal(number)
    if suffix[-1].isdigit():  # a decimal exponent, "1e3"
        return Decimal(number + suffix)
    base = 1024 if suffix.endswith("i") else 1000
    return Decimal(number) * (base ** Decimal(_EXPONENTS[suffix[0]]))


def _shown(value: object) -> str:
    """The value in a message, short: a message names a bad value, it does not echo a megabyte of it."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


MAX_INT64 = 2**63 - 1
_MAX_VALUE = Decimal(MAX_INT64)
_MAX_MILLI_VALUE = Decimal(MAX_INT64) / 1000


def _text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"{_shown(value)} is not a Kubernetes quantity")
    return value if isinstance(value, str) else str(value)


def millis(value: object) -> int:
    """`value` in thousandths, rounded up: "250m" -> 250, "0.5" -> 500, "2" -> 2000."""
    text = _text(value)
    amount = _decimal(text)
    if amount > _MAX_MILLI_VALUE:
        raise QuantityError(f"{_shown(text)} is larger than the API server stores in thousandths (2^63-1)")
    return math.ceil(amount * 1000)


def units(value: object) -> int:
    """`value` in whole units, rounded up: "1Gi" -> 1073741824, "1e3" -> 1000."""
    return math.ceil(_decimal(_text(value)))
