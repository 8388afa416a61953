"""Scale-down steering's pod-deletion-cost, written over real HTTP against the fake API server."""

from __future__ import annotations

from typing import Any

from compactor.core.model import DELETION_COST, STEERED_COST
from tests.fakeapi import builders as k8s
from tests.fakeapi.server import FakeApiServer, Fault
from tests.integration.conftest import CONFIG, POOL_CONFIG, env_with, run_once

OURS = {DELETION_COST: "-1", STEERED_COST: "-1"}


def pod_annotations(api: FakeApiServer, name: str) -> dict[str, str]:
    found = api.get("Pod", name, "default")
    assert found is not None
    result: dict[str, str] = found["metadata"].get("annotations") or {}
    return result


def pod_patches(api: FakeApiServer) -> list[Any]:
    return api.writes_of("Pod", "PATCH")


def light_n1(api: FakeApiServer, **n1_pods: dict[str, str]) -> None:
    """n1 is the least utilized node (not yet marked, so no drain starts); n2 and n3 are busy."""
    for name in ("n1", "n2", "n3"):
        api.add(k8s.node(name))
    api.add(k8s.pod("busy-b2", node="n2", cpu="3"))
    api.add(k8s.pod("busy-b3", node="n3", cpu="3"))
    api.add(k8s.pod("fluentbit-n1", namespace="kube-system", node="n1", owner_kind="DaemonSet", cpu="50m"))
    api.add(k8s.pod("db-0", node="n1", owner_kind="StatefulSet", cpu="300m"))
    for name, extra in {"web-a": {}, **n1_pods}.items():
        api.add(k8s.pod(name, node="n1", cpu="300m", annotations=extra or None))


def test_the_replicaset_pods_of_the_least_utilized_node_get_the_cost_and_no_other_pod_does(
    api: FakeApiServer,
) -> None:
    light_n1(api, **{"own-cost": {DELETION_COST: "5"}})
    result = run_once(api)
    assert result.report["scaleDownSteering"]["nodes"] == ["n1"]
    assert result.outcome.deletion_costs_added == ["default/web-a"]
    assert pod_annotations(api, "web-a") == OURS
    # A StatefulSet pod (its controller reads no cost), a cost someone set, the busy nodes' pods.
    assert DELETION_COST not in pod_annotations(api, "db-0")
    assert pod_annotations(api, "own-cost") == {DELETION_COST: "5"}
    assert DELETION_COST not in pod_annotations(api, "busy-b2")
    (patch,) = pod_patches(api)
    assert patch.body["metadata"]["resourceVersion"], "guarded by the pod's resourceVersion"
    # The next run finds the pod already steered and writes nothing.
    api.reset_counters()
    assert run_once(api).outcome.deletion_costs_added == []
    assert pod_patches(api) == []


def person_sets_a_cost(api: FakeApiServer, name: str, cost: str) -> None:
    pod = api.get("Pod", name, "default")
    assert pod is not None
    pod["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), DELETION_COST: cost}
    api.add(pod)


def test_the_cost_is_taken_back_where_the_node_is_no_longer_steered_and_a_changed_cost_is_kept(
    api: FakeApiServer,
) -> None:
    light_n1(api)
    api.add(k8s.pod("steered-before", node="n2", cpu="200m", annotations=OURS))
    api.add(k8s.pod("changed-since", node="n3", cpu="200m", annotations=OURS))
    # Right after the run has listed the pods, someone sets a cost of their own on one of them.
    api.on_request("GET", r"/api/v1/pods$", lambda: person_sets_a_cost(api, "changed-since", "7"))
    result = run_once(api)
    assert sorted(result.outcome.deletion_costs_removed) == ["default/changed-since", "default/steered-before"]
    assert pod_annotations(api, "steered-before") == {}
    # Theirs stays, only node-compactor's record goes.
    assert pod_annotations(api, "changed-since") == {DELETION_COST: "7"}


def test_a_cost_set_between_the_read_and_the_write_wins(api: FakeApiServer) -> None:
    light_n1(api)
    # Once the run has read the pod to write it, someone sets a cost: the write, guarded by the
    # resourceVersion read, is refused (409) and theirs stays.
    api.on_request("GET", r"/namespaces/default/pods/web-a$", lambda: person_sets_a_cost(api, "web-a", "100"))
    result = run_once(api)
    assert result.outcome.deletion_costs_added == []
    patches = [r.status for r in api.requests if r.method == "PATCH" and r.path.endswith("/pods/web-a")]
    assert patches == [409]
    assert pod_annotations(api, "web-a") == {DELETION_COST: "100"}
    assert not result.outcome.errors


def test_no_permission_to_patch_pods_leaves_them_as_they_are_and_the_run_goes_on(api: FakeApiServer) -> None:
    light_n1(api)
    api.add_fault(Fault(method="PATCH", path_regex=r"/pods/", status=403, times=-1))
    result = run_once(api)
    assert [r.status for r in api.requests if r.method == "PATCH" and "/pods/" in r.path] == [403]
    assert result.outcome.deletion_costs_added == []
    assert result.outcome.marks_added == ["n1"]
    assert DELETION_COST not in pod_annotations(api, "web-a")


def test_a_dry_run_writes_no_pod(api: FakeApiServer) -> None:
    light_n1(api)
    result = run_once(api, dry_run=True)
    assert result.report["scaleDownSteering"]["add"] == ["default/web-a"]
    assert pod_patches(api) == []


def test_with_steering_off_every_cost_node_compactor_wrote_is_taken_back(api: FakeApiServer) -> None:
    light_n1(api, **{"web-b": OURS})
    config = {**CONFIG, "steerScaleDown": False, "nodePools": {"default-pool": POOL_CONFIG}}
    result = run_once(api, env=env_with(config))
    assert result.report["scaleDownSteering"]["nodes"] == []
    assert result.outcome.deletion_costs_removed == ["default/web-b"]
    assert DELETION_COST not in pod_annotations(api, "web-a")
    assert pod_annotations(api, "web-b") == {}
