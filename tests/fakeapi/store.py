"""The fake API server's storage: objects by kind and key, one resourceVersion counter,
cached JSON per object, and consistent snapshots behind paginated lists.

Keys are `namespace/name` (or `name` for cluster-scoped kinds) and lists are served in
key order, which is the order etcd returns them to kube-apiserver. Each stored object
keeps its JSON encoding until the object is written again, so a page of a large list is
a join of ready-made bytes. Stored objects carry no `kind`/`apiVersion`: list items on
the wire have none, and single objects get them spliced in front.

Callers hold `lock` around every call; nothing here takes it by itself.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from tests.fakeapi import statuses
from tests.fakeapi.resources import BY_KIND, JsonObject

Predicate = Callable[[JsonObject], bool]
Encoder = Callable[[JsonObject], bytes]

# How many paginated lists may be in flight before the oldest one's continue token expires.
SNAPSHOTS_KEPT = 64
# How many changes watches can be started before (kube-apiserver's watch cache keeps at least its
# `eventFreshDuration`, 75 s, of them, and up to 100,000 per resource); older ones are compacted away.
CHANGES_KEPT = 10_000


@dataclass
class Change:
    """One write as watches see it: the object before and after (None: created / deleted), at `resource_version`.

    `lost`: a fault that keeps this change from every watch open when it happened (`api.lose_watch_events`)."""

    resource_version: int
    kind: str
    key: str
    before: JsonObject | None
    after: JsonObject | None
    lost: bool = False


@dataclass(eq=False)
class WatchQueue:
    """The changes of `kind` an open watch has still to send, in order (kube-apiserver's cacheWatcher input)."""

    kind: str
    pending: deque[Change]


@dataclass
class _Snapshot:
    resource_version: int
    keys: list[str]
    items: list[bytes]
    id: int | None = None


@dataclass(frozen=True)
class Page:
    resource_version: int
    items: list[bytes]
    continue_token: str
    remaining_item_count: int | None


@dataclass(frozen=True)
class _ContinueToken:
    """What a continue token carries; `scope` is the key range (kind and namespace) it belongs to."""

    resource_version: int
    snapshot: int | None
    offset: int
    start_after: str
    scope: str

    def encode(self) -> str:
        payload = {
            "rv": self.resource_version,
            "snap": self.snapshot,
            "off": self.offset,
            "start": self.start_after,
            "scope": self.scope,
        }
        return base64.urlsafe_b64encode(orjson.dumps(payload)).decode()

    @staticmethod
    def decode(token: str, scope: str) -> _ContinueToken:
        try:
            payload = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            decoded = _ContinueToken(
                int(payload["rv"]),
                None if payload["snap"] is None else int(payload["snap"]),
                int(payload["off"]),
                str(payload["start"]),
                str(payload["scope"]),
            )
        except (binascii.Error, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise statuses.bad_request(f"continue key is not valid: {token!r}") from None
        if decoded.scope != scope:
            raise statuses.bad_request("continue key is not valid: key provided is not in the requested range")
        return decoded


def object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.resource_version = 0
        self._objects: dict[str, dict[str, JsonObject]] = {kind: {} for kind in BY_KIND}
        self._encoded: dict[str, dict[str, bytes]] = {kind: {} for kind in BY_KIND}
        self._sorted_keys: dict[str, list[str] | None] = {kind: [] for kind in BY_KIND}
        self._pods_by_node: dict[str, set[str]] = {}
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        # How many of the next requests that continue a list find their snapshot compacted away.
        self.expire_next_continues = 0
        self._snapshot_ids = itertools.count(1)
        # Every write, for watches (`changes_since`); those at or below `compacted_through` are gone.
        self.changes: deque[Change] = deque()
        self.compacted_through = 0
        # Per kind, how many of the next changes no watch open now will see (a fault).
        self.lose_next: dict[str, int] = {}
        # Notified (under its own lock) after each change, so that watches need not poll the store.
        self.changed = threading.Condition(threading.Lock())
        self.watch_queues: list[WatchQueue] = []

    def next_resource_version(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def get(self, kind: str, key: str) -> JsonObject | None:
        """The stored dict itself: callers copy before changing it."""
        return self._objects[kind].get(key)

    def items(self, kind: str) -> Iterator[tuple[str, JsonObject]]:
        objects = self._objects[kind]
        for key in self.sorted_keys(kind):
            yield key, objects[key]

    def count(self, kind: str) -> int:
        return len(self._objects[kind])

    def put(self, kind: str, key: str, obj: JsonObject, *, bump: bool = True) -> JsonObject:
        """Store `obj` (taking ownership of it) under a fresh resourceVersion."""
        objects = self._objects[kind]
        previous = objects.get(key)
        if bump:
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.next_resource_version())
        if previous is None:
            self._sorted_keys[kind] = None
        objects[key] = obj
        self._encoded[kind].pop(key, None)
        if kind == "Pod":
            self._reindex_pod(key, previous, obj)
        if bump:
            self._record(kind, key, previous, obj)
        return obj

    def remove(self, kind: str, key: str) -> JsonObject | None:
        obj = self._objects[kind].pop(key, None)
        if obj is None:
            return None
        self.next_resource_version()
        self._encoded[kind].pop(key, None)
        self._sorted_keys[kind] = None
        if kind == "Pod":
            self._reindex_pod(key, obj, None)
        self._record(kind, key, obj, None)
        return obj

    def _record(self, kind: str, key: str, before: JsonObject | None, after: JsonObject | None) -> None:
        lost = self.lose_next.get(kind, 0) > 0
        if lost:
            self.lose_next[kind] -= 1
        change = Change(self.resource_version, kind, key, before, after, lost)
        self.changes.append(change)
        if not lost:
            for queue in self.watch_queues:
                if queue.kind == kind:
                    queue.pending.append(change)
        while len(self.changes) > CHANGES_KEPT:
            self.compacted_through = self.changes.popleft().resource_version
        with self.changed:
            self.changed.notify_all()

    def compact_changes(self) -> None:
        """Forget every change so far, as an etcd compaction followed by a restart of kube-apiserver
        (whose new watch cache starts at the current revision) does."""
        self.changes.clear()
        self.compacted_through = self.resource_version

    def open_watch(self, resource_version: int, kind: str) -> WatchQueue | None:
        """A queue holding the changes of `kind` after `resource_version`, and every later one as it happens;
        None when some of them were compacted away (410 Gone)."""
        if resource_version < self.compacted_through:
            return None
        found: list[Change] = []
        for change in reversed(self.changes):
            if change.resource_version <= resource_version:
                break
            if change.kind == kind and not change.lost:
                found.append(change)
        found.reverse()
        queue = WatchQueue(kind, deque(found))
        self.watch_queues.append(queue)
        return queue

    def close_watch(self, queue: WatchQueue) -> None:
        if queue in self.watch_queues:
            self.watch_queues.remove(queue)

    def encoded(self, kind: str, key: str) -> bytes:
        cache = self._encoded[kind]
        data = cache.get(key)
        if data is None:
            data = cache[key] = orjson.dumps(self._objects[kind][key])
        return data

    def copy(self, kind: str, key: str) -> JsonObject:
        """A deep copy of a stored object, cheaper through its cached JSON than `copy.deepcopy`."""
        copied: JsonObject = orjson.loads(self.encoded(kind, key))
        return copied

    def sorted_keys(self, kind: str) -> list[str]:
        keys = self._sorted_keys[kind]
        if keys is None:
            keys = self._sorted_keys[kind] = sorted(self._objects[kind])
        return keys

    def keys_in_namespace(self, kind: str, namespace: str | None) -> list[str]:
        keys = self.sorted_keys(kind)
        if not namespace:
            return keys
        prefix = f"{namespace}/"
        start = bisect.bisect_left(keys, prefix)
        end = bisect.bisect_left(keys, f"{namespace}0")  # "0" sorts right after "/"
        return keys[start:end]

    def pod_keys_on_node(self, node: str) -> list[str]:
        return sorted(self._pods_by_node.get(node, ()))

    def _reindex_pod(self, key: str, before: JsonObject | None, after: JsonObject | None) -> None:
        old_node = _node_name(before)
        new_node = _node_name(after)
        if old_node == new_node and before is not None and after is not None:
            return
        if before is not None:
            residents = self._pods_by_node.get(old_node)
            if residents is not None:
                residents.discard(key)
                if not residents:
                    del self._pods_by_node[old_node]
        if after is not None:
            self._pods_by_node.setdefault(new_node, set()).add(key)

    def list_page(
        self,
        kind: str,
        scope: str,
        candidate_keys: Callable[[], list[str]],
        predicate: Predicate | None,
        *,
        limit: int,
        continue_token: str,
        encode: Encoder | None = None,
    ) -> Page:
        """One page of a list; later pages come from the snapshot the first page took.

        `scope` names the collection (resource and namespace); a token only continues its own.
        """
        snapshot: _Snapshot | None = None
        offset = 0
        if continue_token:
            token = _ContinueToken.decode(continue_token, scope)
            if self.expire_next_continues > 0:
                self.expire_next_continues -= 1
                self._snapshots.clear()
            if token.snapshot is not None:
                snapshot = self._snapshots.get(token.snapshot)
                if snapshot is None:
                    inconsistent = _ContinueToken(self.resource_version, None, 0, token.start_after, scope)
                    raise statuses.expired_continue(inconsistent.encode())
                self._snapshots.move_to_end(token.snapshot)
                offset = token.offset
            else:
                keys = candidate_keys()
                snapshot = self._take_snapshot(
                    kind, keys[bisect.bisect_right(keys, token.start_after) :], predicate, encode
                )
        if snapshot is None:
            snapshot = self._take_snapshot(kind, candidate_keys(), predicate, encode)
        end = len(snapshot.items) if limit <= 0 else min(offset + limit, len(snapshot.items))
        items = snapshot.items[offset:end]
        if end >= len(snapshot.items):
            return Page(snapshot.resource_version, items, "", None)
        snapshot_id = self._keep(snapshot)
        token = _ContinueToken(snapshot.resource_version, snapshot_id, end, snapshot.keys[end - 1], scope)
        remaining = None if predicate is not None else len(snapshot.items) - end
        return Page(snapshot.resource_version, items, token.encode(), remaining)

    def expire_snapshots(self) -> None:
        self._snapshots.clear()

    def _take_snapshot(
        self, kind: str, keys: list[str], predicate: Predicate | None, encode: Encoder | None
    ) -> _Snapshot:
        objects = self._objects[kind]
        if predicate is not None:
            keys = [key for key in keys if predicate(objects[key])]
        if encode is not None:
            items = [encode(objects[key]) for key in keys]
        else:
            items = [self.encoded(kind, key) for key in keys]
        return _Snapshot(self.resource_version, keys, items)

    def _keep(self, snapshot: _Snapshot) -> int:
        if snapshot.id is None:
            snapshot.id = next(self._snapshot_ids)
            self._snapshots[snapshot.id] = snapshot
            while len(self._snapshots) > SNAPSHOTS_KEPT:
                self._snapshots.popitem(last=False)
        return snapshot.id


def _node_name(pod: JsonObject | None) -> str:
    if pod is None:
        return ""
    spec: Any = pod.get("spec") or {}
    return str(spec.get("nodeName") or "")
