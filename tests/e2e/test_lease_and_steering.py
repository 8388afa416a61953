"""The run's Lease and scale-down steering on a real control plane.

Two runs at once against kube-apiserver's own Lease validation (MicroTime, optimistic
concurrency), and the pod-deletion-cost node-compactor writes being honoured by the real
ReplicaSet controller when a Deployment scales in.
"""

from __future__ import annotations

import re
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e.cluster import REPOSITORY, KubeCluster, Scenario, compactor_env, name_of, node_of, wait_for
from tests.e2e.controlplane import COMPACTOR_USER
from tests.e2e.proxy import Seen, api_proxy
from tests.e2e.test_drain import config_for, writes_of

pytestmark = pytest.mark.e2e

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-compactor"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
COST_RECORD = "node-compactor.dev/deletion-cost"


def micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_writes(cluster: KubeCluster, since: int) -> list[dict[str, Any]]:
    return [
        e
        for e in writes_of(cluster.audit_events(since))
        if (e.get("objectRef") or {}).get("resource") == "leases" and e["objectRef"].get("name") == "node-compactor"
    ]


def test_a_held_lease_stops_a_run_and_two_runs_at_once_never_hold_it_together(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "lease-pool"
    nodes = scenario.add_pool(pool, 2)
    scenario.deployment("web", replicas=2, cpu="300m", pool=pool, spread=True)
    config = config_for(pool, neededMarkedTimeSeconds=3600)
    assert cluster.compactor("run", config=config).exit_code == 0  # the Lease exists from here on

    # Another run holds the Lease (renewed just now): this run does nothing and says so.
    lease = cluster.get(LEASE_PATH)
    now = datetime.now(UTC)
    lease["spec"].update(
        holderIdentity="another-run", leaseDurationSeconds=270, acquireTime=micro_time(now), renewTime=micro_time(now)
    )
    cluster.request("PUT", LEASE_PATH, lease)
    cluster.patch(
        f"/api/v1/nodes/{nodes[0]}", {"metadata": {"annotations": {"node-compactor.dev/underutilized-since": None}}}
    )
    mark = cluster.audit_mark()
    held = cluster.compactor("run", config=config)
    assert held.exit_code == 1, held
    assert "another-run" in held.stderr, held
    assert writes_of(cluster.audit_events(mark)) == [], "a run that did not get the Lease wrote"
    assert "node-compactor.dev/underutilized-since" not in cluster.node(nodes[0])["metadata"]["annotations"]

    # Once that holder stopped renewing (its Lease expired), the next run takes it over.
    lease = cluster.get(LEASE_PATH)
    stale = datetime.now(UTC) - timedelta(minutes=10)
    lease["spec"].update(acquireTime=micro_time(stale), renewTime=micro_time(stale))
    cluster.request("PUT", LEASE_PATH, lease)
    taken = cluster.compactor("run", config=config)
    assert taken.exit_code == 0, taken
    assert "node-compactor.dev/underutilized-since" in cluster.node(nodes[0])["metadata"]["annotations"]
    spec = cluster.get(LEASE_PATH)["spec"]
    assert spec.get("holderIdentity") is None, "the run gave the Lease back"
    assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"]), spec

    # Two runs at once: the first is kept inside its Lease (the proxy holds its list of pods back)
    # while the second starts; the second finds the Lease held and does nothing.
    mark = cluster.audit_mark()
    go_on = threading.Event()

    def hold_the_pod_list(request: Seen) -> None:
        if request.method == "GET" and request.path == "/api/v1/pods":
            go_on.wait(timeout=60)

    with api_proxy(cluster.plane, hold_the_pod_list) as proxy:
        slow = proxy.kubeconfig(
            cluster.workdir / "slow.kubeconfig", token=cluster.plane.compactor_token, user=COMPACTOR_USER
        )
        argv = cluster.compactor_argv("run", config=config, kubeconfig=slow)
        first = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPOSITORY, env=compactor_env()
        )
        try:
            first_holder = wait_for(
                "the first run holds the Lease", lambda: cluster.get(LEASE_PATH)["spec"].get("holderIdentity")
            )
            second = cluster.compactor("run", config=config)
        finally:
            go_on.set()
            _, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err
    assert second.exit_code == 1, second
    assert f"another run ({first_holder}) holds Lease kube-system/node-compactor" in second.stderr, second
    holder: str | None = None
    history = []
    for event in lease_writes(cluster, mark):
        code = event["responseStatus"]["code"]
        wanted = ((event.get("requestObject") or {}).get("spec") or {}).get("holderIdentity")
        history.append(f"{event['verb']} holder={wanted} -> {code}")
        if code >= 300:
            continue  # refused: kube-apiserver's optimistic concurrency caught a race
        assert holder is None or wanted is None or wanted == holder, f"two holders at once: {history}"
        holder = wanted
    assert holder is None, f"the Lease was not given back: {history}"
    assert [h.split(" -> ")[0] for h in history] == [f"update holder={first_holder}", "update holder=None"], history


def test_the_replicaset_controller_removes_the_pods_node_compactor_steered_first(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "steer-pool"
    first = scenario.add_pool(pool, 2)
    scenario.deployment("shop", replicas=4, cpu="200m", pool=pool, spread=True)
    [light] = [scenario.add_node(f"{pool}-c-1", pool=pool)["metadata"]["name"]]
    pods = scenario.scale("shop", 5)
    layout = sorted(node_of(pod) or "" for pod in pods)
    # Two replicas on each of the first nodes, one on the newest: left alone, a scale-in takes a
    # replica that shares its node (the ReplicaSet controller's ranking), never the one on `light`.
    assert layout == sorted([*first, *first, light]), layout

    mark = cluster.audit_mark()
    run = cluster.compactor("run", config=config_for(pool, neededMarkedTimeSeconds=3600))
    assert run.exit_code == 0, run
    steered = {
        name_of(p) for p in scenario.pods("shop") if (p["metadata"].get("annotations") or {}).get(DELETION_COST) == "-1"
    }
    assert steered == {name_of(p) for p in pods if node_of(p) == light}, steered
    for pod in scenario.pods("shop"):
        if name_of(pod) in steered:
            assert pod["metadata"]["annotations"][COST_RECORD] == "-1"
    patches = [
        e
        for e in cluster.audit_events(mark)
        if e["verb"] == "patch" and (e.get("objectRef") or {}).get("resource") == "pods"
    ]
    assert {e["objectRef"]["name"] for e in patches if e["responseStatus"]["code"] == 200} == steered
    for patch in patches:
        # Each write carries the resourceVersion it read: a pod changed since is a conflict, not overwritten.
        metadata = patch["requestObject"]["metadata"]
        assert metadata.get("resourceVersion"), patch["requestObject"]
        assert metadata["annotations"] == {DELETION_COST: "-1", COST_RECORD: "-1"}, patch["requestObject"]

    left = scenario.scale("shop", 4)
    assert {name_of(p) for p in left}.isdisjoint(steered), "the steered pod outlived the scale-in"
    assert sorted(node_of(pod) or "" for pod in left) == sorted([*first, *first])
