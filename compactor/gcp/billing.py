"""Today's Compute Engine prices from the Cloud Billing Catalog API, as a `pricing.PriceTable`.

Lists every SKU of the Compute Engine service (`services/6F81-5844-456A`, paged) and keeps the per-vCPU and
per-GiB hourly rates of predefined machines: category.resourceFamily "Compute", usageType "OnDemand" or
"Preemptible" (Spot), descriptions such as "E2 Instance Core running in Americas", "N1 Predefined Instance Ram
running in Belgium" or "Spot Preemptible N2D AMD Instance Ram running in Tokyo", unit "h" (vCPU) or "GiBy.h"
(memory), one rate per region the SKU's serviceRegions names. GPU SKUs (resourceGroup "GPU", "Nvidia Tesla T4 GPU
running in Belgium", "Nvidia L4 GPU attached to Spot Preemptible VMs running in Tokyo", unit "h") give a rate per
GPU-hour under the accelerator's GKE name (`GPU_NAMES`); a GPU not named there is skipped and counted. Everything
else (custom, sole-tenant, commitments, extended memory, virtual workstations, disks, licences, network) is
skipped and counted. `table_from_skus` does that mapping on
the SKUs as the REST API writes them (camelCase JSON), with no I/O; `read_catalog` fetches them.

The client speaks REST (`transport="rest"`) with google-auth's default credentials; COMPACTOR_BILLING_ENDPOINT
points it elsewhere (a Private Service Connect name, or a local stand-in over http:// on loopback only, so a
token never crosses a network in clear). Must never: write anything anywhere, or guess a price it did not read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

import google.auth.exceptions
import requests
from google.api_core import exceptions as api_exceptions
from google.cloud import billing_v1

from compactor.core.prices import pricing
from compactor.errors import BadInputError, ClusterAccessError

if TYPE_CHECKING:
    import google.auth.credentials

SERVICE = "services/6F81-5844-456A"  # Compute Engine
SOURCE = "Cloud Billing Catalog API, service 6F81-5844-456A"
ENV_ENDPOINT = "COMPACTOR_BILLING_ENDPOINT"
DEFAULT_ENDPOINT = "cloudbilling.googleapis.com"
# The API's largest page: the Compute Engine service has tens of thousands of SKUs, so a handful of pages.
PAGE_SIZE = 5000
TIMEOUT_SECONDS = 60.0
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

# "E2 Instance Core running in Americas", "Spot Preemptible N2D AMD Instance Ram running in Belgium",
# "N1 Predefined Instance Core running in Iowa", "C4A Arm Instance Core running in Netherlands". Older Spot SKUs
# say "Preemptible" alone.
_DESCRIPTION = re.compile(
    r"(?P<spot>(?:Spot )?Preemptible )?(?P<series>[A-Z][A-Z0-9]{1,5})(?: (?:AMD|Arm|Intel))?(?: Predefined)?"
    r" Instance (?P<resource>Core|Ram) running in (?P<place>.+)"
)
# "Nvidia Tesla T4 GPU running in Belgium"; Spot: "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in
# Belgium" (older Spot SKUs: "Preemptible Nvidia Tesla T4 GPU running in ...").
_GPU_DESCRIPTION = re.compile(
    r"(?P<older_spot>Preemptible )?(?P<gpu>.+?) GPU(?P<spot> attached to Spot Preemptible VMs)?"
    r" running in (?P<place>.+)"
)
# The catalog's GPU name -> the accelerator as GKE labels a node (cloud.google.com/gke-accelerator) and as
# `gcloud container node-pools create --accelerator type=...` takes it. Only these are read: a new or renamed GPU
# (and the "Virtual Workstation" SKUs, which add a licence) is skipped and counted until it is added here.
GPU_NAMES: Mapping[str, str] = {
    "Nvidia Tesla K80": "nvidia-tesla-k80",
    "Nvidia Tesla P4": "nvidia-tesla-p4",
    "Nvidia Tesla P100": "nvidia-tesla-p100",
    "Nvidia Tesla V100": "nvidia-tesla-v100",
    "Nvidia Tesla T4": "nvidia-tesla-t4",
    "Nvidia Tesla A100": "nvidia-tesla-a100",
    "Nvidia A100 80GB": "nvidia-a100-80gb",
    "Nvidia L4": "nvidia-l4",
    "Nvidia H100 80GB": "nvidia-h100-80gb",
    "Nvidia H100 80GB Mega": "nvidia-h100-mega-80gb",
}
GPU = "GPU"  # the resource of a GPU rate, beside "Core" and "Ram"
_UNITS = {"Core": "h", "Ram": "GiBy.h", GPU: "h"}
_USAGE_MODELS = {"OnDemand": pricing.ON_DEMAND, "Preemptible": pricing.SPOT}


class Rate(NamedTuple):
    """One SKU's rate: per vCPU-hour ("Core") or GiB-hour ("Ram") of a machine family, or per GPU-hour ("GPU") of
    an accelerator (`family` is then its GKE name, nvidia-tesla-t4)."""

    family: str
    model: str  # ON_DEMAND or SPOT
    resource: str  # "Core", "Ram" or GPU
    regions: tuple[str, ...]
    price: float


@dataclass(frozen=True)
class CatalogReading:
    """A price table read from the catalog, and what was left out of it."""

    table: pricing.PriceTable
    skus: int  # SKUs listed
    used: int  # SKUs that gave a rate
    skipped: Mapping[str, int] = field(default_factory=dict)  # why -> how many SKUs
    # family/region/model with a vCPU rate but no memory rate (or the other way round): not in the table.
    incomplete: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for a person: what was read and what was skipped."""
        families = sorted({family for family, _, _ in self.table.rates})
        regions = {region for _, region, _ in self.table.rates}
        accelerators = {accelerator for accelerator, _, _ in self.table.gpus}
        reasons = ", ".join(f"{count} {why}" for why, count in sorted(self.skipped.items(), key=lambda i: -i[1]))
        line = (
            f"read {self.skus} SKUs: {len(self.table.rates)} rates for {len(families)} machine families in "
            f"{len(regions)} regions, {len(self.table.gpus)} GPU rates for {len(accelerators)} accelerators, from "
            f"{self.used} SKUs; skipped {sum(self.skipped.values())} ({reasons or 'none'})"
        )
        if self.incomplete:
            line += f"; left out (vCPU or memory rate missing): {', '.join(self.incomplete)}"
        return line


def table_from_skus(skus: Iterable[Mapping[str, Any]], *, as_of: str, currency: str) -> CatalogReading:
    """The price table in Compute Engine SKUs as the REST API lists them (camelCase JSON objects)."""
    found: dict[tuple[str, str, str], dict[str, float]] = {}
    gpus: dict[tuple[str, str, str], float] = {}
    skipped: Counter[str] = Counter()
    listed = used = 0
    for sku in skus:
        listed += 1
        rate = classify(sku, currency=currency)
        if isinstance(rate, str):
            skipped[rate] += 1
            continue
        family, model, resource, regions, price = rate
        clashed = False
        for region in regions:
            if resource == GPU:
                clashed = gpus.setdefault((family, region, model), price) != price or clashed
                continue
            rates = found.setdefault((family, region, model), {})
            if rates.setdefault(resource, price) != price:
                clashed = True
        if clashed:
            skipped["another price for a rate already read"] += 1
        else:
            used += 1
    table: dict[tuple[str, str, str], pricing.Rates] = {}
    incomplete: list[str] = []
    for key, rates in sorted(found.items()):
        if "Core" in rates and "Ram" in rates:
            table[key] = pricing.Rates(vcpu_hour=rates["Core"], gib_hour=rates["Ram"])
        else:
            incomplete.append("/".join(key))
    return CatalogReading(
        table=pricing.PriceTable(as_of=as_of, source=SOURCE, currency=currency, rates=table, gpus=gpus),
        skus=listed,
        used=used,
        skipped=dict(skipped),
        incomplete=tuple(incomplete),
    )


def classify(sku: Mapping[str, Any], *, currency: str) -> Rate | str:
    """The rate of a predefined machine's vCPU or memory SKU, or of a GPU's; otherwise why it is skipped."""
    category = _mapping(sku.get("category"))
    description = str(sku.get("description") or "")
    usage = str(category.get("usageType") or "")
    if category.get("resourceFamily") != "Compute":
        return "not Compute (disks, network, licences, ...)"
    if usage.startswith("Commit"):
        return "commitment"
    if "Sole Tenancy" in description:
        return "sole tenancy"
    if "Custom" in description:
        return "custom machine type"
    if "Extended" in description:
        return "extended memory"
    if usage not in _USAGE_MODELS:
        return f"usage type {usage or 'missing'}"
    model = _USAGE_MODELS[usage]
    if category.get("resourceGroup") == GPU:
        gpu = _GPU_DESCRIPTION.fullmatch(description)
        if gpu is None or gpu["gpu"] not in GPU_NAMES:
            return "GPU without a GKE accelerator name here (new, or a virtual workstation)"
        if (gpu["spot"] is not None or gpu["older_spot"] is not None) != (model == pricing.SPOT):
            return "description and usage type disagree on Spot"
        family, resource = GPU_NAMES[gpu["gpu"]], GPU
    else:
        described = _DESCRIPTION.fullmatch(description)
        if described is None:
            return "not a predefined vCPU or memory rate (premium images, ...)"
        if (described["spot"] is not None) != (model == pricing.SPOT):
            return "description and usage type disagree on Spot"
        family, resource = described["series"].lower(), described["resource"]
    pricing_info = sku.get("pricingInfo") or []
    expression = _mapping(_mapping(pricing_info[0]).get("pricingExpression")) if pricing_info else {}
    if expression.get("usageUnit") != _UNITS[resource]:
        return "unexpected usage unit"
    regions = tuple(str(region) for region in sku.get("serviceRegions") or ())
    if not regions:
        return "no service region"
    price = _unit_price(expression, currency)
    if price is None:
        return f"no {currency} price"
    return Rate(family, model, resource, regions, price)


def _unit_price(expression: Mapping[str, Any], currency: str) -> float | None:
    """The first non-zero tier's unit price (a free first tier, as some SKUs have, is not the rate)."""
    for tier in expression.get("tieredRates") or ():
        price = _mapping(_mapping(tier).get("unitPrice"))
        if price.get("currencyCode", currency) != currency:
            return None
        try:
            value = int(price.get("units") or 0) + int(price.get("nanos") or 0) / 1e9
        except (TypeError, ValueError):
            return None
        if value > 0:
            return round(value, 9)
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def catalog_client(
    endpoint: str | None = None, credentials: google.auth.credentials.Credentials | None = None
) -> billing_v1.CloudCatalogClient:
    """A REST client of the Cloud Billing Catalog API; google-auth's default credentials unless given."""
    endpoint = endpoint or DEFAULT_ENDPOINT
    if endpoint.startswith("http://") and urlsplit(endpoint).hostname not in _LOOPBACK:
        raise BadInputError(
            f"{ENV_ENDPOINT}: {endpoint} is plain http:// to another machine; only loopback may be reached "
            "without TLS (credentials travel with each request)"
        )
    try:
        return billing_v1.CloudCatalogClient(
            credentials=credentials, transport="rest", client_options={"api_endpoint": endpoint}
        )
    except google.auth.exceptions.DefaultCredentialsError as error:
        raise ClusterAccessError(
            "no Google credentials to read the Cloud Billing Catalog API: run `gcloud auth application-default "
            f"login`, or set GOOGLE_APPLICATION_CREDENTIALS ({error})"
        ) from error


def read_catalog(
    *,
    as_of: str,
    currency: str = "USD",
    endpoint: str | None = None,
    credentials: google.auth.credentials.Credentials | None = None,
) -> CatalogReading:
    """Every Compute Engine SKU's price in `currency` today, as a price table dated `as_of`."""
    where = endpoint or DEFAULT_ENDPOINT
    request = billing_v1.ListSkusRequest(parent=SERVICE, currency_code=currency, page_size=PAGE_SIZE)
    try:
        with catalog_client(endpoint, credentials) as client:
            pages = client.list_skus(request=request, timeout=TIMEOUT_SECONDS)
            reading = table_from_skus(
                (billing_v1.Sku.to_dict(sku, preserving_proto_field_name=False) for sku in pages),
                as_of=as_of,
                currency=currency,
            )
    except api_exceptions.GoogleAPICallError as error:
        raise ClusterAccessError(_refusal(error, where)) from error
    except google.auth.exceptions.RefreshError as error:
        raise ClusterAccessError(f"cannot get an access token for the Cloud Billing Catalog API: {error}") from error
    except (requests.exceptions.RequestException, google.auth.exceptions.TransportError) as error:
        raise ClusterAccessError(f"cannot reach the Cloud Billing Catalog API at {where}: {error}") from error
    except google.auth.exceptions.GoogleAuthError as error:
        raise ClusterAccessError(f"the credentials for the Cloud Billing Catalog API do not work: {error}") from error
    if not reading.table.rates:
        raise ClusterAccessError(
            f"the Cloud Billing Catalog API at {where} listed {reading.skus} SKUs but no vCPU or memory rate in "
            f"{currency}: nothing to write"
        )
    return reading


def _refusal(error: api_exceptions.GoogleAPICallError, where: str) -> str:
    status = error.code
    said = error.message or str(error)
    if status == 403:
        return (
            f"the Cloud Billing Catalog API at {where} refused (403 {said}): enable cloudbilling.googleapis.com "
            "in the project of the credentials (or their quota project)"
        )
    if status == 401:
        return f"the Cloud Billing Catalog API at {where} did not accept the credentials (401 {said})"
    if status == 429:
        return f"the Cloud Billing Catalog API's quota is used up (429 {said}): try again in a minute"
    if status == 400:
        return f"the Cloud Billing Catalog API at {where} refused the request (400 {said}): is the currency right?"
    return f"the Cloud Billing Catalog API at {where} answered {status or 'an error'}: {said}"
