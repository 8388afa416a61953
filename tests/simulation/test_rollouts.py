"""Simulated Deployments: rolling restarts, seconds without a Ready pod, node-compactor with and without surge."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from compactor.core import planner
from compactor.core.model import RESTARTED_AT
from compactor.errors import BadInputError
from compactor.kube.answers import ConflictError
from compactor.simulation import availability, rollouts, runner
from compactor.simulation.world import World
from tests.simulation.builders import POOL, cluster_from, scenario_data, setup_from

START = datetime.fromisoformat("2026-11-20T17:00:00+00:00")
STARTUP = 40  # seconds from binding to Ready: the replacement's start-up an eviction costs
NODES = 3
SURGES = {"type": "RollingUpdate", "maxSurge": 1, "maxUnavailable": 0}


def single(name: str, *, strategy: dict[str, Any] | None = None, pdb: bool = False, **fields: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": name,
        "pool": POOL,
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "replicas": 1,
        "startupSeconds": STARTUP,
        **fields,
    }
    if strategy is not None:
        item["strategy"] = strategy
    if pdb:
        item["pdb"] = {"minAvailable": 1}
    return item


def small(*deployments: dict[str, Any], **changes: Any) -> dict[str, Any]:
    pool = {"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a"], "minNodes": 1, "initialNodes": NODES}
    return scenario_data(pools=[pool], deployments=list(deployments), daemonSets=[], hours=1, **changes)


def restart(cluster: runner.Cluster, name: str, at: datetime) -> None:
    rollout = cluster.controllers.rollouts
    current = rollout.get("default", name, at)
    assert current is not None
    patch = {
        "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: at.isoformat()}}}},
    }
    rollout.patch("default", name, patch)


def ready_pods(world: World, name: str, at: datetime) -> list[str]:
    return [key for key in world.pods if key.startswith(f"default/{name}-") and world.is_ready(key, at)]


def play(cluster: runner.Cluster, name: str, begin: datetime, seconds: int) -> list[int]:
    """Settle every 5 s for `seconds`; the number of Ready pods of `name` at each moment."""
    counts = []
    for offset in range(0, seconds + 1, 5):
        moment = begin + timedelta(seconds=offset)
        cluster.world.now = moment
        cluster.settle(moment, moment)
        availability.close(cluster.world, moment)
        counts.append(len(ready_pods(cluster.world, name, moment)))
    return counts


def test_a_surging_restart_starts_the_new_pod_first_and_never_leaves_the_service_without_a_ready_pod() -> None:
    cluster = cluster_from(small(single("billing", strategy=SURGES, pdb=True)))
    world = cluster.world
    begin = START + timedelta(minutes=5)  # the first pod is Ready
    (old,) = ready_pods(world, "billing", begin)
    restart(cluster, "billing", begin)
    counts = play(cluster, "billing", begin, 120)
    assert min(counts) == 1
    assert old not in world.pods  # moved: the old pod went once the new one was Ready
    (new,) = ready_pods(world, "billing", begin + timedelta(seconds=120))
    assert new != old
    new_hash = world.pod_record(new).labels["pod-template-hash"]
    assert old.split("-")[1] != new_hash and new.split("-")[1] == new_hash  # a new ReplicaSet's pod
    deployment = cluster.controllers.rollouts.get("default", "billing", begin + timedelta(seconds=120))
    assert deployment is not None
    assert deployment["status"] == {
        "observedGeneration": 2,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
    }
    assert sum(world.recorder.no_ready_seconds.values()) == 0


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param({"type": "RollingUpdate", "maxSurge": 0, "maxUnavailable": 1}, id="max-unavailable-1"),
        pytest.param({"type": "Recreate"}, id="recreate"),
    ],
)
def test_a_restart_that_does_not_surge_leaves_the_service_without_a_ready_pod_and_that_is_counted(
    strategy: dict[str, Any],
) -> None:
    cluster = cluster_from(small(single("ledger", strategy=strategy)))
    begin = START + timedelta(minutes=5)
    restart(cluster, "ledger", begin)
    counts = play(cluster, "ledger", begin, 120)
    assert 0 in counts
    assert counts[-1] == 1
    # The old pod goes at the first reconcile, the new one is Ready STARTUP s after it is bound (the next one).
    assert cluster.world.recorder.no_ready_seconds == {availability.CONTROLLERS: STARTUP + 5}


def test_an_evicted_single_replica_is_without_a_ready_pod_until_its_replacement_is_ready() -> None:
    cluster = cluster_from(small(single("mailer")))
    world = cluster.world
    begin = START + timedelta(minutes=5)
    world.recorder.no_ready_seconds.clear()
    (old,) = ready_pods(world, "mailer", begin)
    assert world.evict(old, actor="node-compactor", at=begin).status == "evicted"
    cluster.settle(begin, begin)  # replaced and bound at once: Ready STARTUP s later
    availability.close(world, begin + timedelta(seconds=STARTUP - 1))
    assert world.recorder.no_ready_since  # not Ready yet: still counting
    availability.close(world, begin + timedelta(minutes=3))
    assert world.recorder.no_ready_seconds == {"node-compactor": STARTUP}
    assert world.recorder.no_ready_spans == {"node-compactor": 1}


def test_evicting_one_replica_of_several_leaves_ready_pods_and_counts_nothing() -> None:
    cluster = cluster_from(small(single("web", replicas=3)))
    world = cluster.world
    begin = START + timedelta(minutes=5)
    first = ready_pods(world, "web", begin)[0]
    world.evict(first, actor="node-compactor", at=begin)
    cluster.settle(begin, begin)
    availability.finish(world, begin + timedelta(minutes=3))
    assert world.recorder.no_ready_seconds == {}


def test_a_deployment_patch_is_guarded_by_its_resource_version_and_only_a_spec_change_bumps_the_generation() -> None:
    cluster = cluster_from(small(single("billing")))
    rollout = cluster.controllers.rollouts
    stale = rollout.get("default", "billing", START)
    assert stale is not None
    labelled = rollout.patch("default", "billing", {"metadata": {"labels": {"team": "payments"}}})
    assert labelled["metadata"]["generation"] == 1
    with pytest.raises(ConflictError):
        rollout.patch("default", "billing", {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}})
    restart(cluster, "billing", START)
    moved = rollout.get("default", "billing", START)
    assert moved is not None
    assert (moved["metadata"]["generation"], moved["status"]["observedGeneration"]) == (2, 1)


def test_the_planner_reads_the_simulated_deployments_and_moves_a_single_replica_behind_its_pdb_by_a_restart() -> None:
    cluster = cluster_from(small(single("billing", strategy=SURGES, pdb=True)))
    world = cluster.world
    at = START + timedelta(minutes=5)
    config = rollouts.surging(setup_from(small()).config)
    assert world.snapshot(at).deployments == ()  # only a strategy whose pools surge reads them
    world.workload_records = cluster.controllers.rollouts.records
    snapshot = world.snapshot(at)
    assert [d.key for d in snapshot.deployments] == ["default/billing"]
    (pod,) = ready_pods(world, "billing", at)
    node = world.pod_record(pod).node_name
    plan = planner.plan(snapshot, config, now=at)
    report = next(item for item in plan.nodes if item.name == node)
    assert [(v.pod, v.action) for v in report.single_replicas] == [(pod, "restart")]
    assert not any("PodDisruptionBudget" in blocker for blocker in report.blockers)


SURGE_RUN = {
    "enabled": True,
    "scaleDownCPURequestRatioLimit": 0.75,
    "minimumNodeAgeSeconds": 0,
    "neededMarkedTimeSeconds": 0,
    "scaleUpCooldownSeconds": 0,
    "minNodes": 1,
}


def test_node_compactor_with_surge_drains_the_node_a_minavailable_1_pdb_blocks_without_it() -> None:
    # Three nodes, one single-replica service behind minAvailable: 1 on each: one node's worth of work.
    data = small(
        *(single(f"svc-{index}", strategy=SURGES, pdb=True) for index in range(NODES)),
        compactor={"nodePools": {POOL: SURGE_RUN}},
    )
    results = runner.run(setup_from(data), strategies=("node-compactor", "node-compactor+surge"))
    off, on = results.strategies
    assert off.summary.get("drainsStarted", 0) == 0
    assert on.summary["rollingRestarts"] >= 1
    assert on.summary["drainsStarted"] >= 1
    assert sum(on.series.nodes) < sum(off.series.nodes)
    assert on.recorder.evicted["node-compactor+surge"] == 0
    assert sum(on.recorder.no_ready_seconds.values()) == sum(off.recorder.no_ready_seconds.values()) == 0
    assert on.failures == off.failures == []


def test_without_a_pdb_node_compactor_evicts_the_single_replica_and_the_seconds_without_a_ready_pod_show_it() -> None:
    data = small(
        *(single(f"svc-{index}", strategy=SURGES) for index in range(NODES)), compactor={"nodePools": {POOL: SURGE_RUN}}
    )
    results = runner.run(setup_from(data), strategies=("node-compactor", "node-compactor+surge"))
    off, on = results.strategies
    assert off.recorder.evicted["node-compactor"] >= 1
    assert off.recorder.no_ready_seconds["node-compactor"] >= STARTUP * off.recorder.evicted["node-compactor"]
    assert on.summary["rollingRestarts"] >= 1
    assert sum(on.recorder.no_ready_seconds.values()) == 0


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        pytest.param({"maxSurge": "lots"}, "maxSurge 'lots' is neither a number nor a percentage", id="bad-surge"),
        pytest.param({"maxUnavailable": -1}, "maxUnavailable -1 is negative", id="negative"),
        pytest.param(
            {"type": "Recreate", "maxSurge": 1}, "maxSurge and maxUnavailable belong to RollingUpdate", id="recreate"
        ),
    ],
)
def test_a_deployment_strategy_that_does_not_read_is_refused_with_its_path(
    strategy: dict[str, Any], message: str
) -> None:
    with pytest.raises(BadInputError) as caught:
        setup_from(small(single("billing", strategy=strategy)))
    assert any(
        problem.startswith("test.json: deployments.0.strategy") and message in problem
        for problem in caught.value.problems
    )


def test_a_stateful_set_has_no_rollout_strategy() -> None:
    stateful = {"name": "db", "requests": {"cpu": "1", "memory": "1Gi"}, "replicas": 1, "strategy": SURGES}
    with pytest.raises(BadInputError) as caught:
        setup_from(small(statefulSets=[stateful]))
    assert "test.json: statefulSets.0.strategy: unknown key (check its spelling)" in caught.value.problems
