"""The ComputeClasses a run reads (core.coexistence): a pool whose limit is at or below the threshold its
nodes' ComputeClass sets is left to the Cluster Autoscaler, which removes every node node-compactor would
drain (the pair did worse than the threshold alone: steady-fragmented 409.3 node-hours against 385.8,
docs/savings.md); a drain already under way there still continues or is rolled back (DESIGN rule 0)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from compactor.core import planner
from compactor.core.model import (
    COMPUTE_CLASS_LABEL,
    DRAIN_STARTED_AT,
    PREFER_NO_SCHEDULE,
    SOFT_TAINT,
    ComputeClass,
    Node,
    Pod,
)
from compactor.core.plan import Plan
from compactor.report import to_dict
from tests.builders import (
    NOW,
    POOL,
    ago,
    blockers_of,
    busy,
    make_config,
    make_node,
    make_pod,
    make_snapshot,
    stamp,
    taint,
)

CLASS = "consolidate-75"


def in_class(name: str, compute_class: str | None = CLASS, **fields: Any) -> Node:
    labels = {COMPUTE_CLASS_LABEL: compute_class} if compute_class is not None else {}
    return make_node(name, labels=labels, **fields)


def cluster(compute_class: str | None = CLASS) -> tuple[list[Node], list[Pod]]:
    """n1 at 40% cpu, marked long ago, whose pods fit on n2 and n3 (75% busy); all of one ComputeClass."""
    nodes = [
        in_class("n1", compute_class),
        in_class("n2", compute_class, marked_since=None),
        in_class("n3", compute_class, marked_since=None),
    ]
    pods = [make_pod("web-1", node="n1", cpu="800m"), make_pod("web-2", node="n1", cpu="800m")]
    return nodes, [*pods, busy("b2", "n2"), busy("b3", "n3")]


def plan_with(
    nodes: list[Node],
    pods: list[Pod],
    classes: tuple[ComputeClass, ...] = (ComputeClass(CLASS, 75),),
    *,
    unread: str | None = None,
    **pool: Any,
) -> Plan:
    snapshot = msgspec.structs.replace(
        make_snapshot(nodes, pods), compute_classes=classes, compute_classes_unread=unread
    )
    return planner.plan(snapshot, make_config(pools={POOL: pool}), now=NOW)


def pool_report(plan: Plan) -> dict[str, Any]:
    report: dict[str, Any] = next(pool for pool in to_dict(plan)["pools"] if pool["name"] == POOL)
    return report


def test_a_limit_at_the_class_threshold_leaves_the_pool_to_the_autoscaler() -> None:
    nodes, pods = cluster()
    assert plan_with(nodes, pods, ()).decision.action == "drain", "without the class n1 is drained"

    plan = plan_with(nodes, pods)

    assert plan.decision.action == "none"
    assert plan.held_by == "compute-class"
    assert plan.marks_remove == ("n1",) and plan.marks_add == ()
    assert "left to the Cluster Autoscaler" in blockers_of(plan, "n1")
    report = pool_report(plan)
    assert report["consolidationThreshold"] == 0.75 and report["thresholdSource"] == "cluster"
    assert report["computeClass"] == CLASS
    left = report["leftToAutoscaler"]
    assert "consolidationThreshold 75%" in left and "scaleDownCPURequestRatioLimit 0.75" in left
    assert "raise scaleDownCPURequestRatioLimit above 0.75 (0.9, for example)" in left
    assert left in to_dict(plan)["warnings"]
    assert "left to the Cluster Autoscaler" in planner.BLOCKER_SUMMARY["compute-class"]
    assert "in a pool left to the Cluster Autoscaler" in plan.decision.reason


def test_a_limit_above_the_class_threshold_drains_between_the_two() -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, scaleDownCPURequestRatioLimit=0.9)
    assert plan.decision.action == "drain" and plan.decision.node == "n1"
    report = pool_report(plan)
    assert report["consolidationThreshold"] == 0.75 and "leftToAutoscaler" not in report
    assert plan.compute_class_warnings == ()


def test_no_soft_taint_and_no_steering_in_a_pool_left_to_the_autoscaler() -> None:
    nodes, pods = cluster()
    nodes[0] = msgspec.structs.replace(nodes[0], taints=(taint(SOFT_TAINT, effect=PREFER_NO_SCHEDULE),))
    pods[0] = msgspec.structs.replace(pods[0], steered=True, deletion_cost_set=True)
    plan = plan_with(nodes, pods)
    assert plan.soft_taints_add == () and plan.soft_taints_remove == ("n1",)
    assert plan.steered_nodes == () and plan.deletion_costs_add == ()
    assert plan.deletion_costs_remove == ("default/web-1",)


def test_the_class_read_wins_over_a_different_declared_threshold() -> None:
    nodes, pods = cluster()
    plan = plan_with(
        nodes,
        pods,
        (ComputeClass(CLASS, 80),),
        scaleDownCPURequestRatioLimit=0.75,
        computeClassConsolidationThreshold=0.6,
    )
    assert plan.decision.action == "none" and plan.held_by == "compute-class"
    differs = [w for w in plan.compute_class_warnings if "computeClassConsolidationThreshold is 0.6" in w]
    assert differs and "consolidationThreshold 80% (0.8)" in differs[0]
    assert pool_report(plan)["consolidationThreshold"] == 0.8


def test_a_declared_threshold_alone_leaves_a_pool_whose_memory_limit_is_below_it() -> None:
    nodes, pods = cluster(compute_class=None)
    plan = plan_with(
        nodes,
        pods,
        (),
        scaleDownCPURequestRatioLimit=0.9,
        scaleDownMemoryRequestRatioLimit=0.7,
        computeClassConsolidationThreshold=0.75,
    )
    assert plan.decision.action == "none"
    report = pool_report(plan)
    assert report["thresholdSource"] == "configuration" and "computeClass" not in report
    assert "scaleDownMemoryRequestRatioLimit 0.7" in report["leftToAutoscaler"]


def test_nodes_of_several_classes_take_the_highest_threshold_and_warn() -> None:
    nodes, pods = cluster()
    nodes[2] = in_class("n3", "consolidate-60", marked_since=None)
    classes = (ComputeClass(CLASS, 75), ComputeClass("consolidate-60", 60))
    plan = plan_with(nodes, pods, classes, scaleDownCPURequestRatioLimit=0.7)
    assert plan.decision.action == "none" and pool_report(plan)["computeClass"] == CLASS
    mixed = [w for w in plan.compute_class_warnings if "different ComputeClasses" in w]
    assert mixed and f"{CLASS}: 2 node(s)" in mixed[0] and "consolidate-60: 1 node(s)" in mixed[0]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(
            ComputeClass(CLASS, None, "spec.autoscalingPolicy.consolidationThreshold '75' is not a whole percent"),
            id="text",
        ),
        pytest.param(
            ComputeClass(CLASS, None, "spec.autoscalingPolicy.consolidationThreshold 150 is outside 0 to 100"),
            id="range",
        ),
        pytest.param(ComputeClass(CLASS, None), id="missing"),
    ],
)
def test_a_class_without_a_readable_threshold_is_a_warning_and_ignored(bad: ComputeClass) -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, (bad,))
    assert plan.decision.action == "drain", "the class is ignored: the pool is node-compactor's"
    assert any(CLASS in warning for warning in plan.compute_class_warnings)


def test_a_class_label_without_its_class_says_how_to_save_the_classes() -> None:
    nodes, pods = cluster()
    plan = plan_with(nodes, pods, ())
    assert plan.decision.action == "drain"
    assert any("computeclasses" in w and CLASS in w for w in plan.compute_class_warnings)


def test_classes_that_could_not_be_read_are_a_warning_and_the_declared_threshold_is_used() -> None:
    nodes, pods = cluster()
    unread = "cannot read the cluster's ComputeClasses (HTTP 403 Forbidden)"
    plan = plan_with(nodes, pods, (), unread=unread, scaleDownCPURequestRatioLimit=0.9)
    assert plan.compute_class_warnings == (unread,)
    assert plan.decision.action == "drain"


def draining(started_seconds_ago: float) -> tuple[list[Node], list[Pod]]:
    nodes, pods = cluster()
    annotations = {DRAIN_STARTED_AT: stamp(ago(started_seconds_ago))}
    nodes[0] = in_class("n1", annotations=annotations, unschedulable=True)
    return nodes, pods


def test_a_drain_under_way_in_a_pool_left_to_the_autoscaler_goes_on() -> None:
    nodes, pods = draining(60)
    plan = plan_with(nodes, pods)
    assert plan.decision.action == "continue-drain" and plan.decision.node == "n1"
    assert plan.decision.evictions == ("default/web-1", "default/web-2")


def test_a_drain_under_way_in_a_pool_left_to_the_autoscaler_is_rolled_back_at_its_timeout() -> None:
    nodes, pods = draining(901)
    plan = plan_with(nodes, pods)
    assert plan.decision.action == "rollback" and plan.decision.node == "n1"
