"""The cluster kept current while a drain runs: the run's own read, then a watch of each kind from there.

A drain proves every later batch of evictions on the cluster as it is then (DESIGN rule 0). Reading
the whole cluster again for each proof cost kube-apiserver a full read each time (at 5,000 nodes 100 MB
and 16 s of its CPU). Instead, when the first later proof is due, `ProofState` starts a watch of
nodes, of unfinished pods and of PodDisruptionBudgets, each from the resourceVersion its list had in
the run's read, with bookmarks, and applies their events to that read's records (`Watched`). A proof
takes the watched state only once it is proven fresh (docs/drain-states.md "How fresh a proof's state
is"):

- every pod this run evicted is seen leaving in it (its DELETED event, or its deletionTimestamp). A
  watch sends its events in resourceVersion order, so the eviction's own write, and every pod change
  before it, is in: the state is at least as new as the run's last eviction answer;
- the draining node, as the executor's GET before the batch read it, is in at that resourceVersion or
  a newer one.

The proof waits for that, up to `confirm_seconds`. The watched state is dropped and the cluster read
afresh (the watches start again from that read) when a watch broke (410 Gone: its resourceVersion was
compacted; a dropped connection; an ERROR event; an object that cannot be read), when the pods' watch
passed the resourceVersion of a list read after the last eviction answer without that eviction's
event (it lost one: a bookmark or a later event shows it), and when freshness was not proven in time
(a stalled or lagging stream). A stream silent for `stall_seconds` (past kube-apiserver's bookmark
interval) is watched again from its last resourceVersion: on a resource nothing changes, kube-apiserver
sends no bookmark at all, so silence alone proves nothing, and the new watch replays what a hung one
held back. Each fresh read is counted in the report's `watch` with its reason. A server that refuses
the watch (403 without the `watch` verb, ...) is read afresh for each proof of the run, as before.

resourceVersions are compared only within one resource, as integers, the way apimachinery's
`resourceversion.CompareResourceVersion` does (k8s.io/apimachinery/pkg/util/resourceversion).

Must never: hand a proof a state not proven fresh; write to the cluster; keep a thread or a
connection open after `close`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import urllib3

from compactor.core.model import Node, Pdb, Pod, Snapshot
from compactor.errors import CompactorError
from compactor.kube.snapshot import SnapshotBuilder

log = logging.getLogger(__name__)

# Pods first: a server that refuses their watch is not asked for the others.
WATCHED_KINDS = ("Pod", "PodDisruptionBudget", "Node")
PLURALS = {"Pod": "pods", "PodDisruptionBudget": "PodDisruptionBudgets", "Node": "nodes"}
# kube-apiserver sends each watcher a bookmark about every minute (apiserver pkg/storage/cacher
# `defaultBookmarkFrequency`) once its watch cache has moved past the watcher's resourceVersion, and 2 s
# before the watch's timeout; a stream silent for that long plus the 15 s kube-apiserver allows its own
# watch cache (`DefaultEventFreshDuration`) is watched again from its last resourceVersion.
BOOKMARK_SECONDS = 60.0
STALL_SECONDS = BOOKMARK_SECONDS + 15.0
# How long a proof waits for the watched state to show the run's own writes (normally milliseconds).
CONFIRM_SECONDS = 5.0
# A watch asks the server to end it after this long at most, and is started again from where it was.
WATCH_SECONDS = 300
READ_BYTES = 64 * 1024
_RECHECK_SECONDS = 0.25  # how often a waiting proof looks at the clock between events


class WatchSource(Protocol):
    """What watching needs of the API server (`compactor.kube.client.Cluster`)."""

    def open_watch(self, kind: str, resource_version: str, *, timeout_seconds: int, idle_seconds: float) -> Any: ...

    def current_resource_version(self, kind: str) -> tuple[str, int]: ...


class UnusableError(Exception):
    """The watched state cannot stand for the cluster now; `reason` says why. `refused`: the server does
    not serve this watch to this client (no retry in this run changes it)."""

    def __init__(self, reason: str, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.refused = refused


@dataclass
class WatchStats:
    """What keeping the state current cost, and how often it could not be used: the report's `watch`."""

    watches: int = 0  # watch requests answered (each kind's first, then after a server-side timeout or a silence)
    reopened: int = 0  # watches started again after `stall_seconds` of silence
    events: int = 0
    events_by_kind: dict[str, int] = field(default_factory=dict)
    bookmarks: int = 0
    wire_bytes: int = 0  # the watch streams' bytes and the resourceVersion reads'
    proofs: int = 0  # proofs that stood on the watched state
    fresh_reads: int = 0  # proofs that stood on the cluster read again instead
    fresh_read_bytes: int = 0
    fallbacks: list[str] = field(default_factory=list)  # why each fresh read was made
    refused: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(
        self,
        *,
        kind: str | None = None,
        events: int = 0,
        bookmarks: int = 0,
        wire_bytes: int = 0,
        watches: int = 0,
        reopened: int = 0,
    ) -> None:
        with self._lock:
            self.events += events
            if kind is not None and events:
                self.events_by_kind[kind] = self.events_by_kind.get(kind, 0) + events
            self.bookmarks += bookmarks
            self.wire_bytes += wire_bytes
            self.watches += watches
            self.reopened += reopened

    def to_dict(self) -> dict[str, Any]:
        return {
            "watches": self.watches,
            "reopened": self.reopened,
            "events": self.events,
            "eventsByKind": dict(sorted(self.events_by_kind.items())),
            "bookmarks": self.bookmarks,
            "bytesOnWire": self.wire_bytes,
            "proofs": self.proofs,
            "freshReads": self.fresh_reads,
            "freshReadBytesOnWire": self.fresh_read_bytes,
            "fallbacks": list(self.fallbacks),
            "refused": self.refused,
        }


class _Meta(msgspec.Struct, gc=False):
    name: Any = None
    namespace: Any = None
    resourceVersion: Any = None  # noqa: N815


class _Head(msgspec.Struct, gc=False):
    """An event object's metadata, or an ERROR event's Status."""

    metadata: _Meta | None = None
    code: Any = None
    reason: Any = None
    message: Any = None


class _Event(msgspec.Struct, gc=False):
    type: Any = None
    object: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))


_EVENT = msgspec.json.Decoder(_Event)
_HEAD = msgspec.json.Decoder(_Head)


def version_of(text: object) -> int | None:
    """A resourceVersion as apimachinery's CompareResourceVersion reads one: a positive decimal integer
    without leading zeros; None for anything else (not comparable: a server whose versions are opaque)."""
    if not isinstance(text, str) or not text.isdigit() or not text.isascii() or text.startswith("0"):
        return None
    return int(text)


class Watched:
    """One snapshot kept current by one watch per kind (threads of their own), and what proves it fresh."""

    def __init__(
        self,
        source: WatchSource,
        base: Snapshot,
        versions: Mapping[str, str],
        stats: WatchStats,
        *,
        evicted: Iterable[str] = (),
        stall_seconds: float = STALL_SECONDS,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self._source = source
        self._stats = stats
        self._stall_seconds = stall_seconds
        self._watch_seconds = watch_seconds
        # Waits and stalls are real time (the connection's), whatever clock the run's budget keeps.
        self._monotonic = time.monotonic
        self._changed = threading.Condition()
        # The proof's snapshot keeps the read's other fields; what the watches do not follow is left out, as a
        # read for a proof left it out before (Deployments, ReplicaSets, claims: surge reads them itself).
        self._base = msgspec.structs.replace(base, deployments=(), replica_sets=(), claims=())
        self._nodes: dict[str, Node] = {node.name: node for node in base.nodes}
        self._pods: dict[str, Pod] = {pod.key: pod for pod in base.pods}
        self._pods.update((pod.key, pod) for pod in base.placeholders)
        self._pdbs: dict[str, Pdb] = {pdb.key: pdb for pdb in base.pdbs}
        # A kind whose records got a key the list did not have is sorted again before the next snapshot,
        # in the order a list has (etcd's key order), so that a proof sees what a fresh read would.
        self._resort: set[str] = {"Pod"} if base.placeholders else set()
        self._confirmed: dict[str, int] = {}
        for kind in WATCHED_KINDS:
            version = version_of(versions.get(kind))
            if version is None:
                raise UnusableError(
                    f"the list of {PLURALS[kind]} had no resourceVersion a watch can start from "
                    f"({str(versions.get(kind))[:40]!r})"
                )
            self._confirmed[kind] = version
        self._read_versions = dict(self._confirmed)  # where each watch started: the read's lists
        self._node_versions: dict[str, int] = {}  # nodes changed since the read: their resourceVersion
        self._left: set[str] = set()  # pods seen leaving (deleted or terminating) since the read
        # Pods evicted and not yet seen leaving; one already gone or terminating in `base` was seen by its read.
        self._unseen: set[str] = {key for key in evicted if key in self._pods and not self._pods[key].terminating}
        self._heard = dict.fromkeys(WATCHED_KINDS, time.monotonic())
        self._broken: UnusableError | None = None
        self._closed = False
        self._responses: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []

    # -- the watches --------------------------------------------------------------------------

    def start(self) -> None:
        for kind in WATCHED_KINDS:
            thread = threading.Thread(target=self._follow, args=(kind,), name=f"watch-{kind}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        """Stop every watch: their connections are shut, their threads end."""
        with self._changed:
            self._closed = True
            responses = list(self._responses.values())
            self._changed.notify_all()
        for response in responses:
            _shut(response)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5.0)

    def _follow(self, kind: str) -> None:
        """One kind's watch, started again from where it was each time the server ends it (its timeout)."""
        if kind != WATCHED_KINDS[0]:
            # The others are asked once the first was answered: a refusal there is a refusal everywhere.
            with self._changed:
                while not self._closed and self._broken is None and self._stats.watches == 0:
                    self._changed.wait(_RECHECK_SECONDS)
        while True:
            with self._changed:
                if self._closed or self._broken is not None:
                    return
                version = str(self._confirmed[kind])
            try:
                response = self._source.open_watch(
                    kind, version, timeout_seconds=self._watch_seconds, idle_seconds=self._stall_seconds
                )
            except CompactorError as error:
                self._break(_refusal(error))
                return
            self._stats.add(watches=1)
            with self._changed:
                self._heard[kind] = self._monotonic()
                self._changed.notify_all()
                if self._stopping():
                    _shut(response)
                    return
                self._responses[kind] = response
            try:
                self._read(kind, response)
            except UnusableError as unusable:
                self._break(unusable)
                return
            except urllib3.exceptions.ReadTimeoutError:
                # Silence is no proof of a stall: kube-apiserver sends a watcher a bookmark only once its
                # watch cache has passed the watcher's resourceVersion (cache_watcher.go `process`), which on
                # a resource nothing changes may take many minutes. Watching again from the last version
                # seen asks the server to answer, and replays whatever the silent stream held back.
                self._stats.add(reopened=1)
                continue
            except Exception as error:  # whatever a broken or closed connection raises
                if not self._stopping():
                    self._break(
                        UnusableError(f"the watch of {PLURALS[kind]} lost its connection ({type(error).__name__})")
                    )
                return
            finally:
                _shut(response)
                with self._changed:
                    self._responses.pop(kind, None)

    def _stopping(self) -> bool:
        """Whether `close` was called (read under the lock; a method, so no earlier check is assumed to hold)."""
        return self._closed

    def _read(self, kind: str, response: Any) -> None:
        """The stream's events, applied as whole lines come, until the server ends it."""
        pending = bytearray()
        while True:
            data: bytes = response.read1(READ_BYTES)
            if not data:
                if pending.strip():
                    self._apply(kind, [bytes(pending)])
                return
            self._stats.add(wire_bytes=len(data))
            pending += data
            cut = pending.rfind(b"\n") + 1
            if cut:
                lines = bytes(pending[:cut]).split(b"\n")
                del pending[:cut]
                self._apply(kind, [line for line in lines if line.strip()])
            with self._changed:
                self._heard[kind] = self._monotonic()

    def _apply(self, kind: str, lines: list[bytes]) -> None:
        """Events of `kind` into the records, under the lock, in the order they came."""
        decoded = [_decode(kind, line) for line in lines]
        with self._changed:
            if self._closed:
                return
            for event_type, version, key, record in decoded:
                if version < self._confirmed[kind]:
                    raise UnusableError(
                        f"the watch of {PLURALS[kind]} sent resourceVersion {version} after {self._confirmed[kind]}"
                    )
                self._confirmed[kind] = version
                if event_type == "BOOKMARK":
                    continue
                if kind == "Node":
                    self._node_versions[key] = version
                self._change(kind, event_type, key, record)
            self._heard[kind] = self._monotonic()
            self._changed.notify_all()
        bookmarks = sum(1 for event in decoded if event[0] == "BOOKMARK")
        self._stats.add(kind=kind, events=len(decoded) - bookmarks, bookmarks=bookmarks)

    def _change(self, kind: str, event_type: str, key: str, record: Any) -> None:
        records: dict[str, Any] = self._pods if kind == "Pod" else self._nodes if kind == "Node" else self._pdbs
        if event_type == "DELETED":
            records.pop(key, None)
        else:
            if key not in records:
                self._resort.add(kind)
            records[key] = record
        if kind == "Pod" and (event_type == "DELETED" or record.terminating):
            self._left.add(key)
            self._unseen.discard(key)

    def _break(self, unusable: UnusableError) -> None:
        with self._changed:
            if self._closed:
                return
            if self._broken is None:
                self._broken = unusable
                log.warning("watched state given up: %s", unusable.reason)
            self._changed.notify_all()

    # -- what a proof asks ---------------------------------------------------------------------

    def evicted(self, key: str) -> None:
        """The Eviction API answered that it evicted pod `key`: no proof before it is seen leaving."""
        with self._changed:
            pod = self._pods.get(key)
            if key not in self._left and pod is not None and not pod.terminating:
                self._unseen.add(key)

    def current(self, wait_seconds: float, nodes_read: Mapping[str, int]) -> Snapshot:
        """The watched state once it is proven fresh (see the module's docstring), waiting up to
        `wait_seconds` for that; UnusableError when it cannot be."""
        deadline = self._monotonic() + wait_seconds
        horizon: int | None = None  # the pods' resourceVersion read after the last eviction answer
        before_horizon: set[str] = set()  # the evictions answered before it was read (their writes are below it)
        with self._changed:
            while True:
                if self._broken is not None:
                    raise self._broken
                now = self._monotonic()
                unseen = sorted(self._unseen)
                behind: list[str] = []
                for name, version in nodes_read.items():
                    if self._holds_node(name, version):
                        continue
                    if self._confirmed["Node"] >= version:
                        raise UnusableError(
                            f"the watch of nodes passed resourceVersion {version} of node {name} as it was read "
                            "without showing that version (it lost an event)"
                        )
                    behind.append(name)
                if not unseen and not behind:
                    return self._snapshot()
                if unseen and horizon is None:
                    self._changed.release()
                    try:
                        text, read_bytes = self._source.current_resource_version("Pod")
                    except CompactorError as error:
                        raise UnusableError(f"could not read the pods' resourceVersion ({error.message})") from error
                    finally:
                        self._changed.acquire()
                    self._stats.add(wire_bytes=read_bytes)
                    before_horizon = set(unseen)
                    horizon = version_of(text)
                    if horizon is None:
                        raise UnusableError(
                            f"the pods' list had a resourceVersion that cannot be compared ({text[:40]!r})"
                        )
                    continue
                # An eviction answered after the horizon was read may have written after it: only those
                # answered before it prove a lost event once the watch passes it.
                lost = sorted(before_horizon & self._unseen)
                if lost and horizon is not None and self._confirmed["Pod"] >= horizon:
                    raise UnusableError(
                        f"the watch of pods passed resourceVersion {horizon}, read after the run's last eviction "
                        f"answer, without showing the eviction of {lost[0]} (it lost an event)"
                    )
                left = deadline - now
                if left <= 0:
                    waited = f"the eviction of {unseen[0]}" if unseen else f"node {behind[0]} as it was read"
                    raise UnusableError(
                        f"the watched state did not show {waited} within {wait_seconds:g} s (its watch stalled "
                        f"or lags: nothing came from it for {now - self._heard['Pod' if unseen else 'Node']:.1f} s)"
                    )
                self._changed.wait(min(left, _RECHECK_SECONDS))

    def _holds_node(self, name: str, version: int) -> bool:
        """Whether the watched state holds node `name` at resourceVersion `version` or newer: its last event
        since the read was at least that, or it had none and the read itself was at least that new."""
        seen = self._node_versions.get(name)
        if seen is not None:
            return seen >= version
        return self._read_versions["Node"] >= version

    def _snapshot(self) -> Snapshot:
        """The records as they stand (called under the lock)."""
        if "Node" in self._resort:
            self._nodes = dict(sorted(self._nodes.items()))
        if "Pod" in self._resort:
            self._pods = dict(sorted(self._pods.items()))
        if "PodDisruptionBudget" in self._resort:
            self._pdbs = dict(sorted(self._pdbs.items()))
        self._resort.clear()
        pods: list[Pod] = []
        placeholders: list[Pod] = []
        for pod in self._pods.values():
            (pods if pod.placeholder is None else placeholders).append(pod)
        return msgspec.structs.replace(
            self._base,
            nodes=tuple(self._nodes.values()),
            pods=tuple(pods),
            pdbs=tuple(self._pdbs.values()),
            placeholders=tuple(placeholders),
        )


def _decode(kind: str, line: bytes) -> tuple[str, int, str, Any]:
    """(type, resourceVersion, key, record) of one event line; UnusableError for what cannot stand in the state."""
    plural = PLURALS[kind]
    try:
        event = _EVENT.decode(line)
        head = _HEAD.decode(event.object)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as error:
        raise UnusableError(f"the watch of {plural} sent what is not a watch event ({error})") from None
    if event.type == "ERROR":
        code = head.code if isinstance(head.code, int) and not isinstance(head.code, bool) else None
        message = str(head.message or head.reason or "no message")[:300]
        if code == 410:
            raise UnusableError(f"the watch of {plural} expired (410 Gone: {message})")
        raise UnusableError(f"the API server ended the watch of {plural} with an error (code {code}): {message}")
    if event.type not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        raise UnusableError(f"the watch of {plural} sent an event of type {str(event.type)[:40]!r}")
    meta = head.metadata or _Meta()
    version = version_of(meta.resourceVersion)
    if version is None:
        raise UnusableError(f"the watch of {plural} sent a resourceVersion that cannot be compared")
    if event.type == "BOOKMARK":
        return "BOOKMARK", version, "", None
    if not isinstance(meta.name, str) or not meta.name:
        raise UnusableError(f"the watch of {plural} sent an object without a name")
    namespace = meta.namespace if isinstance(meta.namespace, str) and meta.namespace else None
    key = meta.name if kind == "Node" else f"{namespace or 'default'}/{meta.name}"
    if event.type == "DELETED":
        return "DELETED", version, key, None
    builder = SnapshotBuilder()
    builder.add_object(kind, bytes(event.object), what=f"watch {plural}")
    records = builder.nodes if kind == "Node" else builder.pods if kind == "Pod" else builder.pdbs
    if builder.problems or len(records) != 1:
        problem = builder.problems[0] if builder.problems else "no record"
        raise UnusableError(f"the watch of {plural} sent an object that cannot be read: {problem}")
    return str(event.type), version, key, records[0]


def _refusal(error: CompactorError) -> UnusableError:
    from compactor.kube.client import ListExpiredError, WatchRefusedError

    if isinstance(error, WatchRefusedError):
        return UnusableError(f"{error.message}; each proof reads the cluster again instead", refused=True)
    if isinstance(error, ListExpiredError):
        return UnusableError(f"the watch could not start where the read ended ({error.message})")
    return UnusableError(f"a watch could not start ({error.message})")


def _shut(response: Any) -> None:
    """Close a watch's connection, waking its reader: closing alone would not interrupt a blocked read."""
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        response.close()
    with contextlib.suppress(Exception):
        response.release_conn()


FreshRead = Callable[[], tuple[Snapshot, Mapping[str, str], int]]
"""The cluster read again: its snapshot, each kind's list resourceVersion, and its bytes on the wire."""


class ProofState:
    """Where the proof before a later batch of evictions gets the cluster: the watched state when it is
    proven fresh, else the cluster read again (and the watches started again from that read).

    Nothing is watched until the first proof asks (a run that only plans, or whose drain needs no later
    batch, stays one read). Thread-safe: eviction workers report their answers while a proof waits.
    """

    def __init__(
        self,
        source: WatchSource,
        base: Snapshot,
        versions: Mapping[str, str],
        fresh_read: FreshRead,
        *,
        remaining: Callable[[], float] | None = None,
        confirm_seconds: float = CONFIRM_SECONDS,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        self._source = source
        self._base = base
        self._versions = dict(versions)
        self._fresh_read = fresh_read
        self._remaining = remaining
        self._confirm_seconds = confirm_seconds
        self._stall_seconds = stall_seconds
        self.stats = WatchStats()
        self._lock = threading.Lock()
        self._watched: Watched | None = None
        self._started = False
        self._early: set[str] = set()  # evictions answered while nothing is watched (they come in the next read)
        self._nodes_read: dict[str, int] = {}

    def evicted(self, key: str) -> None:
        with self._lock:
            if self._watched is not None:
                self._watched.evicted(key)
            else:
                self._early.add(key)

    def node_read(self, node: Mapping[str, Any]) -> None:
        """The executor read the draining node (a GET) before a batch: a proof's state must hold it as new."""
        metadata = node.get("metadata") or {}
        version = version_of(metadata.get("resourceVersion"))
        name = metadata.get("name")
        if version is None or not isinstance(name, str):
            return
        with self._lock:
            self._nodes_read[name] = max(self._nodes_read.get(name, 0), version)

    @property
    def asked(self) -> bool:
        """Whether a proof asked for the cluster (the report's `watch` says what that cost)."""
        return self._started

    def snapshot(self) -> Snapshot:
        """The cluster as it is now, for a proof (TransientError or CompactorError when it cannot be read)."""
        with self._lock:
            if not self._started:
                self._started = True
                self._start(self._base, self._versions)
            watched = self._watched
            nodes_read = dict(self._nodes_read)
        if watched is not None:
            wait = self._confirm_seconds
            if self._remaining is not None:
                wait = max(0.0, min(wait, self._remaining()))
            try:
                state = watched.current(wait, nodes_read)
                self.stats.proofs += 1
                return state
            except UnusableError as unusable:
                self._give_up(watched, unusable)
        return self._read_again()

    def _give_up(self, watched: Watched, unusable: UnusableError) -> None:
        watched.close()
        with self._lock:
            if self._watched is watched:
                self._watched = None
            if unusable.refused:
                self.stats.refused = unusable.reason
            else:
                self.stats.fallbacks.append(unusable.reason)
        log.warning("the proof reads the cluster again: %s", unusable.reason)

    def _read_again(self) -> Snapshot:
        with self._lock:
            self._early.clear()  # every eviction answered before this read is in it
            self._nodes_read.clear()  # so is each node as read before it
        snapshot, versions, read_bytes = self._fresh_read()
        self.stats.fresh_reads += 1
        self.stats.fresh_read_bytes += read_bytes
        with self._lock:
            if self.stats.refused is None:
                self._start(snapshot, versions)
        return snapshot

    def _start(self, base: Snapshot, versions: Mapping[str, str]) -> None:
        """Watch from `base` (called under the lock); an unusable start leaves proofs to fresh reads."""
        try:
            watched = Watched(
                self._source,
                base,
                versions,
                self.stats,
                evicted=self._early,
                stall_seconds=self._stall_seconds,
                watch_seconds=self._watch_seconds(),
            )
        except UnusableError as unusable:
            self.stats.fallbacks.append(unusable.reason)
            return
        self._early = set()
        self._watched = watched
        watched.start()

    def _watch_seconds(self) -> int:
        left = self._remaining() if self._remaining is not None else WATCH_SECONDS
        return max(1, min(WATCH_SECONDS, int(left) + 1))

    def close(self) -> None:
        with self._lock:
            watched, self._watched = self._watched, None
        if watched is not None:
            watched.close()
