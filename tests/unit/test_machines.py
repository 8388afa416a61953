"""Machine types: every family the price table prices has its shapes, and allocatable follows GKE's reservations."""

from __future__ import annotations

import pytest

from compactor.core.prices import machines, price_table, pricing
from compactor.errors import BadInputError

GIB = 2**30
MIB = 2**20


def test_every_family_the_price_table_prices_has_its_machine_types_but_those_with_gpus() -> None:
    known = {name.split("-", 1)[0] for name in machines.MACHINES}
    with_gpus = {pricing.machine_family(name) for name in pricing.WITH_GPUS}
    assert with_gpus == {"a2", "a3", "g2", "g4"}
    assert known == set(price_table.FAMILIES) - with_gpus


def test_every_priced_predefined_type_but_the_shared_core_ones_and_those_with_gpus_is_known() -> None:
    priced = set(pricing.predefined_types()) - pricing.SHARED_CORE - pricing.WITH_GPUS
    assert priced == set(machines.MACHINES)
    assert not (pricing.SHARED_CORE | pricing.WITH_GPUS) & set(machines.MACHINES)


@pytest.mark.parametrize(
    ("machine", "vcpus", "gib"),
    [
        pytest.param("c2d-standard-56", 56, 224, id="c2d-standard"),
        pytest.param("c2d-highcpu-112", 112, 224, id="c2d-highcpu"),
        pytest.param("t2d-standard-60", 60, 240, id="t2d-only-standard"),
        pytest.param("c3-standard-22", 22, 88, id="c3-its-own-sizes"),
        pytest.param("c4-highmem-2", 2, 15, id="c4-off-its-ratio"),
        pytest.param("n4-highcpu-8", 8, 16, id="n4-highcpu-2-gib-per-vcpu"),
        pytest.param("n1-highcpu-2", 2, 1.8, id="n1-highcpu-0.9-gib-per-vcpu"),
    ],
)
def test_a_machine_type_has_its_families_vcpus_and_memory(machine: str, vcpus: int, gib: float) -> None:
    cores, memory = machines.MACHINES[machine]
    assert cores == vcpus
    assert float(memory) == pytest.approx(gib)


def reserved_memory_gib(gib: float) -> float:
    """GKE's memory reservation, written out tier by tier: 25% of the first 4 GiB, 20% of the next 4, 10% of the
    next 8, 6% of the next 112, 2% above 128."""
    tiers = [(4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02)]
    reserved, left = 0.0, gib
    for size, share in tiers:
        part = min(left, size)
        reserved += part * share
        left -= part
    return reserved


@pytest.mark.parametrize(
    ("machine", "cpu_millis", "gib"),
    [
        # 6% of the first core: 1000 - 60.
        pytest.param("n1-standard-1", 940, 3.75, id="n1-standard-1"),
        # 6% + 1% + 2 x 0.5% + 4 x 0.25% of a core: 8000 - 90.
        pytest.param("c2d-standard-8", 7910, 32, id="c2d-standard-8"),
        # 80 for the first four cores, 0.25% of each of the other 56: 60000 - 220; memory past 128 GiB at 2%.
        pytest.param("t2d-standard-60", 59780, 240, id="t2d-standard-60"),
        # 80 + 18 x 2.5: 22000 - 125.
        pytest.param("c3-standard-22", 21875, 88, id="c3-standard-22"),
    ],
)
def test_allocatable_is_capacity_less_gkes_reservations_and_the_eviction_threshold(
    machine: str, cpu_millis: int, gib: float
) -> None:
    cpu, memory = machines.allocatable_amounts(machine)
    assert cpu == cpu_millis
    expected = (gib - reserved_memory_gib(gib)) * GIB - 100 * MIB
    assert memory == pytest.approx(expected, abs=1024)
    assert machines.allocatable(machine)["cpu"] == f"{cpu_millis}m"


@pytest.mark.parametrize("machine", ["e2-standard-64", "e2-medium", "c3-standard-2", "m1-ultramem-40"])
def test_a_type_compute_engine_does_not_sell_or_gke_reserves_apart_for_is_unknown(machine: str) -> None:
    with pytest.raises(BadInputError, match="give the pool an `allocatable`"):
        machines.allocatable(machine)


@pytest.mark.parametrize("machine", ["g2-standard-4", "a2-highgpu-1g", "a3-highgpu-8g", "g4-standard-48"])
def test_a_type_that_comes_with_gpus_has_a_price_but_no_allocatable_from_the_formula(machine: str) -> None:
    # Its nodes carry GPUs a shape of cpu and memory leaves out: neither a simulated pool nor a new node is made of it.
    assert pricing.machine_shape(machine) is not None
    with pytest.raises(BadInputError, match="give the pool an `allocatable`"):
        machines.allocatable(machine)
