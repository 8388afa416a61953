"""Beside a GKE ComputeClass threshold (computeClassConsolidationThreshold): node-compactor's cpu limit
must be above it, or the autoscaler takes every node node-compactor would (steady-fragmented: 409.3
node-hours against 366.6 for node-compactor alone); above it, the nodes between the two are
node-compactor's."""

from __future__ import annotations

from typing import Any

import pytest

from compactor.core.model import Node, Pod
from compactor.errors import ConfigError
from compactor.settings import config as config_module
from tests.builders import POOL, make_config, make_node, make_pod, run_plan

COEXISTING = {POOL: {"scaleDownCPURequestRatioLimit": 0.9, "computeClassConsolidationThreshold": 0.75}}


def pool(**settings: Any) -> dict[str, Any]:
    return {"nodePools": {POOL: {"enabled": True, **settings}}}


def cluster(*src_cpu: str) -> tuple[list[Node], list[Pod]]:
    """`src` (4 cpu) holds one pod per `src_cpu`; two nodes at 25%, not marked, could take them."""
    nodes = [make_node("src"), make_node("t1", marked_since=None), make_node("t2", marked_since=None)]
    pods = [make_pod(f"app-{i}", node="src", cpu=cpu) for i, cpu in enumerate(src_cpu)]
    pods += [make_pod("base-1", node="t1", cpu="1"), make_pod("base-2", node="t2", cpu="1")]
    return nodes, pods


def test_a_node_between_the_threshold_and_the_limit_is_node_compactors() -> None:
    nodes, pods = cluster("1600m", "1600m")  # 80%: above the autoscaler's 75%, below node-compactor's 90%
    plan = run_plan(nodes, pods, config=make_config(pools=COEXISTING))
    assert plan.decision.action == "drain" and plan.decision.node == "src", plan.decision
    assert run_plan(nodes, pods).decision.action == "none", "with the 0.75 limit it was nobody's"


def test_the_setting_is_read_as_a_fraction() -> None:
    loaded = config_module.validate(
        pool(scaleDownCPURequestRatioLimit=0.9, computeClassConsolidationThreshold=0.75), source="t"
    )
    assert loaded.node_pools[POOL].compute_class_threshold == 0.75
    assert (
        config_module.validate(pool(scaleDownCPURequestRatioLimit=0.75), source="t")
        .node_pools[POOL]
        .compute_class_threshold
        is None
    )


@pytest.mark.parametrize("limit", [0.75, 0.6])
def test_a_limit_at_or_below_the_threshold_is_refused_naming_both(limit: float) -> None:
    with pytest.raises(ConfigError) as raised:
        config_module.validate(
            pool(scaleDownCPURequestRatioLimit=limit, computeClassConsolidationThreshold=0.75), source="t"
        )
    text = " ".join([str(raised.value), *raised.value.problems])
    assert "computeClassConsolidationThreshold" in text and "scaleDownCPURequestRatioLimit" in text


@pytest.mark.parametrize("value", [0, 75, -0.5])
def test_the_threshold_is_a_fraction_above_zero(value: float) -> None:
    with pytest.raises(ConfigError) as raised:
        config_module.validate(
            pool(scaleDownCPURequestRatioLimit=0.9, computeClassConsolidationThreshold=value), source="t"
        )
    assert "computeClassConsolidationThreshold" in " ".join([str(raised.value), *raised.value.problems])
