"""The Cluster Autoscaler model: scale-up for pending pods, scale-down of unneeded nodes, its delays."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from compactor.simulation.model import compute_class
from compactor.simulation.runner import Cluster
from tests.simulation.builders import POOL, add_pdb, add_pod, cluster_from, scenario_data

BEGIN = datetime.fromisoformat("2026-11-20T17:00:00+00:00")


def idle_cluster(nodes: int = 3, **pool: object) -> Cluster:
    """`nodes` empty nodes of one pool, no workload; the tests add what they need."""
    pools = [{"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a"], "initialNodes": nodes, **pool}]
    return cluster_from(scenario_data(pools=pools, deployments=[], daemonSets=[]))


def names(cluster: Cluster) -> list[str]:
    return sorted(cluster.world.nodes)


def fill(cluster: Cluster, node: str, cpu: str) -> None:
    add_pod(cluster.world, f"fill-{node}", node=node, cpu=cpu, owner=("ReplicaSet", f"fill-{node}"))


def minutes(cluster: Cluster, start: int, stop: int) -> None:
    for minute in range(start, stop):
        cluster.autoscaler.step(BEGIN + timedelta(minutes=minute))


def test_an_empty_cordoned_node_is_removed_once_unneeded_for_more_than_ten_minutes() -> None:
    cluster = idle_cluster(3)
    first, second, third = names(cluster)
    fill(cluster, first, "3")
    fill(cluster, second, "3")
    cluster.world.patch_node(third, {"spec": {"unschedulable": True}})
    minutes(cluster, 0, 11)
    assert third in cluster.world.nodes, "unneeded for exactly 10 minutes: since + 10 min is not before now"
    minutes(cluster, 11, 12)
    assert names(cluster) == [first, second]
    assert cluster.world.recorder.nodes_removed == 1


@pytest.mark.parametrize(
    ("cpu", "removed"),
    [
        pytest.param("1500m", True, id="below-half-and-fits-elsewhere"),
        pytest.param("2500m", False, id="above-half"),
    ],
)
def test_a_node_is_removed_only_below_half_its_allocatable(cpu: str, removed: bool) -> None:
    cluster = idle_cluster(2)
    light, other = names(cluster)
    fill(cluster, light, cpu)
    fill(cluster, other, "1")
    minutes(cluster, 0, 12)
    assert (light not in cluster.world.nodes) is removed or (other not in cluster.world.nodes)
    if removed:
        assert cluster.world.recorder.evicted["cluster-autoscaler"] >= 1


def test_a_pdb_at_zero_keeps_the_node() -> None:
    cluster = idle_cluster(2)
    light, other = names(cluster)
    add_pod(cluster.world, "guarded", node=light, cpu="500m", app="guarded")
    fill(cluster, other, "3")
    cluster.world.set_scale(("default", "ReplicaSet", "rs"), 1)
    add_pdb(cluster.world, "guarded", minAvailable=1)
    minutes(cluster, 0, 20)
    assert light in cluster.world.nodes
    assert cluster.world.recorder.disruptions() == 0


def test_pending_pods_bring_a_node_after_provisioning() -> None:
    cluster = idle_cluster(1)
    (only,) = names(cluster)
    fill(cluster, only, "3500m")
    key = add_pod(cluster.world, "newcomer", cpu="2")
    cluster.scheduler.schedule(BEGIN)
    assert cluster.world.pod_record(key).unschedulable
    cluster.autoscaler.step(BEGIN)
    assert len(cluster.autoscaler.upcoming) == 1
    assert cluster.autoscaler.billed_nodes() == 2
    minutes(cluster, 1, 4)
    assert len(cluster.world.nodes) == 1, "3 to 4 minutes on GCE (the CA FAQ): 210 s, not there at minute 3"
    minutes(cluster, 4, 5)
    assert len(cluster.world.nodes) == 2
    cluster.scheduler.schedule(BEGIN + timedelta(minutes=4))
    assert cluster.world.pod_record(key).node_name not in (None, only)


def test_no_node_is_removed_within_ten_minutes_of_a_scale_up() -> None:
    cluster = idle_cluster(2)
    busy, empty = names(cluster)
    fill(cluster, busy, "3500m")
    cluster.world.patch_node(empty, {"spec": {"unschedulable": True}})
    minutes(cluster, -5, 0)  # unneeded from minute -5: ripe at minute 5
    add_pod(cluster.world, "newcomer", cpu="2", owner=("ReplicaSet", "newcomer"))
    cluster.scheduler.schedule(BEGIN)
    for minute in range(10):  # the scale-up at minute 0 holds every removal until minute 10
        cluster.autoscaler.step(BEGIN + timedelta(minutes=minute))
        cluster.scheduler.schedule(BEGIN + timedelta(minutes=minute))
    assert cluster.autoscaler.last_scale_up == BEGIN
    assert empty in cluster.world.nodes
    minutes(cluster, 10, 11)
    assert empty not in cluster.world.nodes


def test_empty_nodes_go_together_beside_one_drain_at_a_time() -> None:
    cluster = idle_cluster(5)
    keep, first, second, empty, other_empty = names(cluster)
    fill(cluster, keep, "3")
    fill(cluster, first, "200m")
    fill(cluster, second, "200m")
    minutes(cluster, 0, 11)
    assert len(cluster.world.nodes) == 5, "unneeded for 10 minutes only"
    minutes(cluster, 11, 12)
    gone = {empty, other_empty, first, second} - set(cluster.world.nodes)
    assert {empty, other_empty} <= gone and len(gone) == 3, "both empty nodes in bulk, and one drain"
    minutes(cluster, 12, 13)
    assert names(cluster) == [keep], "a second drain waits for the first (max-drain-parallelism 1)"


def test_a_node_whose_pods_found_no_place_is_simulated_again_only_after_five_minutes() -> None:
    cluster = idle_cluster(3)
    light, spare, full = names(cluster)
    fill(cluster, light, "1500m")
    fill(cluster, full, "3500m")
    add_pod(cluster.world, "big", node=spare, cpu="3", owner=("ReplicaSet", "big"))
    minutes(cluster, 0, 1)
    assert light in cluster.autoscaler.unremovable_until, "1.5 cpu fits nowhere"
    cluster.world.scale_down("default/big", BEGIN)
    add_pod(cluster.world, "medium", node=spare, cpu="2100m", owner=("ReplicaSet", "medium"))  # room now
    minutes(cluster, 1, 5)
    assert light not in cluster.autoscaler.unneeded_since, "not simulated again before 5 minutes"
    minutes(cluster, 5, 6)
    assert cluster.autoscaler.unneeded_since[light] == BEGIN + timedelta(minutes=5)
    minutes(cluster, 6, 16)
    assert light in cluster.world.nodes
    minutes(cluster, 16, 17)
    assert light not in cluster.world.nodes


def test_the_planner_keeps_finding_unneeded_nodes_while_a_node_drains() -> None:
    cluster = idle_cluster(3)
    keep, draining, later = names(cluster)
    fill(cluster, keep, "2")
    guarded = [add_pod(cluster.world, f"guarded-{i}", node=draining, cpu="300m", app="guarded") for i in range(2)]
    add_pod(cluster.world, "busy", node=later, cpu="2500m", owner=("ReplicaSet", "busy"))
    cluster.world.set_scale(("default", "ReplicaSet", "rs"), 2)
    add_pdb(cluster.world, "guarded", maxUnavailable=1)
    cluster.autoscaler.unneeded_since[draining] = BEGIN - timedelta(minutes=11)
    cluster.autoscaler.step(BEGIN)  # its drain starts at once; the PDB lets one pod go, and holds the other
    assert cluster.autoscaler.removal is not None and cluster.autoscaler.removal.node == draining
    assert sum(key in cluster.world.pods for key in guarded) == 1
    cluster.world.scale_down("default/busy", BEGIN)
    add_pod(cluster.world, "small", node=later, cpu="300m", owner=("ReplicaSet", "small"))
    minutes(cluster, 1, 2)
    assert cluster.autoscaler.removal is not None, "still draining"
    assert cluster.autoscaler.unneeded_since.get(later) == BEGIN + timedelta(minutes=1), "planned beside the drain"


@pytest.mark.parametrize(
    ("volumes", "namespace", "blocking_seconds", "age_minutes", "removed"),
    [
        pytest.param(
            [{"name": "scratch", "emptyDir": {}}], "default", None, 0, True, id="local-storage-no-longer-blocks"
        ),
        pytest.param(None, "kube-system", None, 600, False, id="a-kube-system-pod-without-a-pdb-blocks"),
        pytest.param(None, "kube-system", 3600, 30, False, id="upstream-timeout-not-yet-reached"),
        pytest.param(None, "kube-system", 3600, 61, True, id="upstream-timeout-reached"),
    ],
)
def test_the_autoscalers_drainability_rules(
    volumes: list[dict[str, object]] | None,
    namespace: str,
    blocking_seconds: int | None,
    age_minutes: int,
    removed: bool,
) -> None:
    cluster = idle_cluster(2)
    light, other = names(cluster)
    # Needed (10 of its 13 GiB requested) with room for the special pod, so that only `light` is a candidate.
    add_pod(cluster.world, "keep", node=other, cpu="1", memory="10Gi", owner=("ReplicaSet", "keep"))
    cluster.world.now = BEGIN - timedelta(minutes=age_minutes)
    add_pod(cluster.world, "special", node=light, cpu="300m", namespace=namespace, volumes=volumes)
    cluster.world.now = BEGIN
    cluster.autoscaler.settings = replace(cluster.autoscaler.settings, system_pod_blocking_seconds=blocking_seconds)
    for minute in range(12):
        cluster.world.now = BEGIN + timedelta(minutes=minute)
        cluster.autoscaler.step(cluster.world.now)
    assert (light not in cluster.world.nodes) is removed


def test_a_compute_class_threshold_removes_what_half_keeps() -> None:
    cluster = idle_cluster(2)
    light, other = names(cluster)
    fill(cluster, light, "2400m")  # 61% of 3.92 cpu
    fill(cluster, other, "1")
    minutes(cluster, 0, 12)
    assert light in cluster.world.nodes and other not in cluster.world.nodes
    cluster = idle_cluster(3)
    light, other, third = names(cluster)
    fill(cluster, light, "2400m")
    fill(cluster, other, "1")
    fill(cluster, third, "1")
    cluster.autoscaler.settings = compute_class(cluster.autoscaler.settings, {POOL: 0.75})
    minutes(cluster, 0, 30)
    assert len(cluster.world.nodes) == 1, "below 75%: every node that can go, goes"


def test_a_pool_never_goes_below_its_minimum() -> None:
    cluster = idle_cluster(3, minNodes=2)
    minutes(cluster, 0, 30)
    assert len(cluster.world.nodes) == 2


def soft_tainted(cluster: Cluster, node: str) -> bool:
    taints = cluster.world.nodes[node]["spec"].get("taints") or []
    return any(t["key"] == "DeletionCandidateOfClusterAutoscaler" and t["effect"] == "PreferNoSchedule" for t in taints)


def test_an_unneeded_node_carries_the_soft_taint_until_it_is_needed_again() -> None:
    cluster = idle_cluster(2)
    light, busy = names(cluster)
    fill(cluster, light, "1")
    fill(cluster, busy, "2500m")
    minutes(cluster, 0, 1)
    assert soft_tainted(cluster, light)
    assert not soft_tainted(cluster, busy), "above half: needed"
    add_pod(cluster.world, "more", node=light, cpu="1500m", owner=("ReplicaSet", "more"))
    minutes(cluster, 1, 2)
    assert not soft_tainted(cluster, light), "above half now: needed again"
    assert names(cluster) == sorted([light, busy])
