"""JSON text that people write (configuration, request bodies), decoded without guessing.

orjson decodes; a second pass with the standard library's `object_pairs_hook`
looks for an object that names a key twice. Every JSON decoder resolves that
silently (the last one wins), so `{"dryRun": true, ..., "dryRun": false}`
would act while whoever reads the text sees a dry run (RFC 8259 section 4:
"The names within an object SHOULD be unique"). Here it is an error naming
the key.

Must never: raise anything but `ValueError` for any text it is given.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


class DuplicateKeyError(ValueError):
    """An object in the text names the same key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} is given twice in one object; give it once")
        self.key = key


def loads(text: str | bytes) -> Any:
    """The decoded JSON; orjson.JSONDecodeError (a ValueError) when not JSON, DuplicateKeyError as above."""
    data = orjson.loads(text)
    reject_duplicate_keys(text)
    return data


def reject_duplicate_keys(text: str | bytes) -> None:
    """Raise DuplicateKeyError for the first key an object repeats; the text must already be valid JSON."""
    try:
        json.loads(text, object_pairs_hook=_unique_object)
    except DuplicateKeyError:
        raise
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to check") from None
    except ValueError:
        # Valid for orjson but not for the standard library (say a huge integer): nothing to add.
        return


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result
