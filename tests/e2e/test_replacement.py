"""Node replacement on a real control plane (DESIGN "Node replacement"): the placeholder stays Pending
until the test, playing the Cluster Autoscaler, adds a node to the target pool; kube-scheduler binds it
there; the drain runs; kube-scheduler preempts the placeholder for the evicted pods' replacements; every
pod ends Running, no PodDisruptionBudget is broken, and the placeholder is gone.

node-compactor runs as users run it (`python -m compactor run --kubeconfig ... --config ... --json`)
with the RBAC of deploy/.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from compactor.core.model import (
    DRAIN_STARTED_AT,
    PLACEHOLDER_LABEL,
    PLACEHOLDER_PRIORITY_CLASS,
    REPLACED_BY,
)
from compactor.settings.config import DEFAULT_PLACEHOLDER_NAMESPACE
from tests.e2e.cluster import (
    HOSTNAME_LABEL,
    PAUSE_IMAGE,
    KubeCluster,
    Scenario,
    Watcher,
    is_ready,
    name_of,
    node_of,
    wait_for,
)
from tests.e2e.test_drain import BudgetWatch, movable_pods_on

pytestmark = pytest.mark.e2e

MARKED_SECONDS = 2
GROUP_LABEL = "node-compactor.dev/e2e-group"


def ensure(cluster: KubeCluster, path: str, obj: dict[str, Any]) -> None:
    """Create what deploy/ and terraform create once per cluster, unless it is there already."""
    if cluster.find(f"{path}/{name_of(obj)}") is None:
        cluster.create(path, obj)


def placeholder_prerequisites(cluster: KubeCluster) -> None:
    ensure(
        cluster,
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEFAULT_PLACEHOLDER_NAMESPACE}},
    )
    ensure(
        cluster,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PLACEHOLDER_PRIORITY_CLASS},
            "value": -10,
            "preemptionPolicy": "Never",
            "globalDefault": False,
        },
    )


def placeholders(cluster: KubeCluster) -> list[dict[str, Any]]:
    return cluster.pods(DEFAULT_PLACEHOLDER_NAMESPACE, f"{PLACEHOLDER_LABEL}=true")


def web(scenario: Scenario, group: str, replicas: int) -> list[dict[str, Any]]:
    """Pods free to run on any node of the test (its group label), spread evenly over the nodes."""
    labels = {"app": "web"}
    spec = {
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {GROUP_LABEL: group},
        "containers": [
            {"name": "app", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "1200m", "memory": "256Mi"}}}
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME_LABEL,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": labels},
            }
        ],
    }
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    scenario.cluster.create(f"/apis/apps/v1/namespaces/{scenario.namespace}/deployments", body)
    return scenario.cluster.wait_deployment(scenario.namespace, "web", replicas)


def test_a_replacement_drains_onto_the_new_node_the_scheduler_preempts_the_placeholder_for(
    scenario: Scenario,
) -> None:
    cluster = scenario.cluster
    placeholder_prerequisites(cluster)
    big, small, group = "rep-big", "rep-small", scenario.namespace
    tagged = {GROUP_LABEL: group}
    # s1 of the small pool is full (a 3.5-cpu filler); b1 and b2 (8 cpu) get 4 web pods of 1.2 cpu each:
    # 60% used, so both are underutilized, and neither has room for all of the other's pods.
    [s1] = scenario.add_pool(small, 1, labels=tagged)
    scenario.deployment("filler", replicas=1, cpu="3500m", pool=small)
    bigs = scenario.add_pool(big, 2, cpu="8", memory="32Gi", instance_type="n2-standard-8", labels=tagged)
    pods = web(scenario, group, 8)
    assert [node_of(pod) for pod in pods].count(bigs[0]) == 4, [node_of(pod) for pod in pods]
    scenario.pdb("web", "web", max_unavailable=1)
    config = {
        "nodePools": {
            big: {
                "enabled": True,
                "scaleDownCPURequestRatioLimit": 0.75,
                "neededMarkedTimeSeconds": MARKED_SECONDS,
                "minimumNodeAgeSeconds": 0,
                "scaleUpCooldownSeconds": 0,
                "drainTimeoutSeconds": 300,
                "pricePerHour": 0.40,
                "replacement": {"enabled": True, "targetPools": [small], "timeoutSeconds": 300},
            },
            small: {"pricePerHour": 0.13},
        }
    }
    env = {"COMPACTOR_RUN_BUDGET_SECONDS": "60"}

    marks = cluster.compactor("run", config=config, env=env)
    assert marks.exit_code == 0, marks
    time.sleep(MARKED_SECONDS + 1)

    # No node can simply be deleted: the run asks for one cheaper node first, and drains nothing.
    asked = cluster.compactor("run", config=config, env=env)
    assert asked.exit_code == 0, asked
    replacement = asked.report["replacement"]
    assert replacement["step"] == "create", asked
    assert asked.report["decision"]["action"] == "none", asked
    [replaced] = replacement["nodes"]
    assert replaced in bigs
    [placeholder] = placeholders(cluster)
    name = name_of(placeholder)
    assert cluster.node(replaced)["metadata"]["annotations"][REPLACED_BY] == name
    wait_for(
        "kube-scheduler finds no node for the placeholder",
        lambda: any(
            c.get("reason") == "Unschedulable"
            for c in (placeholders(cluster)[0].get("status") or {}).get("conditions") or []
        ),
    )
    waiting = cluster.compactor("run", config=config, env=env)
    assert waiting.exit_code == 0, waiting
    assert waiting.report["replacement"]["step"] == "wait", waiting
    assert len(movable_pods_on(cluster, replaced)) == 4

    # The test plays the Cluster Autoscaler: a node of the small pool joins, and the placeholder runs there.
    scenario.add_node(f"{small}-b-2", pool=small, labels=tagged)
    wait_for(
        "the placeholder runs on the new node",
        lambda: [p for p in placeholders(cluster) if is_ready(p) and node_of(p) == f"{small}-b-2"],
    )

    watch = BudgetWatch(cluster, scenario.namespace, {"web": 7})
    mark = cluster.audit_mark()
    runs = []
    with Watcher(watch.observe) as watcher:
        for _ in range(8):
            run = cluster.compactor("run", config=config, env=env)
            assert run.exit_code == 0, run
            runs.append(run)
            if not movable_pods_on(cluster, replaced) and not placeholders(cluster):
                break
            time.sleep(1)
        settled = cluster.wait_deployment(scenario.namespace, "web", 8)
    assert (runs[0].report["decision"]["action"], runs[0].report["decision"]["node"]) == ("drain", replaced), runs[0]
    assert watcher.polls > 10
    assert watch.violations == [], watch.violations
    assert movable_pods_on(cluster, replaced) == []
    assert placeholders(cluster) == [], "the placeholder outlived the replacement"
    assert f"{small}-b-2" in {node_of(pod) for pod in settled}, "no evicted pod went to the new node"
    pending = [name_of(pod) for pod in scenario.pods() if pod["status"].get("phase") != "Running"]
    assert pending == [], f"stranded pods: {pending}"
    assert DRAIN_STARTED_AT in cluster.node(replaced)["metadata"]["annotations"]
    assert s1 not in {node_of(pod) for pod in settled}
    # The only pod node-compactor deleted is its placeholder (if the scheduler had not preempted it first).
    deletes = [
        event["objectRef"]
        for event in cluster.audit_events(mark)
        if event["verb"] == "delete" and (event.get("objectRef") or {}).get("resource") == "pods"
    ]
    assert all(ref.get("name") == name and ref.get("namespace") == DEFAULT_PLACEHOLDER_NAMESPACE for ref in deletes)


def test_a_placeholder_that_never_runs_is_deleted_and_nothing_is_drained(scenario: Scenario) -> None:
    cluster = scenario.cluster
    placeholder_prerequisites(cluster)
    big, small, group = "norun-big", "norun-small", scenario.namespace
    tagged = {GROUP_LABEL: group}
    scenario.add_pool(small, 1, labels=tagged)
    scenario.deployment("filler", replicas=1, cpu="3500m", pool=small)
    bigs = scenario.add_pool(big, 2, cpu="8", memory="32Gi", instance_type="n2-standard-8", labels=tagged)
    web(scenario, group, 8)
    config = {
        "nodePools": {
            big: {
                "enabled": True,
                "scaleDownCPURequestRatioLimit": 0.75,
                "neededMarkedTimeSeconds": MARKED_SECONDS,
                "minimumNodeAgeSeconds": 0,
                "scaleUpCooldownSeconds": 0,
                "pricePerHour": 0.40,
                "replacement": {"enabled": True, "targetPools": [small], "timeoutSeconds": 60},
            },
            small: {"pricePerHour": 0.13},
        }
    }
    assert cluster.compactor("run", config=config).exit_code == 0
    time.sleep(MARKED_SECONDS + 1)
    asked = cluster.compactor("run", config=config)
    assert asked.report["replacement"]["step"] == "create", asked
    [replaced] = asked.report["replacement"]["nodes"]
    # No node joins (a stockout). The placeholder is made older than timeoutSeconds rather than waited for.
    [placeholder] = placeholders(cluster)
    cluster.patch(
        f"/api/v1/namespaces/{DEFAULT_PLACEHOLDER_NAMESPACE}/pods/{name_of(placeholder)}",
        {"metadata": {"annotations": {"node-compactor.dev/created-at": "2000-01-01T00:00:00Z"}}},
    )
    gave_up = cluster.compactor("run", config=config)
    assert gave_up.exit_code == 0, gave_up
    assert gave_up.report["replacement"]["step"] == "give-up", gave_up
    wait_for("the placeholder is deleted", lambda: not placeholders(cluster))
    annotations = cluster.node(replaced)["metadata"]["annotations"]
    assert "node-compactor.dev/replacement-failed-at" in annotations
    assert REPLACED_BY not in annotations
    assert all(len(movable_pods_on(cluster, node)) == 4 for node in bigs)
    assert not cluster.node(replaced)["spec"].get("unschedulable")
