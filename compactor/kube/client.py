"""The Kubernetes adapter: reads the cluster into planner records and performs the few writes we make.

Reads are paginated lists (`limit` + `continue`) fetched as raw JSON
(`_preload_content=False`), the next page while the previous one is
decoded, and handed page by page to the same typed decoder `plan --snapshot`
uses; the client's model objects are never built for the lists. They ask
for gzip (`Accept-Encoding`), which kube-apiserver applies to answers over
128 KiB; urllib3 inflates a page as it reads it. With `list_method =
"watch-list"` each list is instead one streaming list (`compactor.kube.watchlist`),
and a server that refuses it is read with paged lists. Finished pods are
left out by the API server (fieldSelector on `status.phase`), a read whose
list expired while paging (410 Gone) starts again, and a read the server
throttles (429, API Priority and Fairness) waits the `Retry-After` it names
while the run's budget allows. Any request answered 5xx, or whose connection
broke, is sent again with backoff (TRANSIENT_ATTEMPTS, within the budget),
then raises TransientError (evictions excepted: the executor retries them).
Writes are exactly those of `compactor.permissions`: node patches, pod
evictions (policy/v1 Eviction; a pod is never DELETEd), Events, and the Lease;
for pools with surgeSingleReplicas, also a Deployment's restartedAt.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson
import urllib3
from kubernetes import client

from compactor.core.model import PoolAutoscaling, Snapshot
from compactor.core.timing import format_stamp, parse_stamp
from compactor.errors import (
    BudgetExhaustedError,
    ClusterAccessError,
    CompactorError,
    LeaseHeldError,
    LeaseLostError,
    SnapshotError,
    TransientError,
)
from compactor.kube import decoding, watchlist
from compactor.kube.answers import ConflictError, EvictionResult, NotFoundError
from compactor.kube.snapshot import SnapshotBuilder, paused_gc

log = logging.getLogger(__name__)

# Objects per list page. kube-apiserver 1.36 spends about 23 ms of CPU per page of 150,000 pods on top of
# the objects themselves, and allocates more (more garbage to collect): at 5,000 nodes a read in pages
# of 500 cost it 16.1 s of CPU and 4.3 GB allocated, in pages of 2,000 10.7 s and 2.8 GB, of 5,000
# 9.9 s and 2.3 GB, while our peak RSS went 264, 362, 421 MiB (docs/benchmarks.md, issue 27).
PAGE_SIZE = 2000
# How many times a cluster read starts again after its list expired (410 Gone) while paging.
LIST_RESTARTS = 2
# Pods in phase Succeeded or Failed request nothing; fieldSelector on status.phase leaves them out.
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
REQUEST_TIMEOUT = (5.0, 60.0)  # connect, read
ListMethod = Literal["paged-list", "watch-list"]
PAGED_LIST: ListMethod = "paged-list"
WATCH_LIST: ListMethod = "watch-list"
LIST_METHODS: tuple[ListMethod, ...] = (PAGED_LIST, WATCH_LIST)
DEFAULT_LIST_METHOD: ListMethod = PAGED_LIST  # docs/benchmarks.md: what each costs kube-apiserver
# Asked on every list: kube-apiserver compresses answers over 128 KiB at gzip level 1 (responsewriters/writers.go).
GZIP_HEADERS = {"Accept-Encoding": "gzip"}
# A streaming list silent this long before its initial events ended is taken for a server that ignores
# sendInitialEvents (it would never send the bookmark), and the cluster is read with paged lists instead.
WATCH_IDLE_SECONDS = 10.0
WATCH_READ_BYTES = 1024 * 1024
# GKE's ComputeClasses (cluster-scoped custom resources; the CRD exists from GKE 1.30.3-gke.1451000).
COMPUTE_CLASS_GROUP, COMPUTE_CLASS_VERSION, COMPUTE_CLASS_PLURAL = "cloud.google.com", "v1", "computeclasses"
# Statuses with which a server refuses a streaming list it does not offer: 422 Invalid when the WatchList
# feature gate is off ("sendInitialEvents is forbidden for watch ..."), 403 without the `watch` verb.
_WATCH_LIST_REFUSALS = frozenset({400, 403, 404, 405, 406, 415, 422, 501})
# A 429 without a readable Retry-After waits this long; so does one asking for less, so that a server
# answering "Retry-After: 0" is not asked again in a tight loop.
RETRY_AFTER_MIN_SECONDS = 1.0
# A request answered 500, 502, 503 or 504, or whose connection broke or timed out, is sent again after
# TRANSIENT_FIRST_BACKOFF_SECONDS, then twice as long, up to TRANSIENT_ATTEMPTS times in all, while the
# run's budget allows: kube-apiserver answers so while etcd or a webhook is briefly away, and a GKE control
# plane upgrade resets connections. Then TransientError; the caller decides what skipping the request means.
TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
TRANSIENT_ATTEMPTS = 3
TRANSIENT_FIRST_BACKOFF_SECONDS = 1.0
MERGE_PATCH = "application/merge-patch+json"
# The client's keyword arguments for a single read or merge patch whose raw answer is decoded here.
_RAW_READ: dict[str, Any] = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
_RAW_PATCH: dict[str, Any] = {"_content_type": MERGE_PATCH, **_RAW_READ}
LEASE_NAME = "node-compactor"
# Times a Lease renewal that met a 409 is read and made again before the run counts the Lease lost.
LEASE_CONFLICT_RETRIES = 3
EVENT_NAMESPACE = "default"  # where the kubelet and the node controller put Node events
COMPONENT = "node-compactor"


def _describe(error: BaseException) -> str:
    if isinstance(error, client.ApiException):
        message = ""
        try:
            message = orjson.loads(error.body or b"{}").get("message", "")
        except (orjson.JSONDecodeError, AttributeError):
            message = (str(error.body) if error.body else "")[:200]
        return f"HTTP {error.status} {error.reason}: {message}".strip().rstrip(":")
    return f"{type(error).__name__}: {error}"


def access_error(what: str, error: BaseException) -> ClusterAccessError:
    return ClusterAccessError(f"cannot {what}: {_describe(error)}")


def is_transient(error: BaseException) -> bool:
    """A 5xx answer, or a connection that broke or timed out: sending the request again may succeed.

    A certificate or proxy problem (urllib3's SSLError, ProxyError) and every 4xx are not: no retry changes them.
    """
    if isinstance(error, client.ApiException):
        return error.status in TRANSIENT_STATUSES
    if isinstance(error, urllib3.exceptions.MaxRetryError):
        return error.reason is not None and is_transient(error.reason)
    return isinstance(error, urllib3.exceptions.ProtocolError | urllib3.exceptions.TimeoutError)


class ListExpiredError(ClusterAccessError):
    """A list's `continue` token expired while paging (HTTP 410): the list must start again."""


# What a read of the cluster lists, in this order, and what watches keep current (`_snapshot_list`).
SNAPSHOT_KINDS = ("Node", "Pod", "PodDisruptionBudget")


class WatchRefusedError(ClusterAccessError):
    """The server refused a watch in a way no retry in this run changes (403 without the `watch` verb, ...)."""


class WatchListUnavailableError(Exception):
    """The server refused a streaming list or did not finish its initial events; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ReadStats:
    """What reading the cluster cost: shown in the report's `read` and the run's log line.

    Bytes on the wire are the answers' bodies as they came (compressed when the server compressed
    them), without headers and chunk framing; `decoded_bytes` is the JSON the reader decoded.
    """

    method: ListMethod
    gzip_asked: bool
    requests: int = 0
    gzip_answers: int = 0
    wire_bytes: int = 0
    decoded_bytes: int = 0
    throttled: int = 0
    throttled_seconds: float = 0.0
    fallback: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def answered(self, response: Any, decoded: int) -> None:
        """One answer fully read (a page is read in the prefetch thread, hence the lock)."""
        compressed = (response.headers.get("Content-Encoding") or "").strip().lower() == "gzip"
        with self._lock:
            self.requests += 1
            self.gzip_answers += compressed
            self.wire_bytes += response.tell()
            self.decoded_bytes += decoded

    def failed(self) -> None:
        """One request answered with an error (a refused streaming list, an expired continue token)."""
        with self._lock:
            self.requests += 1

    def waited(self, seconds: float) -> None:
        with self._lock:
            self.requests += 1
            self.throttled += 1
            self.throttled_seconds += seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "gzip": self.gzip_answers > 0,
            "gzipAsked": self.gzip_asked,
            "requests": self.requests,
            "bytesOnWire": self.wire_bytes,
            "bytesDecoded": self.decoded_bytes,
            "throttled": self.throttled,
            "throttledSeconds": round(self.throttled_seconds, 3),
            "fallback": self.fallback,
        }


def _page_head(page: bytes, what: str, list_kind: str | None) -> decoding.PageHead:
    """The page's kind and metadata, read before its items are decoded.

    A page whose `metadata.continue` cannot be read is refused: taken for the last
    page, it would cut the list short without a word. So is a page of another kind
    (a `PodList` where nodes were asked for); the API server names its lists' kinds.
    """
    try:
        head = decoding.PAGE_HEAD.decode(page)
    except RecursionError:
        raise SnapshotError(f"cannot {what}: the answer is nested too deeply to be a list") from None
    except decoding.ValidationError as error:
        raise SnapshotError(f"cannot {what}: the list's kind or metadata cannot be read ({error})") from None
    except decoding.DecodeError as error:
        raise SnapshotError(f"cannot {what}: the API server sent invalid JSON ({error})") from None
    if list_kind is not None and head.kind and head.kind != list_kind:
        raise SnapshotError(f"cannot {what}: the answer is a {head.kind[:60]!r}, not a {list_kind}")
    return head


def _named_object(item: object, index: int, what: str) -> dict[str, Any]:
    """An item its caller parses by itself: an object whose metadata names it, or SnapshotError."""
    if not isinstance(item, dict):
        raise SnapshotError(f"cannot {what}: item {index} is not an object")
    meta = item.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise SnapshotError(f"cannot {what}: item {index} has no metadata.name")
    if not isinstance(meta.get("namespace", ""), str):
        raise SnapshotError(f"cannot {what}: item {index} has a metadata.namespace that is not a string")
    return item


def _continue_token(head: decoding.PageHead) -> str | None:
    if head.metadata is None or not head.metadata.continue_:
        return None
    return head.metadata.continue_


class Cluster:
    """One Kubernetes API server, through the official client."""

    def __init__(self, api_client: Any, *, page_size: int = PAGE_SIZE) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        _wait_out_429_here(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.page_size = page_size
        # Seconds left of the run's budget for reading (None: unbounded); see `read_timeout`.
        self.read_budget: Callable[[], float] | None = None
        # How a 429's Retry-After is waited out (the run's budget's clock in a run).
        self.sleep: Callable[[float], None] = time.sleep
        self.list_method: ListMethod = DEFAULT_LIST_METHOD
        self.gzip = True
        self.watch_idle_seconds = WATCH_IDLE_SECONDS
        # What the last `read_snapshot` cost (None before the first).
        self.last_read: ReadStats | None = None
        # The resourceVersion of each kind's list in the last `read_snapshot` ("Node", "Pod",
        # "PodDisruptionBudget"): where watches that keep that snapshot current start (`kube.watching`).
        self.list_resource_versions: dict[str, str] = {}

    def watcher(self) -> Cluster:
        """A client for watches on connections of its own (the same server and credentials): a watch holds
        its connection for minutes, which would leave the evictions too few in this client's pool."""
        other = Cluster(client.ApiClient(self.api_client.configuration), page_size=self.page_size)
        other.read_budget = self.read_budget
        other.sleep = self.sleep
        return other

    def close(self) -> None:
        self.api_client.close()

    # -- reading ------------------------------------------------------------------------------

    def read_snapshot(
        self, pool_autoscaling: Mapping[str, PoolAutoscaling] | None = None, *, workloads: bool = False
    ) -> Snapshot:
        """Nodes, pods of all namespaces and PDBs, decoded page by page; with `workloads` (a pool sets
        surgeSingleReplicas), Deployments, ReplicaSets and PersistentVolumeClaims too.

        A `continue` token can expire while a long list is paged (410 Gone, reason Expired:
        etcd compacted the revision the list started from). The list cannot resume where it
        was, since pages already taken would count twice, so the whole read starts again
        with a fresh builder, at most LIST_RESTARTS times.

        With `list_method = "watch-list"`, a server that refuses a streaming list, or ends one before
        its initial events did, is read again from the start with paged lists (once; `last_read.fallback`
        says why), as are the rest of this client's reads.
        """
        stats = ReadStats(self.list_method, self.gzip)
        self.last_read = stats
        expired: ListExpiredError | None = None
        restarts = 0
        while restarts <= LIST_RESTARTS:
            try:
                return self._read_snapshot_once(pool_autoscaling, stats, workloads)
            except ListExpiredError as error:
                expired = error
                restarts += 1
                log.warning("%s; reading the cluster again from the start", error)
            except WatchListUnavailableError as unavailable:
                log.warning("%s; reading the cluster with paged lists instead", unavailable.reason)
                self.list_method = stats.method = PAGED_LIST
                stats.fallback = unavailable.reason
        raise ClusterAccessError(
            f"{expired}; the cluster was read {1 + LIST_RESTARTS} times and the list expired every time "
            f"(the API server compacts its history faster than {self.page_size}-item pages can be read)"
        )

    def _read_snapshot_once(
        self, pool_autoscaling: Mapping[str, PoolAutoscaling] | None, stats: ReadStats, workloads: bool = False
    ) -> Snapshot:
        builder = SnapshotBuilder()
        versions: dict[str, str] = {}
        with paused_gc():
            # Nodes, unfinished pods and PDBs, listed as `_snapshot_list` says: the watches that keep the snapshot
            # current (`open_watch`) ask for the same objects.
            for kind in SNAPSHOT_KINDS:
                plural, list_call, query = self._snapshot_list(kind)
                self._read_list(builder, stats, kind, f"list {plural}", list_call, versions=versions, **query)
            if workloads:
                self._read_workloads(builder, stats)
            self._read_compute_classes(builder, stats)
        snapshot = builder.build(pool_autoscaling)
        self.list_resource_versions = versions
        return snapshot

    def _read_compute_classes(self, builder: SnapshotBuilder, stats: ReadStats) -> None:
        """GKE's ComputeClasses, in paged lists (a handful of objects; never a streaming list).

        No such resource (404: not GKE, or older than 1.30.3-gke.1451000) means no classes. A 403 is
        not the run's end: the report says which permission is missing and the run goes on with the
        thresholds the configuration declares (`core.coexistence`)."""
        what = "list ComputeClasses"
        list_call = functools.partial(
            self.custom.list_cluster_custom_object, COMPUTE_CLASS_GROUP, COMPUTE_CLASS_VERSION, COMPUTE_CLASS_PLURAL
        )
        try:
            for page in self._raw_pages(what, list_call, list_kind="ComputeClassList", stats=stats):
                try:
                    document = orjson.loads(page)
                except orjson.JSONDecodeError as error:
                    raise SnapshotError(f"cannot {what}: the API server sent invalid JSON ({error})") from error
                items = document.get("items") if isinstance(document, dict) else None
                if not isinstance(items, list):
                    raise SnapshotError(f"cannot {what}: the answer is not a list")
                builder.add_compute_classes(item for item in items if isinstance(item, dict))
        except ClusterAccessError as error:
            cause = error.__cause__
            if not isinstance(cause, client.ApiException):
                raise
            if cause.status == 404:
                builder.compute_classes.clear()
                return
            if cause.status == 403:
                builder.compute_classes.clear()
                builder.compute_classes_unread = (
                    f"cannot read the cluster's ComputeClasses ({_describe(cause)}): grant list on "
                    "computeclasses.cloud.google.com (RBAC, deploy/rbac.yaml) or the IAM permission "
                    "container.thirdPartyObjects.list (the Terraform module's custom role); until then "
                    "node-compactor uses only the thresholds the configuration declares "
                    "(computeClassConsolidationThreshold)"
                )
                return
            raise

    def _read_workloads(self, builder: SnapshotBuilder, stats: ReadStats) -> None:
        """Deployments, ReplicaSets and PersistentVolumeClaims (`compactor.kube.workloads`), in paged lists:
        only pools with surgeSingleReplicas need them, so no other run pays for them."""
        for kind, what, list_call in (
            ("Deployment", "list Deployments", self.apps.list_deployment_for_all_namespaces),
            ("ReplicaSet", "list ReplicaSets", self.apps.list_replica_set_for_all_namespaces),
            (
                "PersistentVolumeClaim",
                "list PersistentVolumeClaims",
                self.core.list_persistent_volume_claim_for_all_namespaces,
            ),
        ):
            try:
                for page in self._raw_pages(what, list_call, list_kind=f"{kind}List", stats=stats):
                    builder.add_workload_page(kind, page, what=what)
            except ClusterAccessError as error:
                cause = error.__cause__
                if isinstance(cause, client.ApiException) and cause.status == 403:
                    raise ClusterAccessError(
                        f"{error.message}; a pool sets surgeSingleReplicas, which needs the permissions of "
                        "SURGE_IAM_PERMISSIONS or deploy/rbac-surge.yaml (Terraform grants them with "
                        "surge_single_replicas, docs/deploy.md)"
                    ) from error
                raise

    def _read_list(
        self,
        builder: SnapshotBuilder,
        stats: ReadStats,
        kind: str,
        what: str,
        list_call: Callable[..., Any],
        *,
        versions: dict[str, str] | None = None,
        **query: Any,
    ) -> None:
        """Every object of `kind` into `builder`, by the list method this client uses; the list's
        resourceVersion (its first page's, or the streaming list's closing bookmark's) into `versions`."""
        if self.list_method == WATCH_LIST:
            self._watch_list(builder, stats, kind, what, list_call, versions=versions, **query)
            return
        first = True
        for page in self._raw_pages(what, list_call, list_kind=f"{kind}List", stats=stats, **query):
            if first and versions is not None:
                head = _page_head(page, what, None)
                versions[kind] = head.metadata.resourceVersion if head.metadata is not None else ""
            first = False
            builder.add_page(kind, page, what=what)

    def _watch_list(
        self,
        builder: SnapshotBuilder,
        stats: ReadStats,
        kind: str,
        what: str,
        list_call: Callable[..., Any],
        *,
        versions: dict[str, str] | None = None,
        **query: Any,
    ) -> None:
        """One streaming list (WatchList): its initial events into `builder`, then the stream is closed.

        WatchListUnavailableError when the server refuses it or does not end its initial events.
        """

        def send(timeout: tuple[float, float]) -> Any:
            left = self.read_budget() if self.read_budget is not None else REQUEST_TIMEOUT[1]
            return list_call(
                watch=True,
                send_initial_events=True,
                resource_version_match="NotOlderThan",
                allow_watch_bookmarks=True,
                # The server ends the watch by itself once the run could no longer use it.
                timeout_seconds=max(1, math.ceil(left)),
                _preload_content=False,
                _request_timeout=(timeout[0], min(timeout[1], self.watch_idle_seconds)),
                _headers=GZIP_HEADERS if self.gzip else {},
                **query,
            )

        try:
            response = self._send(what, send, stats)
        except client.ApiException as error:
            if error.status in _WATCH_LIST_REFUSALS:
                raise WatchListUnavailableError(
                    f"the API server refused a streaming list for {what.removeprefix('list ')} ({_describe(error)})"
                ) from error
            if error.status == 410:
                raise ListExpiredError(f"cannot {what}: {_describe(error)}") from error
            raise access_error(what, error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(what, error) from error

        decoded = 0

        def chunks() -> Iterator[bytes]:
            nonlocal decoded
            while True:
                self.read_timeout(what)  # BudgetExhaustedError once the budget is gone
                data: bytes = response.read1(WATCH_READ_BYTES)
                if not data:
                    return
                decoded += len(data)
                yield data

        try:
            watchlist.read_initial_events(chunks(), builder, kind, what=what, versions=versions)
        except watchlist.StreamEndedError as ended:
            if ended.code == 410:
                raise ListExpiredError(f"cannot {what}: {ended.reason}") from None
            raise WatchListUnavailableError(
                f"the streaming list for {what.removeprefix('list ')} failed: {ended.reason}"
            ) from None
        except urllib3.exceptions.ReadTimeoutError:
            raise WatchListUnavailableError(
                f"the streaming list for {what.removeprefix('list ')} sent nothing for {self.watch_idle_seconds:g} s "
                "before its initial events ended (a server that ignores sendInitialEvents never ends them)"
            ) from None
        except urllib3.exceptions.HTTPError as error:
            raise access_error(what, error) from error
        finally:
            stats.answered(response, decoded)
            # The watch would go on sending changes: close it rather than read it to its end.
            response.close()
            response.release_conn()

    # -- watching (`compactor.kube.watching` keeps a snapshot current with these) ----------------

    def _snapshot_list(self, kind: str) -> tuple[str, Callable[..., Any], dict[str, Any]]:
        """What a list or watch of `kind` is called, the client call, and its query (pods: unfinished ones;
        finished pods count for nothing, DESIGN rule 1, so the API server leaves them out)."""
        if kind == "Node":
            return "nodes", self.core.list_node, {}
        if kind == "Pod":
            return "pods", self.core.list_pod_for_all_namespaces, {"field_selector": UNFINISHED_PODS}
        if kind == "PodDisruptionBudget":
            return "PodDisruptionBudgets", self.policy.list_pod_disruption_budget_for_all_namespaces, {}
        raise ValueError(f"{kind} is not watched")

    def open_watch(self, kind: str, resource_version: str, *, timeout_seconds: int, idle_seconds: float) -> Any:
        """A watch of `kind` from `resource_version` (the objects a snapshot's read found; pods: unfinished
        ones), with bookmarks; the raw response, whose body is read as it comes. The server ends it after
        `timeout_seconds`; a read that waits longer than `idle_seconds` for a byte raises urllib3's
        ReadTimeoutError. A 5xx or a 429 is sent again as for a list; WatchRefusedError for an answer no
        retry changes (403 without the `watch` verb, ...), ListExpiredError for 410 Gone."""
        plural, list_call, query = self._snapshot_list(kind)
        what = f"watch {plural}"

        def send(timeout: tuple[float, float]) -> Any:
            return list_call(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, timeout_seconds),
                _preload_content=False,
                _request_timeout=(timeout[0], idle_seconds),
                **query,
            )

        try:
            return self._send(what, send, None)
        except client.ApiException as error:
            if error.status == 410:
                raise ListExpiredError(f"cannot {what}: {_describe(error)}") from error
            if error.status in _WATCH_LIST_REFUSALS:
                raise WatchRefusedError(f"cannot {what}: {_describe(error)}") from error
            raise access_error(what, error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(what, error) from error

    def current_resource_version(self, kind: str) -> tuple[str, int]:
        """The resourceVersion of a list of `kind` read now (one object asked for): every write the API
        server answered before this call is at or below it. With the bytes it took on the wire."""
        plural, list_call, _ = self._snapshot_list(kind)
        what = f"list {plural} (one, for its resourceVersion)"
        try:
            response = self._send(
                what,
                lambda timeout: list_call(limit=1, _preload_content=False, _request_timeout=timeout),
                None,
            )
            data: bytes = response.data
        except client.ApiException as error:
            raise access_error(what, error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(what, error) from error
        head = _page_head(data, what, f"{kind}List")
        version = head.metadata.resourceVersion if head.metadata is not None else ""
        return version, response.tell() or len(data)

    def _send(
        self,
        what: str,
        send: Callable[[tuple[float, float]], Any],
        stats: ReadStats | None,
        *,
        bounded: bool = True,
    ) -> Any:
        """One request, sent again after each 429 once the Retry-After it names has passed, and after a
        transient error (`is_transient`) with backoff, TRANSIENT_ATTEMPTS times at most.

        A 429 asking for longer than the run's budget has left ends a `bounded` read (the cluster
        read, whose timeouts come from the budget) with BudgetExhaustedError naming what was
        throttled, and is raised as it came for any other request; a transient error that outlasts
        the attempts or the budget is TransientError; other errors are the caller's.
        """
        transient = 0  # attempts answered by a transient error
        while True:
            timeout = self.read_timeout(what) if bounded else REQUEST_TIMEOUT
            try:
                return send(timeout)
            except (client.ApiException, urllib3.exceptions.HTTPError) as error:
                if is_transient(error):
                    if stats is not None:
                        stats.failed()
                    transient += 1
                    self._back_off(what, error, transient)
                    continue
                if not isinstance(error, client.ApiException) or error.status != 429:
                    if stats is not None:
                        stats.failed()
                    raise
                delay = _retry_after(error)
                left = self.read_budget() if self.read_budget is not None else math.inf
                if delay >= left and not bounded:
                    raise
            if delay >= left:
                raise BudgetExhaustedError(
                    f"cannot {what}: the API server is throttling this client (HTTP 429, retry after "
                    f"{delay:g} s) and the run's time budget has {max(left, 0):.0f} s left"
                )
            log.warning("cannot %s yet: HTTP 429 from the API server; trying again in %g s", what, delay)
            if stats is not None:
                stats.waited(delay)
            self.sleep(delay)

    def _back_off(self, what: str, error: BaseException, attempts: int) -> None:
        """Wait before sending a request again after its `attempts`-th met a transient error, or raise
        TransientError when that was the last attempt or the run's budget has no time for the wait."""
        delay = TRANSIENT_FIRST_BACKOFF_SECONDS * 2 ** (attempts - 1)
        left = self.read_budget() if self.read_budget is not None else math.inf
        if attempts >= TRANSIENT_ATTEMPTS or delay >= left:
            tried = f"{attempts} attempt{'s' if attempts > 1 else ''}"
            if attempts < TRANSIENT_ATTEMPTS:
                tried += f"; the run's time budget had {max(left, 0):.0f} s left"
            raise TransientError(f"cannot {what}: {_describe(error)} ({tried})") from error
        log.warning("cannot %s yet: %s; trying again in %g s", what, _describe(error), delay)
        self.sleep(delay)

    def _waiting(self, what: str, call: Callable[[], Any]) -> Any:
        """A request outside the cluster read (a Lease's, a patch, an Event): a 429 is waited out as by
        `_send` while the budget lasts, as urllib3 used to before this client took that over (`_Retries`).
        API Priority and Fairness answers 429 before the request is carried out, so sending a write
        again is safe. A 5xx or a broken connection is sent again too (`_send`): every write sent this
        way is guarded by the resourceVersion it read or is a merge patch that means the same twice, so
        a write that landed although its answer was lost meets a 409 (or 404) the caller reads again;
        an Event sent twice is shown twice, which is harmless."""
        return self._send(what, lambda _timeout: call(), None, bounded=False)

    def node(self, name: str) -> dict[str, Any] | None:
        """The raw Node, or None when it no longer exists."""
        return self._read_object("Node", name, f"node {name}", lambda: self.core.read_node(name, **_RAW_READ))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The raw Pod, or None when it no longer exists."""
        return self._read_object(
            "Pod", name, f"pod {namespace}/{name}", lambda: self.core.read_namespaced_pod(name, namespace, **_RAW_READ)
        )

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The raw apps/v1 Deployment, or None when it no longer exists."""
        return self._read_object(
            "Deployment",
            name,
            f"Deployment {namespace}/{name}",
            lambda: self.apps.read_namespaced_deployment(name, namespace, **_RAW_READ),
        )

    def _read_object(self, kind: str, name: str, what: str, read: Callable[[], Any]) -> dict[str, Any] | None:
        try:
            response = self._send(f"read {what}", lambda _timeout: read(), None, bounded=False)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise access_error(f"read {what}", error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(f"read {what}", error) from error
        try:
            found = orjson.loads(response.data)
        except orjson.JSONDecodeError as error:
            raise SnapshotError(f"cannot read {what}: the API server sent invalid JSON ({error})") from error
        meta = found.get("metadata") if isinstance(found, dict) else None
        if not isinstance(meta, dict) or meta.get("name") != name or not isinstance(meta.get("resourceVersion"), str):
            raise SnapshotError(
                f"cannot read {what}: the answer is not that {kind} (metadata with its name and resourceVersion)"
            )
        checked: dict[str, Any] = found
        checked.setdefault("kind", kind)
        return checked

    def pods_on(self, node_name: str) -> list[dict[str, Any]]:
        """The raw pods bound to one node (fieldSelector spec.nodeName)."""
        return list(
            self._pages(
                f"list pods on {node_name}",
                self.core.list_pod_for_all_namespaces,
                field_selector=f"spec.nodeName={node_name}",
            )
        )

    def pdbs(self) -> list[dict[str, Any]]:
        return list(self._pages("list PodDisruptionBudgets", self.policy.list_pod_disruption_budget_for_all_namespaces))

    def pages(self, what: str, list_call: Callable[..., Any], **query: Any) -> Iterator[dict[str, Any]]:
        """The raw items of any paginated list call of the client (`what` names it in errors)."""
        return self._pages(what, list_call, **query)

    def read_timeout(self, what: str) -> tuple[float, float]:
        """The (connect, read) timeout of one list page, within what is left of the run's budget.

        Every page asks, so the whole cluster read is bounded by the budget however many pages
        it takes or however slowly they come; past it, BudgetExhaustedError.
        """
        if self.read_budget is None:
            return REQUEST_TIMEOUT
        left = self.read_budget()
        if left <= 0:
            raise BudgetExhaustedError(f"cannot {what}: the run's time budget ran out while reading the cluster")
        return (min(REQUEST_TIMEOUT[0], left), min(REQUEST_TIMEOUT[1], left))

    def _pages(self, what: str, list_call: Callable[..., Any], **query: Any) -> Iterator[dict[str, Any]]:
        for data in self._raw_pages(what, list_call, **query):
            try:
                page = orjson.loads(data)
            except orjson.JSONDecodeError as error:
                raise SnapshotError(f"cannot {what}: the API server sent invalid JSON ({error})") from error
            if not isinstance(page, dict) or not isinstance(page.get("items"), list):
                raise SnapshotError(f"cannot {what}: the answer is not a list")
            for index, item in enumerate(page["items"]):
                yield _named_object(item, index, what)

    def _raw_pages(
        self,
        what: str,
        list_call: Callable[..., Any],
        *,
        list_kind: str | None = None,
        stats: ReadStats | None = None,
        **query: Any,
    ) -> Iterator[bytes]:
        """The pages of a list as the API server sent them (inflated); the next one is fetched while this one is used.

        With `list_kind` (`NodeList`, ...), a page that names another kind is refused.
        """
        headers = GZIP_HEADERS if self.gzip else {}

        def fetch(token: str | None) -> bytes:
            try:
                response = self._send(
                    what,
                    lambda timeout: list_call(
                        limit=self.page_size,
                        _continue=token,
                        _preload_content=False,
                        _request_timeout=timeout,
                        _headers=headers,
                        **query,
                    ),
                    stats,
                )
                data: bytes = response.data
                if stats is not None:
                    stats.answered(response, len(data))
            except client.ApiException as error:
                if error.status == 410:
                    raise ListExpiredError(f"cannot {what}: {_describe(error)}") from error
                raise access_error(what, error) from error
            except urllib3.exceptions.HTTPError as error:
                raise access_error(what, error) from error
            return data

        # kube-apiserver never hands out a continue token twice in one list; a server that does
        # would be paged until the run's budget ran out, thousands of requests a second.
        tokens_seen: set[str] = set()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="list-pages") as prefetch:
            page = fetch(None)
            while True:
                token = _continue_token(_page_head(page, what, list_kind))
                if token is not None:
                    if token in tokens_seen:
                        raise SnapshotError(
                            f"cannot {what}: the API server sent the continue token {token[:60]!r} a second time; "
                            "the list would never end"
                        )
                    tokens_seen.add(token)
                upcoming = prefetch.submit(fetch, token) if token else None
                try:
                    yield page
                except GeneratorExit:
                    if upcoming is not None:
                        upcoming.cancel()
                    raise
                if upcoming is None:
                    return
                page = upcoming.result()

    # -- writing ------------------------------------------------------------------------------

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch; with metadata.resourceVersion in it, the API server treats it as a precondition."""
        return self._patch(
            "Node", f"node {name}", {"name": name}, lambda: self.core.patch_node(name, patch, **_RAW_PATCH)
        )

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a pod, resourceVersion in it a precondition as for `patch_node`."""
        return self._patch(
            "Pod",
            f"pod {namespace}/{name}",
            {"name": name, "namespace": namespace},
            lambda: self.core.patch_namespaced_pod(name, namespace, patch, **_RAW_PATCH),
        )

    def patch_deployment(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a Deployment (`compactor.actuation.surging` writes only its pod template's
        restartedAt), resourceVersion in it a precondition as for `patch_node`."""
        return self._patch(
            "Deployment",
            f"Deployment {namespace}/{name}",
            {"name": name, "namespace": namespace},
            lambda: self.apps.patch_namespaced_deployment(name, namespace, patch, **_RAW_PATCH),
        )

    def _patch(self, kind: str, what: str, metadata: dict[str, str], send: Callable[[], Any]) -> dict[str, Any]:
        # A 429 (API Priority and Fairness) is sent before the patch is applied: `_write` waits it out.
        response = self._write(
            f"patch {what}", send, conflict=f"{what} changed since it was read", missing=f"{what} no longer exists"
        )
        try:
            result = orjson.loads(response.data)
        except orjson.JSONDecodeError:
            result = None
        if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
            # The status said the patch was applied; only the Event's reference comes from the answer.
            log.warning("the API server's answer to the patch of %s is not a %s; the patch was applied", what, kind)
            return {"kind": kind, "metadata": dict(metadata)}
        return result

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a pod (node replacement's placeholder, the only pod node-compactor creates); a pod of that
        name already there is a ConflictError, a missing namespace a NotFoundError."""
        name = str(body.get("metadata", {}).get("name", ""))
        what = f"pod {namespace}/{name}"
        response = self._write(
            f"create {what}",
            lambda: self.core.create_namespaced_pod(
                namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            conflict=f"{what} already exists",
            missing=f"namespace {namespace} does not exist",
        )
        try:
            created = orjson.loads(response.data or b"{}")
        except orjson.JSONDecodeError:
            created = None
        return created if isinstance(created, dict) else {"kind": "Pod", "metadata": {"name": name}}

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete node replacement's placeholder pod (never a workload's: those are evicted); gone already is
        a NotFoundError."""
        what = f"pod {namespace}/{name}"
        self._write(
            f"delete {what}",
            lambda: self.core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=0, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            missing=f"{what} no longer exists",
        )

    def _write(self, doing: str, send: Callable[[], Any], *, missing: str, conflict: str | None = None) -> Any:
        """One write through `_waiting`: a 409 is a ConflictError (when `conflict` says what it means), a 404 a
        NotFoundError, anything else a ClusterAccessError naming what was being done."""
        try:
            return self._waiting(doing, send)
        except client.ApiException as error:
            if error.status == 409 and conflict is not None:
                raise ConflictError(conflict) from error
            if error.status == 404:
                raise NotFoundError(missing) from error
            raise access_error(doing, error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(doing, error) from error

    def evict(self, namespace: str, name: str) -> EvictionResult:
        """Ask the Eviction API to evict one pod; PDBs are enforced by the API server (429).

        A 2xx answer is read too: a `Status` whose `status` is `Failure` means the pod
        was not evicted, whatever the status line says. (For a pod under several PDBs,
        `EvictionREST.Create` returns such a Status as its result; kube-apiserver 1.36
        turns it into HTTP 500, tests/e2e/test_fake_claims.py, and either way the pod
        stays.)
        """
        body = client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(),
        )
        try:
            response = self.core.create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        except client.ApiException as error:
            refused = _eviction_refused(error.status, _describe(error))
            # A 5xx may come after the eviction was carried out (a timeout after etcd committed).
            return EvictionResult(refused.status, refused.detail, unknown=is_transient(error))
        except urllib3.exceptions.HTTPError as error:
            return EvictionResult("retry", _describe(error), unknown=True)
        try:
            answer = orjson.loads(response.data or b"{}")
        except orjson.JSONDecodeError:
            return EvictionResult("evicted")  # the status line said so; the body adds nothing readable
        if isinstance(answer, dict) and answer.get("kind") == "Status" and answer.get("status") == "Failure":
            code = answer.get("code")
            message = str(answer.get("message") or answer.get("reason") or "")[:300]
            status = code if isinstance(code, int) and not isinstance(code, bool) else 0
            return _eviction_refused(status, f"HTTP {response.status} with a Failure Status (code {code}): {message}")
        return EvictionResult("evicted")

    def event(
        self,
        node: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        warning: bool,
        now: datetime,
        kind: str = "Node",
        api_version: str = "v1",
    ) -> None:
        """A core/v1 Event on the Node (or, with `kind`, on any object: in its namespace).

        An Event that cannot be written is logged, never fatal.
        """
        meta = node.get("metadata") or {}
        name = meta.get("name", "")
        namespace = meta.get("namespace") or EVENT_NAMESPACE
        stamp = format_stamp(now)
        involved = {"apiVersion": api_version, "kind": kind, "name": name, "uid": meta.get("uid", "")}
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        metadata = {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace}
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        for attempt in range(2):
            try:
                self._waiting(
                    f"record event {reason}",
                    lambda: self.core.create_namespaced_event(namespace, body, _request_timeout=REQUEST_TIMEOUT),
                )
                return
            except client.ApiException as error:
                if error.status == 409 and attempt == 0:
                    # An Event of that name exists already (names are random, so a retried request):
                    # once more under a new name.
                    metadata["name"] = f"{name}.{uuid.uuid4().hex[:16]}"
                    continue
                log.warning("could not record event %s on %s %s: %s", reason, kind.lower(), name, _describe(error))
            except urllib3.exceptions.HTTPError as error:
                log.warning("could not record event %s on %s %s: %s", reason, kind.lower(), name, _describe(error))
            except CompactorError as error:  # a 5xx or broken connection on every attempt: the drain goes on
                log.warning("could not record event %s on %s %s: %s", reason, kind.lower(), name, error.message)
            return

    # -- the Lease ----------------------------------------------------------------------------
    #
    # Read and written as raw JSON so that acquireTime/renewTime go out as the MicroTime strings
    # kube-apiserver parses (exactly six fractional digits) and come back through our one parser,
    # and so every write carries the resourceVersion it read: two runs racing for the Lease, or a
    # renewal racing a takeover, end in a 409 for one of them, never in two holders.

    def acquire_lease(
        self, namespace: str, holder: str, *, duration_seconds: int, now: datetime, name: str = LEASE_NAME
    ) -> None:
        """Hold the `node-compactor` Lease (or the one `name`d) for this run, or raise LeaseHeldError.

        A 409 on the create or the takeover is read again: held by another run now, LeaseHeldError;
        still free (the conflict was not a run's), the Lease is taken again."""
        for _ in range(LEASE_CONFLICT_RETRIES):
            try:
                self._acquire_once(namespace, holder, duration_seconds=duration_seconds, now=now, name=name)
                return
            except _LeaseRaceError:
                continue
        raise LeaseHeldError(
            f"Lease {namespace}/{name} changed under this run {LEASE_CONFLICT_RETRIES} times in a row while it "
            "was being taken; this run did nothing"
        )

    def _acquire_once(self, namespace: str, holder: str, *, duration_seconds: int, now: datetime, name: str) -> None:
        lease = self._read_lease(namespace, name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace},
                "spec": _lease_spec(holder, duration_seconds, now, transitions=0),
            }
            _write_lease(
                "create",
                namespace,
                name,
                lambda: self._waiting(
                    f"create Lease {namespace}/{name}",
                    lambda: self.coordination.create_namespaced_lease(
                        namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                    ),
                ),
            )
            return
        spec = _lease_spec_of(lease)
        current = spec.get("holderIdentity")
        if current and current != holder:
            expires = _lease_expiry(spec)
            if expires is not None and expires > now:
                raise LeaseHeldError(
                    f"another run ({current}) holds Lease {namespace}/{name} until {format_stamp(expires)}; "
                    "this run did nothing"
                )
        transitions = spec.get("leaseTransitions")
        lease["spec"] = _lease_spec(
            holder, duration_seconds, now, transitions=(transitions if isinstance(transitions, int) else 0) + 1
        )
        _write_lease(
            "take",
            namespace,
            name,
            lambda: self._waiting(
                f"take Lease {namespace}/{name}",
                lambda: self.coordination.replace_namespaced_lease(
                    name, namespace, lease, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                ),
            ),
        )

    def renew_lease(
        self, namespace: str, holder: str, *, duration_seconds: int, now: datetime, name: str = LEASE_NAME
    ) -> None:
        """Prove this run still holds the Lease and push its expiry out; LeaseLostError when it does not.

        Called right before each write that only one run may make (the cordon, each batch of
        evictions): a run that was slower than its Lease must find out before acting, not after.
        A 409 (the Lease changed between the read and the write) is read again: still this run's,
        the renewal is made again; another's, LeaseLostError.
        """
        where = f"Lease {namespace}/{name}"
        for _ in range(LEASE_CONFLICT_RETRIES):
            lease = self._read_lease(namespace, name)
            if lease is None:
                raise LeaseLostError(f"{where} no longer exists; this run stopped acting")
            spec = _lease_spec_of(lease)
            current = spec.get("holderIdentity")
            if current != holder:
                raise LeaseLostError(
                    f"{where} is now held by {current or 'nobody'}, not this run ({holder}); this run stopped acting"
                )
            spec["renewTime"] = micro_time(now)
            spec["leaseDurationSeconds"] = duration_seconds
            lease["spec"] = spec
            try:
                self._waiting(
                    f"renew {where}",
                    functools.partial(
                        self.coordination.replace_namespaced_lease,
                        name,
                        namespace,
                        lease,
                        _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT,
                    ),
                )
                return
            except client.ApiException as error:
                if error.status == 409:
                    continue  # changed since it was read: whose is it now?
                raise access_error(f"renew {where}", error) from error
            except urllib3.exceptions.HTTPError as error:
                raise access_error(f"renew {where}", error) from error
        raise LeaseLostError(
            f"{where} changed under this run {LEASE_CONFLICT_RETRIES} times in a row; this run stopped acting"
        )

    def release_lease(self, namespace: str, holder: str, *, name: str = LEASE_NAME) -> None:
        """Give the Lease back so the next run need not wait for it to expire; failures only cost that wait."""
        try:
            lease = self._read_lease(namespace, name)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != holder:
                return
            spec.pop("holderIdentity", None)
            spec["leaseDurationSeconds"] = 1
            lease["spec"] = spec
            self._waiting(
                f"release Lease {namespace}/{name}",
                lambda: self.coordination.replace_namespaced_lease(
                    name, namespace, lease, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        except ClusterAccessError as error:
            log.warning("could not release Lease %s/%s: %s", namespace, name, error.message)
        except (client.ApiException, urllib3.exceptions.HTTPError) as error:
            log.warning("could not release Lease %s/%s: %s", namespace, name, _describe(error))

    def lease(self, namespace: str, name: str = LEASE_NAME) -> dict[str, Any] | None:
        """The raw Lease, or None when there is none (`cleanup` reads both jobs' Leases)."""
        return self._read_lease(namespace, name)

    def delete_lease(self, namespace: str, name: str, *, resource_version: str) -> None:
        """Delete a Lease only as it was read (a precondition on its resourceVersion): ConflictError when
        it changed since, NotFoundError when it is gone. Only `cleanup` deletes a Lease."""
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=resource_version))
        try:
            self._waiting(
                f"delete Lease {namespace}/{name}",
                lambda: self.coordination.delete_namespaced_lease(
                    name, namespace, body=body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        except client.ApiException as error:
            if error.status == 409:
                raise ConflictError(f"Lease {namespace}/{name} changed since it was read") from error
            if error.status == 404:
                raise NotFoundError(f"Lease {namespace}/{name} no longer exists") from error
            raise access_error(f"delete Lease {namespace}/{name}", error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(f"delete Lease {namespace}/{name}", error) from error

    def hpa(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The raw autoscaling/v2 HorizontalPodAutoscaler, or None when it no longer exists."""
        autoscaling = client.AutoscalingV2Api(self.api_client)
        return self._read_object(
            "HorizontalPodAutoscaler",
            name,
            f"HorizontalPodAutoscaler {namespace}/{name}",
            lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler(name, namespace, **_RAW_READ),
        )

    def patch_hpa(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of an HPA, resourceVersion in it a precondition as for `patch_node`."""
        autoscaling = client.AutoscalingV2Api(self.api_client)
        return self._patch(
            "HorizontalPodAutoscaler",
            f"HorizontalPodAutoscaler {namespace}/{name}",
            {"name": name, "namespace": namespace},
            lambda: autoscaling.patch_namespaced_horizontal_pod_autoscaler(name, namespace, patch, **_RAW_PATCH),
        )

    def _read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The raw Lease, or None when there is none."""
        try:
            response = self._waiting(
                f"read Lease {namespace}/{name}",
                lambda: self.coordination.read_namespaced_lease(
                    name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                ),
            )
            lease = orjson.loads(response.data)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise access_error(f"read Lease {namespace}/{name}", error) from error
        except urllib3.exceptions.HTTPError as error:
            raise access_error(f"read Lease {namespace}/{name}", error) from error
        except orjson.JSONDecodeError as error:
            raise ClusterAccessError(
                f"cannot read Lease {namespace}/{name}: the answer is not JSON ({error})"
            ) from error
        if not isinstance(lease, dict):
            raise ClusterAccessError(f"cannot read Lease {namespace}/{name}: the answer is not an object")
        return lease


class _Retries(urllib3.Retry):
    """urllib3's retries (connection and read errors, 413 and 503 with Retry-After) without 429.

    urllib3 waits out a 429 that names a Retry-After by itself, up to three times and as long as
    the header says (hours), before the caller sees anything: the run's budget could not bound it.
    `Cluster._send` waits out a 429 instead, within the budget.
    """

    RETRY_AFTER_STATUS_CODES = frozenset({413, 503})


def _wait_out_429_here(api_client: Any) -> None:
    """Give the client's connection pool `_Retries` (the same count as before: urllib3's default is 3)."""
    pool = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    pool_options = getattr(pool, "connection_pool_kw", None)
    if not isinstance(pool_options, dict) or isinstance(pool_options.get("retries"), _Retries):
        return
    current = pool_options.get("retries")
    total = current.total if isinstance(current, urllib3.Retry) else current
    pool_options["retries"] = _Retries(3 if total is None else total)


def _retry_after(error: client.ApiException) -> float:
    """The seconds a 429 asks to wait (`Retry-After`, delta-seconds as kube-apiserver sends it), at least
    RETRY_AFTER_MIN_SECONDS; a value that does not read as seconds waits that minimum."""
    headers = error.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        seconds = float(str(value).strip()) if value is not None else 0.0
    except ValueError:
        seconds = 0.0
    if not math.isfinite(seconds):
        seconds = 0.0
    return max(seconds, RETRY_AFTER_MIN_SECONDS)


def micro_time(moment: datetime) -> str:
    """A metav1.MicroTime as kube-apiserver parses it: UTC with exactly six fractional digits.

    `datetime.isoformat()` drops the fraction when the microsecond is 0, which the
    server's `time.Parse(RFC3339Micro, ...)` refuses (apimachinery `micro_time.go`).
    """
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _lease_spec(holder: str, duration_seconds: int, now: datetime, *, transitions: int) -> dict[str, Any]:
    stamp = micro_time(now)
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration_seconds,
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": transitions,
    }


def _lease_spec_of(lease: Mapping[str, Any]) -> dict[str, Any]:
    """The Lease's spec; one that is not an object reads as empty (no holder, no time), like a missing one."""
    spec = lease.get("spec")
    return spec if isinstance(spec, dict) else {}


def lease_held(lease: Mapping[str, Any] | None, now: datetime) -> tuple[str, datetime] | None:
    """(holder, until) when someone holds the Lease past `now` (what `acquire_lease` would refuse), else None."""
    spec = _lease_spec_of(lease or {})
    holder = spec.get("holderIdentity")
    expires = _lease_expiry(spec)
    if not holder or expires is None or expires <= now:
        return None
    return str(holder), expires


def _lease_expiry(spec: Mapping[str, Any]) -> datetime | None:
    """When a Lease held by someone expires; None when it carries no readable time (taken over as expired)."""
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    duration = spec.get("leaseDurationSeconds")
    moment = parse_stamp(renewed) if isinstance(renewed, str) else None
    if moment is None:
        return None
    seconds = duration if isinstance(duration, int) and not isinstance(duration, bool) else 0
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)  # held "forever": never taken over


# kube-apiserver's answer for a pod that several PDBs select: no retry can change it.
_SEVERAL_PDBS = "more than one PodDisruptionBudget"


def _eviction_refused(code: int, detail: str) -> EvictionResult:
    """What a refused eviction means for the run, from the Status code (HTTP status or a Status body's `code`)."""
    if code == 404:
        return EvictionResult("gone", detail)
    if code == 429:
        return EvictionResult("blocked", detail)
    if _SEVERAL_PDBS in detail:
        return EvictionResult("failed", detail)  # permanent: retrying would only spend the run's budget
    if code >= 500 or code == 409:
        return EvictionResult("retry", detail)
    return EvictionResult("failed", detail)


class _LeaseRaceError(LeaseHeldError):
    """A Lease write met a 409: someone wrote it since it was read (`acquire_lease` reads it again)."""


def _write_lease(verb: str, namespace: str, name: str, write: Callable[[], Any]) -> None:
    """A Lease write; a conflict means someone else (most likely another run) wrote it first."""
    try:
        write()
    except client.ApiException as error:
        if error.status == 409:
            raise _LeaseRaceError(
                f"another run got Lease {namespace}/{name} at the same moment; this run did nothing"
            ) from error
        raise access_error(f"{verb} Lease {namespace}/{name}", error) from error
    except urllib3.exceptions.HTTPError as error:
        raise access_error(f"{verb} Lease {namespace}/{name}", error) from error


def new_run_id() -> str:
    return f"{COMPONENT}-{uuid.uuid4().hex[:12]}"
