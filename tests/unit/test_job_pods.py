"""A pool's `jobPods` (DESIGN rule 5): a running pod owned by a Job holds its node ("wait", the default), or is
evicted like any other pod ("evict")."""

from __future__ import annotations

import pytest

from compactor import report
from compactor.core.model import Pod
from tests.builders import (
    LONG_AGO,
    NOW,
    ago,
    base_nodes,
    base_pods,
    blockers_of,
    make_config,
    make_pod,
    node_report,
    run_plan,
)


def job_pod(phase: str = "Running", *, terminating: bool = False) -> Pod:
    return make_pod("etl-7x2k", node="n1", owner="Job", phase=phase, created=ago(1800), terminating=terminating)


def test_a_running_job_pod_holds_its_node_and_the_report_names_the_job_and_since_when() -> None:
    plan = run_plan(base_nodes(), [*base_pods(), job_pod()])
    assert plan.decision.action == "none"
    text = blockers_of(plan, "n1")
    assert "pod default/etl-7x2k: Job etl-7x2k-owner is running since" in text
    assert "(30m)" in text
    assert 'jobPods "wait"' in text
    # The node keeps its mark and its soft taint, so new Job pods go elsewhere.
    assert node_report(plan, "n1").marked_since == LONG_AGO
    assert "n1" not in plan.soft_taints_remove
    assert plan.held_by == "job"


def test_with_job_pods_evict_the_job_pod_is_evicted_like_any_other() -> None:
    config = make_config(pools={"default-pool": {"jobPods": "evict"}})
    plan = run_plan(base_nodes(), [*base_pods(), job_pod()], config=config)
    assert plan.decision.action == "drain"
    assert "default/etl-7x2k" in plan.decision.evictions


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(job_pod(phase="Succeeded"), id="finished"),
        pytest.param(job_pod(terminating=True), id="already-leaving"),
        pytest.param(make_pod("web-1", node="n1", owner="ReplicaSet"), id="not-a-job"),
    ],
)
def test_only_a_running_job_pod_waits(pod: Pod) -> None:
    plan = run_plan(base_nodes(), [*base_pods(), pod])
    assert "jobPods" not in blockers_of(plan, "n1")


def test_a_job_pod_of_unknown_age_still_holds_the_node() -> None:
    plan = run_plan(base_nodes(), [*base_pods(), make_pod("etl-1", node="n1", owner="Job")])
    assert "pod default/etl-1: Job etl-1-owner is running; the node is drained once it is done" in blockers_of(
        plan, "n1"
    )


def test_the_report_says_why_in_every_node_s_blockers() -> None:
    plan = run_plan(base_nodes(), [*base_pods(), job_pod()], now=NOW)
    document = report.to_dict(plan)
    [row] = [node for node in document["nodes"] if node["name"] == "n1"]
    assert any("Job etl-7x2k-owner is running" in blocker for blocker in row["blockers"])
