"""JSON object files people hand to the command line, read with a bound.

One reader for the files that are not kubectl node/pod snapshots (those have
`compactor.kube.snapshot`'s streaming reader): the HPA job's snapshot and metrics
files and the simulator's kubectl snapshot. Reading stops one byte past the
limit, so `/dev/zero` or a wrong multi-gigabyte file ends at once with a
message instead of a MemoryError.

Must never: raise anything but the error class it is given for a bad file.
"""

from __future__ import annotations

from typing import Any

import orjson

from compactor.errors import BadInputError


def read_object(path: str, *, what: str, limit: int, error: type[BadInputError], hint: str = "") -> dict[str, Any]:
    """The JSON object in `path` (at most `limit` bytes); `what` names the file in messages."""
    try:
        with open(path, "rb") as stream:
            content = stream.read(limit + 1)
    except OSError as problem:
        raise error(f"cannot read {what} {path}: {problem.strerror or problem}") from problem
    if len(content) > limit:
        size = f"{limit // (1 << 20)} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        raise error(f"{what} {path} is larger than {size} (is this the right file?)")
    try:
        document = orjson.loads(content)
    except orjson.JSONDecodeError as problem:
        raise error(f"{what} {path} is not JSON: {problem}") from problem
    if not isinstance(document, dict):
        raise error(f"{what} {path} must be a JSON object{hint}")
    return document
