"""What each node costs per hour in the plan and the report (`core.prices.costs`): the table, the pool's
pricePerHour, and the nodes the table cannot price."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from compactor import report
from compactor.core import planner
from compactor.core.cluster import ClusterView
from compactor.core.model import Node
from compactor.core.plan import Plan
from compactor.core.prices import costs, pricing
from tests.builders import NOW, make_config, make_node, make_pod, make_snapshot, node_report, run_plan

MACHINE = "e2-standard-4"
REGION = "us-central1"


def priced(
    name: str, *, spot: bool = False, machine: str = MACHINE, accelerator: str | None = None, **fields: Any
) -> Node:
    labels = {
        "node.kubernetes.io/instance-type": machine,
        "topology.kubernetes.io/zone": f"{REGION}-a",
    }
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
    if accelerator is not None:
        labels["cloud.google.com/gke-accelerator"] = accelerator
    return make_node(name, labels=labels, **fields)


def table_price(*, spot: bool = False, machine: str = MACHINE) -> float:
    found = pricing.node_price(pricing.BUILT_IN, machine_type=machine, region=REGION, spot=spot)
    assert found is not None
    return found


def test_a_node_is_priced_from_its_machine_type_region_and_provisioning() -> None:
    plan = run_plan([priced("n1"), priced("n2", spot=True)])
    assert node_report(plan, "n1").price_per_hour == pytest.approx(table_price())
    assert node_report(plan, "n2").price_per_hour == pytest.approx(table_price(spot=True))
    assert table_price(spot=True) < table_price()


def test_the_pool_s_price_per_hour_wins_over_the_table() -> None:
    plan = run_plan([priced("n1")], config=make_config(pools={"default-pool": {"pricePerHour": 1.25}}))
    assert node_report(plan, "n1").price_per_hour == 1.25


@pytest.mark.parametrize(
    ("node", "why"),
    [
        pytest.param(priced("n1", machine="x9-mega-4"), "is not in the price table", id="unknown-machine-type"),
        pytest.param(make_node("n1"), "no machine type label", id="no-machine-label"),
        pytest.param(priced("n1", extended={"nvidia.com/gpu": "1"}), "accelerators (nvidia.com/gpu)", id="a-gpu-node"),
        pytest.param(
            priced("n1", machine="n1-standard-4", accelerator="nvidia-tesla-t4", extended={"nvidia.com/gpu": "1"}),
            "n1-standard-4 has accelerators (nvidia.com/gpu) the price table does not price (nvidia-tesla-t4, "
            "on-demand, in us-central1); set the pool's pricePerHour, or a priceFile from `python -m compactor prices "
            "--refresh`",
            id="a-t4-on-n1-and-no-t4-rate-built-in",
        ),
        pytest.param(
            priced("n1", accelerator="tpu-v5-lite-podslice", extended={"google.com/tpu": "4"}),
            "accelerators (google.com/tpu) the price table does not price; set the pool's pricePerHour",
            id="a-tpu-node",
        ),
    ],
)
def test_a_node_the_table_cannot_price_has_no_price_and_its_pool_says_why(node: Node, why: str) -> None:
    plan = run_plan([node])
    assert node_report(plan, "n1").price_per_hour is None
    pool = plan.pools[0]
    assert pool.price_per_hour is None
    assert pool.cost_lower_bound_per_hour is None
    assert why in (pool.price_note or "")


def test_the_node_s_own_resources_are_not_accelerators() -> None:
    plan = run_plan([priced("n1", extended={"ephemeral-storage": "100Gi", "hugepages-2Mi": "0"})])
    assert node_report(plan, "n1").price_per_hour == pytest.approx(table_price())


def test_the_report_gives_prices_per_node_and_pool_and_what_a_drain_saves() -> None:
    nodes = [priced("n1"), priced("n2", marked_since=None), priced("n3", marked_since=None)]
    pods = [make_pod("light", node="n1"), make_pod("b2", node="n2", cpu="3"), make_pod("b3", node="n3", cpu="3")]
    plan = run_plan(nodes, pods)
    document = report.to_dict(plan)
    assert document["decision"]["action"] == "drain"
    assert document["decision"]["savingsPerHour"] == pytest.approx(table_price(), abs=1e-6)
    assert document["currency"] == "USD"
    [pool] = document["pools"]
    assert pool["pricePerHour"] == pytest.approx(3 * table_price(), abs=1e-5)
    assert pool["costLowerBoundPerHour"] == pytest.approx(pool["lowerBoundNodes"] * table_price(), abs=1e-5)
    assert all(node["pricePerHour"] == pytest.approx(table_price(), abs=1e-6) for node in document["nodes"])
    assert "USD/H" in report.to_table(plan)


# --- GPU nodes -----------------------------------------------------------------------------------------------------

GPU_MACHINE = "n1-standard-4"
T4_ON_DEMAND, T4_SPOT = 0.35, 0.14  # made-up rates for these tests, as a price file would give them
WITH_T4 = replace(
    pricing.BUILT_IN,
    gpus={
        ("nvidia-tesla-t4", REGION, pricing.ON_DEMAND): T4_ON_DEMAND,
        ("nvidia-tesla-t4", REGION, pricing.SPOT): T4_SPOT,
    },
)


def plan_priced_by(table: pricing.PriceTable, nodes: list[Node], **config: Any) -> Plan:
    return planner.plan(make_snapshot(nodes), make_config(**config), now=NOW, prices=table)


def t4_node(name: str, *, gpus: str = "1", spot: bool = False, accelerator: str = "nvidia-tesla-t4") -> Node:
    return priced(name, machine=GPU_MACHINE, spot=spot, accelerator=accelerator, extended={"nvidia.com/gpu": gpus})


def test_a_t4_node_costs_its_machine_and_its_gpu() -> None:
    plan = plan_priced_by(WITH_T4, [t4_node("n1")])
    machine = table_price(machine=GPU_MACHINE)
    assert node_report(plan, "n1").price_per_hour == pytest.approx(machine + T4_ON_DEMAND)
    assert plan.pools[0].price_per_hour == pytest.approx(machine + T4_ON_DEMAND)
    assert plan.pools[0].price_note is None


def test_a_spot_node_with_two_t4s_pays_the_spot_rate_for_each() -> None:
    plan = plan_priced_by(WITH_T4, [t4_node("n1", gpus="2", spot=True)])
    expected = table_price(machine=GPU_MACHINE, spot=True) + 2 * T4_SPOT
    assert node_report(plan, "n1").price_per_hour == pytest.approx(expected)


def test_a_gpu_node_s_price_names_its_source_and_its_gpus() -> None:
    view_costs = costs.node_costs(ClusterView(make_snapshot([t4_node("n1", gpus="2")]), make_config()), WITH_T4)
    price = view_costs.of("n1")
    assert price is not None
    assert price.source.startswith(f"{WITH_T4.source}, {WITH_T4.as_of}; ")
    assert price.source.endswith(f"{GPU_MACHINE} + 2 x nvidia-tesla-t4 at 0.35/h")


def test_an_accelerator_the_table_has_no_rate_for_still_says_set_the_pool_s_price_per_hour() -> None:
    plan = plan_priced_by(WITH_T4, [t4_node("n1", accelerator="nvidia-tesla-x99")])
    assert node_report(plan, "n1").price_per_hour is None
    note = plan.pools[0].price_note or ""
    assert "nvidia-tesla-x99, on-demand, in us-central1" in note
    assert "set the pool's pricePerHour, or a priceFile from `python -m compactor prices --refresh`" in note


def test_a_gpu_node_priced_by_its_pool_is_not_charged_for_its_gpus_twice() -> None:
    plan = plan_priced_by(WITH_T4, [t4_node("n1")], pools={"default-pool": {"pricePerHour": 2.5}})
    assert node_report(plan, "n1").price_per_hour == 2.5


# --- machine types that come with their GPUs, priced by the built-in table -----------------------------------------

# Expected prices: `hour` and `hour_spot` of the machine type in us-central1 in pricing.yml of
# github.com/Cyclenerd/google-cloud-pricing-cost-calculator at commit fd66b26ff84fee5cdd94f341ea89206e76c06b99, the
# file the built-in table is read from (a3-highgpu-8g's Local SSD share has more decimals than 6-decimal rates add up
# to: within 5e-6 there).


def with_gpus(name: str, machine: str, accelerator: str, gpus: str, *, spot: bool = False) -> Node:
    return priced(name, machine=machine, spot=spot, accelerator=accelerator, extended={"nvidia.com/gpu": gpus})


@pytest.mark.parametrize(
    ("node", "on_demand", "spot", "within"),
    [
        pytest.param(("g2-standard-4", "nvidia-l4", "1"), 0.706832255, 0.397336, 1e-6, id="g2-standard-4-one-l4"),
        pytest.param(("a2-highgpu-2g", "nvidia-tesla-a100", "2"), 7.34677, 3.85604, 1e-6, id="a2-highgpu-2g"),
        pytest.param(
            ("a3-highgpu-8g", "nvidia-h100-80gb", "8"), 88.4899999025753, 50.6095408219178, 5e-6, id="a3-highgpu-8g"
        ),
    ],
)
def test_a_gpu_node_of_an_accelerator_optimized_type_costs_its_list_price(
    node: tuple[str, str, str], on_demand: float, spot: float, within: float
) -> None:
    machine, accelerator, gpus = node
    plan = run_plan([with_gpus("n1", *node), with_gpus("n2", machine, accelerator, gpus, spot=True)])
    assert node_report(plan, "n1").price_per_hour == pytest.approx(on_demand, abs=within)
    assert node_report(plan, "n2").price_per_hour == pytest.approx(spot, abs=within)
    assert plan.pools[0].price_note is None


@pytest.mark.parametrize(
    "gpus",
    [
        pytest.param("4", id="time-shared-by-4-clients"),
        pytest.param("0", id="device-plugin-not-ready"),
        pytest.param("7", id="mig-partitions"),
    ],
)
def test_an_accelerator_optimized_node_costs_the_gpus_it_comes_with_whatever_it_reports(gpus: str) -> None:
    # GPU sharing and MIG show one GPU as several nvidia.com/gpu; a node whose driver is not up yet shows none.
    plan = run_plan([with_gpus("n1", "g2-standard-4", "nvidia-l4", gpus)])
    assert node_report(plan, "n1").price_per_hour == pytest.approx(table_price(machine="g2-standard-4"))
    assert table_price(machine="g2-standard-4") == pytest.approx(0.706832255, abs=1e-6)  # as above


def test_an_accelerator_optimized_node_s_price_names_the_gpus_it_comes_with() -> None:
    view = ClusterView(make_snapshot([with_gpus("n1", "g2-standard-4", "nvidia-l4", "1")]), make_config())
    price = costs.node_costs(view, pricing.BUILT_IN).of("n1")
    assert price is not None
    l4 = pricing.BUILT_IN.gpus[("nvidia-l4", REGION, pricing.ON_DEMAND)]
    assert price.source.endswith(f"; g2-standard-4 with 1 x nvidia-l4 at {l4:g}/h")


def test_an_accelerator_optimized_node_whose_gpus_have_no_rate_has_no_price() -> None:
    table = replace(pricing.BUILT_IN, gpus={})
    plan = plan_priced_by(table, [with_gpus("n1", "g2-standard-4", "nvidia-l4", "1")])
    assert node_report(plan, "n1").price_per_hour is None
    assert "g2-standard-4 (on-demand) in us-central1 with its nvidia-l4 GPUs is not in the price table" in (
        plan.pools[0].price_note or ""
    )


def test_an_accelerator_optimized_node_with_a_tpu_too_has_no_price() -> None:
    node = priced("n1", machine="g2-standard-4", extended={"nvidia.com/gpu": "1", "google.com/tpu": "4"})
    plan = run_plan([node])
    assert node_report(plan, "n1").price_per_hour is None
    assert "accelerators (google.com/tpu) the price table does not price" in (plan.pools[0].price_note or "")
