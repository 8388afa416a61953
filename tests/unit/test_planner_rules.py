"""The decision rules of DESIGN.md, one group per rule; each case changes the decision."""

from __future__ import annotations

import random
from typing import Any

import pytest

from compactor.core import fit
from compactor.core.cluster import ClusterView
from compactor.core.model import (
    CA_SCALE_DOWN_DISABLED,
    DISABLED,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    UNDERUTILIZED_SINCE,
    Node,
    Pdb,
    Pod,
    PoolAutoscaling,
)
from tests.builders import (
    NOW,
    ago,
    base_nodes,
    base_pods,
    blockers_of,
    busy,
    make_config,
    make_node,
    make_pdb,
    make_pod,
    make_snapshot,
    node_report,
    run_plan,
    stamp,
    taint,
)

# -- rule 0: a drain in progress ------------------------------------------------------------


def draining_node(started: float, **kwargs: Any) -> Any:
    return make_node(
        "n1",
        unschedulable=True,
        annotations={DRAIN_STARTED_AT: stamp(ago(started)), **kwargs.pop("annotations", {})},
        **kwargs,
    )


def test_continues_a_drain_that_still_has_pods_to_move() -> None:
    plan = run_plan([draining_node(60), *base_nodes()[1:]], [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "continue-drain"
    assert plan.decision.node == "n1"
    assert plan.decision.evictions == ("default/web",)


def test_rolls_back_a_drain_that_ran_past_its_timeout() -> None:
    plan = run_plan([draining_node(901), *base_nodes()[1:]], [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "rollback"
    assert "drainTimeoutSeconds" in plan.decision.reason


@pytest.mark.parametrize(
    "left_behind",
    [
        pytest.param(make_pod("ds", node="n1", owner="DaemonSet"), id="daemonset"),
        pytest.param(make_pod("static", node="n1", owner="Node", is_mirror=True), id="mirror"),
        pytest.param(make_pod("job", node="n1", owner="Job", phase="Succeeded"), id="finished"),
    ],
)
def test_an_emptied_node_awaits_removal_once_only_pods_that_stay_are_left(left_behind: Any) -> None:
    plan = run_plan([draining_node(600), *base_nodes()[1:]], [left_behind, *base_pods()])
    assert plan.decision.action == "none"
    assert plan.awaiting_removal == ("n1",)
    assert blockers_of(plan, "n1") == "emptied; waiting for the Cluster Autoscaler to remove it"
    # Nothing else is underutilized: that, not the node awaiting removal, is what held the run.
    assert plan.held_by == "not-underutilized"


def test_rolls_back_an_empty_node_the_autoscaler_did_not_take() -> None:
    plan = run_plan([draining_node(1801), *base_nodes()[1:]], base_pods())
    assert plan.decision.action == "rollback"
    assert "removalTimeoutSeconds" in plan.decision.reason


def test_starts_no_second_drain_while_one_is_in_progress() -> None:
    nodes = [draining_node(60), make_node("n4"), make_node("n2", marked_since=None), make_node("n3", marked_since=None)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), make_pod("api", node="n4"), *base_pods()])
    assert plan.decision.action == "continue-drain"
    assert not node_report(plan, "n4").candidate
    assert "n1 is being drained; one node at a time" in blockers_of(plan, "n4")


def test_keeps_maintaining_marks_during_a_drain() -> None:
    nodes = [draining_node(60), make_node("n4", marked_since=None), make_node("n2", marked_since=None)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), busy("b2", "n2")])
    assert "n4" in plan.marks_add


def test_rolls_back_when_someone_uncordoned_the_draining_node() -> None:
    node = make_node("n1", annotations={DRAIN_STARTED_AT: stamp(ago(60))})
    plan = run_plan([node, *base_nodes()[1:]], [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "rollback"
    assert "uncordoned" in plan.decision.reason


def test_rolls_back_a_drain_whose_start_time_is_unreadable() -> None:
    node = make_node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: "yesterday"})
    plan = run_plan([node, *base_nodes()[1:]], [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "rollback"


def test_of_two_nodes_claiming_to_be_drained_the_older_drain_is_given_back() -> None:
    nodes = [draining_node(60), make_node("n2", unschedulable=True, annotations={DRAIN_STARTED_AT: stamp(ago(30))})]
    plan = run_plan([*nodes, make_node("n3")], [make_pod("web", node="n1"), make_pod("api", node="n2")])
    assert (plan.decision.action, plan.decision.node) == ("rollback", "n1")
    assert "only one node is drained at a time: n2, the latest drain, goes on" in plan.decision.reason
    assert "this node is being drained" in blockers_of(plan, "n2")


def test_continue_drain_never_evicts_a_pod_that_must_not_be_evicted() -> None:
    pods = [
        make_pod("web", node="n1"),
        make_pod("bare", node="n1", owner=None),
        make_pod("guarded", node="n1", labels={"app": "guarded"}),
        make_pod("leaving", node="n1", terminating=True),
    ]
    pdb = make_pdb(match={"app": "guarded"}, allowed=0)
    plan = run_plan([draining_node(60), *base_nodes()[1:]], [*pods, *base_pods()], [pdb])
    assert plan.decision.action == "continue-drain"
    # The PDB is the Eviction API's to enforce (a 429 is retried); a bare pod would be lost.
    assert set(plan.decision.evictions) == {"default/web", "default/guarded"}


# -- rule 2: underutilization ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpu", "memory", "memory_limit", "underutilized"),
    [
        pytest.param("2", "1Gi", None, True, id="cpu-below-limit"),
        pytest.param("3", "1Gi", None, False, id="cpu-at-limit-is-not-below"),
        pytest.param("2", "15Gi", None, True, id="memory-ignored-without-a-limit"),
        pytest.param("2", "15Gi", 0.75, False, id="memory-above-its-limit"),
        pytest.param("2", "4Gi", 0.75, True, id="both-below"),
    ],
)
def test_a_node_is_underutilized_below_its_ratio_limits(
    cpu: str, memory: str, memory_limit: float | None, underutilized: bool
) -> None:
    settings: dict[str, Any] = {}
    if memory_limit is not None:
        settings["scaleDownMemoryRequestRatioLimit"] = memory_limit
    config = make_config(pools={"default-pool": settings})
    plan = run_plan([make_node("n1", marked_since=None)], [make_pod("x", cpu=cpu, memory=memory)], config=config)
    assert node_report(plan, "n1").underutilized is underutilized


# -- rule 3: marks ------------------------------------------------------------------------------


def test_marks_a_node_when_it_first_becomes_underutilized() -> None:
    plan = run_plan([make_node("n1", marked_since=None), make_node("n2", marked_since=None)], [busy("b", "n2")])
    assert plan.marks_add == ("n1",)
    assert node_report(plan, "n1").marked_since == NOW


def test_removes_the_mark_of_a_node_that_filled_up() -> None:
    plan = run_plan([make_node("n1")], [busy("b", "n1")])
    assert plan.marks_remove == ("n1",)
    assert node_report(plan, "n1").marked_since is None


def test_keeps_an_existing_mark_and_its_time() -> None:
    plan = run_plan([make_node("n1", marked_since=ago(100))])
    assert plan.marks_add == () and plan.marks_remove == ()
    assert node_report(plan, "n1").marked_since == ago(100)


@pytest.mark.parametrize(
    "node",
    [
        pytest.param(make_node("n1", pool="batch"), id="pool-not-configured"),
        pytest.param(make_node("n1", annotations={DISABLED: "true"}), id="node-opted-out"),
    ],
)
def test_removes_stale_marks_where_marking_is_not_allowed(node: Any) -> None:
    plan = run_plan([node])
    assert plan.marks_remove == ("n1",)
    assert plan.marks_add == ()


def test_never_marks_nodes_of_a_disabled_pool() -> None:
    config = make_config(pools={"default-pool": {"enabled": False}})
    plan = run_plan([make_node("n1", marked_since=None)], config=config)
    assert plan.marks_add == ()


@pytest.mark.parametrize("value", ["not-a-time", stamp(NOW.replace(year=2027))], ids=["unreadable", "future"])
def test_restarts_a_mark_that_cannot_be_trusted(value: str) -> None:
    plan = run_plan([make_node("n1", marked_since=None, annotations={UNDERUTILIZED_SINCE: value})])
    assert plan.marks_add == ("n1",)


# -- rule 4: candidate conditions ---------------------------------------------------------


def test_drains_the_light_node_when_every_condition_holds() -> None:
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "drain"
    assert plan.decision.node == "n1"
    assert plan.decision.pool == "default-pool"
    assert node_report(plan, "n1").candidate


@pytest.mark.parametrize(
    ("light", "expected"),
    [
        pytest.param({"marked_since": ago(299)}, "needs 5m (neededMarkedTimeSeconds)", id="marked-too-briefly"),
        pytest.param({"marked_since": None}, "neededMarkedTimeSeconds", id="not-marked-yet"),
        pytest.param({"ready": False}, "not Ready", id="not-ready"),
        pytest.param({"unschedulable": True}, "cordoned by someone else", id="cordoned-by-a-person"),
        pytest.param({"created": ago(1199)}, "minimumNodeAgeSeconds", id="too-young"),
        pytest.param({"created": None}, "creation time unknown", id="age-unknown"),
        pytest.param({"annotations": {DISABLED: "true"}}, "node-compactor.dev/disabled", id="opted-out"),
        pytest.param({"annotations": {CA_SCALE_DOWN_DISABLED: "true"}}, "scale-down-disabled", id="ca-scale-down-off"),
        pytest.param({"annotations": {DRAIN_FAILED_AT: stamp(ago(1000))}}, "retryBackoffSeconds", id="backing-off"),
        pytest.param({"annotations": {DRAIN_FAILED_AT: "garbage"}}, "unreadable", id="backoff-unreadable"),
        pytest.param({"pool": "other"}, "pool other is not enabled", id="pool-not-enabled"),
        pytest.param({"pool": None}, "no cloud.google.com/gke-nodepool label", id="no-pool-label"),
    ],
)
def test_a_node_failing_one_condition_is_not_a_candidate(light: dict[str, Any], expected: str) -> None:
    plan = run_plan(base_nodes(**light), [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.action == "none"
    assert not node_report(plan, "n1").candidate
    assert expected in blockers_of(plan, "n1")


def test_a_drain_may_be_retried_after_the_backoff() -> None:
    plan = run_plan(
        base_nodes(annotations={DRAIN_FAILED_AT: stamp(ago(1801))}), [make_pod("web", node="n1"), *base_pods()]
    )
    assert plan.decision.node == "n1"


def test_keeps_the_pools_minimum_of_schedulable_nodes() -> None:
    config = make_config(pools={"default-pool": {"minNodes": 3}})
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], config=config)
    assert plan.decision.action == "none"
    assert "minNodes is 3" in blockers_of(plan, "n1")


def test_a_pool_without_gke_autoscaling_is_never_drained() -> None:
    autoscaling = {"default-pool": PoolAutoscaling(enabled=False)}
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], pool_autoscaling=autoscaling)
    assert plan.decision.action == "none"
    assert "has no autoscaling" in blockers_of(plan, "n1")


@pytest.mark.parametrize(
    ("autoscaling", "expected"),
    [
        pytest.param(PoolAutoscaling(True, total_min_node_count=3), "totalMinNodeCount 3", id="total-minimum"),
        pytest.param(PoolAutoscaling(True, min_node_count=3), "minNodeCount 3 per zone", id="zone-minimum"),
    ],
)
def test_a_pool_is_never_taken_below_its_autoscaling_minimum(autoscaling: PoolAutoscaling, expected: str) -> None:
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], pool_autoscaling={POOL: autoscaling})
    assert plan.decision.action == "none"
    assert expected in blockers_of(plan, "n1")


POOL = "default-pool"


# -- rule 5: blocking pods ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod("x", node="n1", safe_to_evict=False), "safe-to-evict=false", id="safe-to-evict-false"),
        pytest.param(make_pod("x", node="n1", do_not_disrupt=True), "do-not-disrupt", id="do-not-disrupt"),
        pytest.param(make_pod("x", node="n1", owner=None), "no controller", id="bare-pod"),
        pytest.param(make_pod("x", node="n1", local_storage=("cache",)), "local storage (volume cache)", id="emptydir"),
        pytest.param(
            make_pod("x", node="n1", namespace="kube-system"),
            "kube-system pod without a PodDisruptionBudget",
            id="system-pod-without-pdb",
        ),
    ],
)
def test_a_blocking_pod_keeps_its_node(pod: Any, expected: str) -> None:
    plan = run_plan(base_nodes(), [pod, *base_pods()])
    assert plan.decision.action == "none"
    assert expected in blockers_of(plan, "n1")


def test_a_pdb_that_allows_no_disruption_blocks_the_node() -> None:
    pdb = make_pdb(match={"app": "web"}, allowed=0)
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], [pdb])
    assert plan.decision.action == "none"
    assert "PodDisruptionBudget pdb allows no disruption" in blockers_of(plan, "n1")


def test_a_pdb_in_another_namespace_does_not_apply() -> None:
    pdb = make_pdb(match={"app": "web"}, allowed=0, namespace="other")
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], [pdb])
    assert plan.decision.node == "n1"


def test_a_pod_under_two_pdbs_blocks_because_eviction_refuses_it() -> None:
    pdbs = [make_pdb("a", match={"app": "web"}), make_pdb("b", match={"app": "web"})]
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], pdbs)
    assert "covered by 2 PodDisruptionBudgets" in blockers_of(plan, "n1")


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("x", node="n1", owner=None, safe_to_evict=True), id="bare"),
        pytest.param(make_pod("x", node="n1", local_storage=("tmp",), safe_to_evict=True), id="local-storage"),
        pytest.param(make_pod("x", node="n1", namespace="kube-system", safe_to_evict=True), id="kube-system"),
    ],
)
def test_safe_to_evict_true_overrides_the_soft_rules(pod: Any) -> None:
    plan = run_plan(base_nodes(), [pod, *base_pods()])
    assert plan.decision.node == "n1"


def test_safe_to_evict_true_does_not_override_a_pdb() -> None:
    pdb = make_pdb(match={"app": "x"}, allowed=0)
    plan = run_plan(base_nodes(), [make_pod("x", node="n1", safe_to_evict=True), *base_pods()], [pdb])
    assert plan.decision.action == "none"


def test_a_kube_system_pod_with_a_pdb_may_move() -> None:
    pdb = make_pdb(match={"app": "dns"}, namespace="kube-system")
    plan = run_plan(base_nodes(), [make_pod("dns", node="n1", namespace="kube-system"), *base_pods()], [pdb])
    assert plan.decision.node == "n1"


@pytest.mark.parametrize(
    ("setting", "pod"),
    [
        pytest.param("skipNodesWithLocalStorage", make_pod("x", node="n1", local_storage=("v",)), id="local-storage"),
        pytest.param("skipNodesWithSystemPods", make_pod("x", node="n1", namespace="kube-system"), id="system-pods"),
    ],
)
def test_turning_a_skip_setting_off_lets_such_pods_move(setting: str, pod: Any) -> None:
    config = make_config(
        skipNodesWithLocalStorage=setting != "skipNodesWithLocalStorage",
        skipNodesWithSystemPods=setting != "skipNodesWithSystemPods",
    )
    plan = run_plan(base_nodes(), [pod, *base_pods()], config=config)
    assert plan.decision.node == "n1"


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("ds", node="n1", owner="DaemonSet", local_storage=("logs",)), id="daemonset"),
        pytest.param(make_pod("m", node="n1", owner=None, is_mirror=True, namespace="kube-system"), id="mirror"),
        pytest.param(make_pod("j", node="n1", owner=None, phase="Failed"), id="terminal"),
    ],
)
def test_pods_that_stay_never_block_and_are_not_moved(pod: Any) -> None:
    plan = run_plan(base_nodes(), [pod, *base_pods()])
    assert plan.decision.node == "n1"
    assert plan.decision.evictions == ()


# -- rule 6: the fit simulation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "others", "expected"),
    [
        pytest.param(make_pod("big", node="n1", cpu="1500m"), {}, "(2 checked: 2 with too little free cpu)", id="cpu"),
        pytest.param(
            make_pod("fat", node="n1", memory="15500Mi"), {}, "(2 checked: 2 with too little free memory)", id="memory"
        ),
        pytest.param(
            make_pod("gpu", node="n1", extended={"nvidia.com/gpu": "1"}),
            {},
            "nvidia.com/gpu 1) fits on no other node (2 checked: 2 with too little free nvidia.com/gpu)",
            id="gpu",
        ),
        pytest.param(
            make_pod("web", node="n1"), {"pods": 1}, "2 with no room for another pod (its pod limit)", id="pod-count"
        ),
        pytest.param(
            make_pod("web", node="n1"),
            {"taints": [taint("dedicated", "db")]},
            "2 with a taint it does not tolerate",
            id="taint",
        ),
        pytest.param(
            make_pod("web", node="n1", node_selector=(("disk", "ssd"),)),
            {},
            "2 with labels its nodeSelector does not match",
            id="node-selector",
        ),
    ],
)
def test_a_pod_that_fits_nowhere_else_keeps_its_node(pod: Any, others: dict[str, Any], expected: str) -> None:
    nodes = [
        make_node("n1"),
        make_node("n2", marked_since=None, **others),
        make_node("n3", marked_since=None, **others),
    ]
    plan = run_plan(nodes, [pod, *base_pods()])
    assert plan.decision.action == "none"
    assert expected in blockers_of(plan, "n1")


@pytest.mark.parametrize(
    ("tainted", "plain", "busy_kind", "expected"),
    [
        pytest.param(
            1,
            3,
            "plain",
            "(4 checked: 3 with labels its nodeSelector does not match, 1 with a taint it does not tolerate)",
            id="more-refuse-the-selector",
        ),
        pytest.param(
            3,
            1,
            "plain",
            "(4 checked: 3 with a taint it does not tolerate, 1 with labels its nodeSelector does not match)",
            id="more-refuse-for-a-taint",
        ),
        # Equal counts: in the order the scan meets them, the least allocated node first.
        pytest.param(
            2,
            2,
            "plain",
            "(4 checked: 2 with a taint it does not tolerate, 2 with labels its nodeSelector does not match)",
            id="tie-tainted-nodes-least-allocated",
        ),
        pytest.param(
            2,
            2,
            "tainted",
            "(4 checked: 2 with labels its nodeSelector does not match, 2 with a taint it does not tolerate)",
            id="tie-plain-nodes-least-allocated",
        ),
    ],
)
def test_a_pod_pinned_by_its_node_selector_says_what_each_other_node_refuses_it_for(
    tainted: int, plain: int, busy_kind: str, expected: str
) -> None:
    nodes = [make_node("n1")]
    nodes += [make_node(f"t{i}", marked_since=None, taints=[taint("dedicated", "db")]) for i in range(tainted)]
    nodes += [make_node(f"p{i}", marked_since=None) for i in range(plain)]
    loaded = [node.name for node in nodes[1:] if node.name.startswith(busy_kind[0])]
    pinned = make_pod("pinned", node="n1", node_selector=(("kubernetes.io/hostname", "n1"),))
    plan = run_plan(nodes, [pinned, *(busy(f"b-{name}", name, cpu="2") for name in loaded)])
    assert plan.decision.action == "none"
    assert f"pod default/pinned (cpu 100m, memory 128Mi) fits on no other node {expected}" in blockers_of(plan, "n1")


def test_a_pod_pinned_to_a_target_from_outside_the_view_is_placed_there() -> None:
    # The simulator hands a simulation targets of its own (nodes about to be added); the nodeSelector
    # check must look at the targets it was given, not only at the view's nodes.
    view = ClusterView(make_snapshot([make_node("n1"), make_node("n2")]), make_config())
    arriving = ClusterView(make_snapshot([make_node("new")]), make_config()).nodes["new"]
    pinned = make_pod("pinned", node="n1", node_selector=(("kubernetes.io/hostname", "new"),))
    simulation = fit.Simulation(view, view.nodes["n1"], [view.nodes["n2"], arriving])
    assert simulation.run([pinned]).placements == {"default/pinned": "new"}


def test_placements_accumulate_so_two_pods_cannot_share_the_same_room() -> None:
    # 1800m in all fits the 2000m free in total, but two 600m pods cannot share one node's 1000m.
    pods = [make_pod(f"w{i}", node="n1", cpu="600m") for i in range(3)]
    plan = run_plan(base_nodes(), [*pods, *base_pods()])
    assert plan.decision.action == "none"
    assert "fits on no other node" in blockers_of(plan, "n1")


def test_two_pods_spread_over_two_nodes_fit() -> None:
    pods = [make_pod(f"w{i}", node="n1", cpu="800m") for i in range(2)]
    plan = run_plan(base_nodes(), [*pods, *base_pods()])
    assert plan.decision.node == "n1"
    assert sorted(node for _, node in plan.decision.placements) == ["n2", "n3"]


@pytest.mark.parametrize(
    "others",
    [
        pytest.param({"unschedulable": True}, id="cordoned-targets"),
        pytest.param({"ready": False}, id="not-ready-targets"),
    ],
)
def test_cordoned_or_not_ready_nodes_are_not_targets(others: dict[str, Any]) -> None:
    nodes = [make_node("n1"), make_node("n2", marked_since=None, **others)]
    plan = run_plan(nodes, [make_pod("web", node="n1")], config=make_config(pools={POOL: {"minNodes": 0}}))
    assert plan.decision.action == "none"
    assert "no other Ready, schedulable node" in blockers_of(plan, "n1")


def test_a_tolerated_taint_does_not_stop_a_pod() -> None:
    from tests.builders import toleration

    nodes = [make_node("n1"), make_node("n2", marked_since=None, taints=[taint("dedicated", "db")])]
    pod = make_pod("db", node="n1", tolerations=(toleration("dedicated", "db", "NoSchedule"),))
    plan = run_plan(nodes, [pod, busy("b", "n2")])
    assert plan.decision.node == "n1"


def test_a_prefer_no_schedule_taint_does_not_stop_a_pod() -> None:
    nodes = [make_node("n1"), make_node("n2", marked_since=None, taints=[taint("soft", effect="PreferNoSchedule")])]
    plan = run_plan(nodes, [make_pod("web", node="n1"), busy("b", "n2")])
    assert plan.decision.node == "n1"


def test_required_node_affinity_is_honoured() -> None:
    from tests.builders import node_affinity

    nodes = [make_node("n1"), make_node("n2", marked_since=None, labels={"tier": "gold"}), make_node("n3")]
    pod = make_pod("web", node="n1", node_affinity=node_affinity("tier", "In", "gold"))
    plan = run_plan(nodes, [pod, busy("b2", "n2"), busy("b3", "n3")])
    assert dict(plan.decision.placements) == {"default/web": "n2"}


def test_host_ports_may_not_clash() -> None:
    from tests.builders import host_port

    nodes = [make_node("n1"), make_node("n2", marked_since=None)]
    pods = [make_pod("a", node="n1", host_ports=(host_port(8080),)), busy("b", "n2", host_ports=(host_port(8080),))]
    plan = run_plan(nodes, pods)
    assert "1 with its host port taken" in blockers_of(plan, "n1")


def test_required_anti_affinity_on_hostname_is_respected_both_ways() -> None:
    from tests.builders import anti_affinity

    nodes = [make_node("n1"), make_node("n2", marked_since=None)]
    mine = make_pod("db-1", node="n1", labels={"app": "db"}, pod_anti_affinity=(anti_affinity({"app": "db"}),))
    theirs = busy("db-0", "n2", labels={"app": "db"})
    assert "1 with a pod its pod anti-affinity keeps away" in blockers_of(run_plan(nodes, [mine, theirs]), "n1")
    # The pod already on n2 forbids newcomers that match its term, even if the newcomer has no term itself.
    plain = make_pod("db-1", node="n1", labels={"app": "db"})
    guarded = busy("db-0", "n2", labels={"app": "db"}, pod_anti_affinity=(anti_affinity({"app": "db"}),))
    assert "1 with a pod its pod anti-affinity keeps away" in blockers_of(run_plan(nodes, [plain, guarded]), "n1")


def test_a_pod_with_a_volume_claim_stays_in_its_zone() -> None:
    nodes = [make_node("n1", zone="a"), make_node("n2", zone="b", marked_since=None), make_node("n3", zone="a")]
    pods = [make_pod("pg", node="n1", pvc_names=("data-pg",)), busy("b2", "n2"), busy("b3", "n3")]
    plan = run_plan(nodes, pods)
    assert dict(plan.decision.placements) == {"default/pg": "n3"}


def test_a_volume_claim_with_no_node_in_its_zone_keeps_the_node() -> None:
    nodes = [make_node("n1", zone="a"), make_node("n2", zone="b", marked_since=None)]
    plan = run_plan(nodes, [make_pod("pg", node="n1", pvc_names=("data-pg",)), busy("b2", "n2")])
    assert "1 with another zone than its volume" in blockers_of(plan, "n1")


def test_topology_spread_with_do_not_schedule_is_respected() -> None:
    from tests.builders import spread

    constraint = (spread({"app": "web"}),)
    nodes = [make_node("n1", zone="a"), make_node("n2", zone="a", marked_since=None), make_node("n3", zone="b")]
    web = [
        make_pod(f"web-{i}", node=n, labels={"app": "web"}, spread_constraints=constraint)
        for i, n in enumerate(["n1", "n2", "n3"])
    ]
    # Moving web-0 to n2 (zone a) would make zone a hold 2 and zone b 1: allowed with maxSkew 1.
    plan = run_plan(nodes, [*web, busy("b3", "n3", cpu="3950m")])
    assert plan.decision.node == "n1"
    # With maxSkew 1 and zone b empty of web pods, zone a may not take a second one.
    web_b_gone = [web[0], web[1]]
    plan = run_plan(nodes, [*web_b_gone, busy("b3", "n3", cpu="3950m")])
    assert "1 with too much skew for its topology spread" in blockers_of(plan, "n1")


def test_topology_spread_counts_the_pods_still_on_the_node_being_drained() -> None:
    # kube-scheduler counts every matching pod where it runs now: while web-1 still runs on the
    # cordoned n1 (not evicted yet, or held back by its PDB), it counts in zone a. web-0 has been
    # evicted before its replacement is scheduled, so it counts nowhere.
    from compactor.core import fit
    from compactor.core.cluster import ClusterView
    from tests.builders import make_snapshot, spread

    constraint = (spread({"app": "web"}),)
    nodes = [make_node("n1", zone="a"), make_node("n2", zone="a", marked_since=None), make_node("n3", zone="b")]
    web = [make_pod(f"web-{i}", node="n1", labels={"app": "web"}, spread_constraints=constraint) for i in range(2)]
    view = ClusterView(make_snapshot(nodes, web), make_config())
    n2, n3 = view.nodes["n2"], view.nodes["n3"]
    simulation = fit.Simulation(view, view.nodes["n1"], fit.targets_for(view))
    assert simulation.why_not(web[0], n2) == "topology spread"  # zone a would hold 2 (with web-1), zone b 0
    assert simulation.why_not(web[0], n3) is None
    simulation.place(web[0], n3)
    # web-1 has left zone a when its replacement comes; zone b holds web-0 now.
    assert simulation.why_not(web[1], n2) is None
    assert simulation.why_not(web[1], n3) == "topology spread"


def test_the_cordoned_source_node_stays_a_spread_domain_until_it_is_gone() -> None:
    # kube-scheduler counts a cordoned node as a topology domain (nodeTaintsPolicy defaults to
    # Ignore; kubernetes#106127). Spread by hostname with maxSkew 1 and one web pod on each node:
    # once web-1 has left n1, n1 counts 0, and n2 or n3 would hold 2. The replacement would wait
    # for the Cluster Autoscaler to delete n1.
    from tests.builders import spread

    constraint = (spread({"app": "web"}, key="kubernetes.io/hostname"),)
    nodes = [make_node("n1"), make_node("n2", marked_since=None), make_node("n3", marked_since=None)]
    web = [make_pod(f"web-{i}", node=f"n{i}", labels={"app": "web"}, spread_constraints=constraint) for i in (1, 2, 3)]
    plan = run_plan(nodes, [*web, busy("b2", "n2", cpu="2"), busy("b3", "n3", cpu="2")])
    assert plan.decision.action == "none"
    assert "2 with too much skew for its topology spread" in blockers_of(plan, "n1")


def test_a_zone_the_source_node_is_alone_in_stays_a_spread_domain() -> None:
    # n1 is the only node in zone b: once its web pod has left, zone b counts 0 and zone a, which
    # holds one already, may not take a second with maxSkew 1.
    from tests.builders import spread

    constraint = (spread({"app": "web"}),)
    nodes = [make_node("n1", zone="b"), make_node("n2", zone="a", marked_since=None)]
    web = [make_pod(f"web-{n}", node=n, labels={"app": "web"}, spread_constraints=constraint) for n in ("n1", "n2")]
    plan = run_plan(nodes, [*web, busy("b2", "n2", cpu="2")])
    assert plan.decision.action == "none"
    assert "1 with too much skew for its topology spread" in blockers_of(plan, "n1")


def test_required_pod_affinity_needs_a_matching_pod_in_the_domain() -> None:
    from tests.builders import affinity_term

    nodes = [make_node("n1"), make_node("n2", marked_since=None), make_node("n3", marked_since=None)]
    pod = make_pod("sidekick", node="n1", pod_affinity=(affinity_term({"app": "cache"}),))
    pods = [pod, busy("cache", "n3", labels={"app": "cache"}), busy("b2", "n2")]
    plan = run_plan(nodes, pods)
    assert dict(plan.decision.placements) == {"default/sidekick": "n3"}


# -- rule 7: triggers and guards -------------------------------------------------------------


def test_waits_until_the_pool_has_enough_underutilized_nodes() -> None:
    config = make_config(pools={POOL: {"scaleDownRequiredUnderutilizedNodeCount": 2}})
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), *base_pods()], config=config)
    assert plan.decision.action == "none"
    assert "needs 2 (scaleDownRequiredUnderutilizedNodeCount)" in blockers_of(plan, "n1")


def test_starts_no_drain_while_a_pod_cannot_be_scheduled() -> None:
    pending = make_pod("stuck", node=None, unschedulable=True, phase="Pending")
    plan = run_plan(base_nodes(), [make_pod("web", node="n1"), pending, *base_pods()])
    assert plan.decision.action == "none"
    assert "1 unschedulable pod(s) could use pool default-pool's nodes (default/stuck)" in blockers_of(plan, "n1")


def test_starts_no_drain_in_a_pool_that_just_scaled_up() -> None:
    nodes = [*base_nodes(), make_node("n4", created=ago(300), marked_since=None)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), *base_pods(), busy("b4", "n4")])
    assert plan.decision.action == "none"
    assert "scaleUpCooldownSeconds" in blockers_of(plan, "n1")


def test_a_scale_up_in_another_pool_does_not_hold_this_one_back() -> None:
    nodes = [*base_nodes(), make_node("g1", pool="gpu", created=ago(300), marked_since=None)]
    plan = run_plan(nodes, [make_pod("web", node="n1"), *base_pods()])
    assert plan.decision.node == "n1"


# -- rule 8: ranking --------------------------------------------------------------------------


def two_candidates(pods_a: list[Any], pods_b: list[Any]) -> Any:
    nodes = [make_node("a"), make_node("b"), make_node("n2", marked_since=None)]
    return run_plan(nodes, [*pods_a, *pods_b, busy("b2", "n2", cpu="1")])


@pytest.mark.parametrize(
    ("pods_a", "pods_b", "chosen"),
    [
        pytest.param(
            [make_pod("a1", node="a"), make_pod("a2", node="a")], [make_pod("b1", node="b")], "b", id="fewer-pods"
        ),
        pytest.param(
            [make_pod("a1", node="a", deletion_cost=100)], [make_pod("b1", node="b")], "b", id="lower-deletion-cost"
        ),
        pytest.param([make_pod("a1", node="a", priority=1000)], [make_pod("b1", node="b")], "b", id="lower-priority"),
        pytest.param(
            [make_pod("a1", node="a", cpu="100m")], [make_pod("b1", node="b", cpu="500m")], "a", id="lower-utilization"
        ),
        pytest.param([make_pod("a1", node="a")], [make_pod("b1", node="b")], "a", id="name-breaks-ties"),
    ],
)
def test_chooses_the_cheapest_node_to_disrupt(pods_a: list[Any], pods_b: list[Any], chosen: str) -> None:
    plan = two_candidates(pods_a, pods_b)
    assert plan.decision.action == "drain"
    assert plan.decision.node == chosen
    other = "a" if chosen == "b" else "b"
    assert f"ranked after {chosen}" in blockers_of(plan, other)


def test_falls_back_to_the_next_candidate_when_the_cheapest_does_not_fit() -> None:
    nodes = [make_node("a"), make_node("b"), make_node("n2", marked_since=None)]
    pods = [
        make_pod("a1", node="a", extended={"nvidia.com/gpu": "1"}),
        make_pod("b1", node="b"),
        make_pod("b2", node="b"),
    ]
    plan = run_plan(nodes, [*pods, busy("x", "n2")])
    assert plan.decision.node == "b"
    assert "nvidia.com/gpu" in blockers_of(plan, "a")


# -- rule 9: the pool view ----------------------------------------------------------------------


def test_reports_the_lower_bound_and_excess_nodes_of_each_pool() -> None:
    nodes = [make_node(f"n{i}") for i in range(5)]
    pods = [make_pod(f"p{i}", node=f"n{i}", cpu="1500m", memory="1Gi") for i in range(5)]  # 7.5 cpu of 20
    plan = run_plan(nodes, pods)
    (pool,) = plan.pools
    assert (pool.name, pool.nodes, pool.lower_bound_nodes, pool.excess_nodes) == ("default-pool", 5, 2, 3)
    assert pool.underutilized == 5 and pool.enabled


def test_memory_can_set_the_lower_bound() -> None:
    nodes = [make_node(f"n{i}", memory="10Gi") for i in range(4)]
    pods = [make_pod(f"p{i}", node=f"n{i}", cpu="100m", memory="6Gi") for i in range(4)]  # 24Gi of 40Gi
    (pool,) = run_plan(nodes, pods).pools
    assert pool.lower_bound_nodes == 3 and pool.excess_nodes == 1


def test_explains_why_no_node_was_chosen() -> None:
    plan = run_plan([make_node("n1", pool="other"), make_node("n2", marked_since=ago(10))], [])
    assert plan.decision.action == "none"
    assert plan.decision.reason == (
        "no node can be drained (2 node(s): 1 in a pool that is not enabled, 1 not marked long enough)"
    )


def test_a_disabled_pool_reports_underutilization_but_is_never_marked_or_counted() -> None:
    config = make_config(pools={POOL: {"enabled": False}})
    plan = run_plan([make_node("n1", marked_since=None), make_node("n2", marked_since=None)], config=config)
    assert node_report(plan, "n1").underutilized
    assert plan.marks_add == ()
    (pool,) = plan.pools
    assert not pool.enabled and pool.underutilized == 2
    assert plan.decision.action == "none"


def test_a_node_the_autoscaler_is_removing_is_neither_candidate_nor_target() -> None:
    deleting = taint("ToBeDeletedByClusterAutoscaler", "1700000000", "NoSchedule")
    from tests.builders import toleration

    everything = (toleration(operator="Exists"),)
    nodes = [make_node("n1", taints=[deleting]), make_node("n2"), make_node("n3", marked_since=None)]
    pods = [make_pod("a", node="n1"), make_pod("b", node="n2", tolerations=everything), busy("c", "n3", cpu="3950m")]
    plan = run_plan(nodes, pods)
    assert "already removing this node" in blockers_of(plan, "n1")
    # n2's pod tolerates every taint, yet n1 is no place for it: it is about to go.
    assert plan.decision.action == "none"
    assert "the other nodes have 50m" in blockers_of(plan, "n2")  # n3's 50m only: n1's room does not count


def test_karpenters_do_not_disrupt_on_a_node_is_an_opt_out() -> None:
    plan = run_plan(
        base_nodes(annotations={"karpenter.sh/do-not-disrupt": "true"}), [make_pod("web", node="n1"), *base_pods()]
    )
    assert plan.decision.action == "none"
    assert "karpenter.sh/do-not-disrupt=true" in blockers_of(plan, "n1")


def test_a_drain_is_proven_in_eviction_order_too_as_the_scheduler_will_see_the_pods() -> None:
    # n2 has 1000m free, n3 and n4 600m each. Largest first, the big pod takes n2 and the small ones
    # n3 and n4. But the big pod has the higher priority, so the executor evicts the small pods
    # first, and the scheduler puts each on the least allocated node as it comes: they fill n2 and
    # the big pod finds no place.
    nodes = [make_node("n1"), *(make_node(n, marked_since=None) for n in ("n2", "n3", "n4"))]
    keepers = [busy("k2", "n2", cpu="3"), busy("k3", "n3", cpu="3400m"), busy("k4", "n4", cpu="3400m")]
    movers = [
        make_pod("z-big", node="n1", cpu="1", priority=1000),
        *(make_pod(f"a-small-{i}", node="n1", cpu="300m") for i in range(4)),
    ]
    plan = run_plan(nodes, [*movers, *keepers], config=make_config(reserveRoomForDrains=False))
    assert plan.decision.action == "none"
    assert "pod default/z-big" in blockers_of(plan, "n1")
    assert "when they arrive in eviction order" in blockers_of(plan, "n1")
    # Room kept on n2, which the scheduler then takes last, lets the small pods fill n3 and n4 first.
    reserving = run_plan(nodes, [*movers, *keepers])
    assert (reserving.decision.action, reserving.decision.node) == ("drain", "n1")
    assert reserving.decision.reserved == ("n2",)
    assert dict(reserving.decision.placements)["default/z-big"] == "n2"
    assert "with room kept on n2" in reserving.decision.reason


def crowded_targets(*, small_used: str) -> tuple[list[Node], list[Pod]]:
    """n1 to drain; n2 (8 cpu) with 7 cpu in use, n3 and n4 (4 cpu) with `small_used` in use."""
    nodes = [
        make_node("n1"),
        make_node("n2", cpu="8", marked_since=None),
        make_node("n3", marked_since=None),
        make_node("n4", marked_since=None),
    ]
    keepers = [
        busy("k2", "n2", cpu="7", memory="0"),
        *(busy(f"k{i}", f"n{i}", cpu=small_used, memory="0") for i in (3, 4)),
    ]
    return nodes, keepers


def test_a_drain_is_proven_in_the_order_pdbs_let_the_pods_reach_the_scheduler() -> None:
    # n2 (8 cpu) has 1000m free at 87.5%, n3 and n4 (4 cpu) 1300m each at 67.5%. The executor
    # evicts the largest first, but the PDB lets one of web's pods go at a time: b-web (700m) is
    # refused until a-web's replacement is Ready, so the three 400m pods reach the scheduler before
    # it. In eviction order the web pods take n3 and n4 and the small ones fill around them; in the
    # order they really arrive, a-web takes n3, two small pods n4 and the third n2, and b-web finds
    # no node with 700m free (600m, 600m and 500m are left).
    nodes, keepers = crowded_targets(small_used="2700m")
    movers = [
        make_pod("a-web", cpu="700m", memory="0", labels={"app": "web"}),
        make_pod("b-web", cpu="700m", memory="0", labels={"app": "web"}),
        *(make_pod(f"c-small-{i}", cpu="400m", memory="0") for i in range(3)),
    ]
    one_at_a_time = make_pdb("web", match={"app": "web"}, allowed=1)
    no_reservations = make_config(reserveRoomForDrains=False)
    plan = run_plan(nodes, [*movers, *keepers], [one_at_a_time], config=no_reservations)
    assert plan.decision.action == "none"
    assert "pod default/b-web" in blockers_of(plan, "n1")
    assert "when they reach the scheduler as they really arrive" in blockers_of(plan, "n1")
    # With room for both of web's pods at once, the same pods arrive in eviction order and the drain is proven.
    relaxed = run_plan(
        nodes, [*movers, *keepers], [make_pdb("web", match={"app": "web"}, allowed=2)], config=no_reservations
    )
    assert relaxed.decision.action == "drain" and relaxed.decision.node == "n1"


def test_a_drain_is_proven_in_the_order_the_scheduling_queue_hands_out_the_replacements() -> None:
    # n2 (8 cpu) has 1000m free at 87.5%, n3 and n4 (4 cpu) 400m each at 90%. The executor evicts
    # the pods together, the low priority first; their replacements wait in the scheduling queue
    # side by side, and kube-scheduler's queue (PrioritySort) hands out the higher priority first:
    # dns takes n2, the least allocated, and big (1 cpu) finds no node with 1 cpu free. Largest
    # first and in eviction order big comes first and gets n2.
    nodes, keepers = crowded_targets(small_used="3600m")
    movers = [
        make_pod("big", cpu="1", memory="0"),
        make_pod("dns", cpu="300m", memory="0", priority=2000000000),
    ]
    config = make_config(softTaintMarkedNodes=False, reserveRoomForDrains=False)
    plan = run_plan(nodes, [*movers, *keepers], config=config)
    assert plan.decision.action == "none"
    assert "pod default/big" in blockers_of(plan, "n1")
    assert "when the scheduler takes the higher-priority replacements first" in blockers_of(plan, "n1")
    # With the same priority the queue keeps the eviction order, big first, and the drain is proven.
    level = [make_pod("big", cpu="1", memory="0"), make_pod("dns", cpu="300m", memory="0")]
    relaxed = run_plan(nodes, [*level, *keepers], config=config)
    assert relaxed.decision.action == "drain" and relaxed.decision.node == "n1"


def test_the_queue_order_puts_higher_priorities_first_within_each_batch() -> None:
    pods = [
        make_pod("a", priority=0, labels={"app": "web"}),
        make_pod("b", priority=0, labels={"app": "web"}),
        make_pod("c", priority=100, labels={"app": "web"}),
        make_pod("d", priority=5),
    ]
    web = make_pdb("web", match={"app": "web"}, allowed=1)

    def covering(pod: Pod) -> list[Pdb]:
        return [web] if pod.labels.get("app") == "web" else []

    # a uses the budget; b and c are held back until a's replacement is Ready, and come last.
    assert [p.name for p in fit.arrival_order(pods, covering)] == ["a", "d", "b", "c"]
    assert [p.name for p in fit.queue_order(pods, covering)] == ["d", "a", "c", "b"]


def test_the_executor_evicts_the_lower_priorities_first_and_within_them_the_largest_first() -> None:
    pods = [
        make_pod("a-small", cpu="200m"),
        make_pod("b-big", cpu="1"),
        make_pod("c-big-more-memory", cpu="1", memory="1Gi"),
        make_pod("d-dns", cpu="2", priority=2000000000),
        make_pod("e-cheap-small", cpu="200m", deletion_cost=-10),
    ]
    assert [p.name for p in fit.eviction_order(pods)] == [
        "c-big-more-memory",
        "b-big",
        "e-cheap-small",
        "a-small",
        "d-dns",
    ]


def test_the_big_pod_evicted_first_takes_the_only_hole_it_fits_in() -> None:
    # n2 has 1000m free, n3 and n4 600m each. Evicted small first, the 300m pods would fill n2 (the
    # least allocated) and the 1-cpu pod find no place; evicted largest first, it takes n2 and the
    # small pods spread over n3 and n4.
    nodes = [make_node("n1"), *(make_node(n, marked_since=None) for n in ("n2", "n3", "n4"))]
    keepers = [busy("k2", "n2", cpu="3"), busy("k3", "n3", cpu="3400m"), busy("k4", "n4", cpu="3400m")]
    movers = [make_pod("z-big", cpu="1"), *(make_pod(f"a-small-{i}", cpu="300m") for i in range(4))]
    plan = run_plan(nodes, [*movers, *keepers], config=make_config(reserveRoomForDrains=False))
    assert (plan.decision.action, plan.decision.node) == ("drain", "n1")
    assert plan.decision.evictions[0] == "default/z-big"
    assert dict(plan.decision.placements)["default/z-big"] == "n2"


def test_statefulset_pods_reach_the_scheduler_after_the_other_replacements() -> None:
    # A StatefulSet recreates its pod under the same name once the old one is gone; a ReplicaSet's
    # replacement is made at once. The PDB-held pods still come last.
    pods = [
        make_pod("db-0", cpu="2", owner="StatefulSet"),
        make_pod("web-a", cpu="1", labels={"app": "web"}),
        make_pod("web-b", cpu="1", labels={"app": "web"}),
        make_pod("worker", cpu="500m"),
    ]
    web = make_pdb("web", match={"app": "web"}, allowed=1)

    def covering(pod: Pod) -> list[Pdb]:
        return [web] if pod.labels.get("app") == "web" else []

    evicted = fit.eviction_order(pods)
    assert [p.name for p in evicted] == ["db-0", "web-a", "web-b", "worker"]
    assert [p.name for p in fit.arrival_order(evicted, covering)] == ["web-a", "worker", "db-0", "web-b"]
    assert [p.name for p in fit.queue_order(evicted, covering)] == ["web-a", "worker", "db-0", "web-b"]


def tie_on_n2_and_n3(n3_used: str) -> tuple[list[Node], list[Pod]]:
    """n1's pods (300m, then three of 200m) to n2 (8 cpu, 480m free) and n3 (8 cpu, `n3_used` in use)."""
    nodes = [make_node("n1"), make_node("n2", cpu="8", marked_since=None), make_node("n3", cpu="8", marked_since=None)]
    keepers = [busy("k2", "n2", cpu="7520m", memory="0"), busy("k3", "n3", cpu=n3_used, memory="0")]
    movers = [
        make_pod("big", cpu="300m", memory="0"),
        *(make_pod(f"small-{i}", cpu="200m", memory="0") for i in range(3)),
    ]
    return nodes, [*movers, *keepers]


def test_a_drain_must_fit_whichever_of_two_equal_scores_the_scheduler_picks() -> None:
    # n3 has 540m free, n2 480m: for the 300m pod both score 102 in whole numbers, and
    # kube-scheduler picks one of them at random. On n3, the roomier, the three 200m pods fit
    # (n2 keeps 480m, n3 240m); on n2 they do not (180m and 540m hold two). Not proven.
    config = make_config(reserveRoomForDrains=False, softTaintMarkedNodes=False)
    plan = run_plan(*tie_on_n2_and_n3("7460m"), config=config)
    assert plan.decision.action == "none"
    assert "when the scheduler breaks ties between equal scores another way" in blockers_of(plan, "n1")
    # With 600m free on n3 the 300m pod scores higher there, and every pick leaves room for the rest.
    roomier = run_plan(*tie_on_n2_and_n3("7400m"), config=config)
    assert (roomier.decision.action, roomier.decision.node) == ("drain", "n1")


def test_a_tie_goes_to_the_roomiest_the_fullest_or_a_seeded_random_target() -> None:
    nodes, pods = tie_on_n2_and_n3("7460m")
    view = ClusterView(make_snapshot(nodes, pods), make_config())
    targets = [view.nodes["n2"], view.nodes["n3"]]
    big = [pod for pod in pods if pod.name == "big"]

    def pick(ties: fit.TieBreak) -> str:
        return fit.Simulation(view, view.nodes["n1"], targets, ties=ties).run(big).placements["default/big"]

    assert pick("roomiest") == "n3"
    assert pick("fullest") == "n2"
    draws = {pick(random.Random(seed)) for seed in range(20)}
    assert draws == {"n2", "n3"}
    assert pick(random.Random(7)) == pick(random.Random(7))


def test_the_proof_places_each_pod_on_the_least_allocated_node() -> None:
    nodes = [make_node("n1"), *(make_node(n, marked_since=None) for n in ("n2", "n3", "n4"))]
    keepers = [busy("k2", "n2", cpu="2"), busy("k3", "n3", cpu="2500m"), busy("k4", "n4", cpu="3")]
    movers = [make_pod(f"w{i}", node="n1", cpu="500m") for i in range(3)]
    plan = run_plan(nodes, [*movers, *keepers], config=make_config(softTaintMarkedNodes=False))
    # Each pod goes to the node with the most room at that moment: n2 (50%), then n3 and n2 again.
    assert sorted(dict(plan.decision.placements).values()) == ["n2", "n2", "n3"]
    assert plan.decision.evictions == ("default/w0", "default/w1", "default/w2")


def test_the_proof_places_each_pod_where_the_default_scheduler_scores_it_best() -> None:
    """kube-scheduler's default profile adds NodeResourcesBalancedAllocation to LeastAllocated: a 2-cpu
    pod without memory goes to the node whose memory is as used as its cpu will be (150 against 124),
    although the other keeps more free (least allocated first would choose cpu-used), and a 2 GiB pod
    without cpu then goes to cpu-used (175 against 124)."""
    nodes = [
        make_node("n1"),
        make_node("cpu-used", cpu="4", memory="8Gi", marked_since=None),
        make_node("memory-used", cpu="4", memory="8Gi", marked_since=None),
    ]
    pods = [
        busy("compute", "cpu-used", cpu="1", memory="0"),
        busy("cache", "memory-used", cpu="0", memory="4Gi"),
        make_pod("cruncher", cpu="2", memory="0"),
        make_pod("store", cpu="0", memory="2Gi"),
    ]
    view = ClusterView(make_snapshot(nodes, pods), make_config())
    simulation = fit.Simulation(view, view.nodes["n1"], fit.targets_for(view))
    result = simulation.run([pod for pod in pods if pod.node_name == "n1"])
    assert result.fits
    assert result.placements == {"default/cruncher": "memory-used", "default/store": "cpu-used"}


def test_job_pods_reach_the_scheduler_after_the_replicaset_pods_and_before_the_statefulset_pods() -> None:
    # The Job controller syncs a Job one second after its pods' events; a ReplicaSet's replacement
    # is made at once, a StatefulSet's once the old pod is gone.
    pods = [
        make_pod("etl-1", cpu="2", owner="Job"),
        make_pod("etl-2", cpu="2", owner="Job"),
        make_pod("db-0", cpu="2", owner="StatefulSet"),
        make_pod("worker-a", cpu="1"),
        make_pod("worker-b", cpu="1"),
    ]
    evicted = fit.eviction_order(pods)
    assert [p.name for p in evicted] == ["db-0", "etl-1", "etl-2", "worker-a", "worker-b"]
    expected = ["worker-a", "worker-b", "etl-1", "etl-2", "db-0"]
    assert [p.name for p in fit.arrival_order(evicted, lambda pod: [])] == expected
    assert [p.name for p in fit.queue_order(evicted, lambda pod: [])] == expected


def test_a_drain_whose_job_pods_only_fit_before_the_replicaset_pods_is_not_proven() -> None:
    # n2 has 5 cpu free, n3 4 cpu. Largest first, the three 2-cpu Job pods and three 1-cpu workers
    # fit (n2: 2+2+1, n3: 2+1+1). The workers' replacements come first, though, and spread (n2: 1+1,
    # n3: 1): then n2 and n3 keep 3 cpu each, and the third Job pod finds no place.
    nodes = [
        make_node("n1", cpu="16"),
        make_node("n2", cpu="8", marked_since=None),
        make_node("n3", cpu="8", marked_since=None),
    ]
    keepers = [busy("k2", "n2", cpu="3", memory="0"), busy("k3", "n3", cpu="4", memory="0")]
    movers = [
        *(make_pod(f"etl-{i}", cpu="2", memory="0", owner="Job") for i in range(3)),
        *(make_pod(f"worker-{i}", cpu="1", memory="0") for i in range(3)),
    ]
    # The pool evicts running Job pods (jobPods "evict"): otherwise they hold the node before any proof.
    config = make_config(
        pools={"default-pool": {"jobPods": "evict"}}, reserveRoomForDrains=False, softTaintMarkedNodes=False
    )
    plan = run_plan(nodes, [*movers, *keepers], config=config)
    assert plan.decision.action == "none"
    assert "when they reach the scheduler as they really arrive" in blockers_of(plan, "n1")
