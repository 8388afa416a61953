"""The simulated API: merge patches with a resourceVersion precondition, and the Eviction API's budget rules."""

from __future__ import annotations

import copy
import pickle
import random
from datetime import datetime, timedelta

import pytest

from compactor.kube.answers import ConflictError, NotFoundError
from compactor.simulation.world import OwnerKey, ReadyTimes, World
from tests.simulation.builders import START, add_node, add_pdb, add_pod, world


def test_a_merge_patch_sets_and_removes_fields_and_bumps_the_resource_version() -> None:
    cluster = world()
    add_node(cluster, "n1")
    before = cluster.nodes["n1"]["metadata"]["resourceVersion"]
    cluster.patch_node("n1", {"metadata": {"annotations": {"a": "1", "b": "2"}}})
    patched = cluster.patch_node("n1", {"metadata": {"annotations": {"a": None}}, "spec": {"unschedulable": True}})
    assert patched["metadata"]["annotations"] == {"b": "2"}
    assert patched["metadata"]["resourceVersion"] != before
    record = cluster.node_record("n1")
    assert record is not None and record.unschedulable


@pytest.mark.parametrize(
    ("name", "version", "error"),
    [
        pytest.param("n1", "0", ConflictError, id="stale-resource-version"),
        pytest.param("gone", None, NotFoundError, id="missing-node"),
    ],
)
def test_a_patch_that_cannot_apply_raises_what_the_live_adapter_raises(
    name: str, version: str | None, error: type[Exception]
) -> None:
    cluster = world()
    add_node(cluster, "n1")
    patch: dict[str, object] = {"spec": {"unschedulable": True}}
    if version is not None:
        patch["metadata"] = {"resourceVersion": version}
    with pytest.raises(error):
        cluster.patch_node(name, patch)


def test_a_pdb_at_zero_stops_an_eviction() -> None:
    cluster = world()
    add_node(cluster, "n1")
    add_pod(cluster, "web-1", node="n1", app="web")
    add_pod(cluster, "web-2", node="n1", app="web")
    cluster.set_scale(("default", "ReplicaSet", "rs"), 2)
    add_pdb(cluster, "web", minAvailable=2)
    result = cluster.evict("default/web-1", actor="test", at=START)
    assert result.status == "blocked"
    assert "default/web-1" in cluster.pods
    assert cluster.recorder.disruptions() == 0


@pytest.mark.parametrize(
    ("budget", "allowed"),
    [
        pytest.param({"maxUnavailable": 1}, 1, id="max-unavailable-number"),
        pytest.param({"maxUnavailable": "30%"}, 2, id="max-unavailable-percent-rounds-up"),
        pytest.param({"minAvailable": "50%"}, 2, id="min-available-percent-rounds-up"),
        pytest.param({"minAvailable": 5}, 0, id="min-available-all"),
    ],
)
def test_disruptions_allowed_follow_the_disruption_controller(budget: dict[str, int | str], allowed: int) -> None:
    cluster = world()
    add_node(cluster, "n1")
    for index in range(5):
        add_pod(cluster, f"web-{index}", node="n1", app="web")
    cluster.set_scale(("default", "ReplicaSet", "rs"), 5)
    key = add_pdb(cluster, "web", **budget)
    assert cluster.disruptions_allowed(key, START) == allowed


def test_a_pod_that_is_not_ready_yet_does_not_count_as_healthy() -> None:
    cluster = world()
    add_node(cluster, "n1")
    add_pod(cluster, "web-1", node="n1", app="web")
    add_pod(cluster, "web-2", node="n1", app="web", ready=False)  # started just now: Ready after its startup time
    cluster.set_scale(("default", "ReplicaSet", "rs"), 2)
    key = add_pdb(cluster, "web", maxUnavailable=1)
    assert cluster.disruptions_allowed(key, START) == 0
    assert cluster.disruptions_allowed(key, START + timedelta(minutes=1)) == 1


def _two_ready_web_pods(replicas: int, **budget: int | str) -> tuple[World, OwnerKey, str]:
    """A node with two Ready pods of ReplicaSet rs (`app: web`) scaled to `replicas`, and a budget over them: the
    cluster, the ReplicaSet and the budget's key."""
    cluster = world()
    add_node(cluster, "n1")
    rs = ("default", "ReplicaSet", "rs")
    add_pod(cluster, "web-1", node="n1", app="web")
    add_pod(cluster, "web-2", node="n1", app="web")
    cluster.set_scale(rs, replicas)
    return cluster, rs, add_pdb(cluster, "web", **budget)


def test_a_budget_follows_each_change_it_is_made_of_and_no_other() -> None:
    """The budget is kept between changes: a pod of its own coming, bound or going, its owner's scale and the
    Deployment a ReplicaSet joins move it; a pod under no budget of its own, a node, does not."""
    cluster, rs, key = _two_ready_web_pods(2, minAvailable="50%")
    assert cluster.disruptions_allowed(key, START) == 1
    cluster.set_scale(rs, 4)  # two more expected: desired 2 of 4, 2 healthy
    assert cluster.disruptions_allowed(key, START) == 0
    add_pod(cluster, "web-3", app="web")  # pending: not healthy
    assert cluster.disruptions_allowed(key, START) == 0
    cluster.bind("default/web-3", "n1", START)
    assert cluster.disruptions_allowed(key, START) == 0  # bound, not Ready yet
    assert cluster.disruptions_allowed(key, START + timedelta(minutes=1)) == 1
    deployment = ("default", "Deployment", "web")
    cluster.set_scale(deployment, 6)
    cluster.link_owner(rs, deployment)  # the budget now expects the Deployment's 6: desired 3, 3 healthy
    assert cluster.disruptions_allowed(key, START + timedelta(minutes=1)) == 0
    cluster.set_scale(deployment, 3)
    assert cluster.disruptions_allowed(key, START + timedelta(minutes=1)) == 1
    computed = cluster._budgets[key]
    add_node(cluster, "n2")
    add_pod(cluster, "db-1", node="n2", app="db", owner=("StatefulSet", "db"))
    cluster.set_scale(("default", "StatefulSet", "db"), 1)
    assert cluster.disruptions_allowed(key, START + timedelta(minutes=2)) == 1
    assert cluster._budgets[key][0] == computed[0]  # nothing of its own changed: not counted again
    assert cluster.evict("default/web-1", actor="test", at=START + timedelta(minutes=2)).status == "evicted"
    assert cluster.disruptions_allowed(key, START + timedelta(minutes=2)) == 0


def test_a_snapshot_s_budgets_follow_each_change_and_each_pod_turning_ready_and_are_kept_between() -> None:
    """The budgets a snapshot holds are those of the last snapshot while none was touched and no member turned
    Ready since; a bind, a scale, an eviction or the moment a member turns Ready gives new ones."""
    cluster, rs, _ = _two_ready_web_pods(3, minAvailable=2)

    def allowed(at: datetime) -> int:
        return cluster.snapshot(at).pdbs[0].disruptions_allowed

    first = cluster.snapshot(START).pdbs
    assert allowed(START) == 0
    assert cluster.snapshot(START + timedelta(seconds=5)).pdbs is first  # nothing changed: the same budgets
    add_pod(cluster, "web-3", app="web")
    cluster.bind("default/web-3", "n1", START)
    assert allowed(START) == 0  # bound, not Ready yet
    assert allowed(START + timedelta(minutes=1)) == 1  # Ready now, with no change to the world between
    cluster.set_scale(rs, 2)
    assert allowed(START + timedelta(minutes=1)) == 1
    assert cluster.evict("default/web-1", actor="test", at=START + timedelta(minutes=1)).status == "evicted"
    assert allowed(START + timedelta(minutes=1)) == 0
    assert allowed(START) == 0  # an earlier moment is found again


def test_an_evicted_pod_is_owed_to_its_owner_and_booked_to_the_actor() -> None:
    cluster = world()
    add_node(cluster, "n1")
    add_pod(cluster, "web-1", node="n1", app="web")
    assert cluster.evict("default/web-1", actor="node-compactor", at=START).status == "evicted"
    assert cluster.evict("default/web-1", actor="node-compactor", at=START).status == "gone"
    assert cluster.recorder.evicted["node-compactor"] == 1
    assert cluster.owed[("default", "ReplicaSet", "rs")] == ["node-compactor"]


def test_a_direct_delete_past_the_budget_is_a_violation_the_first_within_it_is_not() -> None:
    cluster = world()
    add_node(cluster, "n1")
    for index in range(3):
        add_pod(cluster, f"web-{index}", node="n1", app="web")
    cluster.set_scale(("default", "ReplicaSet", "rs"), 3)
    add_pdb(cluster, "web", maxUnavailable=1)
    cluster.delete_pod("default/web-0", actor="estafette", at=START)
    assert cluster.recorder.pdb_violations["estafette"] == 0
    cluster.delete_pod("default/web-1", actor="estafette", at=START)
    assert cluster.recorder.pdb_violations["estafette"] == 1
    assert cluster.recorder.deleted["estafette"] == 2


def test_pods_with_the_same_labels_share_one_map_as_the_live_reader_gives_them() -> None:
    cluster = world()
    add_node(cluster, "n1")
    first, second = (add_pod(cluster, f"web-{index}", node="n1", app="web") for index in range(2))
    other = add_pod(cluster, "api-0", node="n1", app="api")
    labels = cluster.pod_record(first).labels
    assert labels == {"app": "web"} and cluster.pod_record(second).labels is labels
    assert cluster.pod_record(other).labels == {"app": "api"}
    cluster.patch_pod(first, {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "5"}}})
    assert cluster.pod_record(first).labels is labels


def test_the_next_ready_time_is_the_least_later_one_through_replacements_and_removals() -> None:
    """`ReadyTimes.first_after` answers what `min` over every later time answers, however the times were
    set, replaced or removed (the sorted list it keeps beside the mapping passes over the stale ones)."""
    rng = random.Random(44)
    times = ReadyTimes()
    plain: dict[str, datetime] = {}
    for _ in range(5000):
        key = f"default/pod-{rng.randrange(200)}"
        draw = rng.random()
        if draw < 0.5:
            plain[key] = times[key] = START + timedelta(seconds=rng.randrange(3600))
        elif draw < 0.7:
            assert times.pop(key, None) == plain.pop(key, None)
        else:
            at = START + timedelta(seconds=rng.randrange(-60, 3660))
            assert times.first_after(at) == min((ready for ready in plain.values() if ready > at), default=None)
    assert times == plain
    with pytest.raises(KeyError):
        times.pop("default/never-set")
    # A strategy's copy of the warm cluster (deepcopy) and a pickled one answer the same, and keep no stale time.
    for copied in (copy.deepcopy(times), pickle.loads(pickle.dumps(times))):
        assert type(copied) is ReadyTimes and copied == plain
        assert copied._sorted == sorted((ready, key) for key, ready in plain.items())
        for at in (START + timedelta(seconds=second) for second in range(-60, 3660, 30)):
            assert copied.first_after(at) == times.first_after(at)
