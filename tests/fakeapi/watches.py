"""Plain watches (a watch from a resourceVersion, without sendInitialEvents), as kube-apiserver's watch cache
serves them, and the faults that break them.

Each behaviour and where it comes from (k8s.io/apiserver v0.36.3, `pkg/storage/cacher`, the source the
e2e toolchain builds kube-apiserver 1.36.3 from):

- Events come in resourceVersion order, each change of a matching object once, starting after the
  `resourceVersion` asked for (`watch_cache.go` `getAllEventsSinceLocked`, then the live events).
- With a field or label selector an object that stops matching is sent as DELETED (its previous
  content, the change's resourceVersion), one that starts matching as ADDED (`cache_watcher.go`
  `convertToWatchEvent`): a pod that finishes leaves a watch of unfinished pods as DELETED.
- A resourceVersion older than what the cache still holds is answered 200 with one ERROR event, a
  Status 410 `Expired` "too old resource version: RV (OLDEST-1)" (`watch_cache.go`, `cacher.go`
  `newErrWatcher`). The cache holds 75 s to 100,000 events; the fake the last `store.CHANGES_KEPT`
  changes, and none before `api.compact_watch_history()` (etcd compacted, then kube-apiserver
  restarted: its new cache starts at the current revision).
- With `allowWatchBookmarks=true` each watcher gets a BOOKMARK, the kind's empty object carrying the
  resourceVersion the watcher has been brought up to, about every minute (`cacher.go`
  `defaultBookmarkFrequency`); the fake every `api.watch_bookmarks(seconds)` (60 by default). The
  real cache also sends one 2 s before the watch's timeout; the fake does not.
- `timeoutSeconds` ends the watch cleanly (the chunked stream's last chunk) when it passes
  (`handlers/watch.go`).
- A watch stream is never compressed (`handlers/watch.go` writes events straight to the response).

Faults: `api.drop_watches()` closes every open watch's connection without the last chunk, as a
kube-apiserver restart does; `api.stall_watches(True)` keeps them open and silent, bookmarks too;
`api.lose_watch_events(kind, count)` keeps the next `count` changes of `kind` from every watch (a
later bookmark carries a resourceVersion past them). Simplifications: a bookmark's resourceVersion is
the store's current one when the watcher has nothing left to send (the real cache's lags on a quiet
resource until etcd reports progress), and `resourceVersion` "" or "0" starts at the current one
without initial events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import orjson

from tests.fakeapi import statuses
from tests.fakeapi.resources import JsonObject, Resource

if TYPE_CHECKING:
    from tests.fakeapi.cluster import Cluster

WATCH_MODES = ("off", "on", "forbidden")
DEFAULT_BOOKMARK_SECONDS = 60.0
_TICK_SECONDS = 0.05  # how often an idle watch looks at the clock, its faults and its client


class DropConnectionError(Exception):
    """The watch's connection is to be closed without the chunked stream's end (a restart, a broken network)."""


class Watches:
    """How plain watches are served and the faults set on them (the fake API server holds one)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.mode = "off"
        self.bookmark_seconds = DEFAULT_BOOKMARK_SECONDS
        self._lock = threading.Lock()
        self._generation = 0  # bumped by drop(): every watch open before it ends abruptly
        self._stalled = False
        self.opened = 0

    def drop(self) -> None:
        with self._lock:
            self._generation += 1

    def stall(self, stalled: bool) -> None:
        with self._lock:
            self._stalled = stalled

    def _state(self) -> tuple[int, bool]:
        with self._lock:
            return self._generation, self._stalled

    def stream(
        self,
        resource: Resource,
        namespace: str | None,
        query: dict[str, str],
        predicate: Callable[[JsonObject], bool] | None,
        bookmarks: bool,
    ) -> Iterator[bytes]:
        """The watch's lines as they come; b"" while idle (the server then checks whether the client left)."""
        text = query.get("resourceVersion", "")
        try:
            since = int(text) if text not in ("", "0") else None
        except ValueError:
            raise statuses.bad_request(f"resourceVersion: Invalid value: {text!r}") from None
        try:
            timeout = float(query.get("timeoutSeconds") or 1800)
        except ValueError:
            raise statuses.bad_request(f"timeoutSeconds: Invalid value: {query.get('timeoutSeconds')!r}") from None
        store = self._cluster.store
        with self._cluster.lock:
            start = store.resource_version if since is None else since
            queue = store.open_watch(start, resource.kind)
            oldest = store.compacted_through
        generation, _ = self._state()
        with self._lock:
            self.opened += 1
        type_meta = orjson.dumps({"kind": resource.kind, "apiVersion": resource.api_version})[:-1] + b","
        return self._events(
            resource, namespace, queue, start, oldest, predicate, bookmarks, timeout, type_meta, generation
        )

    def _events(
        self,
        resource: Resource,
        namespace: str | None,
        queue: object,
        start: int,
        oldest: int,
        predicate: Callable[[JsonObject], bool] | None,
        bookmarks: bool,
        timeout: float,
        type_meta: bytes,
        generation: int,
    ) -> Iterator[bytes]:
        from tests.fakeapi.store import WatchQueue

        store = self._cluster.store
        if not isinstance(queue, WatchQueue):
            status = statuses.failure_body(410, "Expired", f"too old resource version: {start} ({oldest})")
            yield orjson.dumps({"type": "ERROR", "object": status}) + b"\n"
            return
        deadline = time.monotonic() + max(timeout, 0.0)
        next_bookmark = time.monotonic() + self.bookmark_seconds
        prefix = f"{namespace}/" if namespace else ""
        try:
            while True:
                current, stalled = self._state()
                if current != generation:
                    raise DropConnectionError
                now = time.monotonic()
                if now >= deadline:
                    return
                lines: list[bytes] = []
                if not stalled:
                    with self._cluster.lock:
                        changes = list(queue.pending)
                        queue.pending.clear()
                        brought_up_to = store.resource_version
                    if self._state()[0] != generation:
                        # Dropped while these were gathered: a change made after `drop` returned is never
                        # sent on the old connection, so a test that drops before a request is handled
                        # knows its change cannot have reached the client that way.
                        raise DropConnectionError
                    for change in changes:
                        if prefix and not change.key.startswith(prefix):
                            continue
                        line = _event_line(change.before, change.after, change.resource_version, predicate, type_meta)
                        if line is not None:
                            lines.append(line)
                    if bookmarks and now >= next_bookmark:
                        next_bookmark = now + self.bookmark_seconds
                        lines.append(_bookmark_line(resource, brought_up_to))
                if lines:
                    yield b"".join(lines)
                    continue
                with store.changed:
                    store.changed.wait(_TICK_SECONDS)
                yield b""
        finally:
            with self._cluster.lock:
                store.close_watch(queue)


def _event_line(
    before: JsonObject | None,
    after: JsonObject | None,
    resource_version: int,
    predicate: Callable[[JsonObject], bool] | None,
    type_meta: bytes,
) -> bytes | None:
    """kube-apiserver's `convertToWatchEvent`: ADDED, MODIFIED or DELETED as the object passes the selectors
    before and after the change, or nothing when it passes neither."""
    now_passes = after is not None and (predicate is None or predicate(after))
    was_passing = before is not None and (predicate is None or predicate(before))
    if now_passes and after is not None:
        event_type = "MODIFIED" if was_passing else "ADDED"
        body = orjson.dumps(after)
    elif was_passing and before is not None:
        event_type = "DELETED"
        gone = dict(before)
        gone["metadata"] = {**(before.get("metadata") or {}), "resourceVersion": str(resource_version)}
        body = orjson.dumps(gone)
    else:
        return None
    return b'{"type":"' + event_type.encode() + b'","object":' + type_meta + body[1:] + b"}\n"


def _bookmark_line(resource: Resource, resource_version: int) -> bytes:
    from tests.fakeapi.server import _BOOKMARK_BODIES

    bookmark = {
        "kind": resource.kind,
        "apiVersion": resource.api_version,
        "metadata": {"resourceVersion": str(resource_version), "creationTimestamp": None},
        **_BOOKMARK_BODIES.get(resource.kind, {}),
    }
    return orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n"
