"""A fake Kubernetes API server that the official `kubernetes` client talks to over real HTTP.

`FakeApiServer` runs `http.server.ThreadingHTTPServer` on 127.0.0.1 in a background
thread, serves the resources node-compactor uses with kube-apiserver's semantics
(see docs/fake-apiserver.md for each behaviour and the Kubernetes page behind it),
records every request for assertions, and injects faults on demand.

It is test infrastructure: it never listens on anything but loopback, and never
pretends to support a request it does not understand (those get a clear 4xx).
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import logging
import os
import re
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
from kubernetes import client

from tests.fakeapi import discovery, statuses
from tests.fakeapi.cluster import Cluster, deep_copy
from tests.fakeapi.resources import BY_URL, COMPUTE_CLASSES, PODS, JsonObject, Resource, resource_for_kind
from tests.fakeapi.statuses import ApiError
from tests.fakeapi.watches import WATCH_MODES, DropConnectionError, Watches

logger = logging.getLogger(__name__)

_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_APF_REJECTION = b"Too many requests, please try again later.\n"
# kube-apiserver compresses an answer when asked and its first write is larger than this, at gzip level 1
# (apiserver/pkg/endpoints/handlers/responsewriters/writers.go); a watch stream is never compressed.
GZIP_THRESHOLD_BYTES = 128 * 1024
GZIP_LEVEL = 1
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WATCH_CHUNK_BYTES = 64 * 1024  # events are written out in chunks of about this size
WATCH_HOLD_SECONDS = 30.0  # a streaming list stays open after its bookmark at most this long (or timeoutSeconds)
WATCH_LIST_MODES = ("on", "refused", "ignored")
# What kube-apiserver puts in a bookmark's object besides its metadata: the kind's zero values.
_BOOKMARK_BODIES: dict[str, JsonObject] = {
    "Pod": {"spec": {"containers": None}, "status": {}},
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}}},
    "PodDisruptionBudget": {
        "spec": {},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    },
}


@dataclass(frozen=True)
class Fault:
    """A misbehaviour applied to matching requests, in the order faults were added.

    `path_regex` is searched in the path without its query string. `times=-1` applies
    forever. `delay` sleeps before answering (or before dropping the connection);
    `status=None` with a delay only slows the real answer down. `body` replaces the
    default body for the status: a dict is sent as JSON, str/bytes as text. With
    `applied`, the request is carried out first and only its answer is replaced (or
    the connection dropped): a write that landed although the client saw it fail.
    """

    method: str | None = None
    path_regex: str = ""
    status: int | None = None
    times: int = 1
    delay: float = 0.0
    drop_connection: bool = False
    body: JsonObject | str | bytes | None = None
    retry_after: int = 1
    applied: bool = False


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    status: int | None  # None when the connection was dropped
    content_encoding: str | None = None  # "gzip" when the answer was compressed


@dataclass(frozen=True)
class Write:
    method: str
    path: str
    kind: str
    name: str
    namespace: str | None
    body: Any  # the decoded request body: an object, a JSON patch list, or None
    status: int
    content_type: str | None = None


class Eviction(NamedTuple):
    namespace: str
    name: str
    status: int


@dataclass
class _ArmedFault:
    fault: Fault
    pattern: re.Pattern[str]
    remaining: int


@dataclass
class _ArmedHook:
    method: str | None
    pattern: re.Pattern[str]
    action: Callable[[], None]
    remaining: int
    before: bool = False


@dataclass
class _Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    # A watch: its body in pieces, sent with chunked transfer encoding, then held open this long
    # (or until the client closes it) as kube-apiserver holds a watch open.
    chunks: list[bytes] | None = None
    hold_open: float = 0.0
    # A plain watch: its lines as they come (b"" while idle), until the watch ends (`watches.Watches`).
    stream: Iterator[bytes] | None = None

    @staticmethod
    def json(status: int, body: JsonObject | bytes) -> _Response:
        return _Response(status, body if isinstance(body, bytes) else orjson.dumps(body))

    @staticmethod
    def error(error: ApiError) -> _Response:
        return _Response(error.code, orjson.dumps(error.body()), headers=dict(error.headers))


@dataclass(frozen=True)
class _Target:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


class FakeApiServer:
    def __init__(self, token: str | None = "test-token", *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._token = token
        self._address = (host, port)
        self._cluster = Cluster()
        self._records_lock = threading.Lock()
        self._requests: list[Request] = []
        self._writes: list[Write] = []
        self._pod_deletes: list[Write] = []
        self._evictions: list[Eviction] = []
        self._faults_lock = threading.Lock()
        self._faults: list[_ArmedFault] = []
        self._hooks: list[_ArmedHook] = []
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._watch_list = "on"
        self._watches = Watches(self._cluster)
        self._gzip = True
        self._before_bookmark: dict[str, list[tuple[str, JsonObject]]] = {}
        # GKE's ComputeClass CRD: "installed" (served), "absent" (404, as off GKE) or "forbidden" (403 on a list).
        self._compute_classes = "installed"

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> FakeApiServer:
        if self._http is not None:
            return self
        self._http = _HttpServer(self._address, self)
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="fakeapi-http", daemon=True
        )
        self._thread.start()
        return self

    def serve_until_signalled(self) -> None:
        """Serve until SIGTERM or SIGINT, then stop (for the command-line launchers)."""
        stopping = threading.Event()

        def stop(_signal: int, _frame: FrameType | None) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        stopping.wait()
        self.stop()

    def stop(self) -> None:
        self._cluster.timers.stop()
        if self._http is None:
            return
        self._http.shutdown()
        self._http.server_close()
        self._http.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = None
        self._thread = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._http is None:
            raise RuntimeError("the fake API server is not started")
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def client_configuration(self) -> client.Configuration:
        configuration = client.Configuration()
        configuration.host = self.url
        if self._token is not None:
            configuration.api_key = {"BearerToken": self._token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return configuration

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """A kubeconfig (JSON, which YAML readers accept) whose current context is this server."""
        user: JsonObject = {"token": self._token} if self._token is not None else {}
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        target = Path(path)
        target.write_bytes(orjson.dumps(kubeconfig, option=orjson.OPT_INDENT_2))
        return target

    # ----------------------------------------------------------------- fixtures and state

    def add(self, obj: JsonObject) -> JsonObject:
        """Create or replace a stored object (any kind in `resources.BY_KIND`); returns it as stored."""
        with self._cluster.lock:
            return self._cluster.add(obj)

    def add_all(self, objects: Iterable[JsonObject]) -> int:
        """`add` for thousands of objects; returns how many were stored.

        The dicts are stored as given (do not use them afterwards). The store is then
        frozen out of the cyclic garbage collector (`gc.freeze`): in a benchmark the
        fake shares the process with the code under test, whose allocations would
        otherwise make every collection rescan hundreds of thousands of stored dicts,
        a cost the code would not pay against a real API server.
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            with self._cluster.lock:
                count = self._cluster.add_all(list(objects))
        finally:
            if collecting:
                gc.enable()
        gc.freeze()
        return count

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        """Remove an object as something outside node-compactor would (not recorded as a write)."""
        resource_for_kind(kind)
        with self._cluster.lock:
            return self._cluster.remove(kind, name, namespace)

    def get(self, kind: str, name: str, namespace: str | None = None) -> JsonObject | None:
        resource_for_kind(kind)
        with self._cluster.lock:
            return self._cluster.find(kind, name, namespace)

    def objects(self, kind: str, namespace: str | None = None) -> list[JsonObject]:
        resource_for_kind(kind)
        with self._cluster.lock:
            return self._cluster.all_of(kind, namespace)

    def snapshot(self) -> JsonObject:
        """What `kubectl get nodes,pods,poddisruptionbudgets -A -o json` prints for this cluster."""
        with self._cluster.lock:
            items = [obj for kind in ("Node", "Pod", "PodDisruptionBudget") for obj in self._cluster.all_of(kind, None)]
        return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}

    @property
    def resource_version(self) -> int:
        with self._cluster.lock:
            return self._cluster.store.resource_version

    # ----------------------------------------------------------------- simulated controllers

    def recreate_evicted(self, delay: float | None) -> None:
        """Let workload controllers replace evicted pods after `delay` seconds; None turns it off."""
        with self._cluster.lock:
            self._cluster.recreate_delay = delay

    def pod_termination_delay(self, seconds: float) -> None:
        """Evicted or deleted pods keep running, with deletionTimestamp set, for `seconds`."""
        with self._cluster.lock:
            self._cluster.termination_delay = seconds

    def rollout_step(self, seconds: float) -> None:
        """Seconds between two steps of a Deployment's rolling update (default 0.05; `deployments`)."""
        with self._cluster.lock:
            self._cluster.rollout_step = seconds

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Wait until no termination or recreation is pending (raises TimeoutError otherwise)."""
        self._cluster.timers.wait_idle(timeout)

    def schedule_pending(self) -> list[str]:
        """Retry binding replacement pods left Pending; returns the names that found a node."""
        with self._cluster.lock:
            return self._cluster.schedule_pending()

    def expire_continue_tokens(self) -> None:
        """Forget every list snapshot, as etcd compaction does: the next continue gets 410 Expired."""
        with self._cluster.lock:
            self._cluster.store.expire_snapshots()

    def expire_continue_tokens_while_listing(self, times: int = 1) -> None:
        """The next `times` requests that continue a list get 410 Expired, as if etcd compacted just before each."""
        with self._cluster.lock:
            self._cluster.store.expire_next_continues = times

    # ----------------------------------------------------------------- how reads are served

    def serve_watch_list(self, mode: str) -> None:
        """How a streaming list (a watch with sendInitialEvents) is answered.

        "on" (the default): as kube-apiserver >= 1.34 does, ADDED events then the bookmark annotated
        `k8s.io/initial-events-end`. "refused": 422 Invalid, as with the WatchList feature gate off.
        "ignored": as a server that predates the parameters, a plain watch whose ADDED events are
        never followed by that bookmark.
        """
        if mode not in WATCH_LIST_MODES:
            raise ValueError(f"watch-list mode {mode!r} is not one of {WATCH_LIST_MODES}")
        self._watch_list = mode

    def serve_watches(self, mode: str) -> None:
        """How a plain watch (from a resourceVersion, no sendInitialEvents) is answered: "off" (the default,
        `400` as before the fake served them), "on" (as kube-apiserver's watch cache, `watches.py`), or
        "forbidden" (RBAC's `403` for a client bound without the `watch` verb)."""
        if mode not in WATCH_MODES:
            raise ValueError(f"watch mode {mode!r} is not one of {WATCH_MODES}")
        self._watches.mode = mode

    def watch_bookmarks(self, seconds: float) -> None:
        """Seconds between two bookmarks of a watch that asked for them (kube-apiserver: about 60)."""
        self._watches.bookmark_seconds = seconds

    def drop_watches(self) -> None:
        """Close every open watch's connection without ending its stream, as a kube-apiserver restart does."""
        self._watches.drop()

    def stall_watches(self, stalled: bool = True) -> None:
        """Open watches send nothing, not even bookmarks, until `stall_watches(False)` (their changes wait)."""
        self._watches.stall(stalled)

    def lose_watch_events(self, kind: str, count: int = 1) -> None:
        """The next `count` changes of `kind` reach no watch (later bookmarks pass their resourceVersion)."""
        with self._cluster.lock:
            store = self._cluster.store
            store.lose_next[kind] = store.lose_next.get(kind, 0) + count

    def compact_watch_history(self) -> None:
        """Forget every change so far: a watch from an older resourceVersion gets 410 Expired."""
        with self._cluster.lock:
            self._cluster.store.compact_changes()

    @property
    def watches_opened(self) -> int:
        """How many plain watches were answered 200 (a 410 as an ERROR event included)."""
        return self._watches.opened

    def serve_compute_classes(self, mode: str) -> None:
        """How GKE's `computeclasses` (cloud.google.com/v1) are answered: "installed" (the default, as on
        GKE from 1.30.3-gke.1451000), "absent" (404 for every request, as kube-apiserver answers a group
        no CRD registers: a cluster that is not GKE, or an older one), or "forbidden" (a list is refused
        with RBAC's 403, as for a client bound without that rule)."""
        if mode not in ("installed", "absent", "forbidden"):
            raise ValueError(f"ComputeClass mode {mode!r} is not installed, absent or forbidden")
        self._compute_classes = mode

    def compress_answers(self, enabled: bool) -> None:
        """Whether `Accept-Encoding: gzip` is honoured (kube-apiserver's APIResponseCompression; on by default)."""
        self._gzip = enabled

    def change_before_bookmark(self, event_type: str, obj: JsonObject, *, kind: str | None = None) -> None:
        """The next streaming list of `kind` (default: `obj`'s) sends this event after its initial events
        and before its bookmark: a MODIFIED, DELETED or late ADDED, as a server does when the object changes
        while the list is sent, or an ERROR with a Status. Nothing is stored: make the same change with
        `add` or `delete`."""
        listed = resource_for_kind(kind or str(obj.get("kind"))).kind
        self._before_bookmark.setdefault(listed, []).append((event_type, deep_copy(obj)))

    # ----------------------------------------------------------------- faults

    def add_fault(self, fault: Fault) -> None:
        with self._faults_lock:
            self._faults.append(_ArmedFault(fault, re.compile(fault.path_regex), fault.times))

    def clear_faults(self) -> None:
        with self._faults_lock:
            self._faults.clear()
            self._hooks.clear()

    def on_request(
        self, method: str | None, path_regex: str, action: Callable[[], None], *, times: int = 1, before: bool = False
    ) -> None:
        """Run `action` after a matching request was handled and before its answer is sent
        (`before=True`: before it is handled, so that no watch can have sent its change yet).

        What someone else does to the cluster at that exact moment (a person uncordoning
        a node between two evictions), without racing the client. `times=-1`: every match.
        """
        with self._faults_lock:
            self._hooks.append(_ArmedHook(method, re.compile(path_regex), action, times, before))

    # ----------------------------------------------------------------- records

    @property
    def requests(self) -> list[Request]:
        with self._records_lock:
            return list(self._requests)

    @property
    def writes(self) -> list[Write]:
        with self._records_lock:
            return list(self._writes)

    def writes_of(self, kind: str | None = None, method: str | None = None) -> list[Write]:
        return [
            write
            for write in self.writes
            if (kind is None or write.kind == kind) and (method is None or write.method == method.upper())
        ]

    @property
    def pod_deletes(self) -> list[Write]:
        with self._records_lock:
            return list(self._pod_deletes)

    @property
    def evictions(self) -> list[Eviction]:
        with self._records_lock:
            return list(self._evictions)

    def reset_counters(self) -> None:
        with self._records_lock:
            self._requests.clear()
            self._writes.clear()
            self._pod_deletes.clear()
            self._evictions.clear()

    # ----------------------------------------------------------------- request handling

    def _respond(self, method: str, target: str, headers: Any, body: bytes) -> _Response | None:
        """The answer to one HTTP request; None means drop the connection without one."""
        split = urlsplit(target)
        path = split.path
        query = {key: values[0] for key, values in parse_qs(split.query, keep_blank_values=True).items()}
        self._run_hooks(method, path, before=True)
        fault = self._take_fault(method, path)
        response: _Response | None
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.applied:
            self._handle(method, path, query, headers, body)
        if fault is not None and fault.drop_connection:
            response = None
        elif fault is not None and fault.status is not None:
            response = self._fault_response(fault, path)
        else:
            response = self._handle(method, path, query, headers, body)
        encoding = None
        if response is not None and self._should_compress(response, headers):
            response.body = gzip.compress(response.body, compresslevel=GZIP_LEVEL, mtime=0)
            response.headers["Content-Encoding"] = encoding = "gzip"
        with self._records_lock:
            self._requests.append(Request(method, path, query, None if response is None else response.status, encoding))
        self._run_hooks(method, path)
        return response

    def _should_compress(self, response: _Response, headers: Any) -> bool:
        if not self._gzip or response.chunks is not None or len(response.body) <= GZIP_THRESHOLD_BYTES:
            return False
        accepted = headers.get("Accept-Encoding") or ""
        return any(token.split(";")[0].strip() == "gzip" for token in accepted.split(","))

    def _run_hooks(self, method: str, path: str, *, before: bool = False) -> None:
        with self._faults_lock:
            due = []
            for armed in self._hooks:
                if armed.before != before:
                    continue
                if armed.remaining == 0 or (armed.method is not None and armed.method.upper() != method):
                    continue
                if not armed.pattern.search(path):
                    continue
                if armed.remaining > 0:
                    armed.remaining -= 1
                due.append(armed.action)
        for action in due:
            action()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._faults_lock:
            for armed in self._faults:
                fault = armed.fault
                if armed.remaining == 0:
                    continue
                if fault.method is not None and fault.method.upper() != method:
                    continue
                if not armed.pattern.search(path):
                    continue
                if armed.remaining > 0:
                    armed.remaining -= 1
                return fault
        return None

    def _fault_response(self, fault: Fault, path: str) -> _Response:
        status = fault.status or 500
        headers: dict[str, str] = {}
        if status == 429:
            headers["Retry-After"] = str(fault.retry_after)
        if fault.body is not None:
            if isinstance(fault.body, dict):
                return _Response(status, orjson.dumps(fault.body), headers=headers)
            text = fault.body.encode() if isinstance(fault.body, str) else fault.body
            return _Response(status, text, "text/plain; charset=utf-8", headers)
        if status == 429:
            # API Priority and Fairness rejects with plain text, not a Status object.
            headers["X-Content-Type-Options"] = "nosniff"
            return _Response(429, _APF_REJECTION, "text/plain; charset=utf-8", headers)
        target = _parse_resource_path(path)
        if status == 409 and target is not None and target.name:
            error = statuses.conflict(target.resource, target.name)
        elif status == 500:
            error = statuses.internal_error("fault injected by the test")
        else:
            error = statuses.generic(status)
        return _Response(status, orjson.dumps(error.body()), headers=headers)

    def _handle(self, method: str, path: str, query: dict[str, str], headers: Any, body: bytes) -> _Response:
        try:
            if self._token is not None:
                authorization = headers.get("Authorization")
                if not authorization or not authorization.startswith("Bearer "):
                    _refuse_anonymous(method, path, query)
                elif not _bearer_matches(authorization, self._token):
                    raise statuses.unauthorized()
            return self._route(method, path, query, headers, body)
        except ApiError as error:
            return _Response.error(error)
        except Exception as error:  # a bug in the fake must reach the test as a 500, not a hung client
            logger.exception("the fake API server failed on %s %s", method, path)
            return _Response.error(statuses.internal_error(f"fake API server bug: {error!r}"))

    def _route(self, method: str, path: str, query: dict[str, str], headers: Any, body: bytes) -> _Response:
        document = self._discovery(path)
        if document is not None:
            if method != "GET":
                raise statuses.method_not_allowed()
            return _Response.json(200, document)
        target = _parse_resource_path(path)
        if target is None:
            raise statuses.path_not_found()
        if method in _MUTATING and "dryRun" in query:
            raise statuses.bad_request("dryRun is not supported by the fake API server")
        resource, namespace, name = target.resource, target.namespace, target.name
        if resource is COMPUTE_CLASSES and self._compute_classes != "installed":
            if self._compute_classes == "absent":
                raise statuses.path_not_found()
            if method == "GET" and name is None:
                raise statuses.forbidden_cluster_wide(
                    resource, "system:serviceaccount:node-compactor:node-compactor", "list"
                )
        cluster = self._cluster
        if target.subresource is not None:
            if target.subresource != "eviction" or resource is not PODS or method != "POST":
                raise statuses.method_not_allowed() if target.subresource == "eviction" else statuses.path_not_found()
            return self._evict(path, namespace or "default", name or "", body)
        if method == "DELETE" and resource is PODS:
            return self._delete_pod(path, namespace, name, body)
        with cluster.lock:
            if name is None:
                if method == "GET":
                    if _parse_bool(query.get("watch")):
                        return self._watch(resource, namespace, query)
                    return _Response.json(200, cluster.list_collection(resource, namespace, query))
                if method == "POST":
                    if resource.namespaced and namespace is None:
                        raise statuses.method_not_allowed()
                    decoded = _decode_object(body)
                    created = cluster.create(resource, namespace, decoded)
                    created_name = orjson.loads(created)["metadata"]["name"]
                    self._record_write(method, path, resource, created_name, namespace, decoded, 201, headers)
                    return _Response.json(201, created)
                raise statuses.method_not_allowed()
            if method == "GET":
                return _Response.json(200, cluster.get(resource, namespace, name))
            if method == "PUT":
                decoded = _decode_object(body)
                updated, created_now = cluster.update(resource, namespace, name, decoded)
                status = 201 if created_now else 200
                self._record_write(method, path, resource, name, namespace, decoded, status, headers)
                return _Response.json(status, updated)
            if method == "PATCH":
                patched, patch = cluster.patch(resource, namespace, name, headers.get("Content-Type") or "", body)
                self._record_write(method, path, resource, name, namespace, patch, 200, headers)
                return _Response.json(200, patched)
            if method == "DELETE":
                options = _decode_object(body) if body else {}
                deleted = cluster.delete(resource, namespace, name, options)
                self._record_write(method, path, resource, name, namespace, options or None, 200, headers)
                return _Response.json(200, deleted)
        raise statuses.method_not_allowed()

    def _watch(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> _Response:
        """A streaming list: every matching object as an ADDED event, then the initial-events-end bookmark.

        Validated as kube-apiserver validates watch options (`validateWatchOptions`); a plain watch
        (no sendInitialEvents) is not supported here, except as what a server in mode "ignored" sends.
        """
        send_initial = query.get("sendInitialEvents")
        match = query.get("resourceVersionMatch", "")
        if send_initial is None and not match and self._watches.mode != "off":
            if self._watches.mode == "forbidden":
                raise statuses.forbidden_cluster_wide(
                    resource, "system:serviceaccount:node-compactor:node-compactor", "watch"
                )
            predicate = self._cluster.selection(resource, query)
            bookmarks = _parse_bool(query.get("allowWatchBookmarks"))
            stream = self._watches.stream(resource, namespace, query, predicate, bookmarks)
            return _Response(200, b"", "application/json", stream=stream)
        if self._watch_list != "ignored":
            problems: list[tuple[str, str]] = []
            if send_initial is not None and match != "NotOlderThan":
                problems.append(
                    ("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
                )
            if send_initial is not None and self._watch_list == "refused":
                problems.append(
                    (
                        "sendInitialEvents",
                        "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                    )
                )
            if match and send_initial is None:
                problems.append(
                    (
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    )
                )
            if problems:
                raise statuses.invalid_list_options(problems)
            if not _parse_bool(send_initial):
                raise statuses.bad_request(
                    "a watch without sendInitialEvents=true is not supported by the fake API server"
                )
        resource_version, items = self._cluster.initial_events(resource, namespace, query)
        type_meta = orjson.dumps({"kind": resource.kind, "apiVersion": resource.api_version})[:-1] + b","
        lines = [b'{"type":"ADDED","object":' + type_meta + item[1:] + b"}\n" for item in items]
        for event_type, obj in self._before_bookmark.pop(resource.kind, []):
            lines.append(orjson.dumps({"type": event_type, "object": obj}) + b"\n")
        if self._watch_list == "on":
            bookmark = {
                "kind": resource.kind,
                "apiVersion": resource.api_version,
                "metadata": {
                    "resourceVersion": str(resource_version),
                    "creationTimestamp": None,
                    "annotations": {INITIAL_EVENTS_END: "true"},
                },
                **_BOOKMARK_BODIES.get(resource.kind, {}),
            }
            lines.append(orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n")
        chunks: list[bytes] = []
        piece: list[bytes] = []
        size = 0
        for line in lines:
            piece.append(line)
            size += len(line)
            if size >= WATCH_CHUNK_BYTES:
                chunks.append(b"".join(piece))
                piece, size = [], 0
        if piece:
            chunks.append(b"".join(piece))
        try:
            hold = min(WATCH_HOLD_SECONDS, float(query.get("timeoutSeconds") or WATCH_HOLD_SECONDS))
        except ValueError:
            raise statuses.bad_request(f"timeoutSeconds: Invalid value: {query.get('timeoutSeconds')!r}") from None
        return _Response(200, b"", "application/json", chunks=chunks, hold_open=max(hold, 0.0))

    def _evict(self, path: str, namespace: str, name: str, body: bytes) -> _Response:
        status = 500
        try:
            decoded = _decode_object(body)
            with self._cluster.lock:
                status, answer = self._cluster.evict(namespace, name, decoded)
            # A 201 may carry a Failure Status (several PDBs): the pod was not evicted, nothing was written.
            if status < 400 and orjson.loads(answer).get("status") != "Failure":
                with self._records_lock:
                    self._writes.append(
                        Write("POST", path, "Eviction", name, namespace, decoded, status, "application/json")
                    )
            return _Response.json(status, answer)
        except ApiError as error:
            status = error.code
            raise
        finally:
            with self._records_lock:
                self._evictions.append(Eviction(namespace, name, status))

    def _delete_pod(self, path: str, namespace: str | None, name: str | None, body: bytes) -> _Response:
        status = 500
        options: JsonObject = {}
        try:
            if name is None:
                status = 405
                raise statuses.method_not_allowed()
            options = _decode_object(body) if body else {}
            with self._cluster.lock:
                deleted = self._cluster.delete(PODS, namespace, name, options)
            status = 200
            with self._records_lock:
                self._writes.append(
                    Write("DELETE", path, "Pod", name, namespace, options or None, 200, "application/json")
                )
            return _Response.json(200, deleted)
        except ApiError as error:
            status = error.code
            raise
        finally:
            with self._records_lock:
                self._pod_deletes.append(Write("DELETE", path, "Pod", name or "", namespace, options or None, status))

    def _record_write(
        self,
        method: str,
        path: str,
        resource: Resource,
        name: str,
        namespace: str | None,
        body: Any,
        status: int,
        headers: Any,
    ) -> None:
        content_type = headers.get("Content-Type")
        with self._records_lock:
            self._writes.append(
                Write(method, path, resource.kind, name, namespace, deep_copy(body), status, content_type)
            )

    def _discovery(self, path: str) -> JsonObject | None:
        trimmed = path.rstrip("/") or "/"
        if trimmed == "/version":
            return discovery.VERSION
        if trimmed == "/api":
            return discovery.api_versions(self.url.removeprefix("http://"))
        if trimmed == "/apis":
            return discovery.group_list()
        parts = trimmed.strip("/").split("/")
        if parts == ["api", "v1"]:
            return discovery.resource_list("", "v1")
        if len(parts) == 2 and parts[0] == "apis":
            return discovery.group(parts[1])
        if len(parts) == 3 and parts[0] == "apis":
            return discovery.resource_list(parts[1], parts[2])
        return None


def _parse_resource_path(path: str) -> _Target | None:
    parts = [unquote(part) for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    resource = BY_URL.get((group, version, rest[0]))
    if resource is None:
        return None
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if namespace is not None and not resource.namespaced:
        return None
    if resource.namespaced and name is not None and namespace is None:
        return None
    return _Target(resource, namespace, name, subresource)


# What RBAC's default roles let `system:anonymous` read (system:public-info-viewer).
PUBLIC_PATHS = frozenset({"/version", "/version/", "/healthz", "/livez", "/readyz"})


def _refuse_anonymous(method: str, path: str, query: dict[str, str]) -> None:
    """A request without a bearer token: kube-apiserver authenticates it as `system:anonymous`, and
    RBAC refuses it (403) everything but the public paths; only a wrong token is a 401."""
    if path in PUBLIC_PATHS:
        return
    target = _parse_resource_path(path)
    if target is None:
        raise statuses.anonymous_forbidden_path(method, path)
    if method == "GET":
        verb = "get" if target.name else ("watch" if _parse_bool(query.get("watch")) else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        if method == "DELETE":
            verb = "delete" if target.name else "deletecollection"
    raise statuses.anonymous_forbidden(target.resource, verb, target.namespace, target.name, target.subresource)


def _parse_bool(value: str | None) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it (the Python client sends "True")."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _decode_object(body: bytes) -> JsonObject:
    try:
        decoded = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as error:
        raise statuses.bad_request(f"the body of the request could not be decoded: {error}") from error
    if not isinstance(decoded, dict):
        raise statuses.bad_request("the body of the request is not a JSON object")
    return decoded


def _bearer_matches(header: str | None, token: str) -> bool:
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and value.strip() == token


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], fake: FakeApiServer) -> None:
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Close kept-alive connections so a stopped server cannot answer a pooled client."""
        with self._connections_lock:
            connections = list(self._connections)
            self._connections.clear()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle's algorithm delays every answer.
    disable_nagle_algorithm = True
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        response = self.server.fake._respond(self.command, self.path, self.headers, body)
        if response is None:
            self.close_connection = True
            return
        if response.stream is not None:
            self._follow(response.stream)
            return
        if response.chunks is not None:
            self._stream(response)
            return
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)

    def _follow(self, lines: Iterator[bytes]) -> None:
        """A plain watch: each piece as it comes, chunked, until the watch ends, the client leaves, or a fault
        drops the connection (no last chunk)."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for piece in lines:
                if not piece:
                    # Readable means the client closed the connection (it sends nothing else on a watch).
                    if select.select([self.connection], [], [], 0)[0]:
                        return
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except DropConnectionError:
            with contextlib.suppress(OSError):
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            return  # the client left
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                close()

    def _stream(self, response: _Response) -> None:
        """A watch: chunked transfer encoding, then open until the client leaves or the hold time passes."""
        self.close_connection = True
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for chunk in response.chunks or ():
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            # Readable means the client closed the connection (it sends nothing else on a watch).
            select.select([self.connection], [], [], response.hold_open)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return  # the client left
