"""The Cluster Autoscaler model where the 1.36.1 source (kubernetes/autoscaler, cluster-autoscaler/) and GKE's
fork (GoogleCloudPlatform/cluster-autoscaler) decide: eligibility, the sequential removal simulation, the
order and budgets of deletions, the soft taints, the DaemonSet evictions, the 10 s loop and the node pool's
consolidation delay."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from compactor.simulation import autoscaler as autoscaler_module
from compactor.simulation import runner
from compactor.simulation.model import compute_class
from compactor.simulation.runner import Cluster
from compactor.simulation.strategies import ClusterAutoscalerAlone
from tests.simulation.builders import POOL, add_pdb, add_pod, cluster_from, scenario_data, setup_from

BEGIN = datetime.fromisoformat("2026-11-20T17:00:00+00:00")
CA = "cluster-autoscaler"


def idle_cluster(
    nodes: int = 3, *, seed: int = 3, autoscaler: dict[str, object] | None = None, **pool: object
) -> Cluster:
    pools = [{"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a"], "initialNodes": nodes, **pool}]
    settings = {"autoscaler": autoscaler} if autoscaler is not None else {}
    return cluster_from(scenario_data(pools=pools, deployments=[], daemonSets=[], seed=seed, **settings))


def names(cluster: Cluster) -> list[str]:
    return sorted(cluster.world.nodes)


def fill(cluster: Cluster, node: str, cpu: str, name: str | None = None) -> str:
    name = name or f"fill-{node}"
    return add_pod(cluster.world, name, node=node, cpu=cpu, owner=("ReplicaSet", name))


def keep(cluster: Cluster, node: str) -> str:
    """A needed node with room: 10 of its 13 GiB requested (above the threshold by memory), 1 cpu of 3.92."""
    return add_pod(
        cluster.world, f"keep-{node}", node=node, cpu="1", memory="10Gi", owner=("ReplicaSet", f"keep-{node}")
    )


def daemon(cluster: Cluster, node: str, cpu: str) -> str:
    return add_pod(cluster.world, f"agent-{node}", node=node, cpu=cpu, owner=("DaemonSet", "agent"))


def loops(cluster: Cluster, start_minute: float, stop_minute: float, every_seconds: int = 60) -> None:
    at = BEGIN + timedelta(minutes=start_minute)
    while at < BEGIN + timedelta(minutes=stop_minute):
        cluster.world.now = at
        cluster.autoscaler.step(at)
        at += timedelta(seconds=every_seconds)


def soft_tainted(cluster: Cluster, node: str) -> bool:
    taints = cluster.world.nodes[node]["spec"].get("taints") or []
    return any(t["key"] == autoscaler_module.DELETION_CANDIDATE for t in taints)


@pytest.mark.parametrize(
    ("daemon_cpu", "removed"),
    [
        pytest.param("2500m", False, id="daemonsets-at-64%-keep-the-node"),
        pytest.param("1960m", True, id="daemonsets-at-exactly-50%-removed"),
        pytest.param("500m", True, id="daemonsets-at-13%-removed"),
    ],
)
def test_a_node_with_only_daemonset_pods_is_removed_only_at_or_below_the_threshold(
    daemon_cpu: str, removed: bool
) -> None:
    cluster = idle_cluster(2)
    only_daemons, busy = names(cluster)
    daemon(cluster, only_daemons, daemon_cpu)
    fill(cluster, busy, "2500m")
    loops(cluster, 0, 13)
    assert (only_daemons not in cluster.world.nodes) is removed


def test_a_node_exactly_at_the_threshold_is_unneeded() -> None:
    cluster = idle_cluster(2)
    at_half, other = names(cluster)
    fill(cluster, at_half, "1960m")  # 1960m of 3920m: utilization 0.5, not above 0.5
    keep(cluster, other)
    loops(cluster, 0, 1)
    assert at_half in cluster.autoscaler.unneeded_since


def test_a_removable_nodes_pods_are_booked_before_the_next_node_is_judged() -> None:
    cluster = idle_cluster(3)
    first, second, target = names(cluster)
    fill(cluster, first, "1200m")
    fill(cluster, second, "1200m")
    fill(cluster, target, "2000m")  # 51%: needed; 1920m free, room for one of the two pods only
    loops(cluster, 0, 1)
    (judged_first,) = cluster.autoscaler.unneeded_since
    (judged_second,) = {first, second} - {judged_first}
    assert judged_second not in cluster.autoscaler.unneeded_since, "no room once the first one's pod is booked"
    assert cluster.autoscaler.unremovable_until == {judged_second: BEGIN + timedelta(minutes=5)}, (
        "rechecked after unremovable-node-recheck-timeout"
    )


def test_the_recheck_of_an_unremovable_node_follows_the_scenarios_timeout() -> None:
    cluster = idle_cluster(3, autoscaler={"unremovableRecheckSeconds": 60})
    first, second, target = names(cluster)
    fill(cluster, first, "1200m")
    fill(cluster, second, "1200m")
    fill(cluster, target, "2000m")
    loops(cluster, 0, 1)
    (judged_second,) = {first, second} - set(cluster.autoscaler.unneeded_since)
    assert cluster.autoscaler.unremovable_until[judged_second] == BEGIN + timedelta(minutes=1)


def removable_of_two(seed: int) -> str:
    """Which of two equal candidates a pass finds removable when the room left takes the pod of one only."""
    cluster = idle_cluster(3, seed=seed)
    first, second, target = names(cluster)
    fill(cluster, first, "1200m")
    fill(cluster, second, "1200m")
    fill(cluster, target, "2000m")
    loops(cluster, 0, 1)
    (found,) = cluster.autoscaler.unneeded_since
    return found


def test_candidates_are_judged_in_the_node_listers_order_drawn_from_the_seed() -> None:
    assert removable_of_two(1) == removable_of_two(1), "the same seed, the same order"
    assert len({removable_of_two(seed) for seed in range(8)}) == 2, "not always the first by name"


def simulated_place(seed: int, passes: int = 1) -> set[str]:
    """Where the removal simulation puts a light node's pod over `passes` passes, each one run in full."""
    cluster = idle_cluster(4, seed=seed)
    light, *others = names(cluster)
    pod = fill(cluster, light, "500m")
    for node, cpu in zip(others, ("1", "2", "2500m"), strict=True):
        add_pod(cluster.world, f"keep-{node}", node=node, cpu=cpu, memory="10Gi", owner=("ReplicaSet", node))
    places = set()
    for second in range(0, 10 * passes, 10):
        cluster.world.now = BEGIN + timedelta(seconds=second)
        cluster.autoscaler._last_pass = None  # as if something had changed since the last pass
        cluster.autoscaler._update_unneeded(cluster.world.now)
        places.add(cluster.autoscaler._hints[pod])
    return places


def test_the_removal_simulation_takes_the_first_node_that_fits_from_a_random_place() -> None:
    places = set().union(*(simulated_place(seed) for seed in range(12)))
    assert len(places) > 1, "no score: not always the emptiest node, as kube-scheduler's would be"


def first_roomy_node_takes_it(seed: int) -> bool:
    """Whether a light node's pod lands on the first node with room in the order the cluster lists its
    nodes, right after the three full ones: a walk in that fixed order would give it every pod whose walk
    starts on a full node."""
    cluster = idle_cluster(8, seed=seed)
    light, *full_then_roomy = sorted(cluster.world.nodes, key=lambda name: name[-4:])  # as created: -0000 ...
    pod = fill(cluster, light, "500m")
    for node in full_then_roomy[:3]:
        fill(cluster, node, "3800m")  # 97%: needed, and no room for the pod
    for node in full_then_roomy[3:]:
        keep(cluster, node)
    cluster.world.now = BEGIN
    cluster.autoscaler._update_unneeded(BEGIN)
    return cluster.autoscaler._hints[pod] == full_then_roomy[3]


def test_the_removal_simulation_walks_the_nodes_in_a_random_order_not_a_fixed_one() -> None:
    share = sum(first_roomy_node_takes_it(seed) for seed in range(32)) / 32
    assert share < 0.45, f"{share:.0%} of the pods on one of four equal nodes: a fixed order's bias (4 in 7)"


def test_the_search_takes_the_node_one_past_the_last_match_when_every_node_passes() -> None:
    assert autoscaler_module.first_match(12, 4, lambda index: True) == 5
    assert autoscaler_module.first_match(12, 11, lambda index: True) == 0, "round the end of the list"


def test_the_search_runs_its_chunks_in_step_so_a_chunks_first_node_beats_the_chunk_before() -> None:
    # 12 nodes: chunks of 3 (the square root), four goroutines, so all four chunks at once. From last match 0
    # the i-th node checked is node i + 1: node 3 is the third of the first chunk, node 4 the first of the next.
    assert autoscaler_module.first_match(12, 0, lambda index: index in {3, 4}) == 4
    assert autoscaler_module.first_match(12, 0, lambda index: index in {3, 9}) == 3, "the earliest at one step"
    assert autoscaler_module.first_match(12, 0, lambda index: False) is None


def test_the_search_takes_its_chunks_four_at_a_time() -> None:
    # 100 nodes: chunks of 10, the goroutines take chunks 0-3 first, then 4-7: node 42 (chunk 4's second) is
    # found before node 91 (chunk 9's first), and chunk 0's last node before chunk 4's first.
    assert autoscaler_module.first_match(100, 0, lambda index: index in {42, 91}) == 42
    assert autoscaler_module.first_match(100, 0, lambda index: index in {10, 41}) == 10


def placed_apart(seed: int) -> bool:
    """Whether three small pods of one node land on three different nodes of five with room for all."""
    cluster = idle_cluster(6, seed=seed)
    light, *others = names(cluster)
    pods = [fill(cluster, light, "300m", name=f"small-{k}") for k in range(3)]
    for node in others:
        keep(cluster, node)
    cluster.world.now = BEGIN
    cluster.autoscaler._update_unneeded(BEGIN)
    return len({cluster.autoscaler._hints[pod] for pod in pods}) == 3


def test_a_nodes_pods_take_the_nodes_after_the_last_match_one_each() -> None:
    # A search from a random place for each pod would put two of the three on one node in about half the
    # passes (1 - 4/5 * 3/5); from one past the last match it never does while every node has room.
    assert all(placed_apart(seed) for seed in range(8))


def test_a_pods_simulated_place_is_kept_from_one_pass_to_the_next() -> None:
    assert len(simulated_place(seed=5, passes=30)) == 1, "its hint: the node it was put on in the pass before"


def test_pods_of_a_drain_under_way_count_in_the_utilization_of_the_node_they_land_on() -> None:
    cluster = idle_cluster(3)
    draining, light, busy = names(cluster)
    fill(cluster, draining, "1500m")  # held by the drain under way
    fill(cluster, light, "500m")  # 13% alone, 51% with the drained pod, the only node it fits
    fill(cluster, busy, "3300m")  # 620m free: room for light's pod, not for the drained one
    cluster.autoscaler.removal = autoscaler_module._Removal(draining, BEGIN)
    cluster.world.now = BEGIN
    cluster.autoscaler._update_unneeded(BEGIN)
    assert light not in cluster.autoscaler.unneeded_since, "above 50% with the pod it is about to receive"
    assert light not in cluster.autoscaler.unremovable_until, "turned down by utilization, not by the simulation"


def test_the_pool_minimum_is_checked_only_when_deleting() -> None:
    cluster = idle_cluster(3, minNodes=2)
    loops(cluster, 0, 1)
    assert len(cluster.autoscaler.unneeded_since) == 3, "every empty node stays a candidate"
    loops(cluster, 1, 30)
    assert len(cluster.world.nodes) == 2


def test_soft_taints_are_updated_in_a_loop_that_starts_a_deletion() -> None:
    cluster = idle_cluster(3)
    empty, light, busy = names(cluster)
    fill(cluster, light, "500m")
    fill(cluster, busy, "2500m")
    cluster.autoscaler.unneeded_since[empty] = BEGIN - timedelta(minutes=11)
    loops(cluster, 0, 1)
    assert empty not in cluster.world.nodes, "deleted in this loop"
    assert soft_tainted(cluster, light), "and the new candidate tainted in the same loop"


def test_daemonset_pods_of_a_drained_node_are_counted_as_evictions() -> None:
    cluster = idle_cluster(2)
    light, busy = names(cluster)
    fill(cluster, light, "500m")
    daemon(cluster, light, "100m")
    keep(cluster, busy)
    loops(cluster, 0, 12)
    assert light not in cluster.world.nodes
    assert cluster.world.recorder.evicted[CA] == 2, "the app pod and the DaemonSet pod"


def test_an_empty_nodes_daemonset_pods_are_not_evicted() -> None:
    cluster = idle_cluster(2)
    empty, busy = names(cluster)
    daemon(cluster, empty, "100m")
    fill(cluster, busy, "1")
    loops(cluster, 0, 12)
    assert empty not in cluster.world.nodes
    assert cluster.world.recorder.evicted[CA] == 0, "--daemonset-eviction-for-empty-nodes is false by default"


def first_drained(seed: int) -> int:
    cluster = idle_cluster(5, seed=seed)
    nodes = names(cluster)
    fill(cluster, nodes[0], "2500m")
    for node in nodes[1:]:
        fill(cluster, node, "200m")
    for node in nodes[1:]:
        cluster.autoscaler.unneeded_since[node] = BEGIN - timedelta(minutes=20)
    loops(cluster, 0, 0.5)
    (gone,) = set(nodes) - set(cluster.world.nodes)
    return nodes.index(gone)


def test_ripe_nodes_are_drained_in_an_order_drawn_from_the_seed() -> None:
    assert first_drained(1) == first_drained(1), "the same seed, the same order"
    assert len({first_drained(seed) for seed in range(8)}) > 1, "not always the first by name"


def test_the_autoscaler_loops_every_ten_seconds_inside_a_step() -> None:
    cluster = idle_cluster(5)
    busy, *light = names(cluster)
    fill(cluster, busy, "1")
    for node in light:
        fill(cluster, node, "200m")
        cluster.autoscaler.unneeded_since[node] = BEGIN - timedelta(minutes=20)
    cluster.step(ClusterAutoscalerAlone(), BEGIN)
    assert cluster.world.recorder.nodes_removed >= 3, "a drain a loop, six loops a minute"


def test_a_scale_up_does_not_end_the_loop() -> None:
    cluster = idle_cluster(2)
    light, busy = names(cluster)
    fill(cluster, light, "500m")
    fill(cluster, busy, "3")
    add_pod(cluster.world, "newcomer", cpu="3500m", owner=("ReplicaSet", "newcomer"))
    cluster.scheduler.schedule(BEGIN)
    loops(cluster, 0, 1)
    assert cluster.autoscaler.upcoming, "a node for the newcomer"
    assert soft_tainted(cluster, light), "the scale-down planner ran in the same loop (in cooldown)"


def test_the_node_pools_consolidation_delay_overrides_its_compute_classs() -> None:
    cluster = idle_cluster(2, consolidationDelaySeconds=120)
    light, busy = names(cluster)
    fill(cluster, light, "500m")
    keep(cluster, busy)
    cluster.autoscaler.settings = compute_class(cluster.autoscaler.settings, {POOL: 0.5}, {POOL: 1800})
    loops(cluster, 0, 2)
    assert light in cluster.world.nodes, "unneeded for 2 minutes only"
    loops(cluster, 2, 4)
    assert light not in cluster.world.nodes, "the pool's 2 minutes, not the class's 30"


def test_the_planner_skips_only_passes_whose_result_it_already_has(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass skipped because nothing it reads changed finds what a full pass would."""
    checked = []
    update = autoscaler_module.Autoscaler._update_unneeded
    unchanged = autoscaler_module.Autoscaler._unchanged_since_last_pass

    def compared(self: autoscaler_module.Autoscaler, now: datetime, draining: str | None) -> bool:
        if not unchanged(self, now, draining):
            return False
        kept = (dict(self.unneeded_since), set(self._needs_drain), set(self.unremovable_until), self._last_pass)
        self._last_pass = None
        update(self, now)
        checked.append((dict(self.unneeded_since), set(self._needs_drain), set(self.unremovable_until)) == kept[:3])
        self.unneeded_since, self._needs_drain, self._last_pass = kept[0], kept[1], kept[3]
        return True

    monkeypatch.setattr(autoscaler_module.Autoscaler, "_unchanged_since_last_pass", compared)
    setup = setup_from(scenario_data(hours=1))
    runner.run(setup, strategies=("ca-alone", "gke-consolidation-threshold"))
    assert checked and all(checked), f"{checked.count(False)} of {len(checked)} skipped passes differ"


def test_a_pdbs_budget_is_spent_by_the_nodes_found_removable_before_in_the_same_pass() -> None:
    cluster = idle_cluster(4)
    *light, busy = names(cluster)
    for node in light:  # one app over three nodes, maxUnavailable 1: its PDB allows one disruption
        add_pod(cluster.world, f"web-{node}", node=node, cpu="500m", app="web", owner=("ReplicaSet", "web"))
    add_pdb(cluster.world, "web", maxUnavailable=1)
    fill(cluster, busy, "2500m")
    loops(cluster, 0, 1)
    # The node judged first spends the one disruption; the others are blocked in that pass, rechecked later.
    (unneeded,) = cluster.autoscaler.unneeded_since
    assert unneeded in light
    assert set(light) - {unneeded} <= set(cluster.autoscaler.unremovable_until)
