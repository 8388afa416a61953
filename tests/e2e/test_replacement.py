"""Node replacement on a real control plane (DESIGN "Node replacement"): the placeholder stays Pending
until the test, playing the Cluster Autoscaler, adds a node to the target pool; kube-scheduler binds it
there; the drain runs; kube-scheduler preempts the placeholder for the evicted pods' replacements; every
pod ends Running, no PodDisruptionBudget is broken, and the placeholder is gone. Also with two new nodes
(two placeholders under one replacement id, kept apart by their anti-affinity, both preempted) and with a
machine type of `machineTypes` (the test plays node auto-provisioning).

node-compactor runs as users run it (`python -m compactor run --kubeconfig ... --config ... --json`)
with the RBAC of deploy/; where the test needs what GKE says of the cluster (node auto-provisioning), as
on GKE (`run --gke`), GKE's API served by tests/fakegke (tests/e2e/gke_run.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from compactor.core.model import (
    DRAIN_STARTED_AT,
    PLACEHOLDER_LABEL,
    PLACEHOLDER_PRIORITY_CLASS,
    REPLACED_BY,
    REPLACEMENT_LABEL,
)
from compactor.core.prices import machines
from compactor.settings.config import DEFAULT_PLACEHOLDER_NAMESPACE
from tests import fakegke
from tests.e2e.cluster import (
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    PAUSE_IMAGE,
    POOL_LABEL,
    ZONE_LABEL,
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


def web(scenario: Scenario, group: str, replicas: int, cpu: str = "1200m") -> list[dict[str, Any]]:
    """Pods free to run on any node of the test (its group label), spread evenly over the nodes."""
    labels = {"app": "web"}
    spec = {
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {GROUP_LABEL: group},
        "containers": [
            {"name": "app", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
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


def replacing(big: str, replacement: dict[str, Any], small: str | None = None, **pool: Any) -> dict[str, Any]:
    """node-compactor's configuration: `big` compacted at once (marked for MARKED_SECONDS, no age or cooldown) with
    node replacement on; with a target pool `small`, `big` priced at 0.40/h and `small` at 0.13/h."""
    settings: dict[str, Any] = {
        "enabled": True,
        "scaleDownCPURequestRatioLimit": 0.75,
        "neededMarkedTimeSeconds": MARKED_SECONDS,
        "minimumNodeAgeSeconds": 0,
        "scaleUpCooldownSeconds": 0,
        **pool,
        "replacement": {"enabled": True, **replacement},
    }
    pools: dict[str, Any] = {big: settings}
    if small is not None:
        settings["pricePerHour"] = 0.40
        pools[small] = {"pricePerHour": 0.13}
    return {"nodePools": pools}


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
    config = replacing(big, {"targetPools": [small], "timeoutSeconds": 300}, small, drainTimeoutSeconds=300)
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
    config = replacing(big, {"targetPools": [small], "timeoutSeconds": 60}, small)
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


def scheduling_message(pod: dict[str, Any]) -> str:
    """Why kube-scheduler left the pod Pending (its PodScheduled condition), or "" while it has not said."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            message: str = condition.get("message") or ""
            return message
    return ""


def preempted(cluster: KubeCluster, names: set[str]) -> set[str]:
    """Which of these placeholders kube-scheduler reported preempting (its `Preempted` Event on the pod)."""
    events = cluster.items(f"/apis/events.k8s.io/v1/namespaces/{DEFAULT_PLACEHOLDER_NAMESPACE}/events")
    return {
        event["regarding"]["name"]
        for event in events
        if event.get("reason") == "Preempted" and (event.get("regarding") or {}).get("name") in names
    }


def test_a_busy_node_is_replaced_by_two_new_nodes_its_placeholders_hold_apart_until_the_scheduler_preempts_both(
    scenario: Scenario,
) -> None:
    cluster = scenario.cluster
    placeholder_prerequisites(cluster)
    big, small, group = "two-big", "two-small", scenario.namespace
    tagged = {GROUP_LABEL: group}
    # The small pool's nodes (8 cpu) take 8 pods each (maxPodsPerNode 8, the least GKE allows). s1 is full.
    # b1 (8 cpu) holds 16 web pods of 450m: 90% busy, so only price makes it a candidate, and its pods need
    # two small nodes (by pod count; by cpu one would do). Each placeholder then asks for 8 pods' 3.6 cpu:
    # two fit on one new node by cpu, and only their anti-affinity keeps them apart. Each takes one of its
    # node's 8 pod slots, so the last evicted pod on each new node finds no slot until its placeholder goes.
    small_node = {"cpu": "8", "memory": "32Gi", "pods": "8", "instance_type": "e2-standard-8", "labels": tagged}
    [s1] = scenario.add_pool(small, 1, **small_node)
    scenario.deployment("filler", replicas=1, cpu="7800m", pool=small)
    [b1] = scenario.add_pool(big, 1, cpu="8", memory="32Gi", instance_type="n2-standard-8", labels=tagged)
    pods = web(scenario, group, 16, cpu="450m")
    assert {node_of(pod) for pod in pods} == {b1}, [node_of(pod) for pod in pods]
    scenario.pdb("web", "web", max_unavailable=2)
    replacement = {"targetPools": [small], "maxNewNodes": 2, "timeoutSeconds": 300}
    config = replacing(big, replacement, small, minNodes=0, drainTimeoutSeconds=300)
    env = {"COMPACTOR_RUN_BUDGET_SECONDS": "60"}

    found = cluster.compactor("run", config=config, env=env)
    assert found.exit_code == 0, found
    assert found.report["replaceable"]["add"] == [b1], found
    time.sleep(MARKED_SECONDS + 1)

    asked = cluster.compactor("run", config=config, env=env)
    assert asked.exit_code == 0, asked
    replacement = asked.report["replacement"]
    assert (replacement["step"], replacement["nodes"], replacement["newNodes"]) == ("create", [b1], 2), asked
    assert asked.report["decision"]["action"] == "none", asked
    made = placeholders(cluster)
    names = sorted(name_of(pod) for pod in made)
    assert len(names) == 2 and sorted(replacement["placeholders"]) == names, made
    assert len({pod["metadata"]["labels"][REPLACEMENT_LABEL] for pod in made}) == 1, "one replacement id on both"
    assert sorted(cluster.node(b1)["metadata"]["annotations"][REPLACED_BY].split(",")) == names
    wait_for(
        "kube-scheduler finds no node for either placeholder",
        lambda: all(
            "didn't match Pod's node affinity/selector" in scheduling_message(p) for p in placeholders(cluster)
        ),
    )

    # The test plays the Cluster Autoscaler, one node at a time. On the first, one placeholder runs; the other
    # would fit beside it, and its anti-affinity keeps it Pending: the run waits and drains nothing.
    first_new, second_new = f"{small}-b-2", f"{small}-b-3"
    scenario.add_node(first_new, pool=small, **small_node)

    def one_runs_and_one_is_repelled() -> bool:
        found = placeholders(cluster)
        running = [p for p in found if is_ready(p) and node_of(p) == first_new]
        repelled = [p for p in found if not node_of(p) and "anti-affinity" in scheduling_message(p)]
        return len(running) == 1 and len(repelled) == 1

    wait_for(
        "one placeholder runs on the first new node and the other is repelled from it", one_runs_and_one_is_repelled
    )
    waiting = cluster.compactor("run", config=config, env=env)
    assert waiting.exit_code == 0, waiting
    assert waiting.report["replacement"]["step"] == "wait", waiting
    assert len(movable_pods_on(cluster, b1)) == 16

    scenario.add_node(second_new, pool=small, **small_node)
    wait_for(
        "both placeholders run, one on each new node",
        lambda: sorted(node_of(p) or "" for p in placeholders(cluster) if is_ready(p)) == [first_new, second_new],
    )

    # Runs every few seconds, as a scheduler would call it, until b1 is empty. Each evicted pod's replacement
    # lands beside a placeholder until the new nodes' pod slots run out; the last two preempt the placeholders.
    watch = BudgetWatch(cluster, scenario.namespace, {"web": 14})
    mark = cluster.audit_mark()
    runs = []
    with Watcher(watch.observe) as watcher:
        for _ in range(8):
            run = cluster.compactor("run", config=config, env=env)
            assert run.exit_code == 0, run
            runs.append(run)
            if not movable_pods_on(cluster, b1):
                break
            time.sleep(1)
        settled = cluster.wait_deployment(scenario.namespace, "web", 16)
    assert (runs[0].report["decision"]["action"], runs[0].report["decision"]["node"]) == ("drain", b1), runs[0]
    assert watcher.polls > 10
    assert watch.violations == [], watch.violations
    assert movable_pods_on(cluster, b1) == []
    assert sorted(Counter(node_of(pod) for pod in settled).values()) == [8, 8], [node_of(p) for p in settled]
    assert {node_of(pod) for pod in settled} == {first_new, second_new}
    # Every evicted pod runs, so both slots the placeholders held were taken: kube-scheduler preempted both.
    assert placeholders(cluster) == [], "a placeholder outlived the replacement"
    assert wait_for("kube-scheduler's Preempted events", lambda: preempted(cluster, set(names)) == set(names))

    # The next run finds the placeholders gone after the drain and takes the pointer off b1.
    done = cluster.compactor("run", config=config, env=env)
    assert done.exit_code == 0, done
    assert done.report["outcome"]["replacedByRemoved"] == [b1], done
    assert REPLACED_BY not in cluster.node(b1)["metadata"]["annotations"]
    pending_pods = [name_of(pod) for pod in scenario.pods() if pod["status"].get("phase") != "Running"]
    assert pending_pods == [], f"stranded pods: {pending_pods}"
    assert placeholders(cluster) == []
    # node-compactor deleted no pod (a DELETE of a placeholder already preempted answers 404), and every eviction
    # the API answered was either done or refused by the PDB (429), never one past it.
    events = cluster.audit_events(mark)
    deleted = [
        (event["objectRef"].get("name"), (event.get("responseStatus") or {}).get("code"))
        for event in events
        if event["verb"] == "delete" and (event.get("objectRef") or {}).get("resource") == "pods"
    ]
    assert all(code == 404 for _, code in deleted), deleted
    evictions = [
        (event["objectRef"].get("name"), (event.get("responseStatus") or {}).get("code"))
        for event in events
        if event["verb"] == "create" and (event.get("objectRef") or {}).get("subresource") == "eviction"
    ]
    assert {name for name, code in evictions if code == 201} == {name_of(pod) for pod in pods}, evictions
    assert all(code in (201, 429) for _, code in evictions), evictions
    assert s1 not in {node_of(pod) for pod in settled}


GKE_CLUSTER = "projects/e2e-project/locations/europe-west1/clusters/e2e"
MACHINE_FAMILY_LABEL = "cloud.google.com/machine-family"


@pytest.fixture
def gke_api() -> Iterator[fakegke.GkeApi]:
    with fakegke.running() as api:
        yield api


def test_a_machine_type_target_asks_gke_for_the_instance_type_and_drains_onto_the_node_it_creates(
    scenario: Scenario, gke_api: fakegke.GkeApi
) -> None:
    cluster = scenario.cluster
    placeholder_prerequisites(cluster)
    big, zone = "mt-big", "europe-west1-b"
    # GKE's word on the cluster, as `run --gke` reads it: node auto-provisioning creates pools, so the pool's
    # machineTypes are targets (without it they are a warning and unused).
    big_pool = {
        "name": big,
        "autoscaling": {"enabled": True, "minNodeCount": 0, "maxNodeCount": 3},
        "locations": [zone],
        "config": {"machineType": "n2-standard-8"},
    }
    nap = {"enableNodeAutoprovisioning": True}
    # b1, an n2-standard-8, holds three pods of 1.2 cpu that one e2-standard-4 (3920m allocatable) takes.
    cpu, memory = machines.allocatable_amounts("n2-standard-8")
    [b1] = scenario.add_pool(big, 1, cpu=f"{cpu}m", memory=str(memory), instance_type="n2-standard-8", zone=zone)
    # No nodeSelector: a node of a pool GKE creates carries GKE's labels only (the test's nodes are the cluster's).
    pods = scenario.deployment("web", replicas=3, cpu="1200m")
    assert {node_of(pod) for pod in pods} == {b1}
    scenario.pdb("web", "web", max_unavailable=1)
    replacement = {"machineTypes": ["e2-standard-8", "e2-standard-4"], "timeoutSeconds": 300}
    config = replacing(big, replacement, minNodes=0, drainTimeoutSeconds=300)
    env = {"COMPACTOR_RUN_BUDGET_SECONDS": "60"}

    def run() -> dict[str, Any]:
        done = cluster.compactor_on_gke(gke_api.url, GKE_CLUSTER, config=config, env=env)
        assert done.exit_code == 0, done
        return done.report

    # Until GKE's cluster config turns node auto-provisioning on, the machine types are a warning and unused.
    gke_api.clusters[GKE_CLUSTER] = cluster.gke_cluster([big_pool])
    unused = run()
    assert "replacement" not in unused and unused["replaceable"]["add"] == [], unused
    assert any("does not create node pools" in warning for warning in unused["warnings"]), unused
    gke_api.clusters[GKE_CLUSTER] = cluster.gke_cluster([big_pool], autoscaling=nap)
    found = run()
    assert found["replaceable"]["add"] == [b1], found
    assert not any("machineTypes" in warning for warning in found["warnings"]), found
    time.sleep(MARKED_SECONDS + 1)

    # The cheapest machine type that takes the pods, priced from the built-in table: one e2-standard-4.
    asked = run()
    replacement = asked["replacement"]
    assert (replacement["step"], replacement["nodes"], replacement["newNodes"]) == ("create", [b1], 1), asked
    assert replacement["target"] == replacement["machineType"] == "e2-standard-4", asked
    assert replacement["zone"] == zone and "targetPool" not in replacement, asked
    [placeholder] = placeholders(cluster)
    # It selects the shape and the zone, never a pool: GKE creates one for it.
    assert placeholder["spec"]["nodeSelector"] == {
        MACHINE_FAMILY_LABEL: "e2",
        INSTANCE_TYPE_LABEL: "e2-standard-4",
        ZONE_LABEL: zone,
    }, placeholder
    wait_for(
        "kube-scheduler finds no node for the placeholder",
        lambda: "didn't match Pod's node affinity/selector" in scheduling_message(placeholders(cluster)[0]),
    )
    assert run()["replacement"]["step"] == "wait"

    # The test plays node auto-provisioning: GKE creates a pool of e2-standard-4 in the zone, and its node joins,
    # labelled as GKE labels it, with what GKE leaves allocatable on the machine type.
    created = "nap-e2-standard-4-1a2b3c4d"
    gke_api.clusters[GKE_CLUSTER] = cluster.gke_cluster(
        [
            big_pool,
            {
                "name": created,
                "autoscaling": {"enabled": True, "autoprovisioned": True, "minNodeCount": 0, "maxNodeCount": 1000},
                "locations": [zone],
                "config": {"machineType": "e2-standard-4"},
            },
        ],
        autoscaling=nap,
    )
    cpu, memory = machines.allocatable_amounts("e2-standard-4")
    new_node = f"gke-e2e-{created}-5e6f-0001"
    scenario.add_node(
        new_node,
        pool=created,
        zone=zone,
        instance_type="e2-standard-4",
        cpu=f"{cpu}m",
        memory=str(memory),
        labels={MACHINE_FAMILY_LABEL: "e2"},
    )
    wait_for(
        "the placeholder runs on the created node",
        lambda: [p for p in placeholders(cluster) if is_ready(p) and node_of(p) == new_node],
    )

    watch = BudgetWatch(cluster, scenario.namespace, {"web": 2})
    runs = []
    with Watcher(watch.observe) as watcher:
        for _ in range(8):
            runs.append(run())
            if not movable_pods_on(cluster, b1):
                break
            time.sleep(1)
        settled = cluster.wait_deployment(scenario.namespace, "web", 3)
    assert (runs[0]["decision"]["action"], runs[0]["decision"]["node"]) == ("drain", b1), runs[0]
    assert watcher.polls > 10
    assert watch.violations == [], watch.violations
    assert {node_of(pod) for pod in settled} == {new_node}
    assert placeholders(cluster) == [], "the placeholder outlived the replacement"
    assert wait_for("kube-scheduler's Preempted event", lambda: preempted(cluster, {name_of(placeholder)}))
    done = run()
    assert done["outcome"]["replacedByRemoved"] == [b1], done
    pending = [name_of(pod) for pod in scenario.pods() if pod["status"].get("phase") != "Running"]
    assert pending == [], f"stranded pods: {pending}"
    assert cluster.node(new_node)["metadata"]["labels"][POOL_LABEL] == created
