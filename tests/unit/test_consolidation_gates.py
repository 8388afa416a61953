"""Pipelined removal, the gates in front of a new drain, the soft taint, and what held a run.

Each case changes the decision, or what the report says held it.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.core.model import DRAIN_FAILED_AT, DRAIN_STARTED_AT, PREFER_NO_SCHEDULE, SOFT_TAINT
from compactor.errors import ConfigError
from tests.builders import (
    ago,
    base_nodes,
    base_pods,
    blockers_of,
    busy,
    make_config,
    make_node,
    make_pod,
    node_report,
    run_plan,
    stamp,
    taint,
    toleration,
)


def emptied(name: str, started_ago: float, **kwargs: Any) -> Any:
    """A node node-compactor drained: cordoned, drain-started-at, only DaemonSet pods left (add them)."""
    return make_node(name, unschedulable=True, annotations={DRAIN_STARTED_AT: stamp(ago(started_ago))}, **kwargs)


def daemon(name: str, node: str, cpu: str = "100m", memory: str = "128Mi") -> Any:
    return make_pod(name, node=node, owner="DaemonSet", cpu=cpu, memory=memory)


def pending(name: str = "stuck", **fields: Any) -> Any:
    return make_pod(name, node=None, unschedulable=True, phase="Pending", **fields)


# -- pipelined removal ----------------------------------------------------------------------


def test_a_new_drain_starts_while_an_emptied_node_awaits_removal() -> None:
    nodes = [*base_nodes(), emptied("e1", 300)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods()])
    assert plan.decision.action == "drain"
    assert plan.decision.node == "n1"
    assert plan.awaiting_removal == ("e1",)


def test_no_new_drain_once_the_pool_has_its_limit_of_nodes_awaiting_removal() -> None:
    nodes = [*base_nodes(), emptied("e1", 300), emptied("e2", 200)]
    pods = [make_pod("web", node="n1"), daemon("ds-e1", "e1"), daemon("ds-e2", "e2"), *base_pods()]
    plan = run_plan(nodes, pods)
    assert plan.decision.action == "none"
    assert plan.held_by == "awaiting-removal"
    assert "at most 2 (maxNodesAwaitingRemoval)" in blockers_of(plan, "n1")
    more = run_plan(nodes, pods, config=make_config(pools={"default-pool": {"maxNodesAwaitingRemoval": 3}}))
    assert more.decision.node == "n1"


def test_a_pod_that_could_use_an_emptied_node_gets_the_newest_one_back_at_once() -> None:
    nodes = [*base_nodes(), emptied("e1", 600), emptied("e2", 60)]
    pods = [make_pod("web", node="n1"), daemon("ds-e1", "e1"), daemon("ds-e2", "e2"), *base_pods(), pending()]
    plan = run_plan(nodes, pods)
    assert plan.decision.action == "rollback"
    assert plan.decision.node == "e2"
    assert plan.decision.reason.startswith("capacity needed again: 1 pod(s) cannot be scheduled (default/stuck)")


def test_an_emptied_node_the_pending_pod_cannot_use_is_not_given_back() -> None:
    nodes = [*base_nodes(), emptied("e1", 60)]
    gpu_pod = pending("trainer", extended={"nvidia.com/gpu": "1"})
    plan = run_plan(nodes, [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods(), gpu_pod])
    assert plan.decision.action == "drain"
    assert plan.decision.node == "n1"


def test_a_give_back_comes_before_continuing_a_drain() -> None:
    draining = make_node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: stamp(ago(60))})
    nodes = [draining, make_node("n2", marked_since=None), make_node("n3", marked_since=None), emptied("e1", 300)]
    pods = [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods(), pending()]
    plan = run_plan(nodes, pods)
    assert (plan.decision.action, plan.decision.node) == ("rollback", "e1")
    later = run_plan(nodes, [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods()])
    assert (later.decision.action, later.decision.node) == ("continue-drain", "n1")


def test_an_emptied_node_the_autoscaler_did_not_take_is_given_back() -> None:
    nodes = [*base_nodes(), emptied("e1", 1801)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods()])
    assert (plan.decision.action, plan.decision.node) == ("rollback", "e1")
    assert "removalTimeoutSeconds" in plan.decision.reason
    assert "this run gives e1 back first" in blockers_of(plan, "n1")


def test_no_drain_starts_while_another_node_is_still_being_evicted() -> None:
    nodes = [*base_nodes(), make_node("d1", unschedulable=True, annotations={DRAIN_STARTED_AT: stamp(ago(60))})]
    plan = run_plan(nodes, [make_pod("web", node="n1"), make_pod("left", node="d1"), *base_pods()])
    assert (plan.decision.action, plan.decision.node) == ("continue-drain", "d1")
    assert "d1 is being drained; one node at a time" in blockers_of(plan, "n1")


# -- pending pods hold only the pools they could use -----------------------------------------


@pytest.mark.parametrize(
    ("stuck", "holds"),
    [
        pytest.param(pending(), True, id="fits-this-pool"),
        pytest.param(pending(node_selector=(("cloud.google.com/gke-nodepool", "other"),)), False, id="other-pool"),
        pytest.param(pending(extended={"nvidia.com/gpu": "1"}), False, id="needs-a-gpu"),
        pytest.param(pending(cpu="64"), False, id="larger-than-any-node"),
        pytest.param(pending(tolerations=(toleration("dedicated", "batch", "NoSchedule"),)), True, id="tolerates"),
    ],
)
def test_unschedulable_pods_hold_only_the_pools_they_could_run_in(stuck: Any, holds: bool) -> None:
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods(), stuck])
    if holds:
        assert plan.decision.action == "none"
        assert plan.held_by == "pending-pods"
        assert "could use pool default-pool's nodes (default/stuck)" in blockers_of(plan, "n1")
    else:
        assert (plan.decision.action, plan.decision.node) == ("drain", "n1")


def test_a_pod_kept_off_the_pool_by_a_taint_does_not_hold_it() -> None:
    nodes = [make_node(n, taints=[taint("dedicated", "batch")], marked_since=m) for n, m in (("n1", ago(3600)),)]
    nodes += [make_node("n2", marked_since=None, taints=[taint("dedicated", "batch")])]
    pods = [make_pod("web", node="n1", tolerations=(toleration("dedicated", "batch", "NoSchedule"),))]
    pods += [busy("b2", "n2")]
    plan = run_plan(nodes, [*pods, pending()])
    assert (plan.decision.action, plan.decision.node) == ("drain", "n1")


# -- node-refiner and Karpenter parity -------------------------------------------------------


def test_the_excess_nodes_threshold_holds_a_pool_with_too_few_excess_nodes() -> None:
    pods = [make_pod("web", node="n1"), *base_pods()]
    # 6.2 cpu requested on three 4-cpu nodes: the lower bound is 2, so one node is in excess.
    held = run_plan(base_nodes(), pods, config=make_config(pools={"default-pool": {"excessNodesThreshold": 2}}))
    assert held.decision.action == "none"
    assert held.held_by == "trigger"
    assert "1 excess node(s) not already being removed, needs 2 (excessNodesThreshold)" in blockers_of(held, "n1")
    enough = run_plan(base_nodes(), pods, config=make_config(pools={"default-pool": {"excessNodesThreshold": 1}}))
    assert enough.decision.node == "n1"


def test_the_drain_interval_holds_a_pool_that_started_a_drain_recently() -> None:
    nodes = [*base_nodes(), emptied("e1", 600)]
    pods = [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods()]
    config = make_config(pools={"default-pool": {"drainIntervalSeconds": 900}})
    plan = run_plan(nodes, pods, config=config)
    assert plan.held_by == "interval"
    assert "started a drain 10m ago; waiting 15m (drainIntervalSeconds)" in blockers_of(plan, "n1")
    later = run_plan([*base_nodes(), emptied("e1", 901)], pods, config=config)
    assert later.decision.node == "n1"


@pytest.mark.parametrize(
    ("windows", "zone", "open_now"),
    [
        pytest.param([{"schedule": "0 11 * * *", "durationMinutes": 120}], "UTC", True, id="inside"),
        pytest.param([{"schedule": "0 13 * * *", "durationMinutes": 60}], "UTC", False, id="before"),
        pytest.param([{"schedule": "0 9 * * *", "durationMinutes": 60}], "UTC", False, id="after"),
        # 12:00 UTC is 13:00 in Amsterdam in November.
        pytest.param([{"schedule": "0 13 * * *", "durationMinutes": 30}], "Europe/Amsterdam", True, id="time-zone"),
        pytest.param([{"schedule": "@daily", "durationMinutes": 720}], "UTC", False, id="macro-ended"),
        pytest.param(
            [{"schedule": "0 9 * * *", "durationMinutes": 60}, {"schedule": "30 11 * * *", "durationMinutes": 60}],
            "UTC",
            True,
            id="second-window",
        ),
    ],
)
def test_drains_start_only_inside_a_disruption_window(windows: Any, zone: str, open_now: bool) -> None:
    config = make_config(pools={"default-pool": {"disruptionWindows": windows}}, timeZone=zone)
    plan = run_plan(base_nodes(marked_since=None), [make_pod("web", node="n1"), *base_pods()], config=config)
    assert plan.marks_add == ("n1",)  # marks are kept outside the windows
    marked = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], config=config)
    if open_now:
        assert marked.decision.node == "n1"
    else:
        assert marked.held_by == "window"
        assert "outside its disruption windows; next opens at" in blockers_of(marked, "n1")


def test_a_closed_window_says_when_the_next_one_opens() -> None:
    config = make_config(
        pools={"default-pool": {"disruptionWindows": [{"schedule": "0 22 * * 1-5", "durationMinutes": 60}]}}
    )
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], config=config)
    # NOW is Saturday 2026-11-21 12:00 UTC: the next weekday 22:00 is Monday.
    assert "next opens at 2026-11-23T22:00:00Z" in blockers_of(plan, "n1")


# -- what the Cluster Autoscaler would not remove ------------------------------------------


def test_a_node_whose_daemonsets_keep_it_above_the_autoscaler_threshold_is_not_drained() -> None:
    pods = [make_pod("web", node="n1"), daemon("heavy-agent", "n1", cpu="2100m"), *base_pods()]
    plan = run_plan(base_nodes(), pods)
    assert plan.decision.action == "none"
    assert "DaemonSet and mirror pods request 52% of its cpu" in blockers_of(plan, "n1")
    assert "clusterAutoscalerUtilizationThreshold" in blockers_of(plan, "n1")
    lenient = run_plan(base_nodes(), pods, config=make_config(clusterAutoscalerUtilizationThreshold=0.6))
    assert lenient.decision.node != "n1" or lenient.decision.action == "drain"
    assert "clusterAutoscalerUtilizationThreshold" not in blockers_of(lenient, "n1")


# -- the soft taint -------------------------------------------------------------------------


def soft() -> Any:
    return taint(SOFT_TAINT, "true", PREFER_NO_SCHEDULE)


def test_marked_nodes_get_the_soft_taint_and_unmarked_ones_lose_it() -> None:
    nodes = [make_node("n1", marked_since=None), make_node("n2", marked_since=None, taints=[soft()])]
    nodes += [make_node("n3", marked_since=None)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), busy("b2", "n2"), busy("b3", "n3")])
    assert plan.marks_add == ("n1",)
    assert plan.soft_taints_add == ("n1",)
    assert plan.soft_taints_remove == ("n2",)


def test_a_cordoned_node_is_never_given_or_relieved_of_the_soft_taint() -> None:
    nodes = [make_node("n1", unschedulable=True), make_node("n2", unschedulable=True, taints=[soft()])]
    plan = run_plan(nodes, [busy("b2", "n2")])
    assert plan.soft_taints_add == ()
    assert plan.soft_taints_remove == ()


def test_no_soft_taint_when_it_is_switched_off() -> None:
    plan = run_plan(base_nodes(), base_pods(), config=make_config(softTaintMarkedNodes=False))
    assert plan.soft_taints_add == ()


def test_the_proof_puts_pods_on_unmarked_nodes_first_as_the_scheduler_will() -> None:
    # n2 is marked (50% used); n3 (80%) and n4 (87%) are not: least allocated alone would pick n2.
    nodes = [make_node("n1"), make_node("n2"), make_node("n3", marked_since=None), make_node("n4", marked_since=None)]
    pods = [make_pod("w0", node="n1", cpu="500m"), busy("k2", "n2", cpu="2"), busy("k3", "n3", cpu="3200m")]
    pods += [busy("k4", "n4", cpu="3500m")]
    plan = run_plan(nodes, pods)
    assert plan.decision.action == "drain"
    assert dict(plan.decision.placements) == {"default/w0": "n3"}


def test_a_drain_must_fit_with_and_without_the_scheduler_avoiding_marked_nodes() -> None:
    # Only n2 (marked) has room for the 1-cpu pod, which has the higher priority and so is evicted
    # after the small ones. With marked nodes avoided, the small pods fill n3 and n4 first and the
    # big one still fits on n2; without, the small pods go to n2 (least allocated) and the big one
    # finds no room: not proven, so not drained.
    nodes = [make_node("n1"), make_node("n2"), make_node("n3", marked_since=None), make_node("n4", marked_since=None)]
    keepers = [busy("k2", "n2", cpu="2800m"), busy("k3", "n3", cpu="3400m"), busy("k4", "n4", cpu="3400m")]
    movers = [
        make_pod("z-big", node="n1", cpu="1", priority=1000),
        *(make_pod(f"a-small-{i}", node="n1", cpu="300m") for i in range(2)),
    ]
    plan = run_plan(nodes, [*movers, *keepers], config=make_config(reserveRoomForDrains=False))
    assert plan.decision.action != "drain" or plan.decision.node != "n1"
    assert "pod default/z-big" in blockers_of(plan, "n1")


# -- what held the run ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "pods", "kind"),
    [
        pytest.param(
            base_nodes(marked_since=ago(60)), [make_pod("web", node="n1"), *base_pods()], "marked-recently", id="mark"
        ),
        pytest.param(
            [make_node("n1"), make_node("n2", marked_since=None, created=ago(60)), make_node("n3", marked_since=None)],
            [make_pod("web", node="n1"), *base_pods()],
            "cooldown",
            id="scaled-up",
        ),
        pytest.param(
            [make_node("n1", annotations={DRAIN_FAILED_AT: stamp(ago(60))}), *base_nodes()[1:]],
            [make_pod("web", node="n1"), *base_pods()],
            "backoff",
            id="backoff",
        ),
        pytest.param(
            base_nodes(),
            [make_pod("web", node="n1", cpu="1500m"), *base_pods()],
            "no-fit",
            id="no-fit",
        ),
        pytest.param(
            [make_node("n1", marked_since=None), make_node("n2", marked_since=None)],
            [busy("b1", "n1"), busy("b2", "n2")],
            "not-underutilized",
            id="busy",
        ),
        pytest.param([], [], "no-nodes", id="empty"),
    ],
)
def test_the_plan_names_the_gate_that_held_it(nodes: Any, pods: Any, kind: str) -> None:
    plan = run_plan(nodes, pods)
    assert plan.decision.action == "none"
    assert plan.held_by == kind


def test_nothing_held_a_run_that_acts() -> None:
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "drain"
    assert plan.held_by is None
    assert node_report(plan, "n1").candidate


# -- the configuration ----------------------------------------------------------------------


def test_the_new_keys_are_optional_and_an_estafette_file_means_the_same() -> None:
    estafette = make_config(pools={"default-pool": {"scaleDownRequiredUnderutilizedNodeCount": 2}})
    pool = estafette.pool("default-pool")
    assert pool is not None
    assert (pool.max_awaiting_removal, pool.excess_nodes_threshold, pool.drain_interval_seconds) == (2, None, 0)
    assert pool.disruption_windows is None
    assert (estafette.time_zone, estafette.ca_utilization_threshold, estafette.soft_taint_marked_nodes) == (
        "UTC",
        0.5,
        True,
    )


@pytest.mark.parametrize(
    ("top", "pool", "problem"),
    [
        pytest.param({"timeZone": "Mars/Olympus"}, {}, "timeZone: 'Mars/Olympus' is not an IANA time zone", id="zone"),
        pytest.param(
            {},
            {"disruptionWindows": [{"schedule": "0 25 * * *", "durationMinutes": 60}]},
            "nodePools.default-pool.disruptionWindows.0.schedule: schedule '0 25 * * *' is not a cron expression",
            id="cron",
        ),
        pytest.param(
            {},
            {"disruptionWindows": [{"schedule": "@daily", "duration": "1h"}]},
            "nodePools.default-pool.disruptionWindows.0.duration: unknown key",
            id="karpenter-spelling",
        ),
        pytest.param(
            {}, {"excessNodesThreshold": 0}, "excessNodesThreshold: Input should be greater than or equal to 1"
        ),
        pytest.param({"clusterAutoscalerUtilizationThreshold": 1.5}, {}, "clusterAutoscalerUtilizationThreshold"),
    ],
)
def test_a_bad_new_key_is_named_with_its_path(top: Any, pool: Any, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_config(pools={"default-pool": pool}, **top)
    assert any(problem in text for text in raised.value.problems), raised.value.problems


def test_the_give_back_looks_past_the_cordon_taint_but_not_past_the_autoscaler_removing_the_node() -> None:
    cordon_taint = taint("node.kubernetes.io/unschedulable")
    nodes = [*base_nodes(), emptied("e1", 60, taints=[cordon_taint])]
    pods = [make_pod("web", node="n1"), daemon("ds-e1", "e1"), *base_pods(), pending()]
    plan = run_plan(nodes, pods)
    assert (plan.decision.action, plan.decision.node) == ("rollback", "e1")
    deleting = [*base_nodes(), emptied("e1", 60, taints=[cordon_taint, taint("ToBeDeletedByClusterAutoscaler")])]
    assert run_plan(deleting, pods).decision.action != "rollback"
