"""node-compactor's drains on a real control plane: the first run, a drain behind PDBs, a PDB at zero, a rollback.

The disruption controller computes every PDB's status, the Eviction API answers, the ReplicaSet
controller replaces each evicted pod and the scheduler places it; node-compactor runs as users
run it (`python -m compactor run --kubeconfig ... --config ... --json`) with the RBAC of
deploy/rbac.yaml.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from compactor.core.model import DRAIN_STARTED_AT
from tests.e2e.cluster import KubeCluster, Scenario, Watcher, is_ready, name_of, node_of, wait_for

pytestmark = pytest.mark.e2e

MARKED_SECONDS = 2
UNDERUTILIZED_SINCE = "node-compactor.dev/underutilized-since"
DRAIN_FAILED_AT = "node-compactor.dev/drain-failed-at"


def config_for(pool: str, **overrides: Any) -> dict[str, Any]:
    """One enabled pool with every wait short enough for a test (marks count after MARKED_SECONDS)."""
    settings = {
        "enabled": True,
        "scaleDownCPURequestRatioLimit": 0.75,
        "neededMarkedTimeSeconds": MARKED_SECONDS,
        "minimumNodeAgeSeconds": 0,
        "minNodes": 1,
        "scaleUpCooldownSeconds": 0,
        "drainTimeoutSeconds": 300,
        "removalTimeoutSeconds": 1800,
        "retryBackoffSeconds": 1800,
        **overrides,
    }
    return {"nodePools": {pool: settings}}


def writes_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["verb"] not in ("get", "list", "watch")]


def describe(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    what = "/".join(p for p in (ref.get("resource"), ref.get("name"), ref.get("subresource")) if p)
    return f"{event['verb']} {what} -> {(event.get('responseStatus') or {}).get('code')}"


def movable_pods_on(cluster: KubeCluster, node: str) -> list[str]:
    """Pods a drain of `node` must move: not a DaemonSet's, not finished."""
    return [
        name_of(pod)
        for pod in cluster.pods_on(node)
        if not any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or [])
        and pod["status"].get("phase") not in ("Succeeded", "Failed")
    ]


class BudgetWatch:
    """During a drain, read every PDB and its pods from the API and remember each time one was below its minimum."""

    def __init__(self, cluster: KubeCluster, namespace: str, minimum: dict[str, int]) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.minimum = minimum  # app -> the fewest Ready pods its PDB allows
        self.violations: list[str] = []
        self.lowest: dict[str, int] = {}

    def observe(self) -> None:
        pdbs = self.cluster.items(f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets")
        for pdb in pdbs:
            status = pdb.get("status") or {}
            if status.get("currentHealthy", 0) < status.get("desiredHealthy", 0):
                self.violations.append(f"PDB {name_of(pdb)} status: {status}")
        pods = self.cluster.pods(self.namespace)
        ready = Counter(pod["metadata"]["labels"].get("app") for pod in pods if is_ready(pod))
        for app, minimum in self.minimum.items():
            self.lowest[app] = min(self.lowest.get(app, ready[app]), ready[app])
            if ready[app] < minimum:
                self.violations.append(f"{app}: {ready[app]} Ready pods, its PDB needs {minimum}")


def test_a_first_run_only_marks_then_the_cheapest_node_drains_and_no_pdb_is_ever_below_its_minimum(
    scenario: Scenario,
) -> None:
    cluster = scenario.cluster
    pool = "drain-pool"
    first = scenario.add_pool(pool, 3)
    scenario.daemonset("node-agent", cpu="50m", pool=pool)
    scenario.deployment("web", replicas=6, cpu="300m", pool=pool, spread=True)
    scenario.deployment("api", replicas=3, cpu="300m", pool=pool, spread=True)
    scenario.deployment("batch", replicas=3, cpu="1", pool=pool, spread=True)
    scenario.pdb("web", "web", min_available=7)
    scenario.pdb("api", "api", max_unavailable=1)
    # A fourth node joins and takes only the scale-up's pods (the spread keeps the others even):
    # two of web and one of api, where the first three nodes hold four pods each.
    [newest] = [scenario.add_node(f"{pool}-b-4", pool=pool)["metadata"]["name"]]
    scenario.scale("web", 8)
    scenario.scale("api", 4)
    nodes = [*first, newest]
    scenario.wait_daemonset("node-agent", nodes)
    movable = {node: movable_pods_on(cluster, node) for node in nodes}
    assert sorted(len(pods) for pods in movable.values()) == [3, 4, 4, 4], movable
    assert len(movable[newest]) == 3, movable
    config = config_for(pool)

    # The first run marks every underutilized node (about 50% of cpu requested) and does nothing else.
    mark = cluster.audit_mark()
    run = cluster.compactor("run", config=config)
    assert run.exit_code == 0, run
    assert sorted(run.report["marks"]["add"]) == sorted(nodes), run
    assert run.report["decision"]["action"] == "none", run
    writes = writes_of(cluster.audit_events(mark))
    assert not [e for e in writes if (e.get("objectRef") or {}).get("subresource") == "eviction"], writes
    for node in nodes:
        found = cluster.node(node)
        assert UNDERUTILIZED_SINCE in found["metadata"]["annotations"]
        assert not found["spec"].get("unschedulable"), f"{node} was cordoned by a run that should only mark"

    # Once the marks are old enough, the next run drains the node with the fewest pods to move.
    time.sleep(MARKED_SECONDS + 1)
    watch = BudgetWatch(cluster, scenario.namespace, {"web": 7, "api": 3})
    mark = cluster.audit_mark()
    runs = []
    with Watcher(watch.observe) as watcher:
        for _ in range(4):  # the drain may span runs; each continues it
            run = cluster.compactor("run", config=config, env={"COMPACTOR_RUN_BUDGET_SECONDS": "60"})
            assert run.exit_code == 0, run
            runs.append(run)
            if not movable_pods_on(cluster, newest):
                break
        web = scenario.cluster.wait_deployment(scenario.namespace, "web", 8)
        api = scenario.cluster.wait_deployment(scenario.namespace, "api", 4)
    decision = runs[0].report["decision"]
    assert (decision["action"], decision["node"]) == ("drain", newest), runs[0]
    assert watcher.polls > 10, "the API was not read often enough during the drain to prove anything"
    assert watch.violations == [], watch.violations
    assert movable_pods_on(cluster, newest) == []
    assert {node_of(pod) for pod in web + api} <= set(first)
    pending = [name_of(p) for p in scenario.pods() if p["status"].get("phase") != "Running"]
    assert pending == [], f"stranded pods: {pending}"
    drained = cluster.node(newest)
    assert drained["spec"].get("unschedulable") is True
    assert DRAIN_STARTED_AT in drained["metadata"]["annotations"]
    assert [node_of(p) for p in scenario.pods("node-agent")].count(newest) == 1, "the DaemonSet pod stays"

    events = cluster.audit_events(mark)
    evictions = [e for e in events if (e.get("objectRef") or {}).get("subresource") == "eviction"]
    assert {e["objectRef"]["name"] for e in evictions if e["responseStatus"]["code"] == 201} == set(movable[newest])
    deletes = [describe(e) for e in events if e["verb"] in ("delete", "deletecollection")]
    assert deletes == [], f"node-compactor deleted instead of evicting: {deletes}"
    refused = [e["responseStatus"]["code"] for e in evictions if e["responseStatus"]["code"] != 201]
    assert set(refused) <= {429}, [describe(e) for e in evictions]


def test_a_pdb_at_zero_on_the_cheapest_node_moves_the_choice_and_a_dry_run_writes_nothing(
    scenario: Scenario,
) -> None:
    cluster = scenario.cluster
    pool = "choice-pool"
    busy = scenario.add_pool(pool, 2)
    scenario.deployment("batch", replicas=2, cpu="1", pool=pool, spread=True)
    [light] = [scenario.add_node(f"{pool}-c-1", pool=pool)["metadata"]["name"]]
    scenario.deployment("web", replicas=3, cpu="300m", pool=pool, spread=True)
    # The single replica prefers the node that is otherwise the cheapest; nothing pins it there.
    [solo] = scenario.deployment("solo", replicas=1, cpu="100m", pool=pool, prefer_node=light)
    assert node_of(solo) == light
    config = config_for(pool)
    run = cluster.compactor("run", config=config)  # marks
    assert run.exit_code == 0, run
    time.sleep(MARKED_SECONDS + 1)

    mark = cluster.audit_mark()
    before = cluster.compactor("run", "--dry-run", config=config)
    assert before.exit_code == 0, before
    assert (before.report["decision"]["action"], before.report["decision"]["node"]) == ("drain", light), before

    scenario.pdb("solo", "solo", min_available=1)  # the disruption controller: disruptionsAllowed 0
    after = cluster.compactor("run", "--dry-run", config=config)
    assert after.exit_code == 0, after
    writes = writes_of(cluster.audit_events(mark))
    assert writes == [], f"a dry run wrote: {[describe(e) for e in writes]}"
    assert after.report["dryRun"] is True
    decision = after.report["decision"]
    assert decision["action"] == "drain" and decision["node"] in busy, after
    [row] = [n for n in after.report["nodes"] if n["name"] == light]
    assert any("solo" in blocker for blocker in row["blockers"]), row

    # And the run that acts drains that other node, leaving the PDB's pod where it is.
    run = cluster.compactor("run", config=config)
    assert run.exit_code == 0, run
    assert (run.report["decision"]["action"], run.report["decision"]["node"]) == ("drain", decision["node"]), run
    assert cluster.node(decision["node"])["spec"].get("unschedulable") is True
    assert not cluster.node(light)["spec"].get("unschedulable")
    assert [name_of(p) for p in scenario.pods("solo")] == [name_of(solo)]


def test_a_drain_past_its_timeout_is_rolled_back_and_the_node_given_back(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "rollback-pool"
    nodes = scenario.add_pool(pool, 2)
    scenario.deployment("web", replicas=2, cpu="300m", pool=pool, spread=True)
    scenario.pdb("web", "web", min_available=2)  # nothing may be evicted: the drain cannot finish
    stuck = nodes[0]
    started = (datetime.now(UTC) - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # What a run that started this drain 20 minutes ago left behind.
    cluster.patch(
        f"/api/v1/nodes/{stuck}",
        {"metadata": {"annotations": {DRAIN_STARTED_AT: started}}, "spec": {"unschedulable": True}},
    )
    wait_for(
        "the node lifecycle controller taints the cordoned node",
        lambda: any(
            t["key"] == "node.kubernetes.io/unschedulable" for t in cluster.node(stuck)["spec"].get("taints") or []
        ),
    )
    run = cluster.compactor("run", config=config_for(pool, drainTimeoutSeconds=600))
    assert run.exit_code == 0, run
    assert (run.report["decision"]["action"], run.report["decision"]["node"]) == ("rollback", stuck), run
    node = cluster.node(stuck)
    annotations = node["metadata"]["annotations"]
    assert not node["spec"].get("unschedulable")
    assert DRAIN_STARTED_AT not in annotations and DRAIN_FAILED_AT in annotations
    wait_for(
        "the node lifecycle controller takes the cordon taint off",
        lambda: (
            not any(
                t["key"] == "node.kubernetes.io/unschedulable" for t in cluster.node(stuck)["spec"].get("taints") or []
            )
        ),
    )
    events = cluster.items(f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name={stuck}")
    assert [
        e["type"]
        for e in events
        if e["source"].get("component") == "node-compactor" or e.get("reportingComponent") == "node-compactor"
    ].count("Warning") >= 1, events
    assert len(scenario.pods("web")) == 2
