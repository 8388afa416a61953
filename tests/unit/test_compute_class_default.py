"""The cluster's default ComputeClass: GKE's autoscaler applies the ComputeClass named `default` to a node pool
without the cloud.google.com/compute-class label when the cluster's default ComputeClass is on
(GoogleCloudPlatform/cluster-autoscaler, pkg/computeclass/lister/ccc.go, `NodeGroupCrd` and `GetDefaultCrd`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from compactor.core import coexistence, planner
from compactor.core.model import COMPUTE_CLASS_LABEL, ComputeClass, Node, Pod, PoolAutoscaling
from compactor.core.plan import Plan
from tests.builders import NOW, POOL, busy, make_config, make_node, make_pod, make_snapshot

DEFAULT = ComputeClass("default", 75, consolidation_delay_minutes=3)


def cluster(label: str | None = None) -> tuple[list[Node], list[Pod]]:
    """n1 at 40% cpu, marked long ago, whose pods fit on n2 and n3; `label` the nodes' compute-class, if any."""
    labels = {COMPUTE_CLASS_LABEL: label} if label is not None else None
    nodes = [
        make_node("n1", labels=labels),
        make_node("n2", marked_since=None, labels=labels),
        make_node("n3", marked_since=None, labels=labels),
    ]
    pods = [make_pod("web-1", node="n1", cpu="800m"), make_pod("web-2", node="n1", cpu="800m")]
    return nodes, [*pods, busy("b2", "n2"), busy("b3", "n3")]


def plan_with(
    nodes: list[Node],
    pods: list[Pod],
    classes: tuple[ComputeClass, ...] = (DEFAULT,),
    *,
    gke: bool | None = None,
    **pool: Any,
) -> Plan:
    """`gke`: whether the GKE API says the cluster's default ComputeClass is on; None: the API was not read."""
    autoscaling = None if gke is None else {POOL: PoolAutoscaling(enabled=True, default_compute_class=gke)}
    snapshot = msgspec.structs.replace(
        make_snapshot(nodes, pods, pool_autoscaling=autoscaling), compute_classes=classes
    )
    return planner.plan(snapshot, make_config(pools={POOL: pool}), now=NOW)


def threshold_of(plan: Plan) -> tuple[float | None, str | None]:
    (pool,) = plan.pools
    assert pool.compute_class is not None
    return pool.compute_class.threshold, pool.compute_class.compute_class


def test_a_pool_without_the_label_follows_the_default_class_when_gke_says_it_is_on() -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, gke=True)
    assert threshold_of(plan) == (0.75, "default")
    assert plan.decision.action == "none" and plan.held_by == "compute-class", "limit 0.75: left to the autoscaler"
    assert not any("assumes" in warning for warning in plan.compute_class_warnings)


def test_a_pool_without_the_label_follows_no_class_when_the_default_is_off() -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, gke=False)
    assert threshold_of(plan) == (None, None)
    assert plan.decision.action == "drain"


def test_without_the_gke_api_the_default_is_assumed_on_and_the_report_says_so() -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, gke=None)
    assert threshold_of(plan) == (0.75, "default")
    assert any("assumes the cluster's default ComputeClass is on" in warning for warning in plan.compute_class_warnings)


def test_a_labelled_pool_follows_its_own_class_not_the_default() -> None:
    nodes, pods = cluster("spread")
    plan = plan_with(nodes, pods, (DEFAULT, ComputeClass("spread", 60)), gke=True, scaleDownCPURequestRatioLimit=0.9)
    assert threshold_of(plan) == (0.6, "spread")


@pytest.mark.parametrize("gke", [True, None])
def test_no_class_named_default_means_no_default(gke: bool | None) -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, (ComputeClass("other", 75),), gke=gke)
    assert threshold_of(plan) == (None, None)


def test_the_simulator_reads_the_default_class_of_a_snapshot() -> None:
    nodes, pods = cluster()
    snapshot = msgspec.structs.replace(make_snapshot(nodes, pods), compute_classes=(DEFAULT,))
    label = "cloud.google.com/gke-nodepool"
    assert coexistence.class_thresholds(snapshot, label) == {POOL: 0.75}
    assert coexistence.class_delays(snapshot, label) == {POOL: 180}
