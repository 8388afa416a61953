"""The HPA floor against a real kube-apiserver and HPA controller, Prometheus answered by tests/fakeprometheus.

kube-apiserver validates each write (minReplicas within 1..maxReplicas), and the real HPA
controller scales the Deployment up to the raised minReplicas, which the scheduler and kwok run.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.hpa.model import BASE_MIN_REPLICAS, ENABLED, MIN_REPLICAS_REASON, PROMETHEUS_QUERY, REQUESTS_PER_REPLICA
from tests.e2e.cluster import Scenario, wait_for
from tests.e2e.test_drain import writes_of
from tests.fakeprometheus import running

pytestmark = pytest.mark.e2e

WEB_RATE = 'sum(rate(http_requests_total{app="web"}[5m]))'
API_RATE = 'sum(rate(http_requests_total{app="api"}[5m]))'


def hpa(name: str, query: str, *, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    """An autoscaling/v2 HPA on cpu for Deployment `name`, with estafette's annotations for the floor."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": name,
            "annotations": {ENABLED: "true", PROMETHEUS_QUERY: query, REQUESTS_PER_REPLICA: "10"},
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
                }
            ],
        },
    }


def test_the_hpa_floor_raises_min_replicas_and_the_hpa_controller_scales_up_to_it(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "hpa-pool"
    scenario.add_pool(pool, 2)
    scenario.deployment("web", replicas=2, cpu="100m", pool=pool)
    scenario.deployment("api", replicas=2, cpu="100m", pool=pool)
    path = f"/apis/autoscaling/v2/namespaces/{scenario.namespace}/horizontalpodautoscalers"
    cluster.create(path, hpa("web", WEB_RATE, min_replicas=2, max_replicas=20))
    cluster.create(path, hpa("api", API_RATE, min_replicas=2, max_replicas=6))

    mark = cluster.audit_mark()
    with running() as prometheus:
        prometheus.answer(WEB_RATE, 65.0)  # ceil(65 / 10) = 7 replicas
        prometheus.answer(API_RATE, 500.0)  # 50, above maxReplicas: capped at 6
        run = cluster.compactor("hpa", env={"PROMETHEUS_SERVER_URL": prometheus.url})
    assert run.exit_code == 0, run
    web = cluster.get(f"{path}/web")
    assert web["spec"]["minReplicas"] == 7
    assert web["metadata"]["annotations"][BASE_MIN_REPLICAS] == "2"
    assert web["metadata"]["annotations"][MIN_REPLICAS_REASON].startswith("7: query floor 7")
    api = cluster.get(f"{path}/api")
    assert (api["spec"]["minReplicas"], api["spec"]["maxReplicas"]) == (6, 6)
    patches = [
        e for e in writes_of(cluster.audit_events(mark)) if e["objectRef"]["resource"] == "horizontalpodautoscalers"
    ]
    assert sorted((e["objectRef"]["name"], e["verb"], e["responseStatus"]["code"]) for e in patches) == [
        ("api", "patch", 200),
        ("web", "patch", 200),
    ]
    for patch in patches:
        assert patch["requestObject"]["metadata"].get("resourceVersion"), "a changed HPA must be a conflict"
    events = cluster.items(f"/api/v1/namespaces/{scenario.namespace}/events")
    raised = {e["involvedObject"]["name"] for e in events if e.get("reason") == "MinReplicasRaised"}
    assert raised == {"web", "api"}, [(e.get("reason"), e["involvedObject"]["name"]) for e in events]

    # The HPA controller scales each Deployment up to its new minimum, without any metrics at all.
    cluster.wait_deployment(scenario.namespace, "web", 7, timeout=90)
    cluster.wait_deployment(scenario.namespace, "api", 6, timeout=90)
    wait_for(
        "the HPA controller reports 7 replicas",
        lambda: (cluster.get(f"{path}/web").get("status") or {}).get("currentReplicas") == 7,
    )
