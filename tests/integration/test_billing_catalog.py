"""Reading prices from the Cloud Billing Catalog API: the real google-cloud-billing REST client against a local
stand-in that answers recorded pages (tests/data/billing), the SKU mapping on its own, and `prices --refresh`."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import google.auth.credentials
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from compactor import cli
from compactor.core.prices import pricing
from compactor.errors import BadInputError, ClusterAccessError
from compactor.gcp import billing

DATA = Path(__file__).resolve().parents[1] / "data" / "billing"
SKUS_PATH = "/v1/services/6F81-5844-456A/skus"
TOKEN = "catalog-test-token"
SERVICE_ACCOUNT = "prices@test-project.iam.gserviceaccount.com"
AS_OF = "2026-07-30"

# What the recorded pages price: (family, region, model) -> (vCPU-hour, GiB-hour).
RECORDED = {
    ("e2", "us-central1", "on-demand"): (0.02181159, 0.00292353),
    ("e2", "us-central1", "spot"): (0.01309, 0.001754),
    ("e2", "europe-west1", "on-demand"): (0.02399337, 0.00321609),
    ("e2", "europe-west1", "spot"): (0.01162, 0.001558),
    ("n2", "us-central1", "on-demand"): (0.031611, 0.004237),
    ("n2", "us-central1", "spot"): (0.01499, 0.00201),
    ("n2", "europe-west1", "on-demand"): (0.034773, 0.004661),
    ("n2", "europe-west1", "spot"): (0.00763, 0.001023),
}
# Per GPU-hour, (accelerator, region, model); made-up figures in the catalog's shape (tests/data/billing/README.md).
RECORDED_GPUS = {
    ("nvidia-tesla-t4", "us-central1", "on-demand"): 0.35,
    ("nvidia-tesla-t4", "us-central1", "spot"): 0.14,
    ("nvidia-l4", "europe-west1", "on-demand"): 0.62,
    ("nvidia-l4", "europe-west1", "spot"): 0.25,
}
SKIPPED = {
    "custom machine type": 1,
    "commitment": 1,
    "GPU without a GKE accelerator name here (new, or a virtual workstation)": 1,
    "not Compute (disks, network, licences, ...)": 2,
    "sole tenancy": 1,
    "extended memory": 1,
}


# --- the stand-in --------------------------------------------------------------------------------------------------


@dataclass
class Catalog:
    """`GET /v1/services/6F81-5844-456A/skus` answering the recorded pages by pageToken, and an OAuth token
    endpoint (`POST /token`), so that credentials whose token_uri points here never reach out either."""

    pages: dict[str, bytes] = field(default_factory=dict)  # pageToken ("" for the first) -> body
    # (HTTP status, google.rpc status, message) to answer every SKU list with instead.
    refusal: tuple[int, str, str] | None = None
    queries: list[dict[str, list[str]]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        catalog = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path != SKUS_PATH:
                    self._answer(404, {"error": {"code": 404, "message": "no such path", "status": "NOT_FOUND"}})
                    return
                query = parse_qs(url.query)
                catalog.queries.append(query)
                catalog.authorizations.append(self.headers.get("Authorization", ""))
                if catalog.refusal is not None:
                    status, rpc_status, message = catalog.refusal
                    self._answer(status, {"error": {"code": status, "message": message, "status": rpc_status}})
                    return
                token = query.get("pageToken", [""])[0]
                if token not in catalog.pages:
                    error = {"code": 400, "message": "bad page token", "status": "INVALID_ARGUMENT"}
                    self._answer(400, {"error": error})
                    return
                self._send(200, catalog.pages[token])

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/token":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                self._send(status, json.dumps(body).encode())

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def catalog() -> Iterator[Catalog]:
    stand_in = Catalog(
        pages={
            "": (DATA / "skus-page-1.json").read_bytes(),
            "page-2": (DATA / "skus-page-2.json").read_bytes(),
            "page-3": (DATA / "skus-page-3.json").read_bytes(),
        }
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), stand_in.handler())
    stand_in.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def anonymous() -> google.auth.credentials.Credentials:
    return google.auth.credentials.AnonymousCredentials()  # type: ignore[no-untyped-call]


def read(catalog: Catalog) -> billing.CatalogReading:
    return billing.read_catalog(as_of=AS_OF, endpoint=catalog.url, credentials=anonymous())


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def rates_of(table: pricing.PriceTable) -> dict[tuple[str, str, str], tuple[float, float]]:
    return {key: (rates.vcpu_hour, rates.gib_hour) for key, rates in table.rates.items()}


# --- reading the catalog -------------------------------------------------------------------------------------------


def test_the_catalog_gives_e2_and_n2_rates_on_demand_and_spot_in_both_regions(catalog: Catalog) -> None:
    reading = read(catalog)
    assert rates_of(reading.table) == RECORDED
    assert dict(reading.table.gpus) == RECORDED_GPUS
    assert reading.table.as_of == AS_OF
    assert reading.table.currency == "USD"
    assert reading.table.source == "Cloud Billing Catalog API, service 6F81-5844-456A"
    assert reading.incomplete == ()


def test_every_page_is_read_by_following_next_page_token(catalog: Catalog) -> None:
    read(catalog)
    assert [query.get("pageToken", [""])[0] for query in catalog.queries] == ["", "page-2", "page-3"]
    assert all(query["currencyCode"] == ["USD"] and query["pageSize"] == ["5000"] for query in catalog.queries)


def test_skus_that_are_no_predefined_vcpu_or_memory_rate_are_skipped_and_counted(catalog: Catalog) -> None:
    reading = read(catalog)
    assert reading.skus == 27
    assert reading.used == 20
    assert reading.skipped == SKIPPED
    assert (
        "read 27 SKUs: 8 rates for 2 machine families in 2 regions, 4 GPU rates for 2 accelerators, from 20 SKUs; "
        "skipped 7" in reading.summary()
    )


def test_the_recorded_prices_are_the_built_in_table_s(catalog: Catalog) -> None:
    # The recorded pages carry the built-in figures; rounded to the table's 6 decimals they agree.
    for key, rates in read(catalog).table.rates.items():
        built_in = pricing.BUILT_IN.rates[key]
        assert (round(rates.vcpu_hour, 6), round(rates.gib_hour, 6)) == (built_in.vcpu_hour, built_in.gib_hour), key


@pytest.mark.parametrize(
    ("status", "rpc_status", "expected"),
    [
        pytest.param(403, "PERMISSION_DENIED", "enable cloudbilling.googleapis.com", id="forbidden"),
        pytest.param(429, "RESOURCE_EXHAUSTED", "quota is used up", id="quota"),
        pytest.param(401, "UNAUTHENTICATED", "did not accept the credentials", id="unauthenticated"),
        pytest.param(400, "INVALID_ARGUMENT", "is the currency right?", id="bad-request"),
    ],
)
@pytest.mark.usefixtures("user_credentials")
def test_a_refusal_is_a_cluster_access_error_that_says_what_to_do(
    catalog: Catalog, status: int, rpc_status: str, expected: str
) -> None:
    catalog.refusal = (status, rpc_status, "refused by the stand-in")
    with pytest.raises(ClusterAccessError) as raised:
        billing.read_catalog(as_of=AS_OF, endpoint=catalog.url)  # google-auth's default credentials
    assert expected in raised.value.message
    assert "refused by the stand-in" in raised.value.message


def test_an_unreachable_catalog_is_a_cluster_access_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.raises(ClusterAccessError) as raised:
        billing.read_catalog(as_of=AS_OF, endpoint=endpoint, credentials=anonymous())
    assert raised.value.message.startswith(f"cannot reach the Cloud Billing Catalog API at {endpoint}: ")


def test_plain_http_to_another_machine_is_refused_before_any_request() -> None:
    with pytest.raises(BadInputError, match="only loopback may be reached without TLS"):
        billing.read_catalog(as_of=AS_OF, endpoint="http://203.0.113.7:8080", credentials=anonymous())


def test_a_catalog_with_no_vcpu_or_memory_rate_writes_nothing(catalog: Catalog) -> None:
    catalog.pages = {"": json.dumps({"skus": json.loads(catalog.pages[""])["skus"][4:]}).encode()}
    with pytest.raises(ClusterAccessError, match="listed 4 SKUs but no vCPU or memory rate in USD"):
        read(catalog)


# --- the SKU mapping, without HTTP ---------------------------------------------------------------------------------


def sku(description: str, *, usage: str = "OnDemand", unit: str = "h", **changes: Any) -> dict[str, Any]:
    price = changes.pop("price", {"currencyCode": "USD", "units": "0", "nanos": 21811590})
    tiers = changes.pop("tiers", [{"startUsageAmount": 0, "unitPrice": price}])
    return {
        "description": description,
        "category": {"resourceFamily": "Compute", "resourceGroup": "CPU", "usageType": usage},
        "serviceRegions": ["us-central1"],
        "pricingInfo": [{"pricingExpression": {"usageUnit": unit, "tieredRates": tiers}}],
        **changes,
    }


def gpu_sku(description: str, **changes: Any) -> dict[str, Any]:
    given = sku(description, **changes)
    given["category"]["resourceGroup"] = "GPU"
    return given


UNKNOWN_GPU = "GPU without a GKE accelerator name here (new, or a virtual workstation)"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(sku("E2 Instance Core running in Iowa"), ("e2", "on-demand", "Core"), id="e2-core"),
        pytest.param(
            sku("Spot Preemptible N2D AMD Instance Ram running in Belgium", usage="Preemptible", unit="GiBy.h"),
            ("n2d", "spot", "Ram"),
            id="n2d-spot-ram",
        ),
        pytest.param(sku("N1 Predefined Instance Core running in Iowa"), ("n1", "on-demand", "Core"), id="n1"),
        pytest.param(sku("C4A Arm Instance Core running in Iowa"), ("c4a", "on-demand", "Core"), id="arm"),
        pytest.param(
            sku("Preemptible E2 Instance Core running in Iowa", usage="Preemptible"),
            ("e2", "spot", "Core"),
            id="older-preemptible-wording",
        ),
    ],
)
def test_a_predefined_vcpu_or_memory_sku_gives_its_family_model_and_resource(
    given: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    rate = billing.classify(given, currency="USD")
    assert not isinstance(rate, str), rate
    assert rate[:3] == expected
    assert rate[3] == ("us-central1",)


# The catalog's GPU names and the accelerator each is on a GKE node (cloud.google.com/gke-accelerator).
GPU_LABELS = [
    ("Nvidia Tesla K80", "nvidia-tesla-k80"),
    ("Nvidia Tesla P4", "nvidia-tesla-p4"),
    ("Nvidia Tesla P100", "nvidia-tesla-p100"),
    ("Nvidia Tesla V100", "nvidia-tesla-v100"),
    ("Nvidia Tesla T4", "nvidia-tesla-t4"),
    ("Nvidia Tesla A100", "nvidia-tesla-a100"),
    ("Nvidia A100 80GB", "nvidia-a100-80gb"),
    ("Nvidia L4", "nvidia-l4"),
    ("Nvidia H100 80GB", "nvidia-h100-80gb"),
    ("Nvidia H100 80GB Mega", "nvidia-h100-mega-80gb"),
]


def test_the_gpu_names_read_are_exactly_these() -> None:
    assert dict(billing.GPU_NAMES) == dict(GPU_LABELS)


@pytest.mark.parametrize(("name", "accelerator"), [pytest.param(*pair, id=pair[1]) for pair in GPU_LABELS])
@pytest.mark.parametrize(
    ("wording", "usage", "model"),
    [
        pytest.param("{} GPU running in Belgium", "OnDemand", "on-demand", id="on-demand"),
        pytest.param("{} GPU attached to Spot Preemptible VMs running in Belgium", "Preemptible", "spot", id="spot"),
        pytest.param("Preemptible {} GPU running in Belgium", "Preemptible", "spot", id="older-preemptible"),
    ],
)
def test_a_gpu_sku_gives_a_rate_per_gpu_hour_under_its_gke_accelerator_name(
    name: str, accelerator: str, wording: str, usage: str, model: str
) -> None:
    given = gpu_sku(wording.format(name), usage=usage, serviceRegions=["europe-west1"])
    assert billing.classify(given, currency="USD") == billing.Rate(
        accelerator, model, billing.GPU, ("europe-west1",), 0.02181159
    )


def test_gpu_rates_go_beside_the_machine_rates_and_a_second_price_is_counted() -> None:
    skus = [
        sku("E2 Instance Core running in Iowa"),
        sku("E2 Instance Ram running in Iowa", unit="GiBy.h"),
        gpu_sku("Nvidia Tesla T4 GPU running in Americas", serviceRegions=["us-central1", "us-east1"]),
        gpu_sku("Nvidia Tesla T4 GPU running in Iowa", price={"currencyCode": "USD", "nanos": 99}),
    ]
    reading = billing.table_from_skus(skus, as_of=AS_OF, currency="USD")
    assert dict(reading.table.gpus) == {
        ("nvidia-tesla-t4", "us-central1", "on-demand"): 0.02181159,
        ("nvidia-tesla-t4", "us-east1", "on-demand"): 0.02181159,
    }
    assert reading.skipped == {"another price for a rate already read": 1}
    assert reading.incomplete == ()


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        pytest.param(sku("N2 Custom Instance Core running in Iowa"), "custom machine type", id="custom"),
        pytest.param(sku("Custom Instance Ram running in Iowa", unit="GiBy.h"), "custom machine type", id="n1-custom"),
        pytest.param(sku("Commitment v1: N2 Cpu in Iowa for 3 Year", usage="Commit3Yr"), "commitment", id="commit"),
        pytest.param(sku("Sole Tenancy Instance Ram running in Iowa", unit="GiBy.h"), "sole tenancy", id="sole"),
        pytest.param(sku("N2 Extended Instance Ram running in Iowa", unit="GiBy.h"), "extended memory", id="extended"),
        pytest.param(
            sku("E2 Instance Core running in Iowa", usage="Preemptible"),
            "description and usage type disagree on Spot",
            id="spot-mismatch",
        ),
        pytest.param(sku("E2 Instance Core running in Iowa", unit="GiBy.h"), "unexpected usage unit", id="unit"),
        pytest.param(sku("E2 Instance Core running in Iowa", serviceRegions=[]), "no service region", id="region"),
        pytest.param(
            sku("E2 Instance Core running in Iowa", price={"currencyCode": "EUR", "units": "0", "nanos": 2}),
            "no USD price",
            id="other-currency",
        ),
        pytest.param(sku("E2 Instance Core running in Iowa", price={"currencyCode": "USD"}), "no USD price", id="free"),
        pytest.param(
            sku("E2 Instance Core running in Iowa", usage="OnDemandSharedCore"),
            "usage type OnDemandSharedCore",
            id="usage",
        ),
        pytest.param(
            sku("Memory-optimized Instance Core running in Iowa"),
            "not a predefined vCPU or memory rate (premium images, ...)",
            id="unnamed-series",
        ),
        pytest.param(gpu_sku("Nvidia Tesla X9 GPU running in Iowa"), UNKNOWN_GPU, id="unknown-gpu"),
        pytest.param(
            gpu_sku("Nvidia Tesla T4 Virtual Workstation GPU running in Iowa"), UNKNOWN_GPU, id="virtual-workstation"
        ),
        pytest.param(gpu_sku("Nvidia L4 GPU in Iowa"), UNKNOWN_GPU, id="gpu-description-of-another-shape"),
        pytest.param(
            gpu_sku("Nvidia L4 GPU running in Iowa", usage="Preemptible"),
            "description and usage type disagree on Spot",
            id="gpu-spot-mismatch",
        ),
        pytest.param(
            gpu_sku("Commitment v1: Nvidia L4 GPU running in Iowa for 1 Year", usage="Commit1Yr"),
            "commitment",
            id="gpu-commitment",
        ),
        pytest.param(gpu_sku("Nvidia L4 GPU running in Iowa", unit="GiBy.h"), "unexpected usage unit", id="gpu-unit"),
    ],
)
def test_a_sku_that_is_no_predefined_rate_says_why(given: dict[str, Any], reason: str) -> None:
    assert billing.classify(given, currency="USD") == reason


def test_the_rate_is_the_first_tier_that_is_not_free_with_units_and_nanos_added() -> None:
    tiers = [
        {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD"}},
        {"startUsageAmount": 720, "unitPrice": {"currencyCode": "USD", "units": "1", "nanos": 500000000}},
        {"startUsageAmount": 1440, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 100}},
    ]
    rate = billing.classify(sku("E2 Instance Core running in Iowa", tiers=tiers), currency="USD")
    assert not isinstance(rate, str)
    assert rate[4] == 1.5


def test_a_sku_for_several_regions_prices_each_and_a_rate_without_its_pair_is_left_out() -> None:
    skus = [
        sku("E2 Instance Core running in Americas", serviceRegions=["us-central1", "us-east1"]),
        sku("E2 Instance Ram running in Iowa", unit="GiBy.h", price={"currencyCode": "USD", "nanos": 2923530}),
    ]
    reading = billing.table_from_skus(skus, as_of=AS_OF, currency="USD")
    assert rates_of(reading.table) == {("e2", "us-central1", "on-demand"): (0.02181159, 0.00292353)}
    assert reading.incomplete == ("e2/us-east1/on-demand",)


def test_a_second_price_for_the_same_rate_keeps_the_first_and_is_counted() -> None:
    skus = [
        sku("E2 Instance Core running in Iowa"),
        sku("E2 Instance Core running in Iowa", price={"currencyCode": "USD", "nanos": 99}),
        sku("E2 Instance Ram running in Iowa", unit="GiBy.h"),
    ]
    reading = billing.table_from_skus(skus, as_of=AS_OF, currency="USD")
    assert reading.table.rates[("e2", "us-central1", "on-demand")].vcpu_hour == 0.02181159
    assert reading.skipped == {"another price for a rate already read": 1}


# --- python -m compactor prices --refresh ------------------------------------------------------------------------


@pytest.fixture
def user_credentials(catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """google-auth's default credentials: a service account key of our own making (GOOGLE_APPLICATION_CREDENTIALS)
    whose token endpoint is the stand-in's, and the stand-in as COMPACTOR_BILLING_ENDPOINT."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    account = {
        "type": "service_account",
        "project_id": "test-project",
        "private_key_id": "test-key",
        "private_key": pem,
        "client_email": SERVICE_ACCOUNT,
        "client_id": "1",
        "token_uri": f"{catalog.url}/token",
    }
    path = tmp_path / "service-account.json"
    path.write_text(json.dumps(account))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv(billing.ENV_ENDPOINT, catalog.url)


@pytest.mark.usefixtures("user_credentials")
def test_the_prices_command_writes_a_price_file_that_reads_back(
    catalog: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "prices.json"
    code = cli.main(["prices", "--refresh", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = pricing.parse_price_file(out.read_bytes(), source=str(out))
    assert rates_of(table) == {key: (round(cpu, 6), round(memory, 6)) for key, (cpu, memory) in RECORDED.items()}
    assert dict(table.gpus) == RECORDED_GPUS
    assert table.source == billing.SOURCE
    assert "read 27 SKUs" in captured.err and f"wrote {out}" in captured.err
    assert captured.out == ""
    # The service account's own signed JWT (google-auth's self-signed JWT access) on every page.
    [authorization] = set(catalog.authorizations)
    assert len(catalog.authorizations) == 3
    assert jwt_claims(authorization.removeprefix("Bearer "))["iss"] == SERVICE_ACCOUNT
    price = pricing.node_price(table, machine_type="n2-standard-4", region="europe-west1", spot=True)
    assert price == round(4 * 0.00763 + 16 * 0.001023, 6)


@pytest.mark.usefixtures("user_credentials")
def test_the_prices_command_exits_1_and_writes_nothing_when_the_catalog_refuses(
    catalog: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog.refusal = (403, "PERMISSION_DENIED", "Cloud Billing API has not been used in project 123")
    out = tmp_path / "prices.json"
    code = cli.main(["prices", "--refresh", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: the Cloud Billing Catalog API at http://127.0.0.1")
    assert "403" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["prices", "--refresh"], "give --out FILE", id="no-out"),
        pytest.param(["prices", "--refresh", "--out", "x.json", "--currency", "usd"], "not an ISO 4217", id="currency"),
        pytest.param(["prices", "--out", "x.json"], "go with --refresh", id="out-without-refresh"),
    ],
)
def test_the_prices_command_exits_2_for_arguments_that_do_not_fit(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(args)
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err
    assert captured.out == ""
