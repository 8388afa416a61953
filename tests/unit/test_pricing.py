"""Node prices (`compactor.core.prices.pricing`): machine shapes, a node's price from its labels, the strict price file
reader and its writer, the built-in table, and `python -m compactor prices` without --refresh."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

import pytest

from compactor import cli
from compactor.core.prices import price_table, pricing
from compactor.core.prices.pricing import ON_DEMAND, SPOT, PriceTable, Rates
from compactor.errors import ConfigError

E2_IOWA = pricing.BUILT_IN.rates[("e2", "us-central1", ON_DEMAND)]
N2_IOWA = pricing.BUILT_IN.rates[("n2", "us-central1", ON_DEMAND)]


def make_table(rates: dict[tuple[str, str, str], Rates] | None = None, **fields: str) -> PriceTable:
    return PriceTable(
        as_of=fields.get("as_of", "2026-11-01"),
        source=fields.get("source", "a test"),
        currency=fields.get("currency", "USD"),
        rates=rates if rates is not None else {("e2", "us-central1", ON_DEMAND): Rates(0.021812, 0.002924)},
    )


# --- machine shapes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("machine_type", "shape"),
    [
        pytest.param("e2-standard-4", ("e2", 4.0, 16.0), id="e2-standard"),
        pytest.param("e2-highcpu-32", ("e2", 32.0, 32.0), id="e2-highcpu"),
        pytest.param("n2-highmem-8", ("n2", 8.0, 64.0), id="n2-highmem"),
        pytest.param("n2-highmem-128", ("n2", 128.0, 864.0), id="n2-highmem-128-off-ratio"),
        pytest.param("n2d-standard-224", ("n2d", 224.0, 896.0), id="n2d-largest"),
        pytest.param("n1-standard-1", ("n1", 1.0, 3.75), id="n1-standard"),
        pytest.param("n1-highcpu-16", ("n1", 16.0, 14.4), id="n1-highcpu"),
        pytest.param("c3-standard-22", ("c3", 22.0, 88.0), id="c3"),
        pytest.param("c3d-highcpu-30", ("c3d", 30.0, 59.0), id="c3d-highcpu-off-ratio"),
        pytest.param("c4-standard-2", ("c4", 2.0, 7.0), id="c4-smallest"),
        pytest.param("c4-highmem-8", ("c4", 8.0, 62.0), id="c4-highmem"),
        pytest.param("t2d-standard-60", ("t2d", 60.0, 240.0), id="t2d"),
        pytest.param("n4-highcpu-2", ("n4", 2.0, 4.0), id="n4-highcpu"),
        pytest.param("n4d-standard-96", ("n4d", 96.0, 384.0), id="n4d"),
        pytest.param("c2d-highmem-56", ("c2d", 56.0, 448.0), id="c2d"),
        pytest.param("a2-highgpu-2g", ("a2", 24.0, 170.0), id="a2-with-gpus"),
        pytest.param("a3-megagpu-8g", ("a3", 208.0, 1872.0), id="a3-with-gpus"),
        pytest.param("g2-standard-24", ("g2", 24.0, 96.0), id="g2-with-gpus"),
        pytest.param("g4-standard-6", ("g4", 6.0, 22.0), id="g4-off-its-ratio"),
    ],
)
def test_a_predefined_machine_type_has_its_vcpus_and_memory(machine_type: str, shape: tuple[str, float, float]) -> None:
    assert pricing.machine_shape(machine_type) == shape


@pytest.mark.parametrize(
    ("machine_type", "shape"),
    [
        pytest.param("e2-micro", ("e2", 0.25, 1.0), id="micro"),
        pytest.param("e2-small", ("e2", 0.5, 2.0), id="small"),
        pytest.param("e2-medium", ("e2", 1.0, 4.0), id="medium"),
    ],
)
def test_a_shared_core_e2_is_billed_for_its_fraction_of_a_vcpu(
    machine_type: str, shape: tuple[str, float, float]
) -> None:
    assert pricing.machine_shape(machine_type) == shape
    price = pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region="us-central1", spot=False)
    assert price == round(shape[1] * E2_IOWA.vcpu_hour + shape[2] * E2_IOWA.gib_hour, 6)


@pytest.mark.parametrize(
    ("machine_type", "shape"),
    [
        pytest.param("n2-custom-4-16384", ("n2", 4.0, 16.0), id="n2"),
        pytest.param("e2-custom-2-8192", ("e2", 2.0, 8.0), id="e2"),
        pytest.param("custom-2-7680", ("n1", 2.0, 7.5), id="n1-has-no-prefix"),
        pytest.param("n2d-custom-8-30720", ("n2d", 8.0, 30.0), id="n2d"),
        pytest.param("e2-custom-medium-4096", ("e2", 1.0, 4.0), id="e2-shared-core"),
    ],
)
def test_a_custom_machine_type_has_the_vcpus_and_memory_its_name_gives(
    machine_type: str, shape: tuple[str, float, float]
) -> None:
    assert pricing.machine_shape(machine_type) == shape


@pytest.mark.parametrize(
    "machine_type",
    [
        pytest.param("", id="empty"),
        pytest.param("e2-standard-3", id="no-such-size"),
        pytest.param("m3-megamem-64", id="family-without-prices"),
        pytest.param("c3-standard-4-lssd", id="local-ssd-billed-apart"),
        pytest.param("c4-highcpu-288-metal", id="bare-metal"),
        pytest.param("n2-custom-4-32768-ext", id="extended-memory"),
        pytest.param("c3-custom-4-16384", id="custom-without-a-known-premium"),
        pytest.param("n2-custom-medium-4096", id="shared-core-custom-outside-e2"),
        pytest.param("n2-custom-0-1024", id="no-vcpu"),
        pytest.param("E2-STANDARD-4", id="upper-case"),
        pytest.param("a3-ultragpu-8g", id="gpu-machine-not-in-the-table"),
        pytest.param("n1-standard-4-t4", id="no-such-gpu-suffix"),
    ],
)
def test_an_unknown_machine_type_has_no_shape_and_no_price(machine_type: str) -> None:
    assert pricing.machine_shape(machine_type) is None
    assert pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region="us-central1", spot=False) is None


# --- node prices ---------------------------------------------------------------------------------------------------

SAMPLE_MACHINE_TYPES = ["e2-standard-4", "e2-medium", "n2-highmem-16", "n2d-standard-8", "n1-standard-4"]
SAMPLE_MACHINE_TYPES += ["c3-highcpu-44", "t2d-standard-8", "n4-standard-2", "c4-standard-8", "custom-4-15360"]


@pytest.mark.parametrize("machine_type", SAMPLE_MACHINE_TYPES)
@pytest.mark.parametrize("region", ["us-central1", "europe-west4", "asia-southeast1"])
def test_a_spot_node_costs_less_than_the_same_node_on_demand(machine_type: str, region: str) -> None:
    on_demand = pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region=region, spot=False)
    spot = pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region=region, spot=True)
    assert on_demand is not None and spot is not None
    assert 0 < spot < on_demand


def test_a_node_costs_its_vcpus_and_gib_at_its_family_s_rates() -> None:
    price = pricing.node_price(pricing.BUILT_IN, machine_type="n2-standard-4", region="us-central1", spot=False)
    assert price == round(4 * N2_IOWA.vcpu_hour + 16 * N2_IOWA.gib_hour, 6)
    assert price == pytest.approx(0.194236)  # Google's list price for n2-standard-4 in Iowa


def test_a_custom_machine_costs_five_percent_more_than_the_same_shape_predefined() -> None:
    def price(machine_type: str) -> float | None:
        return pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region="us-central1", spot=False)

    predefined, custom = price("n2-standard-4"), price("n2-custom-4-16384")
    assert predefined is not None and custom is not None
    assert custom == pytest.approx(predefined * pricing.CUSTOM_PREMIUM, abs=1e-6)


@pytest.mark.parametrize(
    ("machine_type", "region"),
    [
        pytest.param("e2-standard-4", "mars-north1", id="unknown-region"),
        pytest.param("e2-standard-4", "", id="no-region"),
        pytest.param("c3-standard-4", "europe-north2", id="family-not-sold-there"),
        pytest.param("a2-ultragpu-1g", "northamerica-northeast2", id="a2-where-no-a2-highgpu-fixes-its-rates"),
        pytest.param("a3-megagpu-8g", "us-central1", id="gpu-not-sold-there"),
    ],
)
def test_a_region_without_prices_for_the_family_has_no_price(machine_type: str, region: str) -> None:
    assert pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region=region, spot=False) is None


# --- machine types that come with GPUs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("machine_type", "gpus"),
    [
        pytest.param("a2-highgpu-2g", ("nvidia-tesla-a100", 2), id="a2-highgpu"),
        pytest.param("a2-megagpu-16g", ("nvidia-tesla-a100", 16), id="a2-megagpu"),
        pytest.param("a2-ultragpu-4g", ("nvidia-a100-80gb", 4), id="a2-ultragpu"),
        pytest.param("a3-highgpu-8g", ("nvidia-h100-80gb", 8), id="a3-highgpu"),
        pytest.param("a3-megagpu-8g", ("nvidia-h100-mega-80gb", 8), id="a3-megagpu"),
        pytest.param("g2-standard-32", ("nvidia-l4", 1), id="g2-one-gpu-many-vcpus"),
        pytest.param("g2-standard-96", ("nvidia-l4", 8), id="g2-eight"),
        pytest.param("g4-standard-6", ("nvidia-rtx-pro-6000", 0.125), id="g4-an-eighth"),
        pytest.param("n1-standard-4", None, id="gpus-attached-apart"),
        pytest.param("e2-standard-4", None, id="no-gpus"),
    ],
)
def test_an_accelerator_optimized_machine_type_comes_with_its_gpus(
    machine_type: str, gpus: tuple[str, float] | None
) -> None:
    assert pricing.bundled_gpus(machine_type) == gpus


# Expected prices: `hour` and `hour_spot` of the machine type in us-central1 in pricing.yml of
# github.com/Cyclenerd/google-cloud-pricing-cost-calculator at commit fd66b26ff84fee5cdd94f341ea89206e76c06b99, the
# file price_table.py is read from. Where a price has more decimals than 6-decimal rates add up to (a3's Local SSD
# at 1/730 of a month's rate, g2-standard-96's 9 decimals), within 5e-6 (3.2e-6 and 2.3e-6 off); else within 1e-6.
@pytest.mark.parametrize(
    ("machine_type", "on_demand", "spot", "within"),
    [
        pytest.param("g2-standard-4", 0.706832255, 0.397336, 1e-6, id="g2-standard-4"),
        pytest.param("g2-standard-96", 8.003330296, 4.499264, 5e-6, id="g2-standard-96"),
        pytest.param("a2-highgpu-2g", 7.34677, 3.85604, 1e-6, id="a2-highgpu-2g"),
        pytest.param("a2-megagpu-16g", 55.739504, 29.25568, 1e-6, id="a2-megagpu-16g"),
        pytest.param("a3-highgpu-8g", 88.4899999025753, 50.6095408219178, 5e-6, id="a3-highgpu-8g"),
        pytest.param("g4-standard-6", 0.55955625, 0.2238035, 1e-6, id="g4-standard-6"),
    ],
)
def test_a_machine_type_with_gpus_costs_its_list_price_gpus_included(
    machine_type: str, on_demand: float, spot: float, within: float
) -> None:
    def price(spot: bool) -> float | None:
        return pricing.node_price(pricing.BUILT_IN, machine_type=machine_type, region="us-central1", spot=spot)

    assert price(False) == pytest.approx(on_demand, abs=within)
    assert price(True) == pytest.approx(spot, abs=within)


def test_a_machine_type_with_gpus_is_the_sum_of_its_vcpus_gib_and_gpus() -> None:
    rates = pricing.BUILT_IN.rates[("a2", "us-central1", ON_DEMAND)]
    a100 = pricing.BUILT_IN.gpus[("nvidia-tesla-a100", "us-central1", ON_DEMAND)]
    price = pricing.node_price(pricing.BUILT_IN, machine_type="a2-highgpu-2g", region="us-central1", spot=False)
    assert price == round(24 * rates.vcpu_hour + 170 * rates.gib_hour + 2 * a100, 6)


def test_a_machine_type_whose_gpus_have_no_rate_has_no_price() -> None:
    # Its vCPUs and memory alone would make an A100 machine look a tenth of its price.
    table = replace(pricing.BUILT_IN, gpus={})
    assert ("a2", "us-central1", ON_DEMAND) in table.rates
    assert pricing.node_price(table, machine_type="a2-highgpu-1g", region="us-central1", spot=False) is None
    assert pricing.node_price(table, machine_type="n1-standard-4", region="us-central1", spot=False) is not None


def test_a_table_without_spot_rates_has_no_spot_price() -> None:
    table = make_table()
    assert pricing.node_price(table, machine_type="e2-standard-2", region="us-central1", spot=True) is None
    assert pricing.node_price(table, machine_type="e2-standard-2", region="us-central1", spot=False) == 0.067016


def test_a_table_s_rates_cannot_be_changed_after_it_is_made() -> None:
    rates = {("e2", "us-central1", ON_DEMAND): Rates(0.02, 0.003)}
    table = make_table(rates)
    rates[("e2", "us-central1", SPOT)] = Rates(0.01, 0.001)
    assert len(table.rates) == 1
    with pytest.raises(TypeError):
        table.rates[("e2", "us-central1", SPOT)] = Rates(0.01, 0.001)  # type: ignore[index]


# --- node labels ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "region"),
    [
        pytest.param({"topology.kubernetes.io/region": "us-east4"}, "us-east4", id="region-label"),
        pytest.param({"failure-domain.beta.kubernetes.io/region": "us-east1"}, "us-east1", id="beta-region-label"),
        pytest.param({"topology.kubernetes.io/zone": "europe-west4-b"}, "europe-west4", id="zone-label"),
        pytest.param({"failure-domain.beta.kubernetes.io/zone": "asia-east1-c"}, "asia-east1", id="beta-zone-label"),
        pytest.param(
            {"topology.kubernetes.io/region": "us-west1", "topology.kubernetes.io/zone": "us-east1-b"},
            "us-west1",
            id="region-before-zone",
        ),
        pytest.param({"topology.kubernetes.io/zone": "nozone"}, None, id="zone-without-letter"),
        pytest.param({"topology.kubernetes.io/zone": "us-east1-"}, None, id="zone-ending-in-a-dash"),
        pytest.param({"topology.kubernetes.io/region": ""}, None, id="empty-region"),
        pytest.param({}, None, id="no-labels"),
    ],
)
def test_the_region_comes_from_the_region_label_else_the_zone(labels: dict[str, str], region: str | None) -> None:
    assert pricing.region_of(labels) == region


@pytest.mark.parametrize(
    ("labels", "machine_type"),
    [
        pytest.param({"node.kubernetes.io/instance-type": "e2-standard-4"}, "e2-standard-4", id="ga-label"),
        pytest.param({"beta.kubernetes.io/instance-type": "n2-standard-8"}, "n2-standard-8", id="beta-label"),
        pytest.param(
            {"node.kubernetes.io/instance-type": "c3-standard-4", "beta.kubernetes.io/instance-type": "old"},
            "c3-standard-4",
            id="ga-label-first",
        ),
        pytest.param({"node.kubernetes.io/instance-type": ""}, None, id="empty"),
        pytest.param({}, None, id="none"),
    ],
)
def test_the_machine_type_comes_from_the_instance_type_label(labels: dict[str, str], machine_type: str | None) -> None:
    assert pricing.machine_type_of(labels) == machine_type


@pytest.mark.parametrize(
    ("labels", "spot"),
    [
        pytest.param({"cloud.google.com/gke-spot": "true"}, True, id="gke-spot"),
        pytest.param({"cloud.google.com/gke-provisioning": "spot"}, True, id="provisioning-spot"),
        pytest.param({"cloud.google.com/gke-preemptible": "true"}, True, id="preemptible-bills-spot"),
        pytest.param({"cloud.google.com/gke-spot": "false"}, False, id="spot-false"),
        pytest.param({"cloud.google.com/gke-provisioning": "standard"}, False, id="provisioning-standard"),
        pytest.param({}, False, id="no-labels"),
    ],
)
def test_a_spot_or_preemptible_node_is_priced_as_spot(labels: dict[str, str], spot: bool) -> None:
    assert pricing.is_spot(labels) is spot


# --- the price file ------------------------------------------------------------------------------------------------


def price_file(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "asOf": "2026-11-01",
        "source": "Cloud Billing Catalog API, service 6F81-5844-456A",
        "currency": "USD",
        "rates": {
            "e2": {
                "us-central1": {
                    "on-demand": {"vcpuHour": 0.021812, "gibHour": 0.002924},
                    "spot": {"vcpuHour": 0.01309, "gibHour": 0.001754},
                }
            }
        },
    }
    document.update(changes)
    return document


def with_rate(path: str, value: Any) -> bytes:
    """The price file with e2/us-central1/<model>.<field> set to a JSON text (NaN and 1e999 included)."""
    model, field = path.split(".")
    text = json.dumps(price_file())
    old = json.dumps(price_file()["rates"]["e2"]["us-central1"][model][field])
    section = text.index(f'"{model}": ')
    start = text.index(f'"{field}": {old}', section)
    return (text[:start] + f'"{field}": {value}' + text[start + len(f'"{field}": {old}') :]).encode()


def problems_of(data: bytes) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        pricing.parse_price_file(data, source="prices.json")
    return raised.value.problems


SPOT_VCPU = "prices.json: rates.e2.us-central1.spot.vcpuHour: "


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("-0.01", SPOT_VCPU + "-0.01 is negative", id="negative"),
        pytest.param("0", SPOT_VCPU + "0 is no price", id="zero"),
        pytest.param("0.0", SPOT_VCPU + "0 is no price", id="zero-float"),
        pytest.param("NaN", SPOT_VCPU + "NaN is not a finite number", id="nan"),
        pytest.param("Infinity", SPOT_VCPU + "Infinity is not a finite number", id="infinity"),
        pytest.param("-Infinity", SPOT_VCPU + "-Infinity is not a finite number", id="minus-infinity"),
        pytest.param("1e999", SPOT_VCPU + "Infinity is not a finite number", id="overflow"),
        pytest.param("100.5", SPOT_VCPU + "100.5 USD per hour is absurd", id="absurd"),
        pytest.param('"0.01"', SPOT_VCPU + "the string '0.01' is not a number", id="string"),
        pytest.param("true", SPOT_VCPU + "true is not a number", id="boolean"),
        pytest.param("null", SPOT_VCPU + "null is not a number", id="null"),
        pytest.param("[0.01]", SPOT_VCPU + "an array is not a number", id="array"),
    ],
)
def test_a_price_that_is_no_price_is_refused_naming_its_field(value: str, problem: str) -> None:
    problems = problems_of(with_rate("spot.vcpuHour", value))
    assert len(problems) == 1
    assert problems[0].startswith(problem)


def test_a_high_price_in_another_currency_is_no_error() -> None:
    # 100 is absurd for one vCPU-hour in USD, but a vCPU-hour costs a few hundred Indonesian rupiah.
    document = price_file(currency="IDR")
    document["rates"]["e2"]["us-central1"]["on-demand"]["vcpuHour"] = 357.5
    table = pricing.parse_price_file(json.dumps(document).encode(), source="prices.json")
    assert table.rates[("e2", "us-central1", ON_DEMAND)].vcpu_hour == 357.5


@pytest.mark.parametrize(
    ("document", "problems"),
    [
        pytest.param(
            price_file(updated="yesterday"),
            ["updated: unknown key (expected asOf, source, currency, rates, gpus)"],
            id="top",
        ),
        pytest.param(
            price_file(rates={"e2": {"us-central1": {"reserved": {"vcpuHour": 0.01, "gibHour": 0.001}}}}),
            ["rates.e2.us-central1.reserved: unknown key (expected on-demand, spot)", "rates.e2.us-central1: neither"],
            id="model",
        ),
        pytest.param(
            price_file(rates={"e2": {"us-central1": {"spot": {"vcpuHour": 0.01, "gibHour": 0.001, "ramHour": 1}}}}),
            ["rates.e2.us-central1.spot.ramHour: unknown key (expected vcpuHour, gibHour)"],
            id="rate-field",
        ),
        pytest.param(
            {key: value for key, value in price_file().items() if key != "asOf"}, ["asOf: missing"], id="no-date"
        ),
        pytest.param(
            price_file(rates={"e2": {"us-central1": {"spot": {"vcpuHour": 0.01}}}}),
            ["rates.e2.us-central1.spot.gibHour: missing"],
            id="no-gib-hour",
        ),
        pytest.param(price_file(asOf="2026-02-30"), ["asOf: '2026-02-30' is not a date"], id="impossible-date"),
        pytest.param(price_file(asOf="30.07.2026"), ["asOf: '30.07.2026' is not like '2026-07-30'"], id="date-format"),
        pytest.param(price_file(asOf=20260730), ["asOf: must be a non-empty string, not the number"], id="date-number"),
        pytest.param(price_file(source=""), ["source: must be a non-empty string"], id="empty-source"),
        pytest.param(price_file(source="x" * 1001), ["source: longer than 1000 characters"], id="long-source"),
        pytest.param(price_file(currency="dollars"), ["currency: 'dollars' is not like 'USD'"], id="currency"),
        pytest.param(price_file(rates=[]), ["rates: must be an object, not an array"], id="rates-array"),
        pytest.param(price_file(rates={}), ["rates: no prices at all"], id="no-rates"),
        pytest.param(price_file(rates={"e2": {}}), ["rates.e2: no regions"], id="no-regions"),
        pytest.param(
            price_file(rates={"E-2": {"us-central1": {"spot": {"vcpuHour": 0.01, "gibHour": 0.001}}}}),
            ["rates.E-2: 'E-2' is not a machine family"],
            id="family-name",
        ),
        pytest.param(
            price_file(rates={"e2": {"Iowa": {"spot": {"vcpuHour": 0.01, "gibHour": 0.001}}}}),
            ["rates.e2.Iowa: 'Iowa' is not a region"],
            id="region-name",
        ),
        pytest.param(
            price_file(rates={"e2": {"us-central1": {"spot": 0.01}}}),
            ["rates.e2.us-central1.spot: must be an object, not the number 0.01"],
            id="rate-not-object",
        ),
        pytest.param([price_file()], ["the file: must be an object, not an array"], id="top-array"),
        pytest.param(
            price_file(gpus={"Tesla T4": {"us-central1": {"spot": {"gpuHour": 0.14}}}}),
            ["gpus.Tesla T4: 'Tesla T4' is not a GKE accelerator name"],
            id="gpu-name",
        ),
        pytest.param(
            price_file(gpus={"nvidia-l4": {"us-central1": {"spot": {"gpuHour": 0}}}}),
            ["gpus.nvidia-l4.us-central1.spot.gpuHour: 0 is no price (a free GPU is a mistake)"],
            id="free-gpu",
        ),
        pytest.param(
            price_file(gpus={"nvidia-l4": {"us-central1": {"spot": {"gpuHour": 250}}}}),
            ["gpus.nvidia-l4.us-central1.spot.gpuHour: 250 USD per hour is absurd for one GPU"],
            id="absurd-gpu",
        ),
        pytest.param(
            price_file(gpus={"nvidia-l4": {"us-central1": {"spot": {"vcpuHour": 0.1}}}}),
            [
                "gpus.nvidia-l4.us-central1.spot.vcpuHour: unknown key (expected gpuHour)",
                "gpus.nvidia-l4.us-central1.spot.gpuHour: missing",
            ],
            id="gpu-field",
        ),
        pytest.param(price_file(gpus=[]), ["gpus: must be an object, not an array"], id="gpus-array"),
    ],
)
def test_a_file_of_the_wrong_shape_is_refused_naming_every_field(document: Any, problems: list[str]) -> None:
    found = problems_of(json.dumps(document).encode())
    assert len(found) == len(problems), found
    for problem, expected in zip(found, problems, strict=True):
        assert problem.startswith(f"prices.json: {expected}"), (problem, expected)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            '{"asOf": "2026-11-01", "asOf": "2026-11-02", "source": "s", "currency": "USD", "rates": {}}',
            "asOf: given twice (give it once)",
            id="top-level",
        ),
        pytest.param(
            json.dumps(price_file()).replace('"gibHour": 0.001754', '"gibHour": 0.001754, "gibHour": 0.0001'),
            "rates.e2.us-central1.spot.gibHour: given twice (give it once)",
            id="rate",
        ),
        pytest.param(
            json.dumps(price_file()).replace(
                '"rates": {"e2": {', '"rates": {"e2": {"us-east1": {"spot": {"vcpuHour": 1, "gibHour": 1}}}, "e2": {'
            ),
            "rates.e2: given twice (give it once)",
            id="family",
        ),
    ],
)
def test_a_key_given_twice_is_refused_naming_it(text: str, problem: str) -> None:
    assert f"prices.json: {problem}" in problems_of(text.encode())


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(b"{oops", "not JSON: Expecting property name enclosed in double quotes at line 1", id="not-json"),
        pytest.param(b"\xff\xfe{}", "not UTF-8 text (byte 0)", id="not-utf8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "nested too deeply", id="deep"),
        pytest.param(b"", "not JSON: Expecting value at line 1 column 1", id="empty"),
    ],
)
def test_a_file_that_is_no_json_is_refused(data: bytes, problem: str) -> None:
    [found] = problems_of(data)
    assert problem in found


def test_a_file_over_8_mib_is_refused_before_it_is_read() -> None:
    huge = b" " * (pricing.MAX_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match=r"^prices\.json is larger than 8 MiB"):
        pricing.parse_price_file(huge, source="prices.json")


def test_every_problem_of_a_file_is_named_at_once() -> None:
    document = price_file(currency="usd", extra=1)
    document["rates"]["e2"]["us-central1"]["spot"] = {"vcpuHour": -1, "gibHour": 0}
    found = problems_of(json.dumps(document).encode())
    assert len(found) == 4, found


# --- writing and reading back --------------------------------------------------------------------------------------


def test_a_table_written_as_a_price_file_reads_back_the_same() -> None:
    table = make_table(
        {
            ("n2", "europe-west1", SPOT): Rates(0.00763, 0.001023),
            ("e2", "us-central1", ON_DEMAND): Rates(0.021812, 0.002924),
            ("e2", "us-central1", SPOT): Rates(0.01309, 0.001754),
        }
    )
    written = pricing.to_json(table)
    assert pricing.parse_price_file(written, source="prices.json") == table
    document = json.loads(written)
    assert list(document) == ["asOf", "source", "currency", "rates"]
    assert list(document["rates"]) == ["e2", "n2"]
    assert list(document["rates"]["e2"]["us-central1"]) == [ON_DEMAND, SPOT]
    assert document["rates"]["e2"]["us-central1"][SPOT] == {"vcpuHour": 0.01309, "gibHour": 0.001754}


def test_gpu_rates_are_written_beside_the_machine_rates_and_read_back() -> None:
    gpus = {
        ("nvidia-tesla-t4", "us-central1", SPOT): 0.14,
        ("nvidia-tesla-t4", "us-central1", ON_DEMAND): 0.35,
        ("nvidia-l4", "europe-west1", ON_DEMAND): 0.6214999,
    }
    table = replace(make_table(), gpus=gpus)
    written = pricing.to_json(table)
    document = json.loads(written)
    assert list(document) == ["asOf", "source", "currency", "rates", "gpus"]
    assert document["gpus"] == {
        "nvidia-l4": {"europe-west1": {ON_DEMAND: {"gpuHour": 0.6215}}},
        "nvidia-tesla-t4": {"us-central1": {ON_DEMAND: {"gpuHour": 0.35}, SPOT: {"gpuHour": 0.14}}},
    }
    back = pricing.parse_price_file(written, source="prices.json")
    assert back == replace(table, gpus={**gpus, ("nvidia-l4", "europe-west1", ON_DEMAND): 0.6215})
    assert pricing.gpu_price(back, accelerator="nvidia-tesla-t4", region="us-central1", spot=True) == 0.14
    assert pricing.gpu_price(back, accelerator="nvidia-tesla-t4", region="europe-west1", spot=True) is None


def test_a_price_file_written_before_gpu_rates_still_reads() -> None:
    table = pricing.parse_price_file(json.dumps(price_file()).encode(), source="prices.json")
    assert table.gpus == {}
    assert "gpus" not in json.loads(pricing.to_json(table))


def test_a_price_file_holds_rates_to_6_decimals() -> None:
    table = make_table({("e2", "us-central1", ON_DEMAND): Rates(0.02181159, 0.00292353)})
    back = pricing.parse_price_file(pricing.to_json(table), source="prices.json")
    assert back.rates[("e2", "us-central1", ON_DEMAND)] == Rates(0.021812, 0.002924)


def test_the_built_in_table_round_trips_through_its_price_file() -> None:
    written = pricing.to_json(pricing.BUILT_IN)
    assert pricing.parse_price_file(written, source="built-in") == pricing.BUILT_IN
    assert pricing.to_json(pricing.parse_price_file(written, source="built-in")) == written


# --- the built-in table --------------------------------------------------------------------------------------------

REQUIRED_FAMILIES = ["e2", "n2", "n2d", "n1", "c3", "t2d", "n4"]
REQUIRED_REGIONS = ["us-central1", "us-east1", "us-east4", "us-west1", "europe-west1", "europe-west4", "europe-west3"]
REQUIRED_REGIONS += ["asia-northeast1", "asia-southeast1"]


def test_every_built_in_rate_is_a_positive_price_of_at_most_a_dollar() -> None:
    for key, rates in pricing.BUILT_IN.rates.items():
        for value in (rates.vcpu_hour, rates.gib_hour):
            assert math.isfinite(value) and 0 < value < 1, key
            assert round(value, 6) == value, key


def test_every_built_in_spot_rate_is_below_the_on_demand_one_of_its_family_and_region() -> None:
    on_demand = {(family, region) for family, region, model in pricing.BUILT_IN.rates if model == ON_DEMAND}
    spot = {(family, region) for family, region, model in pricing.BUILT_IN.rates if model == SPOT}
    assert on_demand == spot
    for family, region in on_demand:
        regular = pricing.BUILT_IN.rates[(family, region, ON_DEMAND)]
        cheap = pricing.BUILT_IN.rates[(family, region, SPOT)]
        assert cheap.vcpu_hour < regular.vcpu_hour and cheap.gib_hour < regular.gib_hour, (family, region)


@pytest.mark.parametrize("family", REQUIRED_FAMILIES)
def test_the_built_in_table_prices_the_common_families_in_the_common_regions(family: str) -> None:
    missing = [
        (region, model)
        for region in REQUIRED_REGIONS
        for model in (ON_DEMAND, SPOT)
        if (family, region, model) not in pricing.BUILT_IN.rates
    ]
    assert missing == []


def test_the_built_in_table_says_when_and_where_its_prices_were_read() -> None:
    table = pricing.BUILT_IN
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table.as_of) and table.as_of == price_table.AS_OF
    assert "Cloud Billing Catalog API" in table.source and "fd66b26ff84fee5cdd94f341ea89206e76c06b99" in table.source
    assert table.currency == "USD"
    assert {family for family, _, _ in table.rates} == set(price_table.FAMILIES)


def test_every_built_in_family_has_machine_types_that_price() -> None:
    for family in price_table.FAMILIES:
        machine_types = [name for name in pricing.predefined_types() if pricing.machine_family(name) == family]
        priced = [
            name
            for name in machine_types
            if pricing.node_price(pricing.BUILT_IN, machine_type=name, region="us-central1", spot=True)
        ]
        assert priced, family


def test_every_built_in_gpu_rate_goes_with_its_machine_types_and_their_family_s_rates() -> None:
    table = pricing.BUILT_IN
    families: dict[str, set[str]] = {}  # accelerator -> the families whose machine types come with it
    for machine_type in pricing.WITH_GPUS:
        bundled = pricing.bundled_gpus(machine_type)
        assert bundled is not None
        families.setdefault(bundled[0], set()).add(pricing.machine_family(machine_type))
    assert {accelerator for accelerator, _, _ in table.gpus} == set(families) == set(price_table.GPUS)
    for (accelerator, region, model), per_hour in table.gpus.items():
        assert 0 < per_hour < pricing.MAX_USD_RATE and round(per_hour, 6) == per_hour
        assert all((family, region, model) in table.rates for family in families[accelerator]), (accelerator, region)
    for family in {family for found in families.values() for family in found}:
        accelerators = {accelerator for accelerator, found in families.items() if family in found}
        for found_family, region, model in table.rates:
            if found_family == family:
                assert any((accelerator, region, model) in table.gpus for accelerator in accelerators), (family, region)


def test_every_built_in_spot_gpu_rate_is_below_the_on_demand_one() -> None:
    gpus = pricing.BUILT_IN.gpus
    assert {key[:2] for key in gpus if key[2] == ON_DEMAND} == {key[:2] for key in gpus if key[2] == SPOT}
    for accelerator, region, model in gpus:
        if model == SPOT:
            assert gpus[(accelerator, region, SPOT)] < gpus[(accelerator, region, ON_DEMAND)], (accelerator, region)


# --- python -m compactor prices ------------------------------------------------------------------------------------


def test_the_prices_command_names_the_built_in_table_s_date_and_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prices"]) == 0
    out = capsys.readouterr().out
    assert f"Built-in prices as of {pricing.BUILT_IN.as_of} (USD per hour" in out
    assert f"Source: {pricing.BUILT_IN.source}" in out
    assert "Families (15): a2, a3, c2d, c3, c3d, c4, e2, g2, g4, n1, n2, n2d, n4, n4d, t2d" in out
    gpus = ["nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-h100-mega-80gb", "nvidia-l4", "nvidia-rtx-pro-6000"]
    assert f"GPUs (6): {', '.join(gpus)}, nvidia-tesla-a100" in out


def test_the_prices_command_prints_the_built_in_table_as_a_price_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prices", "--json"]) == 0
    out = capsys.readouterr().out
    assert pricing.parse_price_file(out.encode(), source="stdout") == pricing.BUILT_IN
