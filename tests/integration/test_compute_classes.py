"""A run reads the cluster's GKE ComputeClasses (one paged LIST of cloud.google.com/v1 computeclasses) and
leaves a pool whose limit is at or below its class's consolidationThreshold to the Cluster Autoscaler; a
cluster without the CRD (404) has no classes, and a refused list (403) is a warning, never the run's end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactor import cli
from compactor.core.model import COMPUTE_CLASS_LABEL, UNDERUTILIZED_SINCE
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.integration.conftest import MARKED, POOL_CONFIG, cordoned, node_annotations, run_once

CLASS = "consolidate-75"
CLASSES_PATH = "/apis/cloud.google.com/v1/computeclasses"


def compute_class(name: str = CLASS, threshold: object = 75) -> dict[str, Any]:
    """As GKE's CRD stores one (docs/savings.md: the fields node-compactor reads)."""
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": name},
        "spec": {
            "priorities": [{"machineFamily": "e2"}],
            "autoscalingPolicy": {"consolidationThreshold": threshold, "consolidationDelayMinutes": 10},
        },
    }


def classed_cluster(api: FakeApiServer, threshold: object = 75) -> None:
    """`light_cluster`'s nodes, all of the ComputeClass CLASS: n1 light and marked, n2 and n3 75% busy."""
    labels = {COMPUTE_CLASS_LABEL: CLASS}
    api.add(k8s.node("n1", labels=labels, annotations={UNDERUTILIZED_SINCE: MARKED}))
    api.add(k8s.node("n2", labels=labels))
    api.add(k8s.node("n3", labels=labels))
    api.add(k8s.pod("web-a1", node="n1", cpu="300m"))
    api.add(k8s.pod("web-a2", node="n1", cpu="300m"))
    api.add(k8s.pod("busy-b2", node="n2", cpu="3"))
    api.add(k8s.pod("busy-b3", node="n3", cpu="3"))
    api.add(compute_class(threshold=threshold))


def env(limit: float = 0.75) -> dict[str, str]:
    config = {"nodePools": {"default-pool": {**POOL_CONFIG, "scaleDownCPURequestRatioLimit": limit}}}
    return {"COMPACTOR_CONFIG": json.dumps(config), "COMPACTOR_RUN_BUDGET_SECONDS": "60"}


def pool_of(report: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(pool for pool in report["pools"] if pool["name"] == "default-pool")
    return found


def class_lists(api: FakeApiServer) -> list[str]:
    return [request.path for request in api.requests if request.path.startswith(CLASSES_PATH)]


def test_a_pool_at_its_class_threshold_is_left_to_the_autoscaler_and_loses_its_mark(api: FakeApiServer) -> None:
    classed_cluster(api)
    result = run_once(api, env=env(0.75))
    report = result.report
    assert report["decision"]["action"] == "none"
    assert report["heldBy"]["kind"] == "compute-class"
    pool = pool_of(report)
    assert (pool["consolidationThreshold"], pool["thresholdSource"], pool["computeClass"]) == (0.75, "cluster", CLASS)
    assert pool["leftToAutoscaler"] in report["warnings"]
    assert UNDERUTILIZED_SINCE not in node_annotations(api, "n1"), "its stale mark is removed"
    assert not cordoned(api, "n1") and api.evictions == []
    assert len(class_lists(api)) == 1, "one paged list of ComputeClasses per read"


def test_with_the_limit_above_the_class_threshold_the_run_drains(api: FakeApiServer) -> None:
    classed_cluster(api)
    report = run_once(api, env=env(0.9)).report
    assert report["decision"]["action"] == "drain" and report["decision"]["node"] == "n1"
    assert pool_of(report)["consolidationThreshold"] == 0.75
    assert cordoned(api, "n1")


def test_a_cluster_without_the_crd_has_no_classes_and_says_nothing(api: FakeApiServer) -> None:
    classed_cluster(api)
    api.serve_compute_classes("absent")
    report = run_once(api, env=env(0.75)).report
    assert report["decision"]["action"] == "drain"
    assert "consolidationThreshold" not in pool_of(report)
    assert not any("ComputeClass" in warning and "403" in warning for warning in report["warnings"])


def test_a_refused_list_is_a_warning_naming_the_permission_and_the_run_goes_on(api: FakeApiServer) -> None:
    classed_cluster(api)
    api.serve_compute_classes("forbidden")
    report = run_once(api, env=env(0.75)).report
    assert report["decision"]["action"] == "drain", "the configuration declares no threshold: node-compactor acts"
    refused = [warning for warning in report["warnings"] if "cannot read the cluster's ComputeClasses" in warning]
    assert refused and "HTTP 403" in refused[0]
    assert "container.thirdPartyObjects.list" in refused[0] and "computeclasses.cloud.google.com" in refused[0]


@pytest.mark.parametrize("threshold", [pytest.param("75", id="text"), pytest.param(150, id="out-of-range")])
def test_a_class_whose_threshold_does_not_read_is_a_warning_and_ignored(api: FakeApiServer, threshold: object) -> None:
    classed_cluster(api, threshold)
    report = run_once(api, env=env(0.75)).report
    assert report["decision"]["action"] == "drain"
    assert any(f"ComputeClass {CLASS}: spec.autoscalingPolicy" in warning for warning in report["warnings"])


def test_plan_reads_the_classes_of_a_kubectl_snapshot(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl get nodes,pods,poddisruptionbudgets,computeclasses -A -o json`, planned from the command line."""
    classed_cluster(api)
    items = [*api.objects("Node"), *api.objects("Pod"), *api.objects("ComputeClass")]
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    config = tmp_path / "config.json"
    config.write_text(env(0.75)["COMPACTOR_CONFIG"])
    arguments = ["plan", "--snapshot", str(snapshot), "--config", str(config), "--now", "2026-11-21T12:00:00Z"]

    assert cli.main([*arguments, "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["decision"]["action"] == "none" and pool_of(report)["computeClass"] == CLASS
    assert "warning: pool default-pool is left to the Cluster Autoscaler" in captured.err

    assert cli.main(arguments) == 0
    table = capsys.readouterr().out
    assert "left to the autoscaler" in table and "left to the Cluster Autoscaler" in table
