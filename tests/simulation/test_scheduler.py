"""The scheduler: the planner's predicates, least-allocated scoring, and never more than a node holds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from compactor.core import fit
from compactor.core.model import ZERO, Node, Pod
from compactor.kube.snapshot import parse_pod
from compactor.settings.config import Config
from compactor.simulation import objects
from compactor.simulation.scheduler import NOWHERE, Scheduler, feasible_nodes_to_find, node_affinity_scores, node_state
from compactor.simulation.world import World
from tests.simulation.builders import START, add_node, add_pod, world

CONFIG = Config.model_validate({})


def used(cluster: World, node: str) -> tuple[int, int, int]:
    records = [cluster.pod_record(key) for key in cluster.pods_on(node)]
    return (
        sum(r.requests.cpu_millis for r in records),
        sum(r.requests.memory_bytes for r in records),
        len(records),
    )


def test_the_scheduler_never_overcommits_a_node() -> None:
    cluster = world()
    sizes = random.Random(5)
    for index in range(4):
        add_node(cluster, f"n{index}", allocatable={"cpu": "4", "memory": "8Gi", "pods": "12"})
    for index in range(80):
        add_pod(cluster, f"p{index}", cpu=f"{sizes.randint(1, 12) * 100}m", memory=f"{sizes.randint(1, 16) * 128}Mi")
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    for index in range(4):
        cpu, memory, count = used(cluster, f"n{index}")
        assert cpu <= 4000
        assert memory <= 8 * 2**30
        assert count <= 12
    assert cluster.pending(), "some pods must be left over for the test to mean anything"
    assert all(cluster.pod_record(key).unschedulable for key in cluster.pending())


def test_a_pod_goes_to_the_least_allocated_node() -> None:
    cluster = world()
    add_node(cluster, "busy")
    add_node(cluster, "quiet")
    add_pod(cluster, "resident", node="busy", cpu="2")
    key = add_pod(cluster, "new", cpu="500m")
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(key).node_name == "quiet"


def test_with_most_allocated_scoring_a_pod_goes_to_the_busiest_node_that_holds_it() -> None:
    cluster = world()
    add_node(cluster, "busy")
    add_node(cluster, "quiet")
    add_node(cluster, "full")
    add_pod(cluster, "resident", node="busy", cpu="2")
    add_pod(cluster, "hog", node="full", cpu="3800m")
    key = add_pod(cluster, "new", cpu="500m", owner=("ReplicaSet", "new"))  # no sibling to spread from
    Scheduler(cluster, CONFIG, seed=1, most_allocated=True).schedule(START)
    assert cluster.pod_record(key).node_name == "busy"


def test_the_scheduler_honours_taints_like_the_planner() -> None:
    cluster = world()
    add_node(cluster, "gpu", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    key = add_pod(cluster, "web")
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(key).node_name is None
    assert cluster.pod_record(key).unschedulable


def test_a_pod_with_a_bound_volume_stays_in_its_zone() -> None:
    cluster = world()
    add_node(cluster, "a1", zone="zone-a")
    add_node(cluster, "b1", zone="zone-b")
    add_pod(cluster, "filler", node="b1", cpu="3")  # zone-b is fuller, so only the volume can send the pod there
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    cluster.pvc_zone[("default", "data-db-0")] = "zone-b"
    key = add_pod(cluster, "db-0", volumes=volumes)
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(key).node_name == "b1"


def test_placement_is_the_same_for_the_same_seed() -> None:
    def placements(seed: int) -> list[str | None]:
        cluster = world()
        for index in range(6):
            add_node(cluster, f"n{index}")
        keys = [add_pod(cluster, f"p{index}", cpu="250m") for index in range(30)]
        Scheduler(cluster, CONFIG, seed=seed).schedule(START)
        return [cluster.pod_record(key).node_name for key in keys]

    assert placements(7) == placements(7)


def test_with_balanced_allocation_a_pod_goes_where_cpu_and_memory_stay_even() -> None:
    """kube-scheduler's default profile scores NodeResourcesBalancedAllocation beside LeastAllocated: a
    2-cpu pod without memory goes to the node whose memory is as used as its cpu will be, although the
    other node keeps more free (LeastAllocated alone: 62 against 50; with balance: 124 against 137)."""
    placed = {}
    for balanced in (False, True):
        cluster = world()
        add_node(cluster, "cpu-used", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})
        add_node(cluster, "memory-used", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})
        add_pod(cluster, "compute", node="cpu-used", cpu="1", memory="0")
        add_pod(cluster, "cache", node="memory-used", cpu="0", memory="4Gi")
        key = add_pod(cluster, "new", cpu="2", memory="0")
        Scheduler(cluster, CONFIG, seed=1, balanced_allocation=balanced).schedule(START)
        placed[balanced] = cluster.pod_record(key).node_name
    assert placed == {False: "cpu-used", True: "memory-used"}


def test_balanced_allocation_scores_the_change_a_pod_makes_as_kube_scheduler_1_36_does() -> None:
    """What the e2e calibration found (tests/simulation/calibrate_consolidation.py, docs/savings.md): on
    e2-standard-4 nodes, a 500m/1Gi pod beside `busy` (2900m, 3136Mi) and `roomy` (2700m, 4160Mi).
    kube-scheduler 1.36 put it on `busy`: LeastAllocated 41 against 39, balance 50 + (50 + 71 - 74) / 2
    = 73 against 50 + (50 + 78 - 80) / 2 = 74, so 114 against 113. Scoring the balance after placement
    alone (71 against 78) sent it to `roomy`, 112 against 117."""
    cluster = world()
    for name in ("busy", "roomy"):
        add_node(cluster, name, allocatable={"cpu": "3920m", "memory": "13948518Ki", "pods": "110"})
    add_pod(cluster, "busy-resident", node="busy", cpu="2900m", memory="3136Mi", owner=("ReplicaSet", "a"))
    add_pod(cluster, "roomy-resident", node="roomy", cpu="2700m", memory="4160Mi", owner=("ReplicaSet", "b"))
    key = add_pod(cluster, "cache", cpu="500m", memory="1Gi", owner=("ReplicaSet", "cache"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(key).node_name == "busy"


def spread_pick(seed: int, *, topology_spread: bool) -> str | None:
    """Two nodes with the same requests: one holds three pods of `web`'s ReplicaSet, the other three of `api`'s."""
    cluster = world()
    add_node(cluster, "web-node")
    add_node(cluster, "api-node")
    for index in range(3):
        add_pod(cluster, f"web-{index}", node="web-node", app="web", owner=("ReplicaSet", "web"))
        add_pod(cluster, f"api-{index}", node="api-node", app="api", owner=("ReplicaSet", "api"))
    key = add_pod(cluster, "web-new", app="web", owner=("ReplicaSet", "web"))
    Scheduler(cluster, CONFIG, seed=seed, topology_spread=topology_spread).schedule(START)
    return cluster.pod_record(key).node_name


def test_the_default_topology_spread_score_sends_a_replica_set_pod_away_from_its_siblings() -> None:
    assert {spread_pick(seed, topology_spread=True) for seed in range(1, 9)} == {"api-node"}
    assert {spread_pick(seed, topology_spread=False) for seed in range(1, 9)} == {"api-node", "web-node"}, (
        "without it the resource scores tie and the pick is random"
    )


def test_a_job_pod_gets_no_default_spread_score() -> None:
    cluster = world()
    add_node(cluster, "a")
    add_node(cluster, "b")
    for index in range(3):
        add_pod(cluster, f"etl-{index}", node="a", app="etl", owner=("Job", "etl"))
        add_pod(cluster, f"other-{index}", node="b", app="other", owner=("ReplicaSet", "other"))
    picks = set()
    for seed in range(1, 9):
        key = add_pod(cluster, f"etl-new-{seed}", app="etl", owner=("Job", "etl"))
        Scheduler(cluster, CONFIG, seed=seed).schedule(START)
        picks.add(cluster.pod_record(key).node_name)
        cluster.scale_down(key, START)
    assert picks == {"a", "b"}, "no Service or ReplicaSet selects a Job's pods: resource scores alone, tied"


# -- preferred node affinity (NodeAffinity's score) ------------------------------------------------------

SPOT = "cloud.google.com/gke-spot"


def preferring(*terms: tuple[int, str, str]) -> dict[str, Any]:
    """A pod's affinity preferring nodes labelled key=value, each with its weight, as Kubernetes writes it."""
    preferred = [
        {"weight": weight, "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}}
        for weight, key, value in terms
    ]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}


def test_a_pod_preferring_spot_lands_on_the_spot_node_though_another_is_emptier() -> None:
    cluster = world()
    add_node(cluster, "on-demand")
    add_node(cluster, "spot", labels={SPOT: "true"})
    add_pod(cluster, "resident", node="spot", cpu="2", memory="8Gi")  # half full: least-allocated says on-demand
    key = add_pod(cluster, "batch", affinity=preferring((1, SPOT, "true")))
    plain = add_pod(cluster, "web", owner=("ReplicaSet", "web"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(key).node_name == "spot", "weight 1 of 1: normalized to 100, twice 100 in the sum"
    assert cluster.pod_record(plain).node_name == "on-demand", "a pod without preferences goes by resources"


def test_the_node_matching_the_heavier_preferred_term_wins() -> None:
    cluster = world()
    add_node(cluster, "ssd", labels={"disk": "ssd"})
    add_node(cluster, "fast", labels={"cpu": "fast"})
    add_pod(cluster, "resident", node="fast", cpu="1")
    add_pod(cluster, "resident-2", node="ssd", cpu="2")  # the resource scores say fast
    key = add_pod(cluster, "db", affinity=preferring((10, "cpu", "fast"), (90, "disk", "ssd")))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(key).node_name == "ssd"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param([{}, {"a": "1"}, {"a": "1", "b": "1"}], [0, 33, 100], id="by-the-highest-sum-in-integers"),
        pytest.param([{}, {}], [0, 0], id="none-matching-scores-none"),
        pytest.param([{"b": "1"}, {"b": "1"}], [100, 100], id="all-matching-score-alike"),
    ],
)
def test_node_affinity_scores_are_the_matched_weights_normalized_to_100_over_feasible_nodes(
    labels: list[dict[str, str]], expected: list[int]
) -> None:
    pod = parse_pod(pod_object(affinity=preferring((10, "a", "1"), (20, "b", "1"))))
    feasible = [
        node_state(Node(name=f"n{i}", allocatable=ZERO, allocatable_pods=0, labels=each))
        for i, each in enumerate(labels)
    ]
    assert node_affinity_scores(pod, feasible) == expected


def test_a_pod_without_preferred_terms_gets_no_node_affinity_score() -> None:
    pod = parse_pod(pod_object())
    assert node_affinity_scores(pod, [node_state(Node(name="n", allocatable=ZERO, allocatable_pods=0))]) is None


def pod_object(**template: Any) -> dict[str, Any]:
    return objects.stamp_pod(
        objects.pod_template(
            namespace="default", labels={"app": "x"}, requests={"cpu": "1", "memory": "1Gi"}, **template
        ),
        name="x",
        owner_kind="ReplicaSet",
        owner_name="x",
        created=START,
        node_name=None,
    )


@pytest.mark.parametrize(
    ("nodes", "wanted"),
    [
        pytest.param(99, 99, id="below-100-every-node"),
        pytest.param(100, 100, id="100-at-least-100"),
        pytest.param(1_000, 420, id="1000-at-42-percent"),
        pytest.param(5_000, 500, id="5000-at-10-percent"),
        pytest.param(10_000, 500, id="10000-at-the-5-percent-floor"),
    ],
)
def test_kube_scheduler_looks_for_fewer_feasible_nodes_on_larger_clusters(nodes: int, wanted: int) -> None:
    assert feasible_nodes_to_find(nodes) == wanted


def _search(nodes: int, full: int = 0) -> tuple[Scheduler, fit.Simulation, Pod, list[str], dict[str, list[int]]]:
    """A scheduler over `nodes` nodes named in order, every `full`-th of them (if any) with its cpu taken, a
    simulation of them, a small pod, the names, and each node's cpu and memory requested as a round counts them."""
    cluster = world()
    names = [f"n{index:03}" for index in range(nodes)]
    for index, name in enumerate(names):
        add_node(cluster, name)
        if full and index % full == 0:
            add_pod(cluster, f"resident-{index}", node=name, cpu="4")
    view = cluster.view(START, CONFIG)
    simulation = fit.Simulation(view, NOWHERE, sorted(view.nodes.values(), key=lambda state: state.name))
    template = objects.pod_template(namespace="default", labels={}, requests={"cpu": "100m"})
    pod = parse_pod(objects.stamp_pod(template, name="p", owner_kind=None, owner_name=None, created=START))
    used = {state.name: [state.requested.cpu_millis, state.requested.memory_bytes] for state in simulation.targets}
    return Scheduler(cluster, CONFIG, seed=1), simulation, pod, names, used


def test_on_100_nodes_or_more_the_search_stops_at_enough_feasible_nodes_and_the_next_starts_past_it() -> None:
    scheduler, simulation, pod, names, used = _search(150)
    first = scheduler._feasible(pod, simulation, used)
    assert [state.name for state in first] == names[:100]  # 150 x (50 - 1)% = 73, at least 100
    second = scheduler._feasible(pod, simulation, used)
    assert [state.name for state in second] == names[100:] + names[:50]  # round the list
    third = scheduler._feasible(pod, simulation, used)
    assert [state.name for state in third] == names[50:]


def test_nodes_passed_over_for_want_of_room_are_those_the_filter_refuses_and_the_search_moves_past_them() -> None:
    scheduler, simulation, pod, names, used = _search(200, full=3)
    fits = [name for name in names if simulation.why_not(pod, simulation.view.nodes[name]) is None]
    assert len(fits) == 133 and not set(names[::3]) & set(fits)
    first = scheduler._feasible(pod, simulation, used)
    assert [state.name for state in first] == fits[:100]  # 200 x (50 - 1)% = 98, at least 100
    second = scheduler._feasible(pod, simulation, used)
    assert [state.name for state in second] == fits[100:] + fits[:67]  # started past the last node looked at


def test_below_100_nodes_every_feasible_node_is_found_in_name_order() -> None:
    scheduler, simulation, pod, names, used = _search(40)
    assert [state.name for state in scheduler._feasible(pod, simulation, used)] == names
    assert [state.name for state in scheduler._feasible(pod, simulation, used)] == names  # no search moved on


def test_a_daemonset_pod_that_fits_nowhere_does_not_hold_back_its_sibling_for_another_node() -> None:
    # A round passes over the later pods of an owner whose pod fitted nowhere; a DaemonSet's pods differ by the
    # node each selects, so the second still binds.
    cluster = world()
    add_node(cluster, "full", allocatable={"cpu": "1", "memory": "4Gi", "pods": "110"})
    add_node(cluster, "free", allocatable={"cpu": "1", "memory": "4Gi", "pods": "110"})
    add_pod(cluster, "resident", node="full", cpu="1")
    owner = ("DaemonSet", "agent")
    first = add_pod(cluster, "agent-a", cpu="200m", owner=owner, node_selector={"kubernetes.io/hostname": "full"})
    second = add_pod(cluster, "agent-b", cpu="200m", owner=owner, node_selector={"kubernetes.io/hostname": "free"})
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert cluster.pod_record(first).unschedulable
    assert cluster.pod_record(second).node_name == "free"


def test_the_pods_of_a_replica_set_that_fit_nowhere_are_all_marked_unschedulable() -> None:
    cluster = world()
    add_node(cluster, "n1", allocatable={"cpu": "1", "memory": "4Gi", "pods": "110"})
    keys = [add_pod(cluster, f"big-{index}", cpu="2") for index in range(3)]
    small = add_pod(cluster, "small", cpu="500m", owner=("ReplicaSet", "other"))
    Scheduler(cluster, CONFIG, seed=1).schedule(START)
    assert all(cluster.pod_record(key).unschedulable for key in keys)
    assert cluster.pod_record(small).node_name == "n1"
