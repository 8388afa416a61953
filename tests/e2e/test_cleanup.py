"""`python -m compactor cleanup` on a real control plane: every trace real runs left goes, what people set stays."""

from __future__ import annotations

import time

import pytest

from compactor.hpa.model import BASE_MIN_REPLICAS, MIN_REPLICAS_REASON
from tests.e2e.cluster import Scenario, name_of
from tests.e2e.controlplane import ADMIN_USER
from tests.e2e.test_drain import MARKED_SECONDS, config_for, writes_of
from tests.e2e.test_hpa_floor import hpa
from tests.fakeprometheus import running

pytestmark = pytest.mark.e2e

OURS = "node-compactor.dev/"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
WEB_RATE = 'sum(rate(http_requests_total{app="web"}[5m]))'


def test_cleanup_removes_what_real_runs_left_and_keeps_what_people_set(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "cleanup-pool"
    nodes = scenario.add_pool(pool, 4)
    scenario.deployment("web", replicas=6, cpu="300m", pool=pool, spread=True)
    scenario.deployment("shop", replicas=2, cpu="100m", pool=pool)
    [theirs, *_] = scenario.pods("shop")
    pods_path = f"/api/v1/namespaces/{scenario.namespace}/pods"
    cluster.patch(f"{pods_path}/{name_of(theirs)}", {"metadata": {"annotations": {DELETION_COST: "5"}}})
    hpas = f"/apis/autoscaling/v2/namespaces/{scenario.namespace}/horizontalpodautoscalers"
    cluster.create(hpas, hpa("web", WEB_RATE, min_replicas=2, max_replicas=20))

    # Real runs leave marks, soft taints, deletion costs, a drained node and the HPA floor's changes.
    config = config_for(pool)
    assert cluster.compactor("run", config=config).exit_code == 0
    time.sleep(MARKED_SECONDS + 1)
    drain = cluster.compactor("run", config=config)
    assert drain.exit_code == 0 and drain.report["decision"]["action"] == "drain", drain
    drained = drain.report["decision"]["node"]
    with running() as prometheus:
        prometheus.answer(WEB_RATE, 25.0)
        assert cluster.compactor("hpa", env={"PROMETHEUS_SERVER_URL": prometheus.url}).exit_code == 0
    assert cluster.get(f"{hpas}/web")["spec"]["minReplicas"] == 3
    # What people set: a cordon, an opt-out, a deletion cost (above).
    cordoned, opted_out, *_ = [n for n in nodes if n != drained]
    cluster.patch(f"/api/v1/nodes/{cordoned}", {"spec": {"unschedulable": True}})
    cluster.patch(f"/api/v1/nodes/{opted_out}", {"metadata": {"annotations": {f"{OURS}disabled": "true"}}})
    traces = [n for n in nodes if any(k.startswith(OURS) for k in cluster.node(n)["metadata"].get("annotations") or {})]
    assert len(traces) == 4, "the runs marked every node"

    mark = cluster.audit_mark()
    looked = cluster.compactor("cleanup", "--dry-run", kubeconfig=cluster.kubeconfig)
    assert looked.exit_code == 0, looked
    assert writes_of(cluster.audit_events(mark, user=ADMIN_USER)) == [], "cleanup --dry-run wrote"
    assert looked.report["removed"], looked

    cleaned = cluster.compactor("cleanup", kubeconfig=cluster.kubeconfig)
    assert cleaned.exit_code == 0, cleaned
    assert cleaned.report["failed"] == [], cleaned
    for name in nodes:
        node = cluster.node(name)
        annotations = node["metadata"].get("annotations") or {}
        assert [k for k in annotations if k.startswith(OURS)] == ([f"{OURS}disabled"] if name == opted_out else [])
        assert [t["key"] for t in node["spec"].get("taints") or [] if t["key"].startswith(OURS)] == []
        assert bool(node["spec"].get("unschedulable")) == (name == cordoned), name
    for pod in cluster.items(pods_path):
        annotations = pod["metadata"].get("annotations") or {}
        assert f"{OURS}deletion-cost" not in annotations, name_of(pod)
        assert annotations.get(DELETION_COST) == ("5" if name_of(pod) == name_of(theirs) else None), name_of(pod)
    web = cluster.get(f"{hpas}/web")
    assert web["spec"]["minReplicas"] == 2
    assert BASE_MIN_REPLICAS not in web["metadata"]["annotations"]
    assert MIN_REPLICAS_REASON not in web["metadata"]["annotations"]
    for lease in ("node-compactor", "node-compactor-hpa"):
        assert cluster.find(f"{LEASES}/{lease}") is None, lease
