"""The rolling-restart step (`compactor.actuation.surging`) against the fake API server's Deployment controller."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from compactor.actuation import surging
from compactor.core.model import DRAIN_STARTED_AT, RESTARTED_AT
from compactor.errors import ClusterAccessError
from compactor.kube.client import Cluster
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import MARKED, NOW, POOL_CONFIG, TOKEN, FakeTime, env_with, run_once

STARTED = "2026-11-21T11:59:00Z"


class AvailabilityWatch:
    """Reads the Deployment's availableReplicas from the API every few milliseconds while the step runs."""

    def __init__(self, api: FakeApiServer, name: str = "web") -> None:
        self.api = api
        self.name = name
        self.seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> AvailabilityWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        with client.ApiClient(self.api.client_configuration()) as api_client:
            apps = client.AppsV1Api(api_client)
            while not self._stop.is_set():
                status = apps.read_namespaced_deployment(self.name, "default").status
                self.seen.append(status.available_replicas or 0)
                time.sleep(0.005)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        yield server
        assert server.pod_deletes == [], "node-compactor deleted a pod"
        restarted = {write.name for write in server.writes_of("Deployment", "PATCH")}
        evicted = {e.name for e in server.evictions}
        assert not any(name.startswith(f"{deployment}-") for name in evicted for deployment in restarted), (
            "a pod moved by a rolling restart was evicted"
        )


@pytest.fixture
def cluster(api: FakeApiServer) -> Iterator[Cluster]:
    with client.ApiClient(api.client_configuration()) as api_client:
        yield Cluster(api_client)


def draining_cluster(api: FakeApiServer, **deployment: Any) -> dict[str, Any]:
    """n1 cordoned by a drain that started a minute ago, holding web's only pod; n2 has room."""
    api.add(k8s.node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: STARTED}))
    api.add(k8s.node("n2"))
    for obj in k8s.deployment("web", nodes=["n1"], **deployment):
        api.add(obj)
    node = api.get("Node", "n1")
    assert node is not None
    return node


def web_pod(api: FakeApiServer) -> str:
    (pod,) = [p for p in api.objects("Pod") if p["metadata"]["name"].startswith("web-")]
    return f"default/{pod['metadata']['name']}"


def restart(cluster: Cluster, node: dict[str, Any], pod: str, **options: Any) -> surging.Restarts:
    done = surging.start(
        cluster, node, [(pod, "default/web")], clock=lambda: NOW, may_act=lambda _what: True, **options
    )
    surging.wait(cluster, done, time_left=lambda: 30.0, sleep=time.sleep, poll_seconds=0.02)
    return done


def deployment_patches(api: FakeApiServer) -> list[Any]:
    return [write.body for write in api.writes_of("Deployment", "PATCH")]


def test_the_pod_moves_to_another_node_and_the_deployment_never_lacks_a_ready_pod(
    api: FakeApiServer, cluster: Cluster
) -> None:
    node = draining_cluster(api)
    pod = web_pod(api)
    api.rollout_step(0.3)  # slow enough for the watch to read every moment of the rollout
    with AvailabilityWatch(api) as watch:
        done = restart(cluster, node, pod)
    assert done.moved == [pod] and done.waiting == {} and done.errors == []
    assert done.written == {"default/web": "2026-11-21T12:00:00Z"}
    (moved,) = [p for p in api.objects("Pod") if p["metadata"]["name"].startswith("web-")]
    assert moved["spec"]["nodeName"] == "n2"
    assert len(watch.seen) > 10 and min(watch.seen) >= 1, watch.seen


def test_the_only_write_is_the_restart_annotation_guarded_by_the_resource_version(
    api: FakeApiServer, cluster: Cluster
) -> None:
    node = draining_cluster(api)
    restart(cluster, node, web_pod(api))
    (patch,) = deployment_patches(api)
    assert patch["spec"] == {"template": {"metadata": {"annotations": {RESTARTED_AT: "2026-11-21T12:00:00Z"}}}}
    assert set(patch["metadata"]) == {"resourceVersion"}


def test_events_on_the_deployment_and_the_node_say_what_moved(api: FakeApiServer, cluster: Cluster) -> None:
    node = draining_cluster(api)
    pod = web_pod(api)
    restart(cluster, node, pod)
    events = {(e["involvedObject"]["kind"], e["reason"]): e["message"] for e in api.objects("Event")}
    assert f"to move {pod} off node n1" in events[("Deployment", "NodeCompactorRollingRestart")]
    assert (
        f"moves {pod} (Deployment default/web) by a rolling restart" in events[("Node", "NodeCompactorRollingRestart")]
    )


@pytest.mark.parametrize(
    ("strategy", "reason"),
    [
        pytest.param({"type": "Recreate"}, "its strategy is Recreate", id="Recreate"),
        pytest.param(
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "its maxSurge 0 starts no new pod",
            id="no surge",
        ),
    ],
)
def test_a_deployment_that_no_longer_surges_is_not_restarted(
    api: FakeApiServer, cluster: Cluster, strategy: dict[str, Any], reason: str
) -> None:
    node = draining_cluster(api, strategy=strategy)
    pod = web_pod(api)
    done = restart(cluster, node, pod)
    assert deployment_patches(api) == []
    assert done.moved == [] and reason in done.waiting[pod]


def test_a_conflict_reads_the_deployment_again_and_writes_once(api: FakeApiServer, cluster: Cluster) -> None:
    node = draining_cluster(api)
    pod = web_pod(api)
    api.add_fault(Fault(method="PATCH", path_regex="/deployments/web$", status=409, times=1))
    done = restart(cluster, node, pod)
    assert done.moved == [pod]
    assert len(deployment_patches(api)) == 1
    reads = [r for r in api.requests if r.method == "GET" and r.path.endswith("/deployments/web")]
    assert len(reads) >= 2


def test_a_restart_this_drain_already_wrote_is_waited_for_not_written_again(
    api: FakeApiServer, cluster: Cluster
) -> None:
    node = draining_cluster(api)
    pod = web_pod(api)
    first = surging.start(cluster, node, [(pod, "default/web")], clock=lambda: NOW, may_act=lambda _what: True)
    assert first.written
    # The next run finds the rollout of this drain's restart under way.
    second = surging.start(
        cluster, node, [(pod, "default/web")], clock=lambda: datetime(2026, 11, 21, 12, 5), may_act=lambda _w: True
    )
    assert second.written == {}
    surging.wait(cluster, second, time_left=lambda: 30.0, sleep=time.sleep, poll_seconds=0.02)
    assert second.moved == [pod]
    assert len(deployment_patches(api)) == 1


def test_when_time_runs_out_the_pod_waits_and_the_deployment_is_left_rolling_out(
    api: FakeApiServer, cluster: Cluster
) -> None:
    node = draining_cluster(api)
    api.add(k8s.node("n2", unschedulable=True))  # no room anywhere: the new pod stays Pending
    pod = web_pod(api)
    done = surging.start(cluster, node, [(pod, "default/web")], clock=lambda: NOW, may_act=lambda _w: True)
    surging.wait(cluster, done, time_left=lambda: 0.0, sleep=time.sleep, poll_seconds=0.02)
    assert done.moved == []
    assert "rolling restart of Deployment default/web under way" in done.waiting[pod]
    assert len(deployment_patches(api)) == 1, "nothing undoes the restart"
    assert api.get("Pod", pod.split("/")[1]) is not None, "the old pod keeps serving"


def test_a_run_that_may_no_longer_act_writes_nothing(api: FakeApiServer, cluster: Cluster) -> None:
    node = draining_cluster(api)
    pod = web_pod(api)
    done = surging.start(cluster, node, [(pod, "default/web")], clock=lambda: NOW, may_act=lambda _w: False)
    assert deployment_patches(api) == [] and done.pending == []
    assert "may not act" in done.waiting[pod]


# -- whole runs: the planner, the executor and the reader together ------------------------------------


SURGING_POOL = {**POOL_CONFIG, "surgeSingleReplicas": True}


class RealPauses(FakeTime):
    """The run's clock moves only when it sleeps, but each sleep also lets the fake controllers work."""

    def sleep(self, seconds: float) -> None:
        time.sleep(0.02)
        super().sleep(seconds)


def held_single_replica(api: FakeApiServer) -> None:
    """n1 is light and marked, holding web's only pod behind a minAvailable: 1 budget; n2 has room."""
    api.add(k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": MARKED}))
    api.add(k8s.node("n2"))
    api.add(k8s.pod("busy-b2", node="n2", cpu="3"))
    for obj in k8s.deployment("web", nodes=["n1"]):
        api.add(obj)
    api.add(k8s.pdb("web", match_labels={"app": "web"}, min_available=1, disruptions_allowed=0))


def test_without_the_option_the_budget_blocks_the_node_and_no_deployment_is_read(api: FakeApiServer) -> None:
    held_single_replica(api)
    result = run_once(api)
    assert result.report["decision"]["action"] == "none"
    (n1,) = [node for node in result.report["nodes"] if node["name"] == "n1"]
    assert any("PodDisruptionBudget web allows no disruption now" in blocker for blocker in n1["blockers"])
    assert not [request for request in api.requests if "/deployments" in request.path], "the option costs no read"


def test_with_the_option_a_run_drains_the_node_and_the_service_keeps_a_ready_pod(api: FakeApiServer) -> None:
    held_single_replica(api)
    api.rollout_step(0.2)
    pod = web_pod(api)
    with AvailabilityWatch(api) as watch:
        result = run_once(api, env=env_with({"nodePools": {"default-pool": SURGING_POOL}}), time=RealPauses())
    decision = result.report["decision"]
    assert (decision["action"], decision["node"]) == ("drain", "n1")
    assert decision["restarts"] == {pod: "default/web"} and pod not in decision["evictions"]
    outcome = result.report["outcome"]
    assert outcome["movedByRestart"] == [pod] and outcome["restarted"] == ["default/web"]
    assert outcome["drainCompleted"]
    assert min(watch.seen) >= 1 and len(watch.seen) > 10, watch.seen
    (moved,) = [p for p in api.objects("Pod") if p["metadata"]["name"].startswith("web-")]
    assert moved["spec"]["nodeName"] == "n2"
    reasons = [(e["involvedObject"]["kind"], e["reason"]) for e in api.objects("Event")]
    assert ("Node", "NodeCompactorRollingRestart") in reasons and (
        "Deployment",
        "NodeCompactorRollingRestart",
    ) in reasons


def test_a_dry_run_says_what_it_would_restart_and_writes_nothing(api: FakeApiServer) -> None:
    held_single_replica(api)
    pod = web_pod(api)
    result = run_once(api, env=env_with({"nodePools": {"default-pool": SURGING_POOL}}), dry_run=True)
    assert result.report["decision"]["restarts"] == {pod: "default/web"}
    assert api.writes_of("Deployment") == [] and api.writes_of("Node") == []


def _with_single_replica(api: FakeApiServer, kind: str) -> str:
    """n1 light and marked with one single-replica pod of `kind`'s case; returns that pod's key."""
    api.add(k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": MARKED}))
    api.add(k8s.node("n2"))
    api.add(k8s.pod("busy-b2", node="n2", cpu="3"))
    if kind == "StatefulSet":
        api.add(k8s.pod("db-0", node="n1", owner_kind="StatefulSet", owner_name="db"))
        return "default/db-0"
    if kind == "ReadWriteOnce":
        api.add(k8s.claim("data"))
        objects = k8s.deployment("web", nodes=["n1"], volumes=[k8s.persistent_volume_claim("data", "data")])
    elif kind == "Recreate":
        objects = k8s.deployment("web", nodes=["n1"], strategy={"type": "Recreate"})
    else:
        objects = k8s.deployment("web", nodes=["n1"])
    for obj in objects:
        if kind == "mid-rollout" and obj["kind"] == "Deployment":
            obj["status"]["updatedReplicas"] = 0
        api.add(obj)
    return web_pod(api)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        pytest.param("ReadWriteOnce", "its volume claim data is ReadWriteOnce", id="ReadWriteOnce volume"),
        pytest.param("Recreate", "its strategy is Recreate", id="non-surging strategy"),
        pytest.param("mid-rollout", "it is mid-rollout (0 of 1 replica(s) updated)", id="mid-rollout"),
        pytest.param(
            "StatefulSet", "a StatefulSet starts a pod's replacement only once the old pod is gone", id="StatefulSet"
        ),
    ],
)
def test_a_single_replica_pod_a_restart_cannot_move_follows_the_normal_rules_and_the_report_says_why(
    api: FakeApiServer, kind: str, reason: str
) -> None:
    pod = _with_single_replica(api, kind)
    result = run_once(api, env=env_with({"nodePools": {"default-pool": SURGING_POOL}}), dry_run=True)
    decision = result.report["decision"]
    assert decision["restarts"] == {}
    assert (decision["action"], decision["node"]) == ("drain", "n1") and pod in decision["evictions"]
    (n1,) = [node for node in result.report["nodes"] if node["name"] == "n1"]
    (verdict,) = n1["singleReplicaPods"]
    assert (verdict["pod"], verdict["action"]) == (pod, "evict")
    assert reason in verdict["reason"]


def test_a_drain_without_a_pod_to_restart_says_on_the_node_why_each_single_replica_pod_is_evicted(
    api: FakeApiServer,
) -> None:
    pod = _with_single_replica(api, "StatefulSet")
    result = run_once(api, env=env_with({"nodePools": {"default-pool": SURGING_POOL}}))
    assert result.report["decision"]["action"] == "drain" and api.writes_of("Deployment") == []
    assert [(e.namespace, e.name) for e in api.evictions] == [tuple(pod.split("/"))]
    (message,) = [e["message"] for e in api.objects("Event") if e["reason"] == "NodeCompactorRollingRestart"]
    assert message.startswith("node-compactor moves no pod by a rolling restart instead of an eviction")
    assert f"left to the normal rules: {pod} (a StatefulSet starts a pod's replacement only once" in message


def test_a_cluster_that_refuses_the_deployment_list_fails_the_run_naming_the_permissions(api: FakeApiServer) -> None:
    held_single_replica(api)
    api.add_fault(Fault(method="GET", path_regex="/apis/apps/v1/deployments$", status=403, times=-1))
    with pytest.raises(ClusterAccessError, match=r"surgeSingleReplicas, which needs .*deploy/rbac-surge\.yaml"):
        run_once(api, env=env_with({"nodePools": {"default-pool": SURGING_POOL}}))
    assert api.writes_of("Node") == [] and api.writes_of("Deployment") == []
