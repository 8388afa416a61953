"""What stays on a drained node (DaemonSet and mirror pods) against the threshold the Cluster Autoscaler
applies to its pool: the pool's ComputeClass consolidationThreshold when it has one, else
clusterAutoscalerUtilizationThreshold; a node exactly at the threshold is removed
(core/scaledown/eligibility/eligibility.go: `utilization > threshold` keeps a node)."""

from __future__ import annotations

import pytest

from compactor.core.model import ComputeClass, Node, Pod, Snapshot
from compactor.core.plan import Plan
from compactor.core.planner import plan as make_plan
from tests.builders import NOW, POOL, blockers_of, busy, make_config, make_node, make_pod

CLASS_LABEL = "cloud.google.com/compute-class"
REFUSED = "the Cluster Autoscaler would not remove it"  # the ca-threshold blocker


def cluster(daemon_cpu: str, *, compute_class: str | None = None) -> tuple[list[Node], list[Pod]]:
    """`src` (4 cpu) holds a small app pod and a DaemonSet pod of `daemon_cpu`; n2 and n3 have room."""
    labels = {CLASS_LABEL: compute_class} if compute_class is not None else None
    nodes = [
        make_node("src", labels=labels),
        make_node("n2", marked_since=None, labels=labels),
        make_node("n3", marked_since=None, labels=labels),
    ]
    pods = [
        make_pod("app-1", node="src", cpu="100m"),
        make_pod("agent-src", node="src", cpu=daemon_cpu, owner="DaemonSet"),
        busy("b2", "n2", cpu="2"),
        busy("b3", "n3", cpu="2"),
    ]
    return nodes, pods


def planned(nodes: list[Node], pods: list[Pod], classes: tuple[ComputeClass, ...] = (), **pool: object) -> Plan:
    config = make_config(pools={POOL: {"scaleDownCPURequestRatioLimit": 0.9, **pool}})
    snapshot = Snapshot(tuple(nodes), tuple(pods), (), compute_classes=classes)
    return make_plan(snapshot, config, now=NOW)


@pytest.mark.parametrize(
    ("daemon_cpu", "refused"),
    [
        pytest.param("2100m", True, id="daemonsets-at-52.5%-above-50%"),
        pytest.param("2", False, id="daemonsets-at-exactly-50%-are-removable"),
        pytest.param("1", False, id="daemonsets-at-25%"),
    ],
)
def test_without_a_class_the_configured_threshold_decides(daemon_cpu: str, refused: bool) -> None:
    nodes, pods = cluster(daemon_cpu)
    assert (REFUSED in blockers_of(planned(nodes, pods), "src")) is refused


def test_a_class_threshold_read_from_the_cluster_replaces_the_fixed_one() -> None:
    nodes, pods = cluster("2400m", compute_class="dense")  # 60%: above 50%, below the class's 75%
    classes = (ComputeClass("dense", 75),)
    assert REFUSED not in blockers_of(planned(nodes, pods, classes), "src")
    assert REFUSED in blockers_of(planned(nodes, pods), "src"), "at the fixed 50% it was refused"


def test_a_declared_class_threshold_replaces_the_fixed_one() -> None:
    nodes, pods = cluster("2400m")
    declared = planned(nodes, pods, computeClassConsolidationThreshold=0.75)
    assert REFUSED not in blockers_of(declared, "src")


def test_a_lower_class_threshold_refuses_what_the_fixed_one_took() -> None:
    nodes, pods = cluster("1600m", compute_class="strict")  # 40%: under 50%, above the class's 30%
    text = blockers_of(planned(nodes, pods, (ComputeClass("strict", 30),)), "src")
    assert REFUSED in text and "threshold 30%, ComputeClass strict's consolidationThreshold" in text
