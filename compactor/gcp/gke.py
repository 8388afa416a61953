"""Access to a GKE cluster: a ready Kubernetes `ApiClient` and the node pools' autoscaling settings.

Given `projects/P/locations/L/clusters/C`, the cluster is read once from the
GKE API (endpoint, CA, node pools), and a Kubernetes client is built that
authenticates with a Google access token, refreshed before it expires.

Endpoint modes (COMPACTOR_ENDPOINT_MODE):
- `dns`: the DNS-based control plane endpoint (`*.gke.goog`), reachable from
  anywhere with IAM, no VPC access needed;
- `ip`: `cluster.endpoint`, which GKE fills with the PUBLIC address whenever
  the cluster still has a public endpoint, and with the private one only when
  the public endpoint is off;
- `private-ip`: always the private address
  (`controlPlaneEndpointsConfig.ipEndpointsConfig.privateEndpoint`, else the
  older `privateClusterConfig.privateEndpoint`), for a function that reaches
  the VPC through a connector or Direct VPC egress while the public endpoint
  is closed by authorized networks.

The cluster's description is cached for a few minutes so warm invocations of
the function skip the GKE call; nothing is built or fetched at import time.

This module never changes the cluster or its node pools: it only reads them
(`container.clusters.get`) and hands out a client. It never turns TLS
verification off.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, NamedTuple

import google.auth
import google.auth.credentials
import google.auth.exceptions
import google.auth.transport.requests
import kubernetes.client
from google.api_core import exceptions as api_exceptions

from compactor.core.model import PoolAutoscaling, Taint
from compactor.errors import BadInputError, ClusterAccessError

ENV_ENDPOINT_MODE = "COMPACTOR_ENDPOINT_MODE"
ENDPOINT_MODES = ("dns", "ip", "private-ip")
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

# Node pools change rarely (a person edits them); ten minutes of staleness only
# delays when a changed minimum is seen, and the planner re-checks live nodes.
CACHE_SECONDS = 600.0
# Refresh well before expiry so a request (or a retry with backoff) never
# reaches the API server with a token that lapsed on the way.
TOKEN_REFRESH_MARGIN = timedelta(minutes=5)
# The metadata server may keep handing out its cached token until about four
# minutes are left, i.e. inside our margin: after a refresh that brought no
# fresher token, wait this long before asking again instead of asking on
# every request.
TOKEN_RETRY_SECONDS = 30.0
GKE_TIMEOUT_SECONDS = 30.0

_CLUSTER_NAME = re.compile(r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/clusters/(?P<cluster>[^/]+)")


class ClusterName(NamedTuple):
    project: str
    location: str
    cluster: str

    @property
    def path(self) -> str:
        """The resource name GKE uses: projects/P/locations/L/clusters/C."""
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"


@dataclass(frozen=True)
class Connection:
    """A Kubernetes client for one GKE cluster and what GKE says of its node pools."""

    cluster: ClusterName
    api_client: Any  # kubernetes.client.ApiClient (the package ships no type hints)
    pool_autoscaling: Mapping[str, PoolAutoscaling]

    def close(self) -> None:
        self.api_client.close()


@dataclass(frozen=True)
class _ClusterInfo:
    host: str
    ca_cert_file: str | None
    pool_autoscaling: Mapping[str, PoolAutoscaling]
    read_at: float  # time.monotonic()


_cache: dict[tuple[str, str], _ClusterInfo] = {}
_cache_lock = threading.Lock()
_ca_directory: str | None = None


def parse_cluster_name(text: str) -> ClusterName:
    match = _CLUSTER_NAME.fullmatch(text.strip())
    if match is None:
        raise BadInputError(
            f"cluster name {text!r} is not of the form projects/PROJECT/locations/LOCATION/clusters/CLUSTER"
        )
    return ClusterName(match["project"], match["location"], match["cluster"])


def connect(
    cluster_name: str,
    *,
    endpoint_mode: str = "dns",
    credentials: google.auth.credentials.Credentials | None = None,
    cluster_manager: Any = None,
) -> Connection:
    """A ready client for the cluster; `cluster_manager` replaces the GKE API client (tests)."""
    name = parse_cluster_name(cluster_name)
    if endpoint_mode not in ENDPOINT_MODES:
        raise BadInputError(
            f"endpoint mode {endpoint_mode!r} is unknown: use 'dns', 'ip' or 'private-ip' ({ENV_ENDPOINT_MODE})"
        )
    if credentials is None:
        credentials = _default_credentials(name)
    info = _cluster_info(name, endpoint_mode, credentials, cluster_manager)

    configuration = kubernetes.client.Configuration()
    configuration.host = info.host
    configuration.ssl_ca_cert = info.ca_cert_file
    # kubernetes 36.x: auth_settings() sends a bearer token only when
    # api_key["BearerToken"] exists, so it is filled here, not only in the hook.
    token = _Token(credentials, name)
    configuration.api_key["BearerToken"] = token.value()
    configuration.api_key_prefix["BearerToken"] = "Bearer"
    configuration.refresh_api_key_hook = token.refresh_api_key
    return Connection(
        cluster=name,
        api_client=kubernetes.client.ApiClient(configuration),
        pool_autoscaling=info.pool_autoscaling,
    )


def clear_cache() -> None:
    """Forget cached cluster descriptions (tests; a fresh process starts empty)."""
    with _cache_lock:
        _cache.clear()


def _default_credentials(name: ClusterName) -> google.auth.credentials.Credentials:
    try:
        credentials, _project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as error:
        raise ClusterAccessError(f"cannot find Google credentials to reach cluster {name.path}: {error}") from error
    return credentials


def _cluster_info(
    name: ClusterName,
    endpoint_mode: str,
    credentials: google.auth.credentials.Credentials,
    cluster_manager: Any,
) -> _ClusterInfo:
    key = (name.path, endpoint_mode)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and time.monotonic() - cached.read_at < CACHE_SECONDS:
        return cached
    cluster = _read_cluster(name, credentials, cluster_manager)
    info = _ClusterInfo(
        host=_host(cluster, name, endpoint_mode),
        ca_cert_file=None if endpoint_mode == "dns" else _ca_cert_file(cluster, name),
        pool_autoscaling=_pool_autoscaling(cluster),
        read_at=time.monotonic(),
    )
    with _cache_lock:
        _cache[key] = info
    return info


def _read_cluster(name: ClusterName, credentials: google.auth.credentials.Credentials, cluster_manager: Any) -> Any:
    try:
        if cluster_manager is None:
            # Imported here: the GKE client pulls in gRPC, which local runs with a
            # kubeconfig never need.
            from google.cloud import container_v1

            cluster_manager = container_v1.ClusterManagerClient(credentials=credentials)
        return cluster_manager.get_cluster(name=name.path, timeout=GKE_TIMEOUT_SECONDS)
    except (api_exceptions.GoogleAPICallError, api_exceptions.RetryError) as error:
        raise ClusterAccessError(f"cannot read cluster {name.path} from GKE: {error}") from error
    except google.auth.exceptions.GoogleAuthError as error:
        raise ClusterAccessError(f"cannot authenticate to GKE to read cluster {name.path}: {error}") from error


def _host(cluster: Any, name: ClusterName, endpoint_mode: str) -> str:
    if endpoint_mode == "dns":
        return _dns_host(cluster, name)
    if endpoint_mode == "private-ip":
        return _private_ip_host(cluster, name)
    return _ip_host(cluster, name)


def _dns_host(cluster: Any, name: ClusterName) -> str:
    dns = cluster.control_plane_endpoints_config.dns_endpoint_config
    # GKE fills `endpoint` on every cluster; it accepts our traffic only when
    # allow_external_traffic is true (`--enable-dns-access`).
    if not dns.endpoint or not dns.allow_external_traffic:
        raise ClusterAccessError(
            f"cluster {name.path} has no enabled DNS control plane endpoint: enable it "
            f"(gcloud container clusters update {name.cluster} --location={name.location} "
            f"--project={name.project} --enable-dns-access) or set {ENV_ENDPOINT_MODE}=ip or private-ip"
        )
    # No cluster CA here: the DNS endpoint (*.gke.goog) is fronted by Google and
    # presents a publicly trusted certificate, so the system trust store verifies
    # it. gcloud's `get-credentials --dns-endpoint` likewise writes a kubeconfig
    # without certificate-authority-data.
    return f"https://{dns.endpoint}"


def _ip_host(cluster: Any, name: ClusterName) -> str:
    _require_ip_access(cluster, name)
    if not cluster.endpoint:
        raise ClusterAccessError(f"GKE reports no IP endpoint for cluster {name.path} (is it still being created?)")
    return f"https://{cluster.endpoint}"


def _private_ip_host(cluster: Any, name: ClusterName) -> str:
    _require_ip_access(cluster, name)
    # The newer field first: GKE fills it on every cluster with IP endpoints
    # (since 1.29 with the endpoints rework); clusters described only in the
    # older form still carry privateClusterConfig.privateEndpoint.
    private_endpoint = (
        cluster.control_plane_endpoints_config.ip_endpoints_config.private_endpoint
        or cluster.private_cluster_config.private_endpoint
    )
    if not private_endpoint:
        raise ClusterAccessError(
            f"GKE reports no private IP endpoint for cluster {name.path}: a cluster without a private "
            f"control plane address can only be reached with {ENV_ENDPOINT_MODE}=ip (its public endpoint) or dns"
        )
    return f"https://{private_endpoint}"


def _require_ip_access(cluster: Any, name: ClusterName) -> None:
    ip_endpoints = cluster.control_plane_endpoints_config.ip_endpoints_config
    # `enabled` is optional: unset means GKE's default (IP access on); only an
    # explicit false means the control plane answers on its DNS endpoint alone.
    if "enabled" in ip_endpoints and not ip_endpoints.enabled:
        raise ClusterAccessError(
            f"cluster {name.path} has IP access to its control plane turned off: "
            f"set {ENV_ENDPOINT_MODE}=dns to use its DNS endpoint"
        )


def _ca_cert_file(cluster: Any, name: ClusterName) -> str:
    """The cluster CA as a PEM file, the form the Kubernetes client takes."""
    encoded = cluster.master_auth.cluster_ca_certificate
    try:
        pem = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ClusterAccessError(f"GKE returned a cluster CA for {name.path} that is not base64: {error}") from error
    if not pem:
        raise ClusterAccessError(f"GKE returned no cluster CA for {name.path}; it is needed to verify the IP endpoint")
    # Named by content: a client built earlier keeps reading its file (urllib3
    # loads it on each new connection), so a file is never rewritten or removed
    # while the process lives.
    path = os.path.join(_private_directory(), f"cluster-ca-{hashlib.sha256(pem).hexdigest()[:32]}.pem")
    if not os.path.exists(path):
        descriptor, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial")
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(pem)
        os.replace(partial, path)
    return path


def _private_directory() -> str:
    # A directory only this process's user can write to: a CA file at a
    # predictable path in a shared /tmp could be swapped for another CA.
    global _ca_directory
    with _cache_lock:
        if _ca_directory is None or not os.path.isdir(_ca_directory):
            _ca_directory = tempfile.mkdtemp(prefix="node-compactor-")
        return _ca_directory


def _pool_autoscaling(cluster: Any) -> Mapping[str, PoolAutoscaling]:
    """Each node pool's autoscaling limits, its node template for a replacement into a pool with no node
    yet (machine type, Spot, labels, taints, zones: `core.replacement`), its own consolidation delay, its
    maximum pods per node, and whether the cluster's default ComputeClass is on (`core.coexistence`)."""
    cluster_autoscaling = getattr(cluster, "autoscaling", None)
    default_config = getattr(cluster_autoscaling, "default_compute_class_config", None)
    # GKE's autoscaler applies the class named "default" to a node pool without the compute-class label
    # only when this is on (GoogleCloudPlatform/cluster-autoscaler, pkg/computeclass/lister/ccc.go,
    # `NodeGroupCrd` and `GetDefaultCrd`; pkg/cloudprovider/gke/gkeclient/autoscaling_gke_client_v1beta1.go
    # reads it from the cluster's autoscaling.defaultComputeClassConfig.enabled).
    default_class = bool(getattr(default_config, "enabled", False))
    # Node auto-provisioning: GKE creates pools of the machine type a pending pod selects (replacement's
    # `machineTypes`; cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning).
    creates_pools = bool(getattr(cluster_autoscaling, "enable_node_autoprovisioning", False))
    cluster_max_pods = int(getattr(getattr(cluster, "default_max_pods_constraint", None), "max_pods_per_node", 0) or 0)
    pools = {}
    for pool in cluster.node_pools:
        autoscaling, config = pool.autoscaling, pool.config
        pools[pool.name] = PoolAutoscaling(
            enabled=bool(autoscaling.enabled),
            min_node_count=int(autoscaling.min_node_count),
            total_min_node_count=int(autoscaling.total_min_node_count),
            max_node_count=int(autoscaling.max_node_count),
            total_max_node_count=int(autoscaling.total_max_node_count),
            zones=len(pool.locations),
            machine_type=str(config.machine_type) or None,
            spot=bool(config.spot or config.preemptible),
            labels=dict(config.labels),
            taints=tuple(
                Taint(str(taint.key), str(taint.value), _TAINT_EFFECTS.get(int(taint.effect), "NoSchedule"))
                for taint in config.taints
            ),
            locations=tuple(str(zone) for zone in pool.locations),
            consolidation_delay_seconds=_consolidation_delay(config),
            max_pods_per_node=int(
                getattr(getattr(pool, "max_pods_constraint", None), "max_pods_per_node", 0) or cluster_max_pods
            ),
            default_compute_class=default_class,
            creates_pools=creates_pools,
        )
    return MappingProxyType(pools)


def _consolidation_delay(config: Any) -> int | None:
    """NodeConfig.consolidationDelay (a protobuf Duration) in whole seconds; None when the field is not set
    ("nodes are scaled down by default behavior, i.e. according to the chosen autoscaling profile", the
    field's description). GKE's autoscaler reads the pool's value whenever it is given, zero included
    (GoogleCloudPlatform/cluster-autoscaler, pkg/cloudprovider/gke/gkeclient/autoscaling_gke_client.go,
    `NodePoolSpec.ConsolidationDelay`). proto-plus hands the field out as a `datetime.timedelta`."""
    try:
        present = "consolidation_delay" in config
    except TypeError:  # not a proto-plus message (a test double): read the attribute
        present = getattr(config, "consolidation_delay", None) is not None
    if not present:
        return None
    duration = config.consolidation_delay
    if isinstance(duration, timedelta):
        return int(duration.total_seconds())
    return int(getattr(duration, "seconds", 0) or 0)


# container.v1 NodeTaint.Effect -> a Kubernetes taint effect (1 NO_SCHEDULE, 2 PREFER_NO_SCHEDULE, 3 NO_EXECUTE).
_TAINT_EFFECTS = {1: "NoSchedule", 2: "PreferNoSchedule", 3: "NoExecute"}


class _Token:
    """The Google access token of one connection, refreshed ahead of its expiry."""

    def __init__(self, credentials: google.auth.credentials.Credentials, name: ClusterName) -> None:
        self._credentials = credentials
        self._name = name
        # Evictions run in threads that share one ApiClient: one refresh at a time.
        self._lock = threading.Lock()
        self._no_refresh_before = 0.0  # time.monotonic()

    def refresh_api_key(self, configuration: Any) -> None:
        """The `refresh_api_key_hook`: kubernetes calls it before it reads the token for each request.

        A refresh failure surfaces from the Kubernetes call as `ClusterAccessError`.
        """
        configuration.api_key["BearerToken"] = self.value()

    def value(self) -> str:
        with self._lock:
            if self._needs_refresh():
                self._refresh()
            token = self._credentials.token
        if not token:
            raise ClusterAccessError(f"the Google credentials gave no access token for cluster {self._name.path}")
        return str(token)

    def _needs_refresh(self) -> bool:
        if not self._credentials.token:
            return True
        remaining = _remaining(self._credentials)
        if remaining is None:
            return False
        if remaining <= timedelta(0):
            return True
        return remaining <= TOKEN_REFRESH_MARGIN and time.monotonic() >= self._no_refresh_before

    def _refresh(self) -> None:
        try:
            # google-auth's refresh() carries no type hints; Any keeps that at this edge.
            credentials: Any = self._credentials
            credentials.refresh(google.auth.transport.requests.Request())
        except google.auth.exceptions.GoogleAuthError as error:
            raise ClusterAccessError(
                f"cannot get a Google access token for cluster {self._name.path}: {error}"
            ) from error
        remaining = _remaining(self._credentials)
        if remaining is not None and remaining <= TOKEN_REFRESH_MARGIN:
            self._no_refresh_before = time.monotonic() + TOKEN_RETRY_SECONDS


def _remaining(credentials: google.auth.credentials.Credentials) -> timedelta | None:
    """How long the current token stays valid; None when the credentials do not say."""
    expiry: datetime | None = credentials.expiry
    if expiry is None:
        return None
    if expiry.tzinfo is None:  # google-auth keeps expiry as naive UTC
        expiry = expiry.replace(tzinfo=UTC)
    return expiry - datetime.now(UTC)
