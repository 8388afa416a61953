"""node-compactor beside a GKE ComputeClass, on a real kube-apiserver: a run reads the cluster's ComputeClasses
(one paged list of cloud.google.com/v1 computeclasses, granted by deploy/rbac.yaml) and leaves a pool whose
limit is at or below its class's consolidationThreshold to the Cluster Autoscaler; without the CRD, the same
list is a 404 and the run goes on, saying nothing about it.

kube-apiserver has no ComputeClass CRD of its own: COMPUTE_CLASS_CRD is a minimal one written from the fields
GKE documents (ComputeClass CRD reference, https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass:
spec.autoscalingPolicy.consolidationThreshold, an integer percent, and consolidationDelayMinutes, 1 to 1440);
every other field of the spec is kept as it comes. The CRD and the class are removed when the test ends (the
control plane is shared by the e2e session).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compactor.core.model import COMPUTE_CLASS_LABEL, UNDERUTILIZED_SINCE
from tests.e2e.cluster import KubeCluster, Scenario, wait_for
from tests.fakeapi import discovery

pytestmark = pytest.mark.e2e

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD_NAME = "computeclasses.cloud.google.com"
CLASSES_PATH = "/apis/cloud.google.com/v1/computeclasses"
CLASS = "e2e-consolidate-75"
POOL = "cc-pool"

COMPUTE_CLASS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": "cloud.google.com",
        "scope": "Cluster",
        "names": {
            "plural": "computeclasses",
            "singular": "computeclass",
            "kind": "ComputeClass",
            "listKind": "ComputeClassList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {
                                    "autoscalingPolicy": {
                                        "type": "object",
                                        "properties": {
                                            "consolidationThreshold": {"type": "integer", "minimum": 0, "maximum": 100},
                                            "consolidationDelayMinutes": {
                                                "type": "integer",
                                                "minimum": 1,
                                                "maximum": 1440,
                                            },
                                        },
                                    }
                                },
                            },
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def config(limit: float) -> dict[str, Any]:
    """The pool enabled; its marks never old enough for a drain: the test is about what a run reads."""
    settings = {
        "enabled": True,
        "scaleDownCPURequestRatioLimit": limit,
        "neededMarkedTimeSeconds": 3600,
        "minimumNodeAgeSeconds": 0,
        "scaleUpCooldownSeconds": 0,
    }
    return {"nodePools": {POOL: settings}}


def pool_of(report: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(pool for pool in report["pools"] if pool["name"] == POOL)
    return found


def class_lists(cluster: KubeCluster, since: int) -> list[int | None]:
    """The status codes of node-compactor's lists of ComputeClasses since the audit mark `since`."""
    return [
        (event.get("responseStatus") or {}).get("code")
        for event in cluster.audit_events(since)
        if (event.get("objectRef") or {}).get("resource") == "computeclasses" and event["verb"] == "list"
    ]


@pytest.fixture
def compute_class_crd(kube_cluster: KubeCluster) -> Iterator[None]:
    """The ComputeClass CRD installed and served, and a class at 75%; both deleted afterwards."""
    cluster = kube_cluster
    cluster.create(CRD_PATH, COMPUTE_CLASS_CRD)
    try:
        wait_for(
            "the ComputeClass CRD is Established",
            lambda: any(
                condition["type"] == "Established" and condition["status"] == "True"
                for condition in (cluster.get(f"{CRD_PATH}/{CRD_NAME}").get("status") or {}).get("conditions") or []
            ),
        )
        # A new CRD's storage answers 429 "storage is (re)initializing" for a moment.
        wait_for("computeclasses are served", lambda: cluster.request("GET", CLASSES_PATH)[0] == 200)
        cluster.create(
            CLASSES_PATH,
            {
                "apiVersion": "cloud.google.com/v1",
                "kind": "ComputeClass",
                "metadata": {"name": CLASS},
                "spec": {
                    "priorities": [{"machineFamily": "e2"}],
                    "nodePoolAutoCreation": {"enabled": False},
                    "autoscalingPolicy": {"consolidationThreshold": 75, "consolidationDelayMinutes": 10},
                },
            },
        )
        yield
    finally:
        cluster.delete(f"{CLASSES_PATH}/{CLASS}")
        cluster.delete(f"{CRD_PATH}/{CRD_NAME}")
        wait_for("the ComputeClass CRD is gone", lambda: cluster.find(f"{CRD_PATH}/{CRD_NAME}") is None, timeout=60)
        wait_for(
            "computeclasses are no longer served", lambda: cluster.request("GET", CLASSES_PATH)[0] == 404, timeout=60
        )


def test_the_fakes_computeclasses_are_served_as_by_the_crd(kube_cluster: KubeCluster, compute_class_crd: None) -> None:
    """tests/fakeapi's discovery entry for computeclasses: the same kind, scope and verbs as kube-apiserver's."""
    real = {entry["name"]: entry for entry in kube_cluster.get("/apis/cloud.google.com/v1")["resources"]}
    fake = discovery.resource_list("cloud.google.com", "v1")
    assert fake is not None
    (entry,) = fake["resources"]
    found = real[entry["name"]]
    assert (entry["kind"], entry["namespaced"]) == (found["kind"], found["namespaced"])
    assert sorted(entry["verbs"]) == sorted(found["verbs"])


def test_without_the_crd_the_list_is_a_404_and_the_run_goes_on_without_a_word(scenario: Scenario) -> None:
    cluster = scenario.cluster
    assert cluster.find(f"{CRD_PATH}/{CRD_NAME}") is None, "another test left the ComputeClass CRD behind"
    scenario.add_pool(POOL, 2, labels={COMPUTE_CLASS_LABEL: CLASS})
    since = cluster.audit_mark()
    run = cluster.compactor("run", config=config(0.75))
    assert run.exit_code == 0, run
    report = run.report
    assert "consolidationThreshold" not in pool_of(report)
    assert not any("cannot read the cluster's ComputeClasses" in warning for warning in report["warnings"]), run
    assert class_lists(cluster, since) == [404]
    assert sorted(report["marks"]["add"]) == sorted(scenario.nodes), "the empty nodes are node-compactor's to mark"


def test_a_pool_at_its_class_threshold_is_left_to_the_autoscaler_and_its_marks_removed(
    scenario: Scenario, compute_class_crd: None
) -> None:
    cluster = scenario.cluster
    nodes = scenario.add_pool(POOL, 2, labels={COMPUTE_CLASS_LABEL: CLASS})
    # Marked before the class was read, as after an upgrade to this version: the marks must go.
    for name in nodes:
        cluster.patch(
            f"/api/v1/nodes/{name}", {"metadata": {"annotations": {UNDERUTILIZED_SINCE: "2026-01-01T00:00:00Z"}}}
        )
    since = cluster.audit_mark()
    run = cluster.compactor("run", config=config(0.75))
    assert run.exit_code == 0, run
    report = run.report
    pool = pool_of(report)
    assert (pool["consolidationThreshold"], pool["thresholdSource"], pool["computeClass"]) == (0.75, "cluster", CLASS)
    assert pool["leftToAutoscaler"] in report["warnings"]
    assert report["decision"]["action"] == "none" and report["heldBy"]["kind"] == "compute-class"
    assert sorted(report["marks"]["remove"]) == sorted(nodes)
    assert all(UNDERUTILIZED_SINCE not in (cluster.node(name)["metadata"].get("annotations") or {}) for name in nodes)
    assert class_lists(cluster, since) == [200], "one list, allowed by deploy/rbac.yaml"

    above = cluster.compactor("run", config=config(0.9))
    assert above.exit_code == 0, above
    assert "leftToAutoscaler" not in pool_of(above.report) and pool_of(above.report)["consolidationThreshold"] == 0.75
    assert sorted(above.report["marks"]["add"]) == sorted(nodes), (
        "with the limit above 75% the pool is node-compactor's"
    )
