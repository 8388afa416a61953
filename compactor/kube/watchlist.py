"""Streaming lists (WatchList, KEP-3157): the events of one watch, read as a list.

A watch with `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`
and `allowWatchBookmarks=true` sends every object as an ADDED event, then a
BOOKMARK whose metadata carries the annotation `k8s.io/initial-events-end:
"true"`; after it come only changes, so the read stops there. Changes the
server sends before that bookmark (MODIFIED, DELETED: the state moved while
the initial events were sent) are applied, so the snapshot is the cluster at
the bookmark. The events are newline-delimited JSON, decoded a batch of
whole lines at a time into `compactor.kube.decoding.Event`, whose object is the
same typed `Item` a list page holds, and handed to the same
`SnapshotBuilder`.

This module turns bytes into records; it never opens a connection and never
decides whether a server is asked for a streaming list or a paged one
(`compactor.kube.client` does both).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from compactor.errors import SnapshotError
from compactor.kube import decoding
from compactor.kube.snapshot import SnapshotBuilder

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Whole lines are decoded once this much has come, like a list page of 500 pods (3.5 MB): one decoder
# call per batch, not one per event.
BATCH_BYTES = 2 * 1024 * 1024
# A bookmark or an error is acted on as soon as its line is whole: after the initial-events-end bookmark
# the server sends nothing until something changes, and waiting for a full batch would wait for that.
_PROMPT = (b"BOOKMARK", b'"ERROR"')
_MARKER_OVERLAP = 16  # a marker split between two reads is still found


class _Versioned(msgspec.Struct, gc=False):
    resourceVersion: str = ""  # noqa: N815


class _VersionedHead(msgspec.Struct, gc=False):
    metadata: _Versioned | None = None


_VERSIONED_HEAD = msgspec.json.Decoder(_VersionedHead)


class StreamEndedError(Exception):
    """The stream ended (or sent an ERROR event) before its initial events did; `reason` says how."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


def read_initial_events(
    chunks: Iterable[bytes], builder: SnapshotBuilder, kind: str, *, what: str, versions: dict[str, str] | None = None
) -> int:
    """Feed the objects of a streaming list of `kind` to `builder` until its initial events end.

    `chunks` are the stream's bytes as they arrive, in pieces of any size. Returns how many events were
    read; the initial-events-end bookmark's resourceVersion (where a watch of the same objects would go
    on) goes into `versions[kind]`. Raises StreamEndedError when the stream ends first or sends an ERROR
    event, SnapshotError when it sends what is not a watch event of `kind`.
    """
    pending = bytearray()
    events = 0
    prompt = False
    for data in chunks:
        start = max(0, len(pending) - _MARKER_OVERLAP)
        pending += data
        prompt = prompt or any(pending.find(marker, start) >= 0 for marker in _PROMPT)
        if len(pending) < BATCH_BYTES and not prompt:
            continue
        cut = pending.rfind(b"\n") + 1
        if cut == 0:
            continue
        batch = bytes(pending[:cut])
        del pending[:cut]
        prompt = any(marker in pending for marker in _PROMPT)
        count, ended = _add_lines(builder, kind, batch, what, versions)
        events += count
        if ended:
            return events
    if pending.strip():  # the last line of a stream that ended may have no newline
        count, ended = _add_lines(builder, kind, bytes(pending) + b"\n", what, versions)
        events += count
        if ended:
            return events
    raise StreamEndedError(f"the stream ended after {events} events, before the initial-events-end bookmark")


def _add_lines(
    builder: SnapshotBuilder, kind: str, batch: bytes, what: str, versions: dict[str, str] | None = None
) -> tuple[int, bool]:
    """Whole lines of events: (how many, whether the initial-events-end bookmark was among them)."""
    try:
        decoded = decoding.EVENT.decode_lines(batch)
    except (decoding.DecodeError, RecursionError):
        decoded = None
    if decoded is not None:
        # Nearly every batch: only ADDED events of the kind asked for, all read by the typed path.
        items = [event.object for event in decoded if event.type == "ADDED" and event.object is not None]
        if len(items) == len(decoded) and all(item.kind == kind for item in items) and builder.add_typed(kind, items):
            return len(items), False
    count = 0
    for line in batch.split(b"\n"):
        if not line.strip():
            continue
        count += 1
        if _add_line(builder, kind, line, what, versions):
            return count, True
    return count, False


def _add_line(
    builder: SnapshotBuilder, kind: str, line: bytes, what: str, versions: dict[str, str] | None = None
) -> bool:
    """One event read on its own; True when it is the initial-events-end bookmark."""
    try:
        event = decoding.RAW_EVENT.decode(line)
    except (decoding.DecodeError, RecursionError) as error:
        raise SnapshotError(f"cannot {what}: the API server sent a watch event that is not JSON ({error})") from None
    except decoding.ValidationError as error:
        raise SnapshotError(
            f"cannot {what}: the API server sent a watch event that is not an event ({error})"
        ) from None
    if event.type == "ERROR":
        status = _status(bytes(event.object))
        code = status.code if isinstance(status.code, int) and not isinstance(status.code, bool) else None
        message = str(status.message or status.reason or "no message")[:300]
        raise StreamEndedError(f"the API server ended the stream with an error (code {code}): {message}", code)
    if event.type is None:
        # A list, a Status: what a server that does not serve watches here answers (or a proxy in between).
        raise StreamEndedError("the answer is not a watch stream (a line without an event type)")
    if event.type not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        raise SnapshotError(f"cannot {what}: the API server sent a watch event of type {str(event.type)[:40]!r}")
    head = _head(bytes(event.object), what)
    if head.kind is not None and head.kind != kind:
        raise SnapshotError(f"cannot {what}: the watch sent a {str(head.kind)[:60]!r}, not a {kind}")
    meta = head.metadata or decoding.ObjectMeta()
    if event.type == "BOOKMARK":
        annotations = meta.annotations if isinstance(meta.annotations, dict) else {}
        ended = bool(annotations.get(INITIAL_EVENTS_END) == "true")
        if ended and versions is not None:
            versions[kind] = _resource_version(bytes(event.object))
        return ended
    if event.type == "DELETED":
        if not isinstance(meta.name, str) or not meta.name:
            raise SnapshotError(f"cannot {what}: the API server sent a DELETED event for an object without a name")
        builder.remove_object(kind, meta.namespace if isinstance(meta.namespace, str) else None, meta.name)
        return False
    builder.add_object(kind, bytes(event.object), what=what, replaces=event.type == "MODIFIED")
    return False


def _resource_version(raw: bytes) -> str:
    """An event object's metadata.resourceVersion; "" when it has none that reads as a string."""
    try:
        head = _VERSIONED_HEAD.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return ""
    return head.metadata.resourceVersion if head.metadata is not None else ""


def _head(raw: bytes, what: str) -> decoding.ObjectHead:
    try:
        return decoding.OBJECT_HEAD.decode(raw)
    except (decoding.DecodeError, decoding.ValidationError, RecursionError) as error:
        raise SnapshotError(f"cannot {what}: a watch event's object cannot be read ({error})") from None


def _status(raw: bytes) -> decoding.StatusHead:
    try:
        return decoding.STATUS_HEAD.decode(raw)
    except (decoding.DecodeError, decoding.ValidationError, RecursionError):
        return decoding.StatusHead(message="the error's Status cannot be read")
