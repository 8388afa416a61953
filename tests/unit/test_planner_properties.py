"""Properties of the planner over random clusters (hypothesis).

Whenever the planner chooses a node, an independent checker written here,
not the planner's own code, confirms the placements it returns: every
movable pod of the node is placed exactly once, on another Ready,
uncordoned node, and every target can hold all that lands on it at once.
The planner never chooses a node with a blocking pod, an opt-out
annotation or a person's cordon.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import timedelta
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor.core import fit, path, planner
from compactor.core.cluster import ClusterView, PdbIndex
from compactor.core.model import (
    CA_SCALE_DOWN_DISABLED,
    DISABLED,
    DRAIN_STARTED_AT,
    UNDERUTILIZED_SINCE,
    LabelSelector,
    Node,
    Pdb,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
    Snapshot,
    SpreadConstraint,
    Taint,
    Toleration,
)
from compactor.core.selectors import selector_matches
from compactor.core.timing import format_stamp
from tests.builders import NOW, affinity_term, anti_affinity, make_config, make_node, make_pod, make_snapshot, spread

POOLS = ("general", "batch")
APPS = ("web", "api", "db")
ZONES = ("a", "b")


@st.composite
def nodes(draw: st.DrawFn, index: int) -> Node:
    annotations: dict[str, str] = {}
    if draw(st.booleans()):
        annotations[UNDERUTILIZED_SINCE] = format_stamp(NOW - timedelta(seconds=draw(st.integers(0, 4000))))
    if draw(st.integers(0, 14)) == 0:
        annotations[draw(st.sampled_from([DISABLED, CA_SCALE_DOWN_DISABLED]))] = "true"
    tainted = draw(st.integers(0, 2)) == 0
    return Node(
        name=f"n{index}",
        allocatable=Resources(
            draw(st.sampled_from([1000, 2000, 3000])),
            draw(st.sampled_from([1, 2, 4])) * 2**30,
            (("nvidia.com/gpu", 1000),) if draw(st.integers(0, 5)) == 0 else (),
        ),
        allocatable_pods=draw(st.integers(2, 10)),
        labels={
            "cloud.google.com/gke-nodepool": draw(st.sampled_from(POOLS)),
            "topology.kubernetes.io/zone": draw(st.sampled_from(ZONES)),
            "kubernetes.io/hostname": f"n{index}",
            "disk": draw(st.sampled_from(["ssd", "hdd"])),
        },
        annotations=annotations,
        taints=(Taint("dedicated", "batch", "NoSchedule"),) if tainted else (),
        unschedulable=draw(st.integers(0, 9)) == 0,
        ready=draw(st.integers(0, 11)) != 0,
        created=NOW - timedelta(seconds=draw(st.sampled_from([60, 100_000]))),
    )


@st.composite
def pods(draw: st.DrawFn, index: int, node_names: list[str]) -> Pod:
    # The first pods go round the nodes so that every node has something to move.
    node_name = node_names[index] if index < len(node_names) else draw(st.sampled_from(node_names))
    app = draw(st.sampled_from(APPS))
    anti = (
        (PodAffinityTerm(LabelSelector((("app", app),)), ("default",), False, "kubernetes.io/hostname"),)
        if draw(st.integers(0, 4)) == 0
        else ()
    )
    from compactor.core.model import HostPort

    return Pod(
        namespace=draw(st.sampled_from(["default"] * 19 + ["kube-system"])),
        name=f"p{index}",
        node_name=node_name,
        phase=draw(st.sampled_from(["Running", "Running", "Running", "Succeeded"])),
        requests=Resources(
            draw(st.integers(1, 10)) * 100,
            draw(st.integers(0, 4)) * 2**28,
            (("nvidia.com/gpu", 1000),) if draw(st.integers(0, 8)) == 0 else (),
        ),
        labels={"app": app},
        controller_kind=draw(st.sampled_from(["ReplicaSet"] * 12 + ["StatefulSet", "DaemonSet", None])),
        safe_to_evict=draw(st.sampled_from([None] * 12 + [True, False])),
        do_not_disrupt=draw(st.integers(0, 29)) == 0,
        priority=draw(st.integers(0, 3)) * 100,
        local_storage=("cache",) if draw(st.integers(0, 29)) == 0 else (),
        pvc_names=("data",) if draw(st.integers(0, 4)) == 0 else (),
        tolerations=(Toleration("dedicated", "Equal", "batch", "NoSchedule"),) if draw(st.integers(0, 2)) == 0 else (),
        node_selector=(("disk", "ssd"),) if draw(st.integers(0, 4)) == 0 else (),
        host_ports=(HostPort("TCP", 8080, ""),) if draw(st.integers(0, 5)) == 0 else (),
        pod_anti_affinity=anti,
    )


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, Any]:
    node_list = [draw(nodes(i)) for i in range(draw(st.integers(2, 7)))]
    names = [node.name for node in node_list]
    pod_list = [draw(pods(i, names)) for i in range(draw(st.integers(len(names), 30)))]
    pdbs = [
        Pdb("default", f"pdb-{app}", LabelSelector((("app", app),)), draw(st.sampled_from([0, 1, 1, 2, 2])))
        for app in APPS
        if draw(st.booleans())
    ]
    config = make_config(
        pools={
            "general": {
                "scaleDownCPURequestRatioLimit": draw(st.sampled_from([0.75, 1.0, 1.0])),
                "neededMarkedTimeSeconds": draw(st.sampled_from([0, 0, 300])),
                "minimumNodeAgeSeconds": 0,
                "scaleUpCooldownSeconds": 0,
                "minNodes": draw(st.integers(0, 2)),
            },
            "batch": {"enabled": draw(st.booleans()), "scaleDownCPURequestRatioLimit": 0.9, "minNodes": 0},
        },
        skipNodesWithLocalStorage=draw(st.booleans()),
    )
    return Snapshot(tuple(node_list), tuple(pod_list), tuple(pdbs)), config


def check_placements(snapshot: Snapshot, chosen: str, placements: dict[str, str]) -> None:
    """An independent check that the returned placements are a valid way to empty `chosen`."""
    nodes_by_name = {node.name: node for node in snapshot.nodes}
    live = [pod for pod in snapshot.pods if pod.phase not in ("Succeeded", "Failed") and pod.node_name]
    movers = [
        pod for pod in live if pod.node_name == chosen and pod.controller_kind != "DaemonSet" and not pod.is_mirror
    ]
    assert sorted(placements) == sorted(pod.key for pod in movers), "every movable pod placed exactly once"
    arriving: dict[str, list[Pod]] = defaultdict(list)
    for pod in movers:
        arriving[placements[pod.key]].append(pod)
    source_zone = nodes_by_name[chosen].labels["topology.kubernetes.io/zone"]
    for target_name, newcomers in arriving.items():
        target = nodes_by_name[target_name]
        assert target_name != chosen
        assert target.ready and not target.unschedulable, "targets are Ready and uncordoned"
        residents = [pod for pod in live if pod.node_name == target_name]
        everyone = residents + newcomers
        assert sum(p.requests.cpu_millis for p in everyone) <= target.allocatable.cpu_millis
        assert sum(p.requests.memory_bytes for p in everyone) <= target.allocatable.memory_bytes
        assert len(everyone) <= target.allocatable_pods
        # Like the scheduler, extended resources are compared only when a newcomer asks for them.
        if any(dict(p.requests.extended).get("nvidia.com/gpu") for p in newcomers):
            gpus = sum(dict(p.requests.extended).get("nvidia.com/gpu", 0) for p in everyone)
            assert gpus <= dict(target.allocatable.extended).get("nvidia.com/gpu", 0)
        for pod in newcomers:
            for node_taint in target.taints:
                assert any(t.tolerates(node_taint) for t in pod.tolerations), "taints tolerated"
            for key, value in pod.node_selector:
                assert target.labels.get(key) == value, "nodeSelector matches"
            if pod.pvc_names:
                assert target.labels["topology.kubernetes.io/zone"] == source_zone, "volumes stay in their zone"
        taken = [port for pod in residents for port in pod.host_ports]
        arriving_ports = [port for pod in newcomers for port in pod.host_ports]
        assert not set(arriving_ports) & set(taken), "no host port is used twice"
        assert len(arriving_ports) == len(set(arriving_ports)), "no host port is used twice"
        # Random residents may already break anti-affinity among themselves; judge only what moves in.
        for pod in everyone:
            for term in pod.pod_anti_affinity:
                assert term.selector is not None
                wanted = dict(term.selector.match_labels).items()
                for other in everyone:
                    if other is pod or other.namespace not in term.namespaces or not wanted <= other.labels.items():
                        continue
                    assert pod in residents and other in residents, "anti-affinity respected"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_a_chosen_node_can_really_be_emptied(cluster: tuple[Snapshot, Any]) -> None:
    snapshot, config = cluster
    plan = planner.plan(snapshot, config, now=NOW)  # never raises on valid input
    assert plan.decision.action in ("drain", "none")
    if plan.decision.action != "drain":
        return
    chosen = plan.decision.node
    assert chosen is not None
    node = next(n for n in snapshot.nodes if n.name == chosen)
    assert not node.unschedulable, "never a node a person cordoned"
    assert node.ready
    assert node.annotations.get(DISABLED) != "true" and node.annotations.get(CA_SCALE_DOWN_DISABLED) != "true"
    for pod in snapshot.pods:
        if pod.node_name != chosen or pod.controller_kind == "DaemonSet" or pod.phase in ("Succeeded", "Failed"):
            continue
        assert pod.safe_to_evict is not False and not pod.do_not_disrupt, "no pod that refuses eviction"
        assert pod.controller_kind is not None or pod.safe_to_evict is True, "no bare pod"
        for pdb in snapshot.pdbs:
            covers = pdb.selector is not None and dict(pdb.selector.match_labels).items() <= pod.labels.items()
            if pdb.namespace == pod.namespace and covers:
                assert pdb.disruptions_allowed > 0, "no PDB at zero"
    check_placements(snapshot, chosen, dict(plan.decision.placements))
    assert sum(1 for report in plan.nodes if report.candidate) == 1, "exactly one node is chosen"


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(0, 2000))
def test_a_node_being_evicted_is_never_joined_by_a_second(cluster: tuple[Snapshot, Any], elapsed: int) -> None:
    snapshot, config = cluster
    first = snapshot.nodes[0]
    annotations = {**first.annotations, DRAIN_STARTED_AT: format_stamp(NOW - timedelta(seconds=elapsed))}
    draining = Node(
        first.name,
        first.allocatable,
        first.allocatable_pods,
        first.labels,
        annotations,
        first.taints,
        True,
        first.ready,
        first.created,
    )
    snapshot = Snapshot((draining, *snapshot.nodes[1:]), snapshot.pods, snapshot.pdbs)
    plan = planner.plan(snapshot, config, now=NOW)
    being_evicted = any(
        pod.node_name == first.name and not pod.is_terminal and not pod.stays_on_node for pod in snapshot.pods
    )
    if being_evicted:
        assert plan.decision.action in ("continue-drain", "rollback", "none")
        assert plan.decision.node in (first.name, None)
        assert not any(report.candidate for report in plan.nodes)
    else:
        # Emptied, it awaits removal: the next drain may start elsewhere (pipelined), never on it.
        assert first.name in plan.awaiting_removal or plan.decision.action == "rollback"
        assert plan.decision.action != "drain" or plan.decision.node != first.name
        assert sum(1 for report in plan.nodes if report.candidate) <= 1


@st.composite
def one_candidate(draw: st.DrawFn, *, wide: bool = False, many_targets: bool = False) -> tuple[Snapshot, Any]:
    """n0 holds 2-6 pods that nothing blocks; the other nodes are random and never candidates
    (they are not marked), so each example puts the fit simulation itself to the test. With `wide`,
    some of n0's pods also carry constraints that count pods over many nodes (pod affinity,
    anti-affinity by zone, zone spread); with `many_targets`, 5-11 other nodes instead of 1-5, where
    the pods often have a target each (what `fit.fits_in_every_order` looks for)."""
    others = []
    for index in range(1, draw(st.integers(6, 12) if many_targets else st.integers(2, 6))):
        node = draw(nodes(index))
        others.append(
            Node(
                node.name,
                node.allocatable,
                node.allocatable_pods,
                node.labels,
                {},
                node.taints,
                node.unschedulable,
                node.ready,
                node.created,
            )
        )
    candidate = Node(
        "n0",
        Resources(8000, 16 * 2**30),
        20,
        {
            "cloud.google.com/gke-nodepool": "general",
            "topology.kubernetes.io/zone": draw(st.sampled_from(ZONES)),
            "kubernetes.io/hostname": "n0",
            "disk": "ssd",
        },
        {UNDERUTILIZED_SINCE: format_stamp(NOW - timedelta(hours=1))},
        (),
        False,
        True,
        NOW - timedelta(days=1),
    )
    names = [node.name for node in others]
    residents = [draw(pods(i, names)) for i in range(draw(st.integers(0, 12)))]
    movers = []
    for index in range(draw(st.integers(2, 6))):
        pod = draw(pods(100 + index, ["n0"]))
        constraints: dict[str, Any] = {"pod_anti_affinity": pod.pod_anti_affinity}
        if wide:
            constraints.update(draw(wide_constraints(pod.labels["app"], rarely=many_targets)))
        movers.append(
            Pod(
                pod.namespace if pod.namespace == "default" else "default",
                pod.name,
                "n0",
                "Running",
                pod.requests,
                pod.labels,
                "ReplicaSet",
                "rs",
                tolerations=pod.tolerations,
                node_selector=pod.node_selector,
                host_ports=pod.host_ports,
                pvc_names=pod.pvc_names,
                **constraints,
            )
        )
    config = make_config(
        pools={
            "general": {
                "scaleDownCPURequestRatioLimit": 1.0,
                "minimumNodeAgeSeconds": 0,
                "scaleUpCooldownSeconds": 0,
                "minNodes": 0,
            },
            "batch": {"scaleDownCPURequestRatioLimit": 1.0},
        }
    )
    return Snapshot((candidate, *others), (*movers, *residents), ()), config


@st.composite
def wide_constraints(draw: st.DrawFn, app: str, *, rarely: bool = False) -> dict[str, Any]:
    """Now and then (`rarely`: one pod in ten), a constraint of `app`'s pods that counts pods over a
    whole zone or cluster."""
    kinds = ["zone-anti-affinity", "affinity", "spread"]
    kind = draw(st.sampled_from(["none"] * (27 if rarely else 2) + kinds))
    selector = LabelSelector((("app", app),))
    zone = "topology.kubernetes.io/zone"
    if kind == "zone-anti-affinity":
        return {"pod_anti_affinity": (PodAffinityTerm(selector, ("default",), False, zone),)}
    if kind == "affinity":
        key = draw(st.sampled_from([zone, "kubernetes.io/hostname"]))
        return {"pod_affinity": (PodAffinityTerm(selector, ("default",), False, key),)}
    if kind == "spread":
        return {"spread_constraints": (SpreadConstraint(draw(st.integers(1, 2)), zone, selector),)}
    return {}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_candidate())
def test_a_node_with_many_pods_is_chosen_only_when_they_all_fit_together(cluster: tuple[Snapshot, Any]) -> None:
    snapshot, config = cluster
    plan = planner.plan(snapshot, config, now=NOW)
    if plan.decision.action == "drain":
        assert plan.decision.node == "n0"
        check_placements(snapshot, "n0", dict(plan.decision.placements))
    else:
        assert "n0" not in plan.marks_remove


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_a_plan_without_explanations_decides_the_same(cluster: tuple[Snapshot, Any]) -> None:
    """The consolidation path plans with `explain=False`: each node's blockers stop at the first. Every
    decision, gate and mark must be the full plan's, and each node's one reason the full plan's first."""
    snapshot, config = cluster
    full = planner.plan(snapshot, config, now=NOW)
    brief = planner.plan(snapshot, config, now=NOW, explain=False)
    assert brief.decision == full.decision
    assert brief.held_by == full.held_by
    assert (brief.marks_add, brief.marks_remove) == (full.marks_add, full.marks_remove)
    assert (brief.soft_taints_add, brief.soft_taints_remove) == (full.soft_taints_add, full.soft_taints_remove)
    # Prices are explanation: the brief plan leaves them out, and everything else about a pool is the same.
    unpriced = [
        replace(pool, price_per_hour=None, cost_lower_bound_per_hour=None, price_note=None) for pool in full.pools
    ]
    assert brief.pools == tuple(unpriced)
    for short, whole in zip(brief.nodes, full.nodes, strict=True):
        assert short.candidate == whole.candidate
        assert short.blockers == whole.blockers[:1], short.name


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans(), st.booleans())
def test_the_view_after_a_drain_is_the_view_of_the_cluster_it_leaves(
    cluster: tuple[Snapshot, Any], grouped_before: bool, matured: bool
) -> None:
    """`core.path` makes each step's view from the one before and what the drain moved, without
    regrouping every pod: it must be the view a full regrouping of that cluster makes."""
    snapshot, config = cluster
    view = ClusterView(snapshot, config)
    if grouped_before:
        assert view.pods_by_namespace is not None  # made now, so the next view derives its own from it
    decision = planner.plan(snapshot, config, now=NOW, view=view).decision
    if decision.action != "drain" or decision.node is None:
        return
    after, _, moved = path._apply(snapshot, decision, config.pool_label, view.nodes[decision.node].pods)
    if matured:
        after = path._matured(after, NOW)  # new node objects, as the path's first view has
    derived = ClusterView(after, config, view.pdbs, earlier=view, moved=moved)
    full = ClusterView(after, config)
    assert list(derived.nodes) == list(full.nodes)
    for name, state in full.nodes.items():
        mine = derived.nodes[name]
        assert (mine.node, mine.pool, mine.pods, mine.requested, mine.movable_pods) == (
            state.node,
            state.pool,
            state.pods,
            state.requested,
            state.movable_pods,
        ), name
    assert derived.unschedulable_pods == full.unschedulable_pods
    assert derived.schedulable_in_pool == full.schedulable_in_pool
    assert derived.nodes_in_pool_zone == full.nodes_in_pool_zone
    # The same pods in each namespace, each once (their readers count them; the order is not kept).
    assert {namespace: sorted(pod.key for pod in pods) for namespace, pods in derived.pods_by_namespace.items()} == {
        namespace: sorted(pod.key for pod in pods) for namespace, pods in full.pods_by_namespace.items()
    }


LABEL_KEYS = ("app", "tier", "team")
LABEL_VALUES = ("a", "b")


@st.composite
def label_selectors(draw: st.DrawFn) -> LabelSelector | None:
    if draw(st.integers(0, 9)) == 0:
        return None  # selects no pod
    pairs = draw(st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2))
    expressions = draw(
        st.lists(
            st.builds(
                Requirement,
                st.sampled_from(LABEL_KEYS),
                st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                st.lists(st.sampled_from(LABEL_VALUES), min_size=1, max_size=2).map(tuple),
            ),
            max_size=2,
        )
    )
    return LabelSelector(tuple(pairs.items()), tuple(expressions))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["default", "other"]), label_selectors()), max_size=6),
    st.sampled_from(["default", "other", "empty"]),
    st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES)),
)
def test_the_pdb_index_finds_exactly_the_pdbs_whose_selector_matches(
    selectors: list[tuple[str, LabelSelector | None]], namespace: str, labels: dict[str, str]
) -> None:
    """`PdbIndex.covering` against matching every PDB of the namespace one by one."""
    pdbs = tuple(Pdb(ns, f"pdb-{i}", selector, 1) for i, (ns, selector) in enumerate(selectors))
    pod = Pod(namespace, "p", "n0", "Running", Resources(100, 0), labels=labels)
    expected = [pdb.name for pdb in pdbs if pdb.namespace == namespace and selector_matches(pdb.selector, labels)]
    found = PdbIndex(pdbs).covering(pod)
    assert sorted(pdb.name for pdb in found) == sorted(expected)


@st.composite
def tight_cluster(draw: st.DrawFn) -> tuple[Snapshot, Any]:
    """Two or three pods of one app on n0 and two to four small targets in two zones, some already
    holding pods: where one order of arrival fits and another does not, if any does."""
    zones = ("zone-a", "zone-b")
    nodes = [make_node("n0", cpu="4", zone="zone-a")]
    count = draw(st.integers(2, 4))
    nodes += [make_node(f"t{i}", cpu="1", zone=draw(st.sampled_from(zones)), marked_since=None) for i in range(count)]
    kind = draw(st.sampled_from(["none", "hostname-anti-affinity", "zone-anti-affinity", "affinity", "spread"]))
    y = {"app": "y"}
    constraints: dict[str, dict[str, Any]] = {
        "none": {},
        "hostname-anti-affinity": {"pod_anti_affinity": (anti_affinity(y),)},
        "zone-anti-affinity": {"pod_anti_affinity": (anti_affinity(y, "topology.kubernetes.io/zone"),)},
        "affinity": {
            "pod_affinity": (
                affinity_term(y, draw(st.sampled_from(["topology.kubernetes.io/zone", "kubernetes.io/hostname"]))),
            )
        },
        "spread": {"spread_constraints": (spread(y, max_skew=draw(st.integers(1, 2))),)},
    }
    constraint = constraints[kind]
    pods = [
        make_pod(
            f"y{i}",
            node="n0",
            cpu=f"{draw(st.sampled_from([100, 200, 500, 800]))}m",
            labels=y,
            priority=draw(st.sampled_from([0, 100])),
            **constraint,
        )
        for i in range(draw(st.integers(2, 3)))
    ]
    for i in range(count):
        if draw(st.booleans()):
            app = draw(st.sampled_from(["y", "z"]))
            pods.append(
                make_pod(f"r{i}", node=f"t{i}", cpu=f"{draw(st.sampled_from([100, 400, 900]))}m", labels={"app": app})
            )
    return make_snapshot(nodes, pods), make_config()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(one_candidate(wide=True), one_candidate(wide=True, many_targets=True)), st.randoms())
def test_pods_said_to_fit_in_every_order_fit_in_any_order(cluster: tuple[Snapshot, Any], draws: Random) -> None:
    """`fit.fits_in_every_order` lets the fit proof skip its other runs: whenever it says so, the pods
    fit in any order, with any tie-break and any avoided targets."""
    snapshot, config = cluster
    view = ClusterView(snapshot, config)
    source = view.nodes["n0"]
    targets = fit.targets_for(view)
    if not fit.fits_in_every_order(view, source, targets):
        return  # nothing claimed; the proof runs in full (the next test compares the two)
    names = [target.name for target in targets]
    for _ in range(6):
        order = list(source.movable_pods)
        draws.shuffle(order)
        avoided = frozenset(name for name in names if draws.random() < 0.4)
        ties: fit.TieBreak = draws.choice(["roomiest", "fullest", Random(draws.random())])
        result = fit.Simulation(view, source, targets, avoided, ties=ties).run(order)
        assert result.fits, (result.failure, [pod.key for pod in order], avoided, ties)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],  # no state kept
)
@given(cluster=st.one_of(one_candidate(wide=True), one_candidate(wide=True, many_targets=True), clusters()))
def test_the_plan_is_the_same_without_the_every_order_shortcut(
    cluster: tuple[Snapshot, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shortcut only saves runs: with it, the proof returns what the runs it skips would have left."""
    assert_same_plan_without_shortcut(cluster, monkeypatch)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cluster=tight_cluster())
def test_tight_clusters_plan_the_same_without_the_every_order_shortcut(
    cluster: tuple[Snapshot, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few small targets and pods of one app with a constraint: the clusters where one order fits and
    another does not. Had the shortcut claimed too much, a plan would differ here."""
    assert_same_plan_without_shortcut(cluster, monkeypatch)


def assert_same_plan_without_shortcut(cluster: tuple[Snapshot, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot, config = cluster
    quick = planner.plan(snapshot, config, now=NOW)
    with monkeypatch.context() as patched:
        patched.setattr(fit, "fits_in_every_order", lambda *_: False)
        full = planner.plan(snapshot, config, now=NOW)
    assert quick == full
