"""gke-class-priorities: the ComputeClasses a user writes, scale-up by their rungs, and active migration moving pods
up a class's rungs as GKE's defrag processor does (`compactor.simulation.migration`)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from compactor.simulation import migration, runner, strategies
from compactor.simulation.model import MigrationSettings
from tests.simulation.builders import setup_from

DEAR = "dear-pool"
CHEAP = "cheap-pool"
# Two pods of 1.5 cpu fill an e2-standard-4 node (3.92 cpu allocatable): none fits beside them.
WEB = {"name": "web", "requests": {"cpu": "1500m", "memory": "1Gi"}, "replicas": 4}


def two_pools(
    *,
    dear_nodes: int = 2,
    cheap: dict[str, Any] | None = None,
    deployments: list[dict[str, Any]] | None = None,
    pdbs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Web pods that may use either pool, all on the dear pool's nodes at the start; the cheap pool empty."""
    web = dict(WEB)
    if pdbs is not None:
        web["pdb"] = pdbs
    return {
        "name": "two-rungs",
        "seed": 5,
        "start": "2026-11-20T12:00:00Z",
        "hours": 1,
        "warmupHours": 0,
        "stepSeconds": 60,
        "pools": [
            {
                "name": DEAR,
                "machineType": "e2-standard-4",
                "zones": ["zone-a"],
                "minNodes": 0,
                "maxNodes": 10,
                "initialNodes": dear_nodes,
                "pricePerHour": 0.4,
            },
            {
                "name": CHEAP,
                "machineType": "e2-standard-4",
                "zones": ["zone-a"],
                "minNodes": 0,
                "maxNodes": 10,
                "initialNodes": 0,
                "pricePerHour": 0.1,
                **(cheap or {}),
            },
        ],
        "daemonSets": [],
        "deployments": deployments if deployments is not None else [web],
    }


def with_classes(data: dict[str, Any], settings: MigrationSettings | None = None) -> runner.Cluster:
    """The cluster with the classes a user writes for it, as the gke-class-priorities strategy sets them."""
    setup = setup_from(data)
    autoscaler = dataclasses.replace(
        setup.autoscaler, classes=migration.user_classes(setup), migration=settings or MigrationSettings()
    )
    return runner.build(dataclasses.replace(setup, autoscaler=autoscaler))


def run_minutes(cluster: runner.Cluster, minutes: int, watch: Callable[[datetime], None] | None = None) -> None:
    """`Cluster.step` a minute at a time, `watch` called after each of the autoscaler's loops (every 10 s)."""
    start = cluster.autoscaler.setup.start
    for minute in range(minutes):
        now = start + timedelta(minutes=minute)
        cluster.world.now = now
        cluster.autoscaler.provision(now)
        cluster.settle(now, now)
        for offset in range(0, 60, cluster.autoscaler.settings.scan_interval_seconds):
            at = now + timedelta(seconds=offset)
            cluster.world.now = at
            cluster.autoscaler.step(at)
            cluster.settle(now, at)
            if watch is not None:
                watch(at)


def nodes_of(cluster: runner.Cluster, pool: str) -> list[str]:
    return [name for name in cluster.world.nodes if cluster.world.node_pool(name) == pool]


def web_pools(cluster: runner.Cluster) -> list[str]:
    """The pool of each web pod's node ("" for a pod pending)."""
    world = cluster.world
    return sorted(
        (world.node_pool(pod.node_name) or "") if pod.node_name else ""
        for _, pod in world.pod_records()
        if pod.name.startswith("web")
    )


def candidates(cluster: runner.Cluster) -> set[str]:
    world = cluster.world
    return {
        name
        for name in world.nodes
        if any(taint.get("key") == migration.HARD_TAINT for taint in world.nodes[name]["spec"].get("taints") or [])
    }


# -- the classes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dear_price", "cheap_price", "rungs"),
    [
        pytest.param(0.4, 0.1, (CHEAP, DEAR), id="the-cheaper-pool-first"),
        pytest.param(0.1, 0.4, (DEAR, CHEAP), id="prices-swapped-order-swapped"),
    ],
)
def test_rungs_go_cheapest_first_for_the_class_pods(dear_price: float, cheap_price: float, rungs: tuple[str]) -> None:
    data = two_pools()
    data["pools"][0]["pricePerHour"] = dear_price
    data["pools"][1]["pricePerHour"] = cheap_price
    (klass,) = migration.user_classes(setup_from(data))
    assert klass.rungs == rungs
    assert klass.optimize_rule_priority


def test_rungs_are_ordered_by_what_the_class_pods_dominant_resource_costs_on_each_pool() -> None:
    """Memory-heavy pods: the highmem pool holds them on fewer nodes, so it is first though its node costs more."""
    data = two_pools(
        deployments=[{"name": "cache", "requests": {"cpu": "500m", "memory": "6Gi"}, "replicas": 8}],
    )
    data["pools"][0].update({"machineType": "n2-highmem-4", "pricePerHour": 0.3})
    data["pools"][1].update({"machineType": "n2-standard-4", "pricePerHour": 0.2})
    (klass,) = migration.user_classes(setup_from(data))
    assert klass.rungs == (DEAR, CHEAP)


def test_pods_that_tolerate_spot_get_the_spot_pool_as_first_rung() -> None:
    toleration = {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    data = two_pools(deployments=[{**WEB, "tolerations": [toleration]}])
    # The Spot pool priced above the on-demand one: a Spot class still starts with Spot.
    data["pools"][1].update(
        {"spot": True, "pricePerHour": 0.5, "taints": [{**toleration, "operator": None}]},
    )
    del data["pools"][1]["taints"][0]["operator"]
    (klass,) = migration.user_classes(setup_from(data))
    assert klass.rungs == (CHEAP, DEAR)


def test_the_strategy_is_absent_where_no_pod_may_use_two_pools() -> None:
    pinned = two_pools(deployments=[{**WEB, "pool": DEAR}])
    assert runner.CLASS_PRIORITIES not in runner.applicable(setup_from(pinned))
    assert runner.BESIDE_PRIORITIES not in runner.applicable(setup_from(pinned))
    assert runner.CLASS_PRIORITIES in runner.applicable(setup_from(two_pools()))
    assert runner.BESIDE_PRIORITIES in runner.applicable(setup_from(two_pools()))
    assert runner.BESIDE_PRIORITIES not in runner.NATIVE
    assert runner.CLASS_PRIORITIES in runner.NATIVE


# -- scale-up ---------------------------------------------------------------------------------------------------


def test_scale_up_grows_the_first_rung_where_the_expander_alone_picks_another_pool() -> None:
    """least-waste ties go to the first pool by name (a "dear" one here); the class's priorities come first."""
    data = two_pools(dear_nodes=0)
    data["pools"][0]["name"] = "a-dear"
    plain = runner.build(setup_from(data))
    classed = with_classes(data)
    assert {plain.world.node_pool(name) for name in plain.world.nodes} == {"a-dear"}
    assert {classed.world.node_pool(name) for name in classed.world.nodes} == {CHEAP}


# -- migration --------------------------------------------------------------------------------------------------


def test_pods_on_a_lower_rung_move_to_the_higher_rung() -> None:
    cluster = with_classes(two_pools())
    assert web_pools(cluster) == [DEAR] * 4
    run_minutes(cluster, 30)
    assert web_pools(cluster) == [CHEAP] * 4
    assert nodes_of(cluster, DEAR) == []
    assert cluster.autoscaler.migration is not None
    assert cluster.autoscaler.migration.summary() == {"nodesMigrated": 2}


def test_pods_with_a_bound_volume_move_to_the_higher_rung_in_their_volume_s_zone() -> None:
    """A StatefulSet's pods, their claims bound in zone-a where both pools run, move like any other: the
    candidate's simulation pins each to its volume's zone (as the scheduler does) instead of finding no node,
    which asked for a scale-up in every loop and never drained the candidate."""
    data = two_pools(deployments=[])
    data["statefulSets"] = [dict(WEB, name="db")]
    cluster = with_classes(data)
    pods = [key for key, pod in cluster.world.pod_records() if pod.name.startswith("db")]
    assert len(pods) == 4 and all(cluster.world.volume_zone(key) == "zone-a" for key in pods)
    run_minutes(cluster, 30)
    assert [cluster.world.node_pool(cluster.world.pod_record(key).node_name or "") for key in pods] == [CHEAP] * 4
    assert nodes_of(cluster, DEAR) == []
    assert len(nodes_of(cluster, CHEAP)) == 2  # the nodes the pods need, not one scale-up per loop
    assert cluster.autoscaler.migration is not None
    assert cluster.autoscaler.migration.summary() == {"nodesMigrated": 2}


def test_without_classes_the_pods_stay_on_the_lower_rung() -> None:
    cluster = runner.build(setup_from(two_pools()))
    run_minutes(cluster, 30)
    assert web_pools(cluster) == [DEAR] * 4


def test_the_new_node_is_ready_before_the_old_node_is_drained() -> None:
    cluster = with_classes(two_pools(dear_nodes=1, deployments=[{**WEB, "replicas": 2}]))
    seen: dict[str, datetime] = {}

    def watch(now: datetime) -> None:
        if nodes_of(cluster, CHEAP) and "ready" not in seen:
            seen["ready"] = now
        if cluster.world.recorder.evicted and "evicted" not in seen:
            seen["evicted"] = now

    run_minutes(cluster, 20, watch)
    assert set(seen) == {"ready", "evicted"}
    assert seen["ready"] <= seen["evicted"]  # the same loop at the earliest: the VM joins, then the drain starts
    assert web_pools(cluster) == [CHEAP] * 2


@pytest.mark.parametrize("limit", [pytest.param(1, id="one"), pytest.param(2, id="two")])
def test_at_most_the_candidate_limit_of_nodes_is_migrated_at_once(limit: int) -> None:
    cluster = with_classes(
        two_pools(dear_nodes=4, deployments=[{**WEB, "replicas": 8}]), MigrationSettings(candidate_limit=limit)
    )
    most = 0

    def watch(now: datetime) -> None:
        nonlocal most
        most = max(most, len(candidates(cluster)))

    run_minutes(cluster, 10, watch)
    assert most == limit


def test_no_migration_when_the_higher_rung_is_at_its_maximum_size() -> None:
    filler = {"name": "filler", "pool": CHEAP, "requests": {"cpu": "1500m", "memory": "1Gi"}, "replicas": 2}
    cluster = with_classes(two_pools(cheap={"maxNodes": 1, "initialNodes": 1}, deployments=[filler, WEB]))
    dear = sorted(nodes_of(cluster, DEAR))
    run_minutes(cluster, 30)
    assert sorted(nodes_of(cluster, DEAR)) == dear
    assert cluster.world.recorder.evicted == {}
    state = cluster.autoscaler.migration
    assert state is not None and state.given_up["no-scale-up-options"] > 0 and state.nodes_migrated == 0


def test_a_node_given_up_is_backed_off_before_it_is_a_candidate_again() -> None:
    """A candidate without a scale-up option is given up in the next loop, its node backed off for 5 minutes."""
    filler = {"name": "filler", "pool": CHEAP, "requests": {"cpu": "1500m", "memory": "1Gi"}, "replicas": 2}
    data = two_pools(
        dear_nodes=1, cheap={"maxNodes": 1, "initialNodes": 1}, deployments=[filler, {**WEB, "replicas": 2}]
    )
    cluster = with_classes(data)
    tainted: list[datetime] = []

    def watch(now: datetime) -> None:
        if candidates(cluster) and (not tainted or tainted[-1] != now):
            tainted.append(now)

    run_minutes(cluster, 16, watch)
    gaps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(tainted)}
    assert gaps, tainted
    assert min(gaps) >= 300


def test_a_pdb_that_allows_no_disruption_keeps_its_pods_node_out_of_migration() -> None:
    cluster = with_classes(two_pools(pdbs={"maxUnavailable": 0}))
    run_minutes(cluster, 30)
    assert web_pools(cluster) == [DEAR] * 4
    assert nodes_of(cluster, CHEAP) == []  # no node made for a candidate whose pods may not move
    assert cluster.world.recorder.evicted == {}


def test_the_drain_respects_a_pdb_one_pod_at_a_time() -> None:
    cluster = with_classes(two_pools(pdbs={"maxUnavailable": 1}))
    unavailable: list[int] = []

    def watch(now: datetime) -> None:
        world = cluster.world
        ready = sum(1 for key, pod in world.pod_records() if pod.name.startswith("web") and world.is_ready(key, now))
        if unavailable or ready == 4:  # from the moment the starting pods are all Ready
            unavailable.append(4 - ready)

    run_minutes(cluster, 30, watch)
    assert web_pools(cluster) == [CHEAP] * 4
    assert max(unavailable) == 1


def test_defrag_runs_every_loop_unless_pods_wait_for_a_node_then_once_in_five() -> None:
    cluster = with_classes(two_pools())
    state = migration.Migration(MigrationSettings(), cluster.autoscaler.settings.classes, seed=1)
    now = cluster.autoscaler.setup.start
    admitted = []
    for loop in range(1, 11):
        before = state.last_admitted
        state.process(cluster.autoscaler, now, ["default/pending-pod"])
        if state.last_admitted != before:
            admitted.append(loop)
    assert admitted == [5, 10]
    for _ in range(3):
        state.process(cluster.autoscaler, now, [])
    assert state.last_admitted == 13


@pytest.mark.parametrize(
    ("pdb", "most"),
    [
        pytest.param(None, 2, id="no-pdb-both-nodes"),
        pytest.param({"maxUnavailable": 1}, 1, id="pdb-spent-by-the-first-candidate"),
    ],
)
def test_a_budget_the_tracked_candidates_spend_keeps_further_nodes_out(pdb: dict[str, Any] | None, most: int) -> None:
    """Defrag's own RemainingPdbTracker: a candidate's pods count against their PDB, so the next node whose pods the
    same PDB covers is no candidate while it is tracked."""
    cluster = with_classes(two_pools(pdbs=pdb))
    seen = 0

    def watch(now: datetime) -> None:
        nonlocal seen
        seen = max(seen, len(candidates(cluster)))

    run_minutes(cluster, 3, watch)
    assert seen == most


def test_a_scenario_sets_the_defrag_flags_gke_publishes_nowhere() -> None:
    data = two_pools()
    data["autoscaler"] = {"activeMigration": {"candidateLimit": 1, "backoffSeconds": 60}}
    settings = setup_from(data).autoscaler.migration
    assert (settings.candidate_limit, settings.backoff_seconds) == (1, 60)
    assert setup_from(two_pools()).autoscaler.migration == MigrationSettings()


def test_node_compactor_beside_the_priorities_runs_on_their_cluster_with_its_limit_above_the_threshold() -> None:
    setup = setup_from(two_pools())
    cluster = runner.build(setup)
    strategy = runner._strategy(runner.BESIDE_PRIORITIES, setup, cluster)
    assert cluster.autoscaler.settings.classes == migration.user_classes(setup)
    assert cluster.autoscaler.settings.classes, "the classes' priorities and active migration are on"
    assert isinstance(strategy, strategies.NodeCompactor)
    thresholds = runner.consolidation_thresholds(setup)
    for name, threshold in thresholds.items():
        pool = strategy.config.enabled_pool(name)
        assert pool is not None and pool.cpu_limit is not None
        assert pool.compute_class_threshold == threshold
        assert pool.cpu_limit > threshold
