"""GKE access against local stand-ins: the GKE REST API over HTTP and a Kubernetes API server over TLS."""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.server
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import google.auth.credentials
import google.auth.exceptions
import kubernetes.client
import pytest
import urllib3
from google.cloud import container_v1

from compactor.core.model import PoolAutoscaling, Taint
from compactor.errors import BadInputError, ClusterAccessError
from compactor.gcp import gke
from tests import fakegke
from tests.fakegke import GkeApi

CLUSTER = "projects/shop-prod/locations/europe-west1/clusters/main"
DNS_ENDPOINT = "gke-0123456789abcdef0123456789abcdef-123456789012.europe-west1.gke.goog"


# --- stand-ins -----------------------------------------------------------------------------------------------------


@dataclass
class KubernetesApi:
    """An HTTPS server answering `GET /api/v1/nodes` with an empty NodeList; records Authorization headers."""

    ca_pem: bytes
    port: int = 0
    authorizations: list[str | None] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.authorizations.append(self.headers.get("Authorization"))
                if self.path.split("?", 1)[0] != "/api/v1/nodes":
                    self.send_error(404)
                    return
                payload = json.dumps(
                    {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextlib.contextmanager
def serving(server: http.server.HTTPServer) -> Iterator[None]:
    # A short poll interval keeps shutdown() (and so each test's teardown) quick.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def gke_api() -> Iterator[GkeApi]:
    with fakegke.running() as api:
        yield api


@pytest.fixture(scope="module")
def api_server_certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("apiserver-tls"))


@pytest.fixture
def kubernetes_api(api_server_certificate: tuple[Path, Path]) -> Iterator[KubernetesApi]:
    certificate, key = api_server_certificate
    api = KubernetesApi(ca_pem=certificate.read_bytes())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    api.port = server.server_address[1]
    with serving(server):
        yield api


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for IP 127.0.0.1 that is its own CA, made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl command is needed to make the test API server's certificate", pytrace=False)
    certificate, key = directory / "apiserver.pem", directory / "apiserver-key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(certificate),
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return certificate, key


HOUR = datetime.timedelta(hours=1)


def utcnow() -> datetime.datetime:
    """Now as google-auth keeps credential expiry: naive UTC."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


class CountingCredentials(google.auth.credentials.Credentials):
    """Google credentials whose refresh() hands out token-1, token-2, ... valid for `lifetime`."""

    def __init__(self, lifetime: datetime.timedelta = HOUR, *, fail: bool = False) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # google-auth leaves it unannotated
        self.lifetime = lifetime
        self.fail = fail
        self.refreshes = 0

    def refresh(self, request: Any) -> None:
        if self.fail:
            raise google.auth.exceptions.RefreshError("the metadata server refused the stand-in")  # type: ignore[no-untyped-call]
        self.refreshes += 1
        self.token = f"token-{self.refreshes}"
        self.expiry = utcnow() + self.lifetime


def cluster_json(
    *,
    endpoint: str = "203.0.113.10",
    ca_pem: bytes = b"-----BEGIN CERTIFICATE-----\nnot used\n-----END CERTIFICATE-----\n",
    dns_endpoint: dict[str, Any] | None = None,
    ip_endpoints: dict[str, Any] | None = None,
    private_cluster: dict[str, Any] | None = None,
    node_pools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The REST (JSON) shape of container.v1.Cluster, with the fields node-compactor reads."""
    body: dict[str, Any] = {
        "name": "main",
        "location": "europe-west1",
        "endpoint": endpoint,
        "masterAuth": {"clusterCaCertificate": base64.b64encode(ca_pem).decode()},
        "nodePools": node_pools if node_pools is not None else [{"name": "default-pool"}],
    }
    endpoints_config: dict[str, Any] = {}
    if dns_endpoint is not None:
        endpoints_config["dnsEndpointConfig"] = dns_endpoint
    if ip_endpoints is not None:
        endpoints_config["ipEndpointsConfig"] = ip_endpoints
    if endpoints_config:
        body["controlPlaneEndpointsConfig"] = endpoints_config
    if private_cluster is not None:
        body["privateClusterConfig"] = private_cluster
    return body


ENABLED_DNS_ENDPOINT = {"endpoint": DNS_ENDPOINT, "allowExternalTraffic": True}


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    gke.clear_cache()
    yield
    gke.clear_cache()


@pytest.fixture
def cluster_manager(gke_api: GkeApi) -> container_v1.ClusterManagerClient:
    return fakegke.client(gke_api.url)


@pytest.fixture
def ip_cluster(gke_api: GkeApi, kubernetes_api: KubernetesApi) -> KubernetesApi:
    """The GKE stand-in describes a cluster whose IP endpoint is the local TLS API server."""
    gke_api.clusters[CLUSTER] = cluster_json(endpoint=kubernetes_api.endpoint, ca_pem=kubernetes_api.ca_pem)
    return kubernetes_api


def list_nodes(connection: gke.Connection) -> list[Any]:
    node_list = kubernetes.client.CoreV1Api(connection.api_client).list_node(_request_timeout=10)
    return list(node_list.items)


# --- cluster names and modes -----------------------------------------------------------------------------------------


def test_parses_a_cluster_resource_name() -> None:
    assert gke.parse_cluster_name(CLUSTER) == gke.ClusterName("shop-prod", "europe-west1", "main")
    assert gke.parse_cluster_name(CLUSTER).path == CLUSTER


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("main", id="bare-cluster-name"),
        pytest.param("projects/p/zones/z/clusters/c", id="zones-instead-of-locations"),
        pytest.param("projects/p/locations/l/clusters/", id="empty-cluster"),
        pytest.param("projects/p/locations/l/clusters/c/nodePools/x", id="node-pool-name"),
        pytest.param("https://container.googleapis.com/v1/projects/p/locations/l/clusters/c", id="url"),
    ],
)
def test_rejects_a_cluster_name_of_another_form_saying_which_form_is_expected(text: str) -> None:
    with pytest.raises(BadInputError, match="projects/PROJECT/locations/LOCATION/clusters/CLUSTER"):
        gke.parse_cluster_name(text)


def test_rejects_an_unknown_endpoint_mode_before_calling_gke(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    with pytest.raises(BadInputError, match="endpoint mode 'private' is unknown: use 'dns', 'ip' or 'private-ip'"):
        gke.connect(
            CLUSTER, endpoint_mode="private", credentials=CountingCredentials(), cluster_manager=cluster_manager
        )
    assert gke_api.requested == []


# --- IP endpoint: TLS with the cluster CA, bearer token --------------------------------------------------------------


def test_ip_mode_talks_tls_to_the_cluster_endpoint_verified_with_the_cluster_ca(
    ip_cluster: KubernetesApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    connection = gke.connect(
        CLUSTER, endpoint_mode="ip", credentials=CountingCredentials(), cluster_manager=cluster_manager
    )

    assert list_nodes(connection) == []
    assert connection.api_client.configuration.host == f"https://{ip_cluster.endpoint}"
    assert ip_cluster.authorizations == ["Bearer token-1"]
    connection.close()


def test_a_client_without_the_cluster_ca_fails_to_verify_the_ip_endpoint(ip_cluster: KubernetesApi) -> None:
    configuration = kubernetes.client.Configuration(host=f"https://{ip_cluster.endpoint}")
    configuration.retries = 0
    client = kubernetes.client.ApiClient(configuration)

    with pytest.raises(urllib3.exceptions.MaxRetryError) as raised:
        kubernetes.client.CoreV1Api(client).list_node(_request_timeout=10)

    assert isinstance(raised.value.reason, urllib3.exceptions.SSLError)
    assert ip_cluster.authorizations == []
    client.close()


@pytest.mark.parametrize(
    ("lifetime", "expiry_after_connect", "refreshes", "authorizations"),
    [
        pytest.param(
            HOUR,
            datetime.timedelta(minutes=2),
            2,
            ["Bearer token-2", "Bearer token-2"],
            id="refreshed-within-5-minutes",
        ),
        pytest.param(HOUR, None, 1, ["Bearer token-1", "Bearer token-1"], id="kept-while-valid-for-longer"),
        pytest.param(
            datetime.timedelta(minutes=4),
            None,
            1,
            ["Bearer token-1", "Bearer token-1"],
            id="not-asked-again-on-every-request-when-the-source-has-no-fresher-token",
        ),
        pytest.param(
            datetime.timedelta(minutes=4),
            datetime.timedelta(seconds=-1),
            2,
            ["Bearer token-2", "Bearer token-2"],
            id="refreshed-once-expired-even-right-after-a-refresh",
        ),
    ],
)
def test_refreshes_the_google_token_when_it_expires_within_five_minutes(
    ip_cluster: KubernetesApi,
    cluster_manager: container_v1.ClusterManagerClient,
    lifetime: datetime.timedelta,
    expiry_after_connect: datetime.timedelta | None,
    refreshes: int,
    authorizations: list[str],
) -> None:
    credentials = CountingCredentials(lifetime)
    connection = gke.connect(CLUSTER, endpoint_mode="ip", credentials=credentials, cluster_manager=cluster_manager)
    if expiry_after_connect is not None:  # time passes: the token is now this close to its expiry
        credentials.expiry = utcnow() + expiry_after_connect

    list_nodes(connection)
    list_nodes(connection)

    assert credentials.refreshes == refreshes
    assert ip_cluster.authorizations == authorizations
    connection.close()


def test_a_failed_token_refresh_is_a_cluster_access_error_naming_the_cluster(
    ip_cluster: KubernetesApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    with pytest.raises(ClusterAccessError, match=f"cannot get a Google access token for cluster {CLUSTER}"):
        gke.connect(
            CLUSTER, endpoint_mode="ip", credentials=CountingCredentials(fail=True), cluster_manager=cluster_manager
        )
    assert ip_cluster.authorizations == []


def test_missing_google_credentials_are_a_cluster_access_error(
    gke_api: GkeApi,
    cluster_manager: container_v1.ClusterManagerClient,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))

    with pytest.raises(ClusterAccessError, match=f"cannot find Google credentials to reach cluster {CLUSTER}"):
        gke.connect(CLUSTER, cluster_manager=cluster_manager)
    assert gke_api.requested == []


# --- private IP endpoint -------------------------------------------------------------------------------------------

# A public address nothing listens on: a client that used it would fail to connect.
PUBLIC_ENDPOINT = "203.0.113.10"


@pytest.mark.parametrize(
    ("ip_endpoints", "private_cluster"),
    [
        pytest.param(None, "private", id="private-cluster-config-only"),
        pytest.param("private", None, id="ip-endpoints-config-only"),
        pytest.param("private", {"privateEndpoint": "10.0.0.2"}, id="ip-endpoints-config-first"),
    ],
)
def test_private_ip_mode_talks_tls_to_the_private_endpoint_although_a_public_one_exists(
    gke_api: GkeApi,
    kubernetes_api: KubernetesApi,
    cluster_manager: container_v1.ClusterManagerClient,
    ip_endpoints: str | None,
    private_cluster: str | dict[str, str] | None,
) -> None:
    private = {"privateEndpoint": kubernetes_api.endpoint}
    gke_api.clusters[CLUSTER] = cluster_json(
        endpoint=PUBLIC_ENDPOINT,
        ca_pem=kubernetes_api.ca_pem,
        ip_endpoints=(
            {"enabled": True, "enablePublicEndpoint": True, "publicEndpoint": PUBLIC_ENDPOINT, **private}
            if ip_endpoints
            else None
        ),
        private_cluster=private_cluster
        if isinstance(private_cluster, dict)
        else (private if private_cluster else None),
    )

    connection = gke.connect(
        CLUSTER, endpoint_mode="private-ip", credentials=CountingCredentials(), cluster_manager=cluster_manager
    )

    assert list_nodes(connection) == []
    assert connection.api_client.configuration.host == f"https://{kubernetes_api.endpoint}"
    assert kubernetes_api.authorizations == ["Bearer token-1"]
    connection.close()


def test_ip_mode_takes_the_cluster_endpoint_which_is_the_public_one_when_there_is_one(
    gke_api: GkeApi, kubernetes_api: KubernetesApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(
        endpoint=PUBLIC_ENDPOINT,
        ca_pem=kubernetes_api.ca_pem,
        ip_endpoints={"enabled": True, "privateEndpoint": kubernetes_api.endpoint, "publicEndpoint": PUBLIC_ENDPOINT},
    )

    connection = gke.connect(
        CLUSTER, endpoint_mode="ip", credentials=CountingCredentials(), cluster_manager=cluster_manager
    )

    assert connection.api_client.configuration.host == f"https://{PUBLIC_ENDPOINT}"
    connection.close()


def test_private_ip_mode_refuses_a_cluster_without_a_private_endpoint_naming_the_other_modes(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(endpoint=PUBLIC_ENDPOINT, ip_endpoints={"enabled": True})

    with pytest.raises(
        ClusterAccessError,
        match=f"GKE reports no private IP endpoint for cluster {CLUSTER}: .*COMPACTOR_ENDPOINT_MODE=ip .* or dns",
    ):
        gke.connect(
            CLUSTER, endpoint_mode="private-ip", credentials=CountingCredentials(), cluster_manager=cluster_manager
        )


@pytest.mark.parametrize("endpoint_mode", [pytest.param("ip", id="ip"), pytest.param("private-ip", id="private-ip")])
def test_ip_modes_refuse_a_cluster_whose_ip_access_is_turned_off_pointing_to_dns(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient, endpoint_mode: str
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(
        endpoint=PUBLIC_ENDPOINT,
        ip_endpoints={"enabled": False, "privateEndpoint": "10.0.0.2"},
        dns_endpoint=ENABLED_DNS_ENDPOINT,
    )

    with pytest.raises(
        ClusterAccessError, match="IP access to its control plane turned off: set COMPACTOR_ENDPOINT_MODE=dns"
    ):
        gke.connect(
            CLUSTER, endpoint_mode=endpoint_mode, credentials=CountingCredentials(), cluster_manager=cluster_manager
        )


def test_each_endpoint_mode_keeps_its_own_cached_description(
    gke_api: GkeApi, kubernetes_api: KubernetesApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(
        endpoint=PUBLIC_ENDPOINT,
        ca_pem=kubernetes_api.ca_pem,
        ip_endpoints={"privateEndpoint": kubernetes_api.endpoint},
        dns_endpoint=ENABLED_DNS_ENDPOINT,
    )

    hosts = [
        gke.connect(
            CLUSTER, endpoint_mode=mode, credentials=CountingCredentials(), cluster_manager=cluster_manager
        ).api_client.configuration.host
        for mode in ("dns", "ip", "private-ip")
    ]

    assert hosts == [f"https://{DNS_ENDPOINT}", f"https://{PUBLIC_ENDPOINT}", f"https://{kubernetes_api.endpoint}"]


# --- DNS endpoint ----------------------------------------------------------------------------------------------------


def test_dns_mode_uses_the_dns_endpoint_verified_with_the_system_trust_store(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(dns_endpoint=ENABLED_DNS_ENDPOINT)

    connection = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)

    configuration = connection.api_client.configuration
    assert configuration.host == f"https://{DNS_ENDPOINT}"
    assert configuration.ssl_ca_cert is None
    assert configuration.verify_ssl is True
    assert configuration.auth_settings()["BearerToken"]["value"] == "Bearer token-1"
    connection.close()


@pytest.mark.parametrize(
    "dns_endpoint",
    [
        pytest.param(None, id="no-endpoints-config"),
        pytest.param({"endpoint": DNS_ENDPOINT, "allowExternalTraffic": False}, id="external-traffic-not-allowed"),
        pytest.param({"endpoint": DNS_ENDPOINT}, id="external-traffic-never-set"),
    ],
)
def test_dns_mode_refuses_a_cluster_without_an_enabled_dns_endpoint(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient, dns_endpoint: dict[str, Any] | None
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(dns_endpoint=dns_endpoint)

    with pytest.raises(
        ClusterAccessError, match=r"--enable-dns-access.* or set COMPACTOR_ENDPOINT_MODE=ip or private-ip"
    ) as raised:
        gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)
    assert CLUSTER in raised.value.message


# --- GKE answers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "rpc_status"),
    [
        pytest.param(403, "PERMISSION_DENIED", id="permission-denied"),
        pytest.param(404, "NOT_FOUND", id="no-such-cluster"),
    ],
)
def test_a_gke_refusal_is_a_cluster_access_error_naming_the_cluster(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient, status: int, rpc_status: str
) -> None:
    gke_api.errors[CLUSTER] = (status, rpc_status)

    with pytest.raises(ClusterAccessError, match=f"cannot read cluster {CLUSTER} from GKE: {status} ") as raised:
        gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)
    assert raised.value.__cause__ is not None


def test_reads_the_autoscaling_settings_of_every_node_pool(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(
        dns_endpoint=ENABLED_DNS_ENDPOINT,
        node_pools=[
            {
                "name": "default-pool",
                "autoscaling": {"enabled": True, "minNodeCount": 1, "maxNodeCount": 10},
                "locations": ["europe-west1-b", "europe-west1-c"],
                "config": {"machineType": "e2-standard-4", "labels": {"team": "web"}},
            },
            {
                "name": "batch",
                "autoscaling": {"enabled": True, "totalMinNodeCount": 3, "totalMaxNodeCount": 30},
                "locations": ["europe-west1-b"],
                "config": {
                    "machineType": "n2d-standard-8",
                    "spot": True,
                    "taints": [{"key": "dedicated", "value": "batch", "effect": "NO_SCHEDULE"}],
                },
            },
            {"name": "fixed"},
        ],
    )

    connection = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)

    assert dict(connection.pool_autoscaling) == {
        "default-pool": PoolAutoscaling(
            enabled=True,
            min_node_count=1,
            total_min_node_count=0,
            max_node_count=10,
            zones=2,
            machine_type="e2-standard-4",
            labels={"team": "web"},
            locations=("europe-west1-b", "europe-west1-c"),
        ),
        "batch": PoolAutoscaling(
            enabled=True,
            min_node_count=0,
            total_min_node_count=3,
            total_max_node_count=30,
            zones=1,
            machine_type="n2d-standard-8",
            spot=True,
            taints=(Taint("dedicated", "batch", "NoSchedule"),),
            locations=("europe-west1-b",),
        ),
        "fixed": PoolAutoscaling(enabled=False, min_node_count=0, total_min_node_count=0),
    }
    # What a replacement asks of a target pool: may it grow by one node?
    assert connection.pool_autoscaling["default-pool"].can_grow(19)
    assert not connection.pool_autoscaling["default-pool"].can_grow(20)
    assert not connection.pool_autoscaling["batch"].can_grow(30)
    assert not connection.pool_autoscaling["fixed"].can_grow(0)


def test_reads_each_pools_consolidation_delay_max_pods_and_the_clusters_default_compute_class(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    body = cluster_json(
        dns_endpoint=ENABLED_DNS_ENDPOINT,
        node_pools=[
            {"name": "quick", "config": {"consolidationDelay": "120s"}, "maxPodsConstraint": {"maxPodsPerNode": "32"}},
            {"name": "at-once", "config": {"consolidationDelay": "0s"}},
            {"name": "profile", "config": {"machineType": "e2-standard-4"}},
        ],
    )
    body["autoscaling"] = {"defaultComputeClassConfig": {"enabled": True}}
    body["defaultMaxPodsConstraint"] = {"maxPodsPerNode": "110"}
    gke_api.clusters[CLUSTER] = body

    pools = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager).pool_autoscaling

    assert pools["quick"].consolidation_delay_seconds == 120
    assert pools["at-once"].consolidation_delay_seconds == 0, "a zero delay is set, not absent"
    assert pools["profile"].consolidation_delay_seconds is None, "absent: the autoscaling profile's delay"
    assert (pools["quick"].max_pods_per_node, pools["profile"].max_pods_per_node) == (32, 110)
    assert all(pool.default_compute_class for pool in pools.values())


def test_the_default_compute_class_is_off_unless_the_cluster_turns_it_on(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(dns_endpoint=ENABLED_DNS_ENDPOINT)

    pools = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager).pool_autoscaling

    assert not pools["default-pool"].default_compute_class
    assert pools["default-pool"].max_pods_per_node == 0, "not known"
    assert not pools["default-pool"].creates_pools


def test_reads_whether_the_cluster_creates_node_pools(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    # Replacement's machineTypes are used only where node auto-provisioning is on.
    body = cluster_json(dns_endpoint=ENABLED_DNS_ENDPOINT)
    body["autoscaling"] = {"enableNodeAutoprovisioning": True}
    gke_api.clusters[CLUSTER] = body

    pools = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager).pool_autoscaling

    assert pools["default-pool"].creates_pools


# --- cache -----------------------------------------------------------------------------------------------------------


def test_reads_the_cluster_from_gke_once_while_the_description_is_cached(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(dns_endpoint=ENABLED_DNS_ENDPOINT)

    first = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)
    second = gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)

    assert gke_api.requested == [CLUSTER]
    assert second.api_client.configuration.host == first.api_client.configuration.host
    assert second.api_client is not first.api_client


def test_reads_the_cluster_again_once_the_cached_description_is_too_old(
    gke_api: GkeApi, cluster_manager: container_v1.ClusterManagerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    gke_api.clusters[CLUSTER] = cluster_json(dns_endpoint=ENABLED_DNS_ENDPOINT)
    monkeypatch.setattr(gke, "CACHE_SECONDS", 0.0)

    gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)
    gke.connect(CLUSTER, credentials=CountingCredentials(), cluster_manager=cluster_manager)

    assert gke_api.requested == [CLUSTER, CLUSTER]
