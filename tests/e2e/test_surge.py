"""surgeSingleReplicas on a real control plane: a single-replica Deployment behind a minAvailable: 1 PDB.

Without the option the PDB blocks the node for good (an eviction would leave the service no Ready
pod). With it, node-compactor restarts the Deployment instead (kubectl.kubernetes.io/restartedAt);
the real Deployment controller starts the new pod first, kube-scheduler puts it on another node (the
drained one is cordoned), and the old pod goes only once the new one is Ready. The Deployment's
available replicas and its Ready pods are read from the API throughout: never below 1. node-compactor
runs as users run it, with deploy/rbac.yaml and deploy/rbac-surge.yaml.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e import controlplane
from tests.e2e.cluster import REPOSITORY, KubeCluster, Scenario, Watcher, is_ready, name_of, node_of
from tests.e2e.conftest import RBAC_PATHS
from tests.e2e.test_drain import MARKED_SECONDS, config_for, movable_pods_on

pytestmark = pytest.mark.e2e

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


@pytest.fixture(scope="module")
def surge_rbac(kube_cluster: KubeCluster) -> Iterator[None]:
    """deploy/rbac-surge.yaml for node-compactor's user, as Terraform's surge_rbac_manifests fills it in;
    taken away after this module, so the other tests run with deploy/rbac.yaml alone."""
    text = (REPOSITORY / "deploy" / "rbac-surge.yaml").read_text()
    documents = [
        d for d in yaml.safe_load_all(text.replace(controlplane.RBAC_PLACEHOLDER, controlplane.COMPACTOR_USER)) if d
    ]
    for document in documents:
        kube_cluster.create(RBAC_PATHS[document["kind"]], document)
    yield
    for document in documents:
        kube_cluster.delete(f"{RBAC_PATHS[document['kind']]}/{document['metadata']['name']}")


class Availability:
    """The Deployment's status.availableReplicas and its Ready pods, as read from the API at each poll."""

    def __init__(self, cluster: KubeCluster, namespace: str, name: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.name = name
        self.available: list[int] = []
        self.ready_pods: list[int] = []
        self.nodes: set[str | None] = set()

    def observe(self) -> None:
        deployment = self.cluster.get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.name}")
        self.available.append((deployment.get("status") or {}).get("availableReplicas") or 0)
        pods = self.cluster.pods(self.namespace, f"app={self.name}")
        self.ready_pods.append(sum(1 for pod in pods if is_ready(pod)))
        self.nodes.update(node_of(pod) for pod in pods)


def single_replica_on_the_light_node(scenario: Scenario) -> tuple[str, list[str], dict[str, Any]]:
    """Two busy nodes (75% of cpu requested: not underutilized) with 1 cpu free each, and a light node
    whose only movable pod is `solo`'s, the one replica of a Deployment with the default strategy
    (25% surge and unavailable: for one replica, surge 1 and unavailable 0) behind minAvailable: 1."""
    pool = "surge-pool"
    busy = scenario.add_pool(pool, 2)
    scenario.deployment("batch", replicas=2, cpu="3", pool=pool, spread=True)
    light = scenario.add_node(f"{pool}-c-1", pool=pool)["metadata"]["name"]
    [solo] = scenario.deployment("solo", replicas=1, cpu="100m", pool=pool, prefer_node=light)
    assert node_of(solo) == light
    scenario.pdb("solo", "solo", min_available=1)
    return light, busy, solo


def test_without_the_option_the_pdb_blocks_the_node_that_only_a_restart_could_empty(
    scenario: Scenario, surge_rbac: None
) -> None:
    cluster = scenario.cluster
    light, _, solo = single_replica_on_the_light_node(scenario)
    config = config_for("surge-pool")
    assert cluster.compactor("run", config=config).exit_code == 0  # marks
    time.sleep(MARKED_SECONDS + 1)
    run = cluster.compactor("run", config=config)
    assert run.exit_code == 0, run
    assert run.report["decision"]["action"] == "none", run
    [row] = [node for node in run.report["nodes"] if node["name"] == light]
    assert any("PodDisruptionBudget solo allows no disruption" in blocker for blocker in row["blockers"]), row
    assert "singleReplicaPods" not in row
    assert not cluster.node(light)["spec"].get("unschedulable")
    assert [name_of(pod) for pod in scenario.pods("solo")] == [name_of(solo)]


def test_with_the_option_the_node_drains_and_the_deployment_never_has_fewer_than_one_available_replica(
    scenario: Scenario, surge_rbac: None
) -> None:
    cluster = scenario.cluster
    light, busy, solo = single_replica_on_the_light_node(scenario)
    config = config_for("surge-pool", surgeSingleReplicas=True)
    assert cluster.compactor("run", config=config).exit_code == 0  # marks
    time.sleep(MARKED_SECONDS + 1)

    watch = Availability(cluster, scenario.namespace, "solo")
    mark = cluster.audit_mark()
    runs = []
    with Watcher(watch.observe) as watcher:
        for _ in range(4):  # the drain may span runs; each continues it
            run = cluster.compactor("run", config=config, env={"COMPACTOR_RUN_BUDGET_SECONDS": "60"})
            assert run.exit_code == 0, run
            runs.append(run)
            if not movable_pods_on(cluster, light):
                break
        [moved] = cluster.wait_deployment(scenario.namespace, "solo", 1)

    decision = runs[0].report["decision"]
    solo_key = f"{scenario.namespace}/{name_of(solo)}"
    assert (decision["action"], decision["node"]) == ("drain", light), runs[0]
    assert decision["restarts"] == {solo_key: f"{scenario.namespace}/solo"}, runs[0]
    assert solo_key not in decision["evictions"]
    [row] = [node for node in runs[0].report["nodes"] if node["name"] == light]
    assert [(p["pod"], p["action"]) for p in row["singleReplicaPods"]] == [(solo_key, "restart")], row
    assert watcher.polls > 10, "the API was not read often enough during the drain to prove anything"
    assert min(watch.available) >= 1, watch.available
    assert min(watch.ready_pods) >= 1, watch.ready_pods
    assert node_of(moved) in busy and name_of(moved) != name_of(solo)
    assert movable_pods_on(cluster, light) == []
    assert cluster.node(light)["spec"].get("unschedulable") is True
    moved_by_restart = [key for run in runs for key in run.report["outcome"]["movedByRestart"]]
    assert moved_by_restart == [solo_key], [run.report["outcome"] for run in runs]

    events = cluster.audit_events(mark)
    evictions = [e for e in events if (e.get("objectRef") or {}).get("subresource") == "eviction"]
    assert evictions == [], "a pod moved by a rolling restart was evicted"
    patches = [
        e for e in events if e["verb"] == "patch" and (e.get("objectRef") or {}).get("resource") == "deployments"
    ]
    assert [(p["objectRef"]["name"], p["responseStatus"]["code"]) for p in patches] == [("solo", 200)]
    deletes = [e for e in events if e["verb"] in ("delete", "deletecollection")]
    assert deletes == [], "node-compactor deleted a pod"
    template = cluster.get(f"/apis/apps/v1/namespaces/{scenario.namespace}/deployments/solo")["spec"]["template"]
    assert RESTARTED_AT in template["metadata"]["annotations"]
