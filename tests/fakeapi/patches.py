"""The three PATCH formats kube-apiserver accepts for built-in kinds, applied to JSON dicts.

- JSON merge patch (RFC 7386): maps merge, `null` deletes, everything else replaces.
- Strategic merge patch: a merge patch that merges the few lists kube-apiserver
  declares with a patch merge key (containers, volumes, ownerReferences,
  conditions, finalizers) and honours `$patch: replace|delete` on maps. Every
  other list (node taints, pod tolerations) is replaced whole, as the real
  server does for lists without a patch strategy.
- JSON patch (RFC 6902): add, remove, replace, move, copy, test.

Functions here never mutate their arguments.
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.fakeapi import statuses
from tests.fakeapi.resources import JsonObject

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Lists kube-apiserver's built-in types tag with `patchStrategy:"merge"`; the value is the
# patch merge key, or None for lists of scalars merged as a set (finalizers).
_MERGED_LISTS: dict[tuple[str, ...], str | None] = {
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): None,
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("status", "conditions"): "type",
}


def apply(content_type: str, current: JsonObject, body: bytes) -> tuple[JsonObject, Any]:
    """Return the patched object and the decoded patch (for the server's write log)."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == APPLY_PATCH:
        raise statuses.bad_request("server-side apply is not supported by the fake API server")
    if media_type not in (MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH):
        raise statuses.unsupported_media_type()
    try:
        patch = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise statuses.bad_request(f"error decoding patch: {error}") from error
    if media_type == JSON_PATCH:
        return json_patch(current, patch), patch
    if not isinstance(patch, dict):
        raise statuses.bad_request("the patch is not a JSON object")
    if media_type == MERGE_PATCH:
        return merge_patch(current, patch), patch
    return strategic_merge_patch(current, patch), patch


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return _copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, dict):
        return _copy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return _copy({k: v for k, v in patch.items() if k != "$patch"})
    if directive is not None:
        raise statuses.bad_request(f"unknown patch type: {directive!r}")
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            continue  # only an ordering hint; the fake keeps the stored order
        if key.startswith("$"):
            raise statuses.bad_request(f"the strategic merge directive {key!r} is not supported by the fake API server")
        child_path = (*path, key)
        if value is None:
            result.pop(key, None)
            continue
        if isinstance(value, list) and child_path[-2:] in _MERGED_LISTS:
            result[key] = _merge_list(result.get(key), value, _MERGED_LISTS[child_path[-2:]], child_path)
            continue
        merged = strategic_merge_patch(result.get(key), value, child_path)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    return result


def _merge_list(current: Any, patch: list[Any], merge_key: str | None, path: tuple[str, ...]) -> list[Any]:
    items = list(current) if isinstance(current, list) else []
    if merge_key is None:
        return items + [_copy(value) for value in patch if value not in items]
    for element in patch:
        if not isinstance(element, dict) or merge_key not in element:
            raise statuses.bad_request(f"map: {element!r} does not contain declared merge key: {merge_key}")
        index = next(
            (i for i, item in enumerate(items) if isinstance(item, dict) and item.get(merge_key) == element[merge_key]),
            None,
        )
        if element.get("$patch") == "delete":
            if index is not None:
                del items[index]
        elif index is None:
            items.append(_copy({k: v for k, v in element.items() if k != "$patch"}))
        else:
            items[index] = strategic_merge_patch(items[index], element, path)
    return items


def _parse_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise statuses.unprocessable(f"JSON pointer must start with '/': {pointer!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _resolve_parent(document: Any, parts: list[str], operation: str, pointer: str) -> Any:
    node = document
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise statuses.unprocessable(f"{operation} operation does not apply: doc is missing path: {pointer}")
    return node


def _get(document: Any, pointer: str, operation: str) -> Any:
    parts = _parse_pointer(pointer)
    if not parts:
        return document
    parent = _resolve_parent(document, parts, operation, pointer)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise statuses.unprocessable(f"{operation} operation does not apply: doc is missing key: {pointer}")


def _remove(document: Any, pointer: str, operation: str) -> Any:
    parts = _parse_pointer(pointer)
    if not parts:
        raise statuses.unprocessable(f"{operation} operation does not apply: cannot remove the whole document")
    parent = _resolve_parent(document, parts, operation, pointer)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise statuses.unprocessable(f"{operation} operation does not apply: doc is missing key: {pointer}")


def _add(document: Any, pointer: str, value: Any, operation: str, *, replace: bool = False) -> Any:
    parts = _parse_pointer(pointer)
    if not parts:
        return value
    parent = _resolve_parent(document, parts, operation, pointer)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise statuses.unprocessable(f"{operation} operation does not apply: doc is missing key: {pointer}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise statuses.unprocessable(f"{operation} operation does not apply: index out of range: {pointer}")
    else:
        raise statuses.unprocessable(f"{operation} operation does not apply: doc is missing path: {pointer}")
    return document


def _same_json(left: Any, right: Any) -> bool:
    return orjson.dumps(left, option=orjson.OPT_SORT_KEYS) == orjson.dumps(right, option=orjson.OPT_SORT_KEYS)


def json_patch(current: JsonObject, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise statuses.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    document: Any = _copy(current)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise statuses.bad_request(f"invalid JSON patch operation: {operation!r}")
        op, pointer = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise statuses.unprocessable(f"{op} operation does not apply: missing value")
        if op == "add":
            document = _add(document, pointer, _copy(operation["value"]), op)
        elif op == "replace":
            document = _add(document, pointer, _copy(operation["value"]), op, replace=True)
        elif op == "remove":
            _remove(document, pointer, op)
        elif op == "test":
            if not _same_json(_get(document, pointer, op), operation["value"]):
                raise statuses.unprocessable(f"testing value {pointer} failed: test failed")
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise statuses.unprocessable(f"{op} operation does not apply: missing from")
            value = _remove(document, source, op) if op == "move" else _copy(_get(document, source, op))
            document = _add(document, pointer, value, op)
        else:
            raise statuses.bad_request(f"unexpected kind: {op}")
    return document
