"""Hostile variations of realistic JSON: a value of the wrong type, a missing field, an odd
quantity, unicode, a huge list, deep nesting. Shared by every category of the fuzz suite.

A mutation is applied at one place in a copy of a real object (a node of the example
snapshot, a configuration file, a list page), so most of what a test feeds the code
under test is still what it expects and the hostile part reaches deep.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Json = Any
Path = tuple[str | int, ...]

# Strings the Kubernetes quantity grammar refuses, or accepts only at the edges of its range.
ODD_QUANTITIES = [
    "1e400",
    "1e-400",
    "-1",
    "-0.5",
    "1e18",
    "9223372036854775807",
    "9223372036854775808",
    "9223372036854775807Ei",
    "0.0000000001",
    "1Ki1",
    "1 Gi",
    " 1",
    "1.",
    ".5",
    "0x10",
    "1_000",
    "NaN",
    "Infinity",
    "inf",
    "１",  # fullwidth digit one
    "٣",  # Arabic-Indic digit three
    "1e9999999",
    "",
    "m",
    "Gi",
    "1GiB",
    "1k",
    "1mi",
    "9" * 400,
]

UNICODE_STRINGS = [
    "ñode-é",
    "узел",
    "节点",
    "🚀",
    "\u202eevil",  # right-to-left override
    "a\u0000b",  # NUL inside a string
    "\ud7ff\ue000",
    "line\nbreak",
    '"quoted"',
    "\\",
    "x" * 10_000,
]


DEEP_MARK = "@@deep-nesting@@"
_DEEP = re.compile(rf'"{DEEP_MARK}(\d+){DEEP_MARK}"'.encode())


def encode(document: Json, *, pretty: bool = False) -> bytes:
    """JSON text of `document`, with each deep-nesting mark expanded to that many nested objects.

    The nesting is written as text: JSON encoders (and Python) refuse to build it as objects.
    """
    # The standard encoder, not orjson: it writes integers beyond 64 bits as JSON allows.
    text = json.dumps(document, indent=4 if pretty else None, ensure_ascii=False).encode()
    return _DEEP.sub(lambda match: b'{"x":' * int(match.group(1)) + b"null" + b"}" * int(match.group(1)), text)


# The grammar of resource.Quantity (apimachinery), ASCII digits only.
QUANTITY_GRAMMAR = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?")


def hostile_scalars() -> st.SearchStrategy[Json]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([0, -1, 2**63, 2**64, 10**30]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(ODD_QUANTITIES),
        st.sampled_from(UNICODE_STRINGS),
        st.text(max_size=20),
    )


def hostile_values() -> st.SearchStrategy[Json]:
    """Anything JSON can hold, weighted towards what breaks parsers."""
    return st.one_of(
        hostile_scalars(),
        st.lists(hostile_scalars(), max_size=3),
        st.dictionaries(st.text(max_size=8), hostile_scalars(), max_size=3),
        st.sampled_from([[], {}, [{}], [[]], {"": None}]),
    )


def paths(document: Json, prefix: Path = ()) -> list[Path]:
    """Every place in a JSON document, containers and leaves, root excluded."""
    found: list[Path] = []
    if isinstance(document, dict):
        for key, value in document.items():
            found.append((*prefix, key))
            found.extend(paths(value, (*prefix, key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found.append((*prefix, index))
            found.extend(paths(value, (*prefix, index)))
    return found


def kubernetes_path(path: Path) -> str:
    """A path the way the snapshot reader names fields: spec.containers[0].resources."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class Mutation:
    path: Path
    action: str  # replace, delete, huge-list, unicode-key, deep
    value: Json = None

    def describe(self) -> str:
        return f"{self.action} at {kubernetes_path(self.path) or '(top level)'}: {self.value!r:.80}"


def apply(document: Json, mutation: Mutation) -> Json:
    """A mutated deep copy of `document`."""
    result = copy.deepcopy(document)
    *parents, last = mutation.path
    holder = result
    for part in parents:
        holder = holder[part]
    if mutation.action == "replace":
        holder[last] = mutation.value
    elif mutation.action == "delete":
        del holder[last]
    elif mutation.action == "huge-list":
        holder[last] = [copy.deepcopy(holder[last]) for _ in range(mutation.value)]
    elif mutation.action == "unicode-key":
        if isinstance(holder[last], dict):
            holder[last][mutation.value] = mutation.value
        else:
            holder[last] = {mutation.value: holder[last]}
    elif mutation.action == "deep":
        holder[last] = f"{DEEP_MARK}{mutation.value}{DEEP_MARK}"  # expanded by `encode`
    else:
        raise ValueError(f"unknown mutation {mutation.action}")
    return result


@st.composite
def mutations_at(draw: st.DrawFn, path: Path, *, huge: int = 2_000) -> Mutation:
    """One mutation at `path`."""
    action = draw(
        st.sampled_from(["replace", "replace", "replace", "replace", "delete", "huge-list", "unicode-key", "deep"])
    )
    if action == "replace":
        return Mutation(path, action, draw(hostile_values()))
    if action == "huge-list":
        return Mutation(path, action, draw(st.sampled_from([0, 2, huge])))
    if action == "unicode-key":
        return Mutation(path, action, draw(st.sampled_from(UNICODE_STRINGS)))
    if action == "deep":
        return Mutation(path, action, draw(st.sampled_from([3, 60, 5_000])))
    return Mutation(path, action)
