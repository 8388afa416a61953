"""What each node costs per hour in the plan and the report (`core.prices.costs`): the table, the pool's
pricePerHour, and the nodes the table cannot price."""

from __future__ import annotations

from typing import Any

import pytest

from compactor import report
from compactor.core.model import Node
from compactor.core.prices import pricing
from tests.builders import make_config, make_node, make_pod, node_report, run_plan

MACHINE = "e2-standard-4"
REGION = "us-central1"


def priced(name: str, *, spot: bool = False, machine: str = MACHINE, **fields: Any) -> Node:
    labels = {
        "node.kubernetes.io/instance-type": machine,
        "topology.kubernetes.io/zone": f"{REGION}-a",
    }
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
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
