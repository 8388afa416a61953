"""Rule 8 with prices (`ranking: "savings"`, the default): among deletions, the largest saving per hour per
disrupted pod first; rule 8's order where prices are equal or missing, and with `ranking: "disruption"`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor.core import planner
from compactor.core.model import Node, Pod
from compactor.core.prices import pricing
from compactor.errors import ConfigError
from tests.builders import NOW, make_config, make_node, make_pod, make_snapshot, node_report, run_plan

REGION = "us-central1"


def priced(name: str, machine: str, **fields: Any) -> Node:
    labels = {"node.kubernetes.io/instance-type": machine, "topology.kubernetes.io/zone": f"{REGION}-a"}
    return make_node(name, cpu="4", memory="16Gi", labels=labels, **fields)


def price_of(machine: str) -> float:
    found = pricing.node_price(pricing.BUILT_IN, machine_type=machine, region=REGION, spot=False)
    assert found is not None
    return found


def a_cluster(*, cheap_pods: int = 2, dear_pods: int = 2) -> tuple[list[Node], list[Pod]]:
    """`cheap` (e2-standard-4) and `dear` (n2-standard-4, the dearer) are both light candidates; `roomy`
    takes anyone's pods. By rule 8 alone `cheap` comes first: fewer or as many pods, lower utilization."""
    nodes = [
        priced("cheap", "e2-standard-4"),
        priced("dear", "n2-standard-4"),
        priced("roomy", "e2-standard-4", marked_since=None),
    ]
    pods = [make_pod(f"c{i}", node="cheap", cpu="100m") for i in range(cheap_pods)]
    pods += [make_pod(f"d{i}", node="dear", cpu="200m") for i in range(dear_pods)]
    pods += [make_pod("r0", node="roomy", cpu="3200m")]
    return nodes, pods


def test_the_dearer_node_is_drained_first_when_it_disrupts_as_many_pods() -> None:
    assert price_of("n2-standard-4") > price_of("e2-standard-4")
    nodes, pods = a_cluster()
    plan = run_plan(nodes, pods, config=make_config(pools={"default-pool": {"minNodes": 0}}))
    assert plan.decision.action == "drain"
    assert plan.decision.node == "dear"
    assert "saves the most per disrupted pod" in plan.decision.reason
    assert f"{price_of('n2-standard-4'):.4f}/h for 2 pod(s)" in plan.decision.reason


def test_ranking_by_disruption_keeps_rule_8_s_order() -> None:
    nodes, pods = a_cluster()
    config = make_config(pools={"default-pool": {"minNodes": 0}}, ranking="disruption")
    plan = run_plan(nodes, pods, config=config)
    assert plan.decision.node == "cheap"
    assert "least disruptive" in plan.decision.reason


def test_a_dearer_node_that_disrupts_more_pods_per_saving_waits() -> None:
    # n2-standard-4 costs less than twice an e2-standard-4: three pods on it save less per pod than one.
    assert price_of("n2-standard-4") < 3 * price_of("e2-standard-4")
    nodes, pods = a_cluster(cheap_pods=1, dear_pods=3)
    plan = run_plan(nodes, pods, config=make_config(pools={"default-pool": {"minNodes": 0}}))
    assert plan.decision.node == "cheap"


def test_one_candidate_without_a_price_puts_every_candidate_in_rule_8_s_order() -> None:
    nodes, pods = a_cluster()
    nodes[1] = make_node("dear", cpu="4", memory="16Gi")  # no machine type label: no price
    plan = run_plan(nodes, pods, config=make_config(pools={"default-pool": {"minNodes": 0}}))
    assert node_report(plan, "dear").price_per_hour is None
    assert plan.decision.node == "cheap"
    assert "least disruptive" in plan.decision.reason


def test_the_configuration_names_only_the_two_rankings() -> None:
    with pytest.raises(ConfigError) as raised:
        make_config(ranking="cheapest")
    assert any("ranking" in problem and "savings" in problem for problem in raised.value.problems)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loads=st.lists(
        st.lists(st.sampled_from(["100m", "250m", "500m", "1"]), min_size=0, max_size=4), min_size=2, max_size=5
    ),
    machine=st.sampled_from(["e2-standard-4", "n2-standard-4"]),
)
def test_where_every_node_costs_the_same_savings_decide_as_rule_8(loads: list[list[str]], machine: str) -> None:
    nodes = [priced(f"n{index}", machine) for index in range(len(loads))]
    nodes.append(priced("spare", machine, marked_since=None))
    pods = [
        make_pod(f"p{index}-{k}", node=f"n{index}", cpu=cpu)
        for index, cpus in enumerate(loads)
        for k, cpu in enumerate(cpus)
    ]
    snapshot = make_snapshot(nodes, pods)
    by_savings = planner.plan(snapshot, make_config(pools={"default-pool": {"minNodes": 0}}), now=NOW)
    by_disruption = planner.plan(
        snapshot, make_config(pools={"default-pool": {"minNodes": 0}}, ranking="disruption"), now=NOW
    )
    assert by_savings.decision.node == by_disruption.decision.node
    assert by_savings.decision.evictions == by_disruption.decision.evictions
