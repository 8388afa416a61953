"""Controllers: daily replica curves, replacements for evicted pods, ReplicaSet and StatefulSet scaling, Jobs."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from compactor.simulation import objects
from compactor.simulation.model import Curve
from tests.simulation.builders import POOL, add_node, add_pod, cluster_from, scenario_data

EVENING = datetime.fromisoformat("2026-11-20T17:00:00+00:00")


@pytest.mark.parametrize(
    ("hour", "replicas"),
    [
        pytest.param(6, 10, id="on-a-point"),
        pytest.param(9, 20, id="between-points"),
        pytest.param(23, 10, id="wraps-around-midnight"),
        pytest.param(2, 10, id="before-the-first-point"),
    ],
)
def test_a_curve_is_linear_between_points_and_repeats_daily(hour: int, replicas: int) -> None:
    curve = Curve(((6.0, 10.0), (12.0, 30.0), (20.0, 10.0)))
    assert curve.at(EVENING.replace(hour=hour)) == replicas


def test_evicted_pods_are_recreated_and_remember_who_displaced_them() -> None:
    cluster = cluster_from(scenario_data())
    world = cluster.world
    web = [key for key in world.pods if key.startswith("default/web-")]
    later = EVENING + timedelta(minutes=1)  # the pods have become Ready
    assert world.evict(web[0], actor="node-compactor", at=later).status == "evicted"
    cluster.controllers.reconcile(EVENING, later)
    replacements = [key for key, actor in world.displaced_by.items() if actor == "node-compactor"]
    assert len(replacements) == 1
    assert len([key for key in world.pods if key.startswith("default/web-")]) == len(web)


def test_a_replica_set_scales_down_unscheduled_pods_first() -> None:
    cluster = cluster_from(scenario_data())
    world = cluster.world
    owner = next(key for key in world.scales if key[2].startswith("web-"))
    bound = sorted(world.owned(owner))
    extra = add_pod(world, "web-extra", app="web", owner=(owner[1], owner[2]))
    cluster.controllers.reconcile(EVENING, EVENING)
    assert extra not in world.pods
    assert sorted(world.owned(owner)) == bound


def test_a_replica_set_scales_down_from_the_node_with_most_of_its_pods() -> None:
    cluster = cluster_from(scenario_data())
    world = cluster.world
    owner = next(key for key in world.scales if key[2].startswith("web-"))
    per_node = Counter(world.pod_record(key).node_name for key in world.owned(owner))
    crowded, most = per_node.most_common(1)[0]
    cluster.controllers.reconcile(EVENING + timedelta(minutes=20), EVENING)  # the curve asks for 4 fewer
    after = Counter(world.pod_record(key).node_name for key in world.owned(owner))
    assert after[crowded] < most


def test_a_stateful_set_keeps_its_names_and_its_volume_zone() -> None:
    data = scenario_data(
        deployments=[],
        statefulSets=[
            {"name": "db", "pool": POOL, "requests": {"cpu": "1", "memory": "2Gi"}, "replicas": 2, "antiAffinity": True}
        ],
    )
    cluster = cluster_from(data)
    world = cluster.world
    assert sorted(world.owned(("default", "StatefulSet", "db"))) == ["default/db-0", "default/db-1"]
    zone = world.volume_zone("default/db-1")
    assert zone is not None
    world.evict("default/db-1", actor="test", at=EVENING)
    cluster.settle(EVENING, EVENING)
    assert "default/db-1" in world.pods
    node = world.node_record(world.pod_record("default/db-1").node_name or "")
    assert node is not None and node.zone == zone


def test_a_job_pod_runs_to_completion_and_an_evicted_one_starts_over() -> None:
    data = scenario_data(
        deployments=[],
        cronJobs=[
            {
                "name": "etl",
                "pool": POOL,
                "requests": {"cpu": "500m", "memory": "512Mi"},
                "everyMinutes": 60,
                "parallelism": 2,
                "durationMinutes": [10, 10],
            }
        ],
    )
    cluster = cluster_from(data)
    world = cluster.world
    jobs = [key for key in world.pods if key.startswith("default/etl-")]
    assert len(jobs) == 2
    world.evict(jobs[0], actor="test", at=EVENING + timedelta(minutes=5))
    assert world.recorder.lost_job_seconds == 300
    cluster.settle(EVENING, EVENING + timedelta(minutes=5))
    cluster.settle(EVENING, EVENING + timedelta(minutes=10))
    assert len([k for k in world.pods if k.startswith("default/etl-")]) == 1, "the untouched pod finished"
    cluster.settle(EVENING, EVENING + timedelta(minutes=16))
    assert not [k for k in world.pods if k.startswith("default/etl-")], "the restarted pod finished 10 minutes later"


def scale_in_first(seed: int, ready_minutes_ago: list[int]) -> str:
    """Which of a ReplicaSet's pods, Ready that many minutes ago, the controller deletes first."""
    pools = [{"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a"], "initialNodes": 1}]
    cluster = cluster_from(scenario_data(seed=seed, pools=pools, deployments=[], daemonSets=[]))
    world = cluster.world
    node = next(iter(world.nodes))
    keys = []
    for index, minutes in enumerate(ready_minutes_ago):
        key = add_pod(world, f"web-{index}", node=node, app="web", owner=("ReplicaSet", "web"))
        world.ready_at[key] = EVENING - timedelta(minutes=minutes)
        keys.append(key)
    return cluster.controllers._scale_down_order(keys, EVENING)[0].removeprefix("default/")


def test_a_replica_set_deletes_the_pod_ready_most_recently_in_log2_buckets_first() -> None:
    # 5 minutes is bucket 38 (2^38 ns is 4.6 minutes); 80 to 140 minutes all fall in bucket 42.
    assert {scale_in_first(seed, [80, 5, 120, 140]) for seed in range(1, 9)} == {"web-1"}


def test_within_a_log2_bucket_the_replica_set_picks_at_random_not_the_newest() -> None:
    # Pods Ready 80 to 140 minutes ago are equals; the UID decides, which the seed stands in for.
    picks = [scale_in_first(seed, [80, 100, 120, 140]) for seed in range(1, 13)]
    assert len(set(picks)) > 1, "newest first would always pick web-0"
    assert picks == [scale_in_first(seed, [80, 100, 120, 140]) for seed in range(1, 13)], "the seed fixes it"


def test_a_daemonset_pod_whose_name_is_taken_gets_another(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = cluster_from(scenario_data())  # the builders' scenario runs an `agent` DaemonSet on every node
    world = cluster.world
    hashed = objects.short_hash

    def colliding(*parts: str, length: int = 9) -> str:
        # Five characters from the node's name collide on thousands of nodes; here on every node.
        return "xxxxx" if len(parts) == 2 else hashed(*parts, length=length)

    monkeypatch.setattr(objects, "short_hash", colliding)
    for name in ("node-a", "node-b", "node-c"):
        add_node(world, name)
        cluster.controllers.add_daemon_pods(name, EVENING)
    on_new = {key for name in ("node-a", "node-b", "node-c") for key in world.pods_on(name)}
    assert len(on_new) == 3 and all(world.pod_record(key).controller_kind == "DaemonSet" for key in on_new)
    assert {key.split("/")[1] for key in on_new} >= {"agent-xxxxx"}


def test_a_workload_of_one_count_is_visited_again_only_after_the_world_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workload whose replicas never change is left alone by a reconcile while nothing changed since the last
    one ended (it is at its replicas), and brought back to them once its pod is gone; one that follows a curve is
    visited every time."""
    data = scenario_data()
    data["deployments"].append(
        {"name": "steady", "pool": POOL, "requests": {"cpu": "100m", "memory": "128Mi"}, "replicas": 3}
    )
    cluster = cluster_from(data)
    world, controllers = cluster.world, cluster.controllers
    visited: list[str] = []
    real = controllers._replica_set

    def counted(spec: Any, *args: Any, **kwargs: Any) -> None:
        visited.append(spec.owner_name)
        real(spec, *args, **kwargs)

    monkeypatch.setattr(controllers, "_replica_set", counted)
    controllers.reconcile(EVENING, EVENING)
    steady = next(key for key in world.scales if key[2].startswith("steady-"))
    assert len(world.owned(steady)) == 3
    visited.clear()
    controllers.reconcile(EVENING + timedelta(minutes=1), EVENING + timedelta(minutes=1))
    assert visited and not any(name.startswith("steady-") for name in visited)  # web and api follow a curve
    world.scale_down(world.owned(steady)[0], EVENING)  # gone without a disruption: only the count tells
    controllers.reconcile(EVENING + timedelta(minutes=2), EVENING + timedelta(minutes=2))
    assert any(name.startswith("steady-") for name in visited)
    assert len(world.owned(steady)) == 3


def test_a_workload_of_fixed_replicas_that_lost_a_pod_unheard_gets_it_back_once_the_world_changed() -> None:
    """A reconcile on a changed world looks again at the workloads whose pods came or went since the last one,
    not only at those whose replicas follow a moving curve: a pod taken without a disruption the controller
    hears of (here a scale-down made behind its back) is made again, while another workload moved too."""
    data = scenario_data()
    data["deployments"].append(
        {"name": "queue", "pool": POOL, "requests": {"cpu": "200m", "memory": "256Mi"}, "replicas": 3}
    )
    cluster = cluster_from(data)
    world = cluster.world
    controllers = cluster.controllers
    controllers.reconcile(EVENING, EVENING)
    queue = next(key for key in world.scales if key[2].startswith("queue-"))
    assert world.owned_count(queue) == 3
    world.scale_down(world.owned(queue)[0], EVENING)
    web = next(key for key in world.pods if key.startswith("default/web-"))
    world.scale_down(web, EVENING)
    controllers.reconcile(EVENING, EVENING)
    assert world.owned_count(queue) == 3
    controllers.reconcile(EVENING, EVENING)
    assert world.owned_count(queue) == 3
