"""Node replacement in the planner (DESIGN "Node replacement", rule 10): the search, and the steps of one under way."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from compactor import report
from compactor.core import configcheck, fit, planner
from compactor.core.cluster import ClusterView
from compactor.core.model import (
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    REPLACEABLE_SINCE,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    Node,
    Pod,
    PoolAutoscaling,
    Snapshot,
)
from compactor.core.plan import Plan
from compactor.core.replacement import search
from compactor.settings.config import Config
from tests.builders import (
    LONG_AGO,
    NOW,
    ago,
    make_config,
    make_node,
    make_placeholder,
    make_pod,
    make_snapshot,
    node_report,
    stamp,
    taint,
    toleration,
)

BIG = "big-pool"
SMALL = "small-pool"
LARGE = "large-pool"
NAMESPACE = "node-compactor"


def config(*, targets: tuple[str, ...] = (SMALL,), min_nodes: int = 1, **replace_settings: Any) -> Config:
    """big-pool (0.40/h a node) replaces into small-pool (0.13/h) and large-pool (0.50/h)."""
    settings: dict[str, Any] = {"enabled": True, "targetPools": list(targets), **replace_settings}
    return make_config(
        pools={
            BIG: {"pricePerHour": 0.40, "minNodes": min_nodes, "replacement": settings},
            SMALL: {"enabled": False, "pricePerHour": 0.13},
            LARGE: {"enabled": False, "pricePerHour": 0.50},
        }
    )


def big(name: str, *, replaceable_since: str | None = stamp(LONG_AGO), **fields: Any) -> Node:
    """A node of big-pool; it has carried `replaceable-since` long enough unless told otherwise."""
    annotations = dict(fields.pop("annotations", None) or {})
    if replaceable_since is not None:
        annotations.setdefault(REPLACEABLE_SINCE, replaceable_since)
    return make_node(name, cpu="8", memory="32Gi", pool=BIG, annotations=annotations, **fields)


def small(name: str = "s1", **fields: Any) -> Node:
    return make_node(name, cpu="4", memory="16Gi", pool=SMALL, marked_since=None, **fields)


def large(name: str = "l1", **fields: Any) -> Node:
    return make_node(name, cpu="16", memory="64Gi", pool=LARGE, marked_since=None, **fields)


def pods_of(node: str, *cpus: str) -> list[Pod]:
    return [make_pod(f"{node}-p{index}", node=node, cpu=cpu, memory="1Gi") for index, cpu in enumerate(cpus)]


def plan_for(
    nodes: list[Node],
    pods: list[Pod],
    settings: Config,
    *,
    placeholders: tuple[Pod, ...] = (),
    autoscaling: Mapping[str, PoolAutoscaling] | None = None,
    now_offset: float = 0,
) -> Plan:
    if autoscaling is not None:  # what GKE says of every pool, big-pool autoscaled as the others
        autoscaling = {BIG: PoolAutoscaling(enabled=True), **autoscaling}
    snapshot: Snapshot = make_snapshot(nodes, pods, pool_autoscaling=autoscaling)
    if placeholders:
        snapshot = Snapshot(
            snapshot.nodes, snapshot.pods, snapshot.pdbs, snapshot.pool_autoscaling, placeholders=placeholders
        )
    return planner.plan(snapshot, settings, now=NOW + timedelta(seconds=now_offset))


def two_big_nodes_that_cannot_take_each_others_pods() -> tuple[list[Node], list[Pod]]:
    """b1 and b2 hold 4.8 of 8 cpu each (60%, underutilized at 0.75): neither takes the other's 1.2-cpu pods
    all (3.2 free), so neither can simply be deleted; s1 of small-pool has 2 cpu free."""
    nodes = [big("b1"), big("b2", marked_since=None), small()]
    pods = pods_of("b1", "1200m", "1200m", "1200m", "1200m") + pods_of("b2", "1200m", "1200m", "1200m", "1200m")
    pods += pods_of("s1", "2")
    return nodes, pods


def test_replaces_a_node_whose_pods_fit_only_with_one_new_cheaper_node() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    plan = plan_for(nodes, pods, config())
    assert plan.decision.action == "none"
    chosen = plan.replacement
    assert chosen is not None
    assert chosen.step == "create"
    assert chosen.target_pool == SMALL
    assert chosen.price_per_hour == pytest.approx(0.13)
    assert chosen.removed_price_per_hour == pytest.approx(0.40)
    assert chosen.savings_per_hour == pytest.approx(0.27)
    assert chosen.placeholder.startswith("node-compactor-placeholder-")
    assert chosen.placeholder == search.placeholder_name(chosen.nodes, SMALL)
    assert dict(chosen.node_selector) == {
        "cloud.google.com/gke-nodepool": SMALL,
        "topology.kubernetes.io/zone": "zone-a",
    }
    # What the moving pods request, capped at the new node's allocatable (4 cpu, s1's DaemonSets none).
    assert chosen.requests is not None
    assert chosen.requests.cpu_millis == 4000
    replaced = chosen.nodes[0]
    assert (node_report(plan, replaced).replacement or "").startswith("replaced: ")
    assert "saves USD 0.2700/h (68%)" in chosen.reason
    assert "replacing nodes with a cheaper one first" in plan.decision.reason


def test_deleting_without_a_new_node_always_wins() -> None:
    nodes = [big("b1"), big("b2", marked_since=None), small()]
    pods = pods_of("b1", "1"), pods_of("b2", "1")
    plan = plan_for(nodes, [*pods[0], *pods[1]], config())
    assert plan.decision.action == "drain"
    assert plan.replacement is None


def test_a_new_node_that_saves_less_than_min_savings_percent_is_not_asked_for() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    plan = plan_for(nodes, pods, config(minSavingsPercent=90))
    assert plan.replacement is None
    notes = " ".join(node.replacement or "" for node in plan.nodes)
    assert "below minSavingsPercent (90%)" in notes


def test_two_nodes_are_replaced_by_one_when_no_single_replacement_saves() -> None:
    # Each big node holds one 4.8-cpu pod: it fits on no other node, nor on a small one. One large node
    # (16 cpu, 0.50/h) takes both: 0.80/h for 0.50/h.
    nodes = [big("b1"), big("b2"), big("b3", marked_since=None), large()]
    pods = pods_of("b1", "4800m") + pods_of("b2", "4800m") + pods_of("b3", "7") + pods_of("l1", "15")
    plan = plan_for(nodes, pods, config(targets=(SMALL, LARGE)))
    chosen = plan.replacement
    assert chosen is not None
    assert chosen.target_pool == LARGE
    assert set(chosen.nodes) == {"b1", "b2"}
    assert chosen.savings_per_hour == pytest.approx(0.30)
    assert chosen.requests is not None
    assert chosen.requests.cpu_millis == 9600


def test_max_nodes_bounds_the_set() -> None:
    nodes = [big("b1"), big("b2"), big("b3", marked_since=None), large()]
    pods = pods_of("b1", "4800m") + pods_of("b2", "4800m") + pods_of("b3", "7") + pods_of("l1", "15")
    plan = plan_for(nodes, pods, config(targets=(SMALL, LARGE), maxNodes=1))
    assert plan.replacement is None


@pytest.mark.parametrize(
    ("autoscaling", "warning"),
    [
        pytest.param({SMALL: PoolAutoscaling(enabled=False)}, "is not autoscaled", id="not-autoscaled"),
        pytest.param(
            {SMALL: PoolAutoscaling(enabled=True, total_max_node_count=1)}, "at its maximum size", id="at-max"
        ),
        pytest.param(
            {SMALL: PoolAutoscaling(enabled=True, max_node_count=1, zones=1)}, "at its maximum size", id="zone-max"
        ),
    ],
)
def test_a_target_pool_that_cannot_grow_is_a_warning_and_not_used(
    autoscaling: Mapping[str, PoolAutoscaling], warning: str
) -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    plan = plan_for(nodes, pods, config(), autoscaling=autoscaling)
    assert plan.replacement is None
    assert any(warning in text for text in plan.price_warnings)


def test_an_empty_target_pool_whose_machine_type_gke_does_not_name_is_a_warning_saying_so() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    nodes = [node for node in nodes if node.name != "s1"]
    pods = [pod for pod in pods if pod.node_name != "s1"]
    plan = plan_for(nodes, pods, config(), autoscaling={SMALL: PoolAutoscaling(enabled=True, max_node_count=5)})
    assert plan.replacement is None
    expected = f"target pool {SMALL} has no node in the cluster and GKE's node pool config names no machine type"
    assert expected in plan.price_warnings


def test_a_target_pool_that_is_not_in_the_cluster_is_a_warning() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    plan = plan_for(nodes, pods, config(targets=("ghost-pool",)))
    assert plan.replacement is None
    assert any("ghost-pool has no node in the cluster" in text for text in plan.price_warnings)


# -- target pools checked on every run (core.configcheck), not only when a replacement is looked for ---------


@pytest.mark.parametrize(
    ("targets", "autoscaling", "warning"),
    [
        pytest.param(
            ("smal-pool",),
            None,
            "target pool smal-pool has no node in the cluster and GKE's node pool config was not read, so it is not "
            "used: the pools there are big-pool, small-pool (check its spelling;",
            id="misspelt-gke-not-read",
        ),
        pytest.param(
            ("smal-pool",),
            {BIG: PoolAutoscaling(enabled=True), SMALL: PoolAutoscaling(enabled=True)},
            "target pool smal-pool is not in the cluster (no node carries it and GKE names no such pool), so it is "
            "not used: the pools there are big-pool, small-pool (check its spelling)",
            id="misspelt-gke-read",
        ),
        pytest.param(
            (SMALL,),
            {SMALL: PoolAutoscaling(enabled=False)},
            "target pool small-pool is not autoscaled, so it is not used",
            id="not-autoscaled",
        ),
        pytest.param(
            (SMALL,),
            {SMALL: PoolAutoscaling(enabled=True, total_max_node_count=1)},
            "target pool small-pool is at its maximum size (1 node(s)), so it is not used",
            id="at-max",
        ),
    ],
)
def test_a_target_pool_that_cannot_be_used_is_a_warning_even_when_no_node_is_a_candidate(
    targets: tuple[str, ...], autoscaling: Mapping[str, PoolAutoscaling] | None, warning: str
) -> None:
    # b1 is busy (no candidate, so no replacement is looked for): the configuration is still checked.
    nodes = [big("b1", marked_since=None), small()]
    snapshot = make_snapshot(nodes, pods_of("b1", "7"), pool_autoscaling=autoscaling)
    found = configcheck.for_snapshot(snapshot, config(targets=targets))
    assert [text for text in found if text.startswith("target pool")] == [found[-1]]
    assert found[-1].startswith(warning)


@pytest.mark.parametrize(
    "autoscaling",
    [
        pytest.param(None, id="a-pool-with-nodes"),
        pytest.param({SMALL: PoolAutoscaling(enabled=True), "empty-pool": PoolAutoscaling(enabled=True)}, id="gke"),
    ],
)
def test_a_target_pool_that_can_grow_is_no_warning(autoscaling: Mapping[str, PoolAutoscaling] | None) -> None:
    nodes = [big("b1", marked_since=None), small()]
    snapshot = make_snapshot(nodes, pods_of("b1", "7"), pool_autoscaling=autoscaling)
    targets = (SMALL, "empty-pool") if autoscaling else (SMALL,)
    assert not [text for text in configcheck.for_snapshot(snapshot, config(targets=targets)) if "target" in text]


def test_the_report_says_a_target_pool_warning_once_when_the_search_says_it_too() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    settings = config(targets=("ghost-pool",))
    snapshot = make_snapshot(nodes, pods)
    input_warnings = configcheck.for_snapshot(snapshot, settings)
    plan = planner.plan(snapshot, settings, now=NOW)
    assert set(input_warnings) & set(plan.price_warnings), "both say it"
    document = report.to_dict(plan, warnings=input_warnings)
    assert len([text for text in document["warnings"] if "ghost-pool" in text]) == 1


@pytest.mark.parametrize(
    ("effect", "replaced"),
    [
        pytest.param("PreferNoSchedule", True, id="soft-taint"),
        # Pods move only where rule 6 lets them: none of them tolerates the pool's taint.
        pytest.param("NoSchedule", False, id="untolerated-taint"),
    ],
)
def test_a_target_pool_with_no_node_is_built_from_gke_s_node_pool_config(effect: str, replaced: bool) -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    nodes = [node for node in nodes if node.name != "s1"]
    pods = [pod for pod in pods if pod.node_name != "s1"]
    template = PoolAutoscaling(
        enabled=True,
        total_max_node_count=3,
        machine_type="e2-standard-4",
        locations=("zone-a", "zone-b"),
        taints=(taint("dedicated", "batch", effect=effect),),
    )
    plan = plan_for(nodes, pods, config(), autoscaling={SMALL: template})
    chosen = plan.replacement
    if not replaced:
        assert chosen is None
        # The pods cannot run on the pool's tainted node, and the other nodes lack the room: no proof is spent.
        assert "pod(s) that cannot run on it" in (node_report(plan, "b1").replacement or "")
        return
    assert chosen is not None
    assert chosen.machine_type == "e2-standard-4"
    assert chosen.zone == "zone-a"
    assert chosen.taints == (taint("dedicated", "batch", effect=effect),)


def test_a_node_without_a_price_is_a_warning_and_its_pool_is_not_replaced() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    settings = make_config(
        pools={BIG: {"replacement": {"enabled": True, "targetPools": [SMALL]}}, SMALL: {"enabled": False}}
    )
    plan = plan_for(nodes, pods, settings)
    assert plan.replacement is None
    assert any(text.startswith(f"pool {BIG}: replacement is off, a node has no price") for text in plan.price_warnings)
    # Prices are unknown, the nodes' reports say so; deletion is unaffected (none is possible here).
    assert node_report(plan, "b1").price_per_hour is None


def test_a_node_whose_replacement_failed_recently_is_not_replaced_again() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    nodes = [big("b1", annotations={REPLACEMENT_FAILED_AT: stamp(ago(60))}), *nodes[1:]]
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is None or "b1" not in plan.replacement.nodes
    assert "its replacement failed 1m ago" in (node_report(plan, "b1").replacement or "")


def test_while_the_placeholder_waits_for_its_node_nothing_else_is_drained() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    nodes = [big("b1", annotations={REPLACED_BY: name}), *nodes[1:], big("b9")]  # b9 alone could be drained
    plan = plan_for(nodes, pods, config(), placeholders=(make_placeholder(name, ("b1",)),))
    assert plan.replacement is not None
    assert plan.replacement.step == "wait"
    assert plan.decision.action == "none"
    assert "waiting for the node replacement" not in plan.decision.reason  # the reason is the replacement's
    assert "node replacement under way (wait)" in plan.decision.reason
    assert any(name in text for text in node_report(plan, "b9").blockers)


def test_a_placeholder_not_running_within_the_timeout_is_given_up() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    nodes = [big("b1", annotations={REPLACED_BY: name}), *nodes[1:]]
    plan = plan_for(
        nodes, pods, config(timeoutSeconds=600), placeholders=(make_placeholder(name, ("b1",), created=601),)
    )
    assert plan.replacement is not None
    assert plan.replacement.step == "give-up"
    assert plan.replacement.failed == ("b1",)
    assert "did not run on a Ready node within 10m" in plan.replacement.reason


def test_once_the_placeholder_runs_the_replaced_node_is_drained_onto_the_new_node() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    new = small("s2", created=ago(60))  # the node the autoscaler added: too young to be drained itself
    nodes = [big("b1", annotations={REPLACED_BY: name}), *nodes[1:], new]
    # The placeholder holds all 4 cpu of s2; its room is free to the proof (any pod preempts it).
    plan = plan_for(nodes, pods, config(), placeholders=(make_placeholder(name, ("b1",), node="s2"),))
    assert plan.decision.action == "drain"
    assert plan.decision.node == "b1"
    assert f"the new node of {name}" in plan.decision.reason
    assert "s2" in dict(plan.decision.placements).values()
    assert plan.replacement is not None
    assert plan.replacement.step == "drain"
    assert "s2" not in plan.soft_taints_add  # pods must land on the new node


def test_the_placeholder_is_deleted_once_every_replaced_node_is_drained() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    drained = big("b1", annotations={REPLACED_BY: name, DRAIN_STARTED_AT: stamp(ago(120))}, unschedulable=True)
    nodes = [drained, *nodes[1:], small("s2", created=ago(600))]
    pods = [pod for pod in pods if pod.node_name != "b1"]
    plan = plan_for(nodes, pods, config(), placeholders=(make_placeholder(name, ("b1",), node="s2"),))
    assert plan.replacement is not None
    assert plan.replacement.step == "delete"


def test_a_replaced_node_given_back_gives_the_replacement_up() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    nodes = [big("b1", annotations={REPLACED_BY: name, DRAIN_FAILED_AT: stamp(ago(10))}), *nodes[1:]]
    plan = plan_for(nodes, pods, config(), placeholders=(make_placeholder(name, ("b1",), node="s1", created=120),))
    assert plan.replacement is not None
    assert plan.replacement.step == "give-up"


def test_a_replaced_node_a_person_opted_out_gives_the_replacement_up() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    opted_out = big("b1", annotations={REPLACED_BY: name, "node-compactor.dev/disabled": "true"})
    nodes = [opted_out, *nodes[1:], small("s2", created=ago(60))]
    plan = plan_for(nodes, pods, config(), placeholders=(make_placeholder(name, ("b1",), node="s2"),))
    assert plan.replacement is not None
    assert plan.replacement.step == "give-up"
    assert plan.replacement.failed == ("b1",)
    assert plan.decision.action == "none"


def test_an_orphan_placeholder_of_a_stopped_run_is_deleted() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    # A run stopped between creating the placeholder and pointing the nodes at it.
    orphan = make_placeholder("node-compactor-placeholder-orphan", ("b7",))
    plan = plan_for(nodes, pods, config(), placeholders=(orphan,))
    assert plan.placeholders_remove == ("node-compactor-placeholder-orphan",)


def test_a_placeholder_gone_before_its_drain_gives_the_replacement_up_and_after_it_only_the_pointer_goes() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    # Placeholders are created before the pointers: one the pointer names and that is missing disappeared.
    nodes = [big("b1", annotations={REPLACED_BY: "node-compactor-placeholder-gone"}), *nodes[1:]]
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is not None and plan.replacement.step == "give-up"
    assert plan.replacement.failed == ("b1",) and plan.replaced_by_remove == ()
    assert "node-compactor-placeholder-gone is gone before any replaced node was drained" in plan.replacement.reason
    # Preempted by the pods of a drain under way: the pointer goes, the drain goes on.
    nodes[0] = big("b1", annotations={REPLACED_BY: "node-compactor-placeholder-gone", DRAIN_STARTED_AT: stamp(ago(60))})
    plan = plan_for(nodes, pods, config())
    assert plan.replaced_by_remove == ("b1",)
    assert plan.replacement is None or plan.replacement.step != "give-up"


def test_a_placeholder_in_another_namespace_is_not_node_compactor_s() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    foreign = msgspec.structs.replace(make_placeholder("node-compactor-placeholder-x", ("b1",)), namespace="other")
    plan = plan_for(nodes, pods, config(), placeholders=(foreign,))
    assert plan.placeholders_remove == ()


def test_replacement_is_off_unless_enabled_and_the_figures_stay_the_same() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    off = make_config(pools={BIG: {"pricePerHour": 0.40}, SMALL: {"enabled": False, "pricePerHour": 0.13}})
    plan = plan_for(nodes, pods, off)
    assert plan.replacement is None
    assert all(node.replacement is None for node in plan.nodes)
    pool = next(pool for pool in plan.pools if pool.name == BIG)
    assert pool.price_per_hour == pytest.approx(0.80)
    assert pool.cost_lower_bound_per_hour == pytest.approx(pool.lower_bound_nodes * 0.40)


def test_a_replaced_node_that_never_becomes_drainable_does_not_hold_the_cluster_for_good() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    name = search.placeholder_name(["b1"], SMALL)
    nodes = [big("b1", annotations={REPLACED_BY: name}), *nodes[1:], small("s2", created=ago(3600))]
    # b1 got more pods since: they no longer fit, even with the new node.
    pods = [*pods, *pods_of("b1", "3", "3")]
    placeholder_pod = make_placeholder(name, ("b1",), node="s2", created=60)
    held = plan_for(nodes, pods, config(timeoutSeconds=600), placeholders=(placeholder_pod,))
    assert held.replacement is not None
    assert held.replacement.step == "drain"
    assert held.decision.action == "none"
    # timeoutSeconds (600) and drainTimeoutSeconds (900) later, it is given up.
    late = make_placeholder(name, ("b1",), node="s2", created=1500)
    given_up = plan_for(nodes, pods, config(timeoutSeconds=600), placeholders=(late,))
    assert given_up.replacement is not None
    assert given_up.replacement.step == "give-up"
    assert given_up.replacement.failed == ("b1",)


def test_a_labelled_pod_without_the_placeholder_name_is_left_alone() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    plan = plan_for(nodes, pods, config(), placeholders=(make_placeholder("someone-elses-pod", ("b1",)),))
    assert plan.placeholders_remove == ()


def test_a_placeholder_holds_its_room_until_a_pod_that_fits_nowhere_else_preempts_it() -> None:
    """kube-scheduler's order: a pod goes where it fits as the nodes are; only one that fits nowhere preempts."""
    spot = (taint("dedicated", "spot"),)
    nodes = [
        make_node("n1", cpu="4", marked_since=None),
        make_node("n2", cpu="4", marked_since=None),
        make_node("s2", cpu="4", marked_since=None, taints=spot),
    ]
    tolerates = (toleration("dedicated", "spot", "NoSchedule"),)
    batch = make_pod("batch", node="n1", cpu="1500m", tolerations=tolerates)
    service = make_pod("service", node="n1", cpu="1")
    pods = [batch, service, make_pod("filler", node="n2", cpu="2500m")]  # n2: 1.5 cpu free
    held = make_placeholder("node-compactor-placeholder-a", ("n1",), node="s2")  # 4 cpu: s2 is full
    snapshot = Snapshot(tuple(nodes), tuple(pods), placeholders=(held,))
    view = ClusterView(snapshot, make_config())
    targets = fit.targets_for(view)
    # batch first: it fits n2 as it is and takes the room the service needed, which fits nowhere.
    assert not fit.Simulation(view, view.nodes["n1"], targets).run([batch, service]).fits
    # service first: it takes n2; batch fits nowhere as the nodes are, and preempts the placeholder.
    found = fit.Simulation(view, view.nodes["n1"], targets).run([service, batch])
    assert found.fits
    assert found.placements == {"default/service": "n2", "default/batch": "s2"}
    # A pod of a priority not above the placeholder's preempts nothing.
    low = msgspec.structs.replace(batch, priority=-10)
    assert not fit.Simulation(view, view.nodes["n1"], targets).run([service, low]).fits


def test_a_target_pool_whose_limits_were_not_read_is_assumed_able_to_grow_and_says_so() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    plan = plan_for(nodes, pods, config())  # no GKE API read: no pool's autoscaling is known
    assert plan.replacement is not None
    assert any("small-pool: its autoscaling limits are unknown" in text for text in plan.price_warnings)
    known = plan_for(nodes, pods, config(), autoscaling={SMALL: PoolAutoscaling(enabled=True)})
    assert not any("limits are unknown" in text for text in known.price_warnings)


def test_each_zone_s_template_is_proven_with_its_own_new_node() -> None:
    """b1 (zone-a) is tried first and fails; b2's pods hold volumes in zone-b, so only zone-b's new node takes them."""
    nodes = [
        big("b1", zone="zone-a"),
        big("b2", zone="zone-b"),
        small("s1", zone="zone-a"),
        small("s3", zone="zone-b"),
    ]
    pods = [
        make_pod("huge", node="b1", cpu="5500m", memory="1Gi"),  # one pod: the best saving per pod; fits nowhere
        *(make_pod(f"db-{i}", node="b2", cpu="1200m", memory="1Gi", pvc_names=("data",)) for i in range(4)),
        make_pod("full", node="s1", cpu="4", memory="1Gi"),
        make_pod("busy", node="s3", cpu="2500m", memory="1Gi"),
    ]
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is not None, [node.replacement for node in plan.nodes]
    assert plan.replacement.nodes == ("b2",)
    assert plan.replacement.zone == "zone-b"


# -- rule 10's candidates by price: busy nodes too, and the `replaceable-since` wait ----------------------------


def a_busy_big_node_and_room_for_half_its_pods() -> tuple[list[Node], list[Pod]]:
    """b1 holds 6.4 of 8 cpu (80%: not underutilized at 0.75) in 1.6-cpu pods; s1 of small-pool has 3.2 cpu free,
    room for two of them: b1 cannot be deleted, but with one new small node its pods fit."""
    nodes = [big("b1", marked_since=None), small()]
    pods = pods_of("b1", "1600m", "1600m", "1600m", "1600m") + pods_of("s1", "800m")
    return nodes, pods


def test_a_busy_node_is_replaced_by_a_cheaper_node_though_it_is_not_underutilized() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    plan = plan_for(nodes, pods, config(min_nodes=0))
    assert not node_report(plan, "b1").underutilized
    assert plan.replacement is not None, node_report(plan, "b1").replacement
    assert plan.replacement.step == "create"
    assert plan.replacement.nodes == ("b1",)
    assert plan.replacement.savings_per_hour == pytest.approx(0.27)


def test_a_busy_node_of_a_pool_without_replacement_is_left_alone() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    settings = make_config(
        pools={BIG: {"pricePerHour": 0.40, "minNodes": 0}, SMALL: {"enabled": False, "pricePerHour": 0.13}}
    )
    plan = plan_for(nodes, pods, settings)
    assert plan.replacement is None
    assert plan.replaceable_add == ()


def test_a_node_first_found_replaceable_gets_the_annotation_and_waits() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    nodes[0] = big("b1", marked_since=None, replaceable_since=None)
    plan = plan_for(nodes, pods, config(min_nodes=0))
    assert plan.replaceable_add == ("b1",)
    assert plan.replacement is None
    assert "replaceable for 0s, needs 5m (neededMarkedTimeSeconds)" in (node_report(plan, "b1").replacement or "")


def test_a_node_replaceable_for_less_than_the_wait_is_not_replaced_yet() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    nodes[0] = big("b1", marked_since=None, replaceable_since=stamp(ago(299)))
    waiting = plan_for(nodes, pods, config(min_nodes=0))
    assert waiting.replacement is None
    assert waiting.replaceable_add == () and waiting.replaceable_remove == ()
    nodes[0] = big("b1", marked_since=None, replaceable_since=stamp(ago(300)))
    ready = plan_for(nodes, pods, config(min_nodes=0))
    assert ready.replacement is not None and ready.replacement.nodes == ("b1",)


def test_the_annotation_comes_off_a_node_no_replacement_saves_enough_for_any_more() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    plan = plan_for(nodes, pods, config(min_nodes=0, minSavingsPercent=80))  # 0.13 against 0.40 saves 68%
    assert plan.replacement is None
    assert plan.replaceable_remove == ("b1",)


def test_the_annotation_comes_off_the_nodes_of_a_pool_whose_replacement_was_turned_off() -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    settings = make_config(pools={BIG: {"pricePerHour": 0.40}, SMALL: {"enabled": False, "pricePerHour": 0.13}})
    plan = plan_for(nodes, pods, settings)
    assert set(plan.replaceable_remove) == {"b1", "b2"}


def test_the_annotation_stays_while_a_plain_drain_comes_first() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    nodes.append(big("b9"))  # empty and marked: simply deleted
    plan = plan_for(nodes, pods, config(min_nodes=0))
    assert plan.decision.action == "drain" and plan.decision.node == "b9"
    assert plan.replaceable_remove == ()


def test_once_its_new_node_runs_a_busy_replaced_node_is_drained() -> None:
    nodes, pods = a_busy_big_node_and_room_for_half_its_pods()
    name = search.placeholder_name(["b1"], SMALL)
    new = small("s2", created=ago(60))
    nodes = [big("b1", marked_since=None, annotations={REPLACED_BY: name}), nodes[1], new]
    plan = plan_for(nodes, pods, config(min_nodes=0), placeholders=(make_placeholder(name, ("b1",), node="s2"),))
    assert plan.decision.action == "drain", plan.decision.reason
    assert plan.decision.node == "b1"
    assert "s2" in dict(plan.decision.placements).values()


def test_a_search_cut_by_its_budget_says_so_on_the_nodes_it_did_not_try(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = two_big_nodes_that_cannot_take_each_others_pods()
    monkeypatch.setattr(search, "MAX_CANDIDATES", 1)
    monkeypatch.setattr(search, "MAX_PROOFS", 0)
    plan = plan_for(nodes, pods, config())
    assert plan.replacement is None
    notes = {name: node_report(plan, name).replacement or "" for name in ("b1", "b2")}
    assert any("this run's 0 proofs were spent" in note for note in notes.values()), notes
    assert any("combines the 1 best candidates of pool big-pool" in note for note in notes.values()), notes
