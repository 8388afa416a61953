"""What a node costs per hour: its machine type's vCPUs and GiB times its family's rates in its region, on-demand or
Spot, plus each GPU at its accelerator's rate there (the GPUs an accelerator-optimized type such as g2-standard-4
comes with, or those attached to another), from a dated `PriceTable` (the built-in one, or a price file written by
`python -m compactor prices --refresh`). Also the price file format itself: a strict reader and its writer
(docs/prices.md).

Prices are money, not scheduling quantities: floats in the table's currency per hour, rounded to 6 decimals in
files. Must never: read a file, the network or the clock (the caller hands in the bytes and the date), or guess a
price: an unknown machine type, family or region is None, and the caller says so.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import orjson

from compactor.core.prices import price_table
from compactor.errors import ConfigError

T = TypeVar("T")

ON_DEMAND = "on-demand"
SPOT = "spot"
MODELS = (ON_DEMAND, SPOT)

# A price file is a few thousand rates (tens of KiB); anything near this is not one.
MAX_FILE_BYTES = 8 << 20
# No machine family lists anywhere near 100 USD for one vCPU or one GiB for an hour (the dearest are cents), nor
# does Compute Engine for one GPU (the dearest cost tens of dollars an hour at most).
MAX_USD_RATE = 100.0

# Custom machine types bill "Custom Instance Core/Ram" SKUs, 5% above the predefined rates: GKE's Cluster
# Autoscaler table (deprecated_machine_types_config.go, commit 7d250507) gives custom/predefined rate ratios of
# 1.049 to 1.050 for e2, n1, n2 and n2d, on-demand and preemptible alike. Other families' custom types: unknown.
CUSTOM_PREMIUM = 1.05
_CUSTOM_FAMILIES = frozenset({"e2", "n1", "n2", "n2d"})

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"
BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
BETA_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"
# GKE labels every node with its machine family (e2, n2, ...): what a nodeSelector selects to make GKE create a pool
# of that family (cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning).
MACHINE_FAMILY_LABEL = "cloud.google.com/machine-family"
SPOT_LABEL = "cloud.google.com/gke-spot"
PROVISIONING_LABEL = "cloud.google.com/gke-provisioning"
PREEMPTIBLE_LABEL = "cloud.google.com/gke-preemptible"
# The GPU type of a GKE node (nvidia-tesla-t4); its count is the node's nvidia.com/gpu.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Rates:
    """What one vCPU and one GiB of memory cost for an hour, in the table's currency."""

    vcpu_hour: float
    gib_hour: float


@dataclass(frozen=True)
class PriceTable:
    """Rates per (machine family, region, ON_DEMAND or SPOT), with where and when they were read."""

    as_of: str  # ISO date the prices were read
    source: str  # where from: a URL, or "Cloud Billing Catalog API, service 6F81-5844-456A"
    currency: str  # ISO 4217, "USD"
    rates: Mapping[tuple[str, str, str], Rates]
    # Per GPU-hour, by (accelerator as GKE labels it: nvidia-tesla-t4, region, ON_DEMAND or SPOT). Billed on top
    # of the machine's vCPUs and memory.
    gpus: Mapping[tuple[str, str, str], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Shared by every run in the process (BUILT_IN): nobody may change it under another.
        object.__setattr__(self, "rates", MappingProxyType(dict(self.rates)))
        object.__setattr__(self, "gpus", MappingProxyType(dict(self.gpus)))


# --- machine types ---------------------------------------------------------------------------------------------

# Predefined machine types, "family-class" -> (GiB per vCPU, the vCPU counts sold), as the Compute Engine
# machine types list them (the `cpu` and `ram` of every type in the pricing.yml that price_table.py names, which
# agree with GKE's lists in machinetypes/deprecated_machine_types_config.go). The -lssd types (their Local SSD is
# billed apart) and bare-metal types are left out: their price would be short of the bill.
_SERIES: dict[str, tuple[float, tuple[int, ...]]] = {
    "e2-standard": (4, (2, 4, 8, 16, 32)),
    "e2-highmem": (8, (2, 4, 8, 16)),
    "e2-highcpu": (1, (2, 4, 8, 16, 32)),
    "n1-standard": (3.75, (1, 2, 4, 8, 16, 32, 64, 96)),
    "n1-highmem": (6.5, (2, 4, 8, 16, 32, 64, 96)),
    "n1-highcpu": (0.9, (2, 4, 8, 16, 32, 64, 96)),
    "n2-standard": (4, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)),
    "n2-highmem": (8, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "n2-highcpu": (1, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "n2d-standard": (4, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)),
    "n2d-highmem": (8, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "n2d-highcpu": (1, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)),
    "n4-standard": (4, (2, 4, 8, 16, 32, 48, 64, 80)),
    "n4-highmem": (8, (2, 4, 8, 16, 32, 48, 64, 80)),
    "n4-highcpu": (2, (2, 4, 8, 16, 32, 48, 64, 80)),
    "n4d-standard": (4, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "n4d-highmem": (8, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "n4d-highcpu": (2, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "c2d-standard": (4, (2, 4, 8, 16, 32, 56, 112)),
    "c2d-highmem": (8, (2, 4, 8, 16, 32, 56, 112)),
    "c2d-highcpu": (2, (2, 4, 8, 16, 32, 56, 112)),
    "c3-standard": (4, (4, 8, 22, 44, 88, 176)),
    "c3-highmem": (8, (4, 8, 22, 44, 88, 176)),
    "c3-highcpu": (2, (4, 8, 22, 44, 88, 176)),
    "c3d-standard": (4, (4, 8, 16, 30, 60, 90, 180, 360)),
    "c3d-highmem": (8, (4, 8, 16, 30, 60, 90, 180, 360)),
    "c3d-highcpu": (2, (4, 8, 16)),
    "c4-standard": (3.75, (4, 8, 16, 24, 32, 48, 96, 144, 192, 288)),
    "c4-highmem": (7.75, (4, 8, 16, 24, 32, 48, 96, 144, 192, 288)),
    "c4-highcpu": (2, (2, 4, 8, 16, 24, 32, 48, 96, 144, 192, 288)),
    "t2d-standard": (4, (1, 2, 4, 8, 16, 32, 48, 60)),
}
# Predefined types off their series' ratio: (vCPUs, GiB).
_ODD_SHAPES: dict[str, tuple[float, float]] = {
    # E2 shared-core types show 2 vCPUs to the guest but are billed for a fraction of one: 0.25 (micro), 0.5
    # (small) and 1 (medium), with 1, 2 and 4 GiB at the E2 rates (GKE's table bills e2-medium as 1 vCPU + 4 GiB;
    # the pricing.yml above lists cpu 0.25 / 0.5 / 1 for them). machine_shape gives the billed vCPUs.
    "e2-micro": (0.25, 1),
    "e2-small": (0.5, 2),
    "e2-medium": (1, 4),
    "n2-highmem-128": (128, 864),
    "c3d-highcpu-30": (30, 59),
    "c3d-highcpu-60": (60, 118),
    "c3d-highcpu-90": (90, 177),
    "c3d-highcpu-180": (180, 354),
    "c3d-highcpu-360": (360, 708),
    "c4-standard-2": (2, 7),
    "c4-highmem-2": (2, 15),
}
# Accelerator-optimized types come with their GPUs: name -> (vCPUs, GiB, the accelerator as GKE labels it, GPUs),
# the `cpu`, `ram` and GPU count of each in the same pricing.yml (GKE's Cluster Autoscaler lists the same shapes and
# GPUs in deprecated_machine_types_config.go). g4-standard-6, -12 and -24 come with a share of one RTX PRO 6000 (a
# vGPU; GKE names and counts it as a whole one on the node). a2-ultragpu and a3 come with Local SSD, billed with them:
# their GPUs' rates in price_table.py include it.
_WITH_GPUS: dict[str, tuple[float, float, str, float]] = {
    "a2-highgpu-1g": (12, 85, "nvidia-tesla-a100", 1),
    "a2-highgpu-2g": (24, 170, "nvidia-tesla-a100", 2),
    "a2-highgpu-4g": (48, 340, "nvidia-tesla-a100", 4),
    "a2-highgpu-8g": (96, 680, "nvidia-tesla-a100", 8),
    "a2-megagpu-16g": (96, 1360, "nvidia-tesla-a100", 16),
    "a2-ultragpu-1g": (12, 170, "nvidia-a100-80gb", 1),
    "a2-ultragpu-2g": (24, 340, "nvidia-a100-80gb", 2),
    "a2-ultragpu-4g": (48, 680, "nvidia-a100-80gb", 4),
    "a2-ultragpu-8g": (96, 1360, "nvidia-a100-80gb", 8),
    "a3-highgpu-1g": (26, 234, "nvidia-h100-80gb", 1),
    "a3-highgpu-2g": (52, 468, "nvidia-h100-80gb", 2),
    "a3-highgpu-4g": (104, 936, "nvidia-h100-80gb", 4),
    "a3-highgpu-8g": (208, 1872, "nvidia-h100-80gb", 8),
    "a3-megagpu-8g": (208, 1872, "nvidia-h100-mega-80gb", 8),
    "g2-standard-4": (4, 16, "nvidia-l4", 1),
    "g2-standard-8": (8, 32, "nvidia-l4", 1),
    "g2-standard-12": (12, 48, "nvidia-l4", 1),
    "g2-standard-16": (16, 64, "nvidia-l4", 1),
    "g2-standard-24": (24, 96, "nvidia-l4", 2),
    "g2-standard-32": (32, 128, "nvidia-l4", 1),
    "g2-standard-48": (48, 192, "nvidia-l4", 4),
    "g2-standard-96": (96, 384, "nvidia-l4", 8),
    "g4-standard-6": (6, 22, "nvidia-rtx-pro-6000", 0.125),
    "g4-standard-12": (12, 45, "nvidia-rtx-pro-6000", 0.25),
    "g4-standard-24": (24, 90, "nvidia-rtx-pro-6000", 0.5),
    "g4-standard-48": (48, 180, "nvidia-rtx-pro-6000", 1),
    "g4-standard-96": (96, 360, "nvidia-rtx-pro-6000", 2),
    "g4-standard-192": (192, 720, "nvidia-rtx-pro-6000", 4),
    "g4-standard-384": (384, 1440, "nvidia-rtx-pro-6000", 8),
}
_PREDEFINED: dict[str, tuple[float, float]] = {
    **{f"{series}-{vcpus}": (vcpus, ratio * vcpus) for series, (ratio, sizes) in _SERIES.items() for vcpus in sizes},
    **_ODD_SHAPES,
    **{name: (vcpus, gib) for name, (vcpus, gib, _, _) in _WITH_GPUS.items()},
}
# custom-2-7680 (N1), n2-custom-4-16384, e2-custom-medium-4096; -ext (extended memory) is billed apart: unknown.
_CUSTOM = re.compile(
    r"(?:(?P<family>[a-z][a-z0-9]*)-)?custom-(?:(?P<vcpus>[1-9][0-9]{0,2})|(?P<shared>micro|small|medium))"
    r"-(?P<mib>[1-9][0-9]{0,7})"
)
_SHARED_CORE_VCPUS = {"micro": 0.25, "small": 0.5, "medium": 1.0}
# E2's shared-core types: billed for a fraction of a vCPU (`_ODD_SHAPES`), shown to the guest as 2.
SHARED_CORE = frozenset({"e2-micro", "e2-small", "e2-medium"})
# The accelerator-optimized types, which come with GPUs (`bundled_gpus`).
WITH_GPUS = frozenset(_WITH_GPUS)


def predefined_types() -> Mapping[str, tuple[float, float]]:
    """Every predefined machine type the table prices: name -> (billed vCPUs, GiB of memory)."""
    return MappingProxyType(_PREDEFINED)


def bundled_gpus(machine_type: str) -> tuple[str, float] | None:
    """The GPUs an accelerator-optimized machine type comes with: (the accelerator as GKE labels it, how many;
    a2-highgpu-2g's ("nvidia-tesla-a100", 2)); None for a machine type without them."""
    known = _WITH_GPUS.get(machine_type)
    return None if known is None else (known[2], known[3])


class _Shape(NamedTuple):
    family: str
    vcpus: float
    gib: float
    custom: bool


def machine_family(machine_type: str) -> str:
    """A predefined machine type's family, as GKE's machine-family label has it: e2-standard-4's e2."""
    return machine_type.split("-", 1)[0]


def _shape(machine_type: str) -> _Shape | None:
    known = _PREDEFINED.get(machine_type)
    if known is not None:
        return _Shape(machine_family(machine_type), float(known[0]), float(known[1]), custom=False)
    custom = _CUSTOM.fullmatch(machine_type)
    if custom is None:
        return None
    family = custom["family"] or "n1"  # "custom-2-7680" is N1's, the first family that had custom types
    if family not in _CUSTOM_FAMILIES or (custom["shared"] is not None and family != "e2"):
        return None
    vcpus = _SHARED_CORE_VCPUS[custom["shared"]] if custom["shared"] else float(custom["vcpus"])
    return _Shape(family, vcpus, int(custom["mib"]) / 1024, custom=True)


def machine_shape(machine_type: str) -> tuple[str, float, float] | None:
    """(family, billed vCPUs, memory GiB) of a predefined or custom machine type; None when unknown.

    E2 shared-core types give the vCPU fraction they are billed for (e2-micro 0.25), not the 2 the node shows.
    """
    shape = _shape(machine_type)
    return None if shape is None else (shape.family, shape.vcpus, shape.gib)


def node_price(table: PriceTable, *, machine_type: str, region: str, spot: bool) -> float | None:
    """What a node of this machine type costs per hour in the region, in the table's currency, the GPUs an
    accelerator-optimized type comes with included; None when the type, its family in that region and provisioning
    model, or the rate of the GPUs it comes with there, is unknown."""
    shape = _shape(machine_type)
    if shape is None:
        return None
    rates = table.rates.get((shape.family, region, SPOT if spot else ON_DEMAND))
    if rates is None:
        return None
    price = shape.vcpus * rates.vcpu_hour + shape.gib * rates.gib_hour
    bundled = bundled_gpus(machine_type)
    if bundled is not None:
        accelerator, gpus = bundled
        per_gpu = gpu_price(table, accelerator=accelerator, region=region, spot=spot)
        if per_gpu is None:  # the machine alone would look far cheaper than it is
            return None
        price += gpus * per_gpu
    return round(price * CUSTOM_PREMIUM if shape.custom else price, 6)


def gpu_price(table: PriceTable, *, accelerator: str, region: str, spot: bool) -> float | None:
    """What one GPU of this accelerator (nvidia-tesla-t4) costs per hour in the region, on top of its machine;
    None when the table has no rate for it there."""
    return table.gpus.get((accelerator, region, SPOT if spot else ON_DEMAND))


# --- node labels -----------------------------------------------------------------------------------------------


def region_of(labels: Mapping[str, str]) -> str | None:
    """The node's region: its region label, else its zone label less the zone letter (us-central1-a)."""
    for label in (REGION_LABEL, BETA_REGION_LABEL):
        if labels.get(label):
            return labels[label]
    for label in (ZONE_LABEL, BETA_ZONE_LABEL):
        region, dash, letter = (labels.get(label) or "").rpartition("-")
        if region and dash and letter:
            return region
    return None


def machine_type_of(labels: Mapping[str, str]) -> str | None:
    """The node's machine type (e2-standard-4) from its instance-type label."""
    return labels.get(INSTANCE_TYPE_LABEL) or labels.get(BETA_INSTANCE_TYPE_LABEL) or None


def accelerator_of(labels: Mapping[str, str]) -> str | None:
    """The node's GPU type as GKE labels it (nvidia-tesla-t4), or None."""
    return labels.get(ACCELERATOR_LABEL) or None


def is_spot(labels: Mapping[str, str]) -> bool:
    """Whether the node is billed at Spot rates: a Spot node, or a preemptible one. Preemptible VMs bill the same
    "Spot Preemptible ..." SKUs as Spot VMs (the Compute Engine SKU descriptions name both), so they count as Spot."""
    return (
        labels.get(SPOT_LABEL) == "true"
        or labels.get(PROVISIONING_LABEL) == "spot"
        or labels.get(PREEMPTIBLE_LABEL) == "true"
    )


# --- the price file --------------------------------------------------------------------------------------------

_FIELDS = ("asOf", "source", "currency", "rates", "gpus")
_REQUIRED = ("asOf", "source", "currency", "rates")  # `gpus` came later: files without it still load
_RATE_FIELDS = {"vcpuHour": "vcpu_hour", "gibHour": "gib_hour"}
_GPU_FIELDS = ("gpuHour",)
# A GKE accelerator label value: nvidia-tesla-t4, nvidia-l4, nvidia-h100-mega-80gb.
_ACCELERATOR = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+){0,7}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CURRENCY = re.compile(r"[A-Z]{3}")
_FAMILY = re.compile(r"[a-z][a-z0-9]{0,15}")
_REGION = re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}")
_MAX_SOURCE = 1000


class _Object(list[tuple[str, Any]]):
    """A JSON object as its key-value pairs in order, so a key given twice can still be seen (and named)."""


def parse_price_file(data: bytes, *, source: str) -> PriceTable:
    """The price table in a price file's bytes; `source` (its path, say) begins each message.

    Strict: raises ConfigError listing every problem, each with the path of its field (`rates.e2.us-central1.spot.
    vcpuHour: -1 is negative`): not JSON, wrong types, missing or unknown keys, a key given twice, a price that is
    not a finite number above 0, or above 100 per vCPU-hour, GiB-hour or GPU-hour in USD; a file over 8 MiB at
    once. `gpus` may be missing (files written before GPU rates were kept).
    """
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{source} is larger than {MAX_FILE_BYTES >> 20} MiB (is this the right price file?)")
    problems: list[str] = []
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=_Object, parse_constant=float)
    except UnicodeDecodeError as error:
        problems.append(f"not UTF-8 text (byte {error.start})")
    except json.JSONDecodeError as error:
        problems.append(f"not JSON: {error.msg} at line {error.lineno} column {error.colno}")
    except RecursionError:
        problems.append("not a price file: nested too deeply")
    else:
        table = _table(document, problems)
        if table is not None and not problems:
            return table
    raise ConfigError(
        f"{source} is not a valid price file ({len(problems)} problem(s))",
        problems=[f"{source}: {problem}" for problem in problems],
    )


def _table(document: Any, problems: list[str]) -> PriceTable | None:
    fields = _object(document, "the file", problems, allowed=_FIELDS, required=_REQUIRED)
    if fields is None:
        return None
    as_of = _text(fields, "asOf", problems, pattern=_DATE, example="2026-07-30")
    if as_of is not None:
        try:
            date.fromisoformat(as_of)
        except ValueError:
            problems.append(f"asOf: {as_of!r} is not a date")
    text = _text(fields, "source", problems)
    if text is not None and len(text) > _MAX_SOURCE:
        problems.append(f"source: longer than {_MAX_SOURCE} characters")
    currency = _text(fields, "currency", problems, pattern=_CURRENCY, example="USD")
    rates = _rates(fields["rates"], currency, problems) if "rates" in fields else None
    gpus = _gpus(fields["gpus"], currency, problems) if "gpus" in fields else {}
    if as_of is None or text is None or currency is None or rates is None or gpus is None:
        return None
    return PriceTable(as_of=as_of, source=text, currency=currency, rates=rates, gpus=gpus)


def _rates(value: Any, currency: str | None, problems: list[str]) -> dict[tuple[str, str, str], Rates] | None:
    return _by_region_and_model(
        value,
        "rates",
        _FAMILY,
        "is not a machine family (e2, n2d, ...)",
        lambda rate, path: _rate(rate, path, currency, problems),
        problems,
        empty="no prices at all",
    )


def _gpus(value: Any, currency: str | None, problems: list[str]) -> dict[tuple[str, str, str], float] | None:
    def gpu_hour(rate: Any, path: str) -> float | None:
        fields = _object(rate, path, problems, allowed=_GPU_FIELDS, required=_GPU_FIELDS)
        if fields is None or "gpuHour" not in fields:
            return None
        return _price(fields["gpuHour"], f"{path}.gpuHour", currency, problems, what="GPU")

    return _by_region_and_model(
        value, "gpus", _ACCELERATOR, "is not a GKE accelerator name (nvidia-tesla-t4, ...)", gpu_hour, problems
    )


def _by_region_and_model(
    value: Any,
    root: str,
    name_pattern: re.Pattern[str],
    not_a_name: str,
    read: Callable[[Any, str], T | None],
    problems: list[str],
    *,
    empty: str | None = None,
) -> dict[tuple[str, str, str], T] | None:
    """A price file's `root` object: name (a machine family or an accelerator) -> region -> provisioning model ->
    what `read` makes of the value there; every problem named by its path."""
    names = _object(value, root, problems)
    if names is None:
        return None
    if not names and empty is not None:
        problems.append(f"{root}: {empty}")
    found: dict[tuple[str, str, str], T] = {}
    for name, regions_value in names.items():
        path = f"{root}.{name}"
        if not name_pattern.fullmatch(name):
            problems.append(f"{path}: {name!r} {not_a_name}")
        regions = _object(regions_value, path, problems)
        if regions is None:
            continue
        if not regions:
            problems.append(f"{path}: no regions")
        for region, models_value in regions.items():
            region_path = f"{path}.{region}"
            if not _REGION.fullmatch(region):
                problems.append(f"{region_path}: {region!r} is not a region (us-central1, ...)")
            models = _object(models_value, region_path, problems, allowed=MODELS)
            if models is None:
                continue
            if not models:
                problems.append(f"{region_path}: neither {ON_DEMAND} nor {SPOT}")
            for model, rate_value in models.items():
                read_value = read(rate_value, f"{region_path}.{model}")
                if read_value is not None:
                    found[(name, region, model)] = read_value
    return found


def _rate(value: Any, path: str, currency: str | None, problems: list[str]) -> Rates | None:
    fields = _object(value, path, problems, allowed=tuple(_RATE_FIELDS), required=tuple(_RATE_FIELDS))
    if fields is None:
        return None
    prices: dict[str, float] = {}
    for key, name in _RATE_FIELDS.items():
        price = _price(fields.get(key), f"{path}.{key}", currency, problems) if key in fields else None
        if price is not None:
            prices[name] = price
    return Rates(**prices) if len(prices) == len(_RATE_FIELDS) else None


def _price(
    value: Any, path: str, currency: str | None, problems: list[str], *, what: str = "vCPU or GiB"
) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(f"{path}: {_kind(value)} is not a number")
        return None
    price = float(value)
    if not math.isfinite(price):
        written = "NaN" if math.isnan(price) else ("-Infinity" if price < 0 else "Infinity")
        problems.append(f"{path}: {written} is not a finite number")
    elif price < 0:
        problems.append(f"{path}: {value} is negative")
    elif price == 0:
        problems.append(f"{path}: 0 is no price (a free {what} is a mistake)")
    elif currency == "USD" and price > MAX_USD_RATE:
        problems.append(f"{path}: {value} USD per hour is absurd for one {what} (at most {MAX_USD_RATE:g})")
    else:
        return price
    return None


def _object(
    value: Any, path: str, problems: list[str], *, allowed: tuple[str, ...] = (), required: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """The JSON object at `path` as a dict; its problems (not an object, a key twice, unknown, missing) added."""
    if not isinstance(value, _Object):
        problems.append(f"{path}: must be an object, not {_kind(value)}")
        return None
    prefix = "" if path == "the file" else f"{path}."
    fields: dict[str, Any] = {}
    for key, item in value:
        if key in fields:
            problems.append(f"{prefix}{key}: given twice (give it once)")
        elif allowed and key not in allowed:
            problems.append(f"{prefix}{key}: unknown key (expected {', '.join(allowed)})")
        else:
            fields[key] = item
    problems.extend(f"{prefix}{key}: missing" for key in required if key not in fields)
    return fields


def _text(
    fields: dict[str, Any], path: str, problems: list[str], *, pattern: re.Pattern[str] | None = None, example: str = ""
) -> str | None:
    if path not in fields:
        return None  # _object said it is missing
    value = fields[path]
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{path}: must be a non-empty string, not {_kind(value)}")
        return None
    if pattern is not None and not pattern.fullmatch(value):
        problems.append(f"{path}: {value!r} is not like {example!r}")
        return None
    return value


def _kind(value: Any) -> str:
    if isinstance(value, _Object):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return f"the number {value}"


def to_json(table: PriceTable) -> bytes:
    """The price file of a table (docs/prices.md): families and regions sorted, rates rounded to 6 decimals."""
    families: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for (family, region, model), rates in sorted(table.rates.items(), key=lambda item: _order(item[0])):
        families.setdefault(family, {}).setdefault(region, {})[model] = {
            "vcpuHour": round(rates.vcpu_hour, 6),
            "gibHour": round(rates.gib_hour, 6),
        }
    document: dict[str, Any] = {
        "asOf": table.as_of,
        "source": table.source,
        "currency": table.currency,
        "rates": families,
    }
    if table.gpus:  # left out when there are none, so a file without GPUs reads as before
        gpus: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for (accelerator, region, model), per_hour in sorted(table.gpus.items(), key=lambda item: _order(item[0])):
            gpus.setdefault(accelerator, {}).setdefault(region, {})[model] = {"gpuHour": round(per_hour, 6)}
        document["gpus"] = gpus
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


def _order(key: tuple[str, str, str]) -> tuple[str, str, int]:
    family, region, model = key
    return family, region, MODELS.index(model) if model in MODELS else len(MODELS)


def _built_in() -> PriceTable:
    rates: dict[tuple[str, str, str], Rates] = {}
    for family, regions in price_table.FAMILIES.items():
        for region, (vcpu_hour, gib_hour, spot_vcpu_hour, spot_gib_hour) in regions.items():
            rates[(family, region, ON_DEMAND)] = Rates(vcpu_hour, gib_hour)
            rates[(family, region, SPOT)] = Rates(spot_vcpu_hour, spot_gib_hour)
    gpus: dict[tuple[str, str, str], float] = {}
    for accelerator, gpu_regions in price_table.GPUS.items():
        for region, (gpu_hour, spot_gpu_hour) in gpu_regions.items():
            gpus[(accelerator, region, ON_DEMAND)] = gpu_hour
            gpus[(accelerator, region, SPOT)] = spot_gpu_hour
    return PriceTable(
        as_of=price_table.AS_OF, source=price_table.SOURCE, currency=price_table.CURRENCY, rates=rates, gpus=gpus
    )


# The dated table in price_table.py; `priceFile` and a pool's `pricePerHour` win over it (DESIGN, "Node
# replacement").
BUILT_IN: PriceTable = _built_in()
