"""A running Job pod holds its node's drain until the Job completes (a pool's jobPods "wait", the default), on
a real control plane: the Job controller, the disruption controller and kube-scheduler as in any cluster.

kwok completes a Job's pod as soon as it runs (tests/e2e/kwok-stages.yaml, stage pod-complete) unless the pod
carries the annotation e2e.node-compactor.dev/running; the test removes it to let the Job finish.
"""

from __future__ import annotations

import time

import pytest

from tests.e2e.cluster import HOSTNAME_LABEL, PAUSE_IMAGE, Scenario, is_ready, name_of, node_of, wait_for
from tests.e2e.test_drain import MARKED_SECONDS, config_for, movable_pods_on

pytestmark = pytest.mark.e2e

RUNNING = "e2e.node-compactor.dev/running"


def test_a_running_job_pod_holds_the_drain_until_the_job_completes(scenario: Scenario) -> None:
    cluster = scenario.cluster
    pool = "job-pool"
    light, busy = scenario.add_pool(pool, 2)
    scenario.deployment("busy", replicas=1, cpu="3500m", pool=pool, prefer_node=busy)  # not underutilized
    scenario.deployment("web", replicas=1, cpu="300m", pool=pool, prefer_node=light)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": "etl"}, "annotations": {RUNNING: "true"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {HOSTNAME_LABEL: light},
                    "containers": [{"name": "etl", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "200m"}}}],
                },
            },
        },
    }
    cluster.create(f"/apis/batch/v1/namespaces/{scenario.namespace}/jobs", job)
    [etl] = wait_for("the Job's pod runs", lambda: [pod for pod in scenario.pods("etl") if is_ready(pod)])
    assert node_of(etl) == light
    config = config_for(pool)
    assert cluster.compactor("run", config=config).exit_code == 0  # marks
    time.sleep(MARKED_SECONDS + 1)

    held = cluster.compactor("run", config=config)
    assert held.exit_code == 0, held
    assert held.report["decision"]["action"] == "none", held
    [row] = [node for node in held.report["nodes"] if node["name"] == light]
    assert any("Job etl is running since" in blocker for blocker in row["blockers"]), row
    assert row["markedSince"] is not None, "the node keeps its mark while it waits"
    assert not cluster.node(light)["spec"].get("unschedulable")
    assert [name_of(pod) for pod in scenario.pods("etl")] == [name_of(etl)], "the Job's pod was not evicted"

    # The Job's work is done: kwok completes the pod, the Job controller the Job.
    cluster.patch(
        f"/api/v1/namespaces/{scenario.namespace}/pods/{name_of(etl)}",
        {"metadata": {"annotations": {RUNNING: None}}},
    )
    wait_for(
        "the Job completes",
        lambda: (cluster.get(f"/apis/batch/v1/namespaces/{scenario.namespace}/jobs/etl").get("status") or {}).get(
            "succeeded"
        ),
    )
    drained = cluster.compactor("run", config=config)
    assert drained.exit_code == 0, drained
    assert (drained.report["decision"]["action"], drained.report["decision"]["node"]) == ("drain", light), drained
    wait_for("the drained node has no pod to move", lambda: not movable_pods_on(cluster, light))
