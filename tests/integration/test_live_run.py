"""Full runs against the fake API server: the state machine of DESIGN.md "Executing a run"."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from compactor import service
from compactor.actuation.executor import Budget, Executor
from compactor.core import planner, proof
from compactor.core.model import DRAIN_FAILED_AT, DRAIN_STARTED_AT, SOFT_TAINT, UNDERUTILIZED_SINCE
from compactor.errors import ClusterAccessError, LeaseHeldError, RunFailedError
from compactor.kube.client import Cluster
from compactor.settings import config as config_module
from tests.builders import counting_proofs
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.integration.conftest import (
    CONFIG,
    NOW,
    POOL_CONFIG,
    FakeTime,
    connector_for,
    cordoned,
    env_with,
    event_reasons,
    later,
    light_cluster,
    node_annotations,
    run_once,
)


def test_a_run_cordons_the_node_and_evicts_its_pods_through_the_eviction_api(api: FakeApiServer) -> None:
    light_cluster(api)
    result = run_once(api)
    assert result.report["decision"]["action"] == "drain"
    assert result.report["decision"]["node"] == "n1"
    assert cordoned(api, "n1")
    assert node_annotations(api, "n1")[DRAIN_STARTED_AT] == "2026-11-21T12:00:00Z"
    assert sorted((e.namespace, e.name) for e in api.evictions) == [("default", "web-a1"), ("default", "web-a2")]
    assert api.get("Pod", "fluentbit-n1", "kube-system") is not None, "DaemonSet pods stay"
    assert "NodeCompactorDrainStarted" in event_reasons(api, "n1")
    assert result.outcome.drain_completed
    assert "NodeCompactorDrainCompleted" in event_reasons(api, "n1")


def test_the_cordon_and_the_drain_annotation_are_one_guarded_patch(api: FakeApiServer) -> None:
    light_cluster(api)
    run_once(api)
    patches = [
        w
        for w in api.writes_of("Node", "PATCH")
        if w.name == "n1" and w.body and "unschedulable" in (w.body.get("spec") or {})
    ]
    assert len(patches) == 1
    body = patches[0].body
    assert body is not None
    assert body["spec"] == {"unschedulable": True}
    assert DRAIN_STARTED_AT in body["metadata"]["annotations"]
    assert body["metadata"]["resourceVersion"], "guarded by the node's resourceVersion"
    assert patches[0].content_type == "application/merge-patch+json"


def test_marks_are_written_and_removed(api: FakeApiServer) -> None:
    api.add(k8s.node("n1"))
    api.add(k8s.node("n2", annotations={UNDERUTILIZED_SINCE: "2026-11-21T11:00:00Z"}))
    api.add(k8s.pod("busy", node="n2", cpu="3900m"))
    result = run_once(api)
    assert node_annotations(api, "n1")[UNDERUTILIZED_SINCE] == "2026-11-21T12:00:00Z"
    assert UNDERUTILIZED_SINCE not in node_annotations(api, "n2")
    assert result.outcome.marks_added == ["n1"] and result.outcome.marks_removed == ["n2"]
    assert "Underutilized" in event_reasons(api, "n1")


def test_the_next_run_waits_for_the_autoscaler_and_then_gives_the_node_back(api: FakeApiServer) -> None:
    light_cluster(api)
    run_once(api)
    waiting = run_once(api, at=later(300))
    assert waiting.report["decision"]["action"] == "none"
    assert waiting.report["awaitingRemoval"] == ["n1"]
    n1 = next(node for node in waiting.report["nodes"] if node["name"] == "n1")
    assert n1["blockers"] == ["emptied; waiting for the Cluster Autoscaler to remove it"]
    assert cordoned(api, "n1")
    given_back = run_once(api, at=later(1801))
    assert given_back.report["decision"]["action"] == "rollback"
    assert not cordoned(api, "n1")
    assert DRAIN_STARTED_AT not in node_annotations(api, "n1")
    assert node_annotations(api, "n1")[DRAIN_FAILED_AT] == "2026-11-21T12:30:01Z"
    assert "NodeCompactorRollback" in event_reasons(api, "n1")


def test_a_pdb_that_never_allows_eviction_ends_in_a_rollback(api: FakeApiServer) -> None:
    light_cluster(api)
    # One disruption allowed for two pods: the first eviction spends it, the second is refused (429) for good.
    api.add(k8s.pdb("web", match_labels={"app": "web"}, disruptions_allowed=1))
    first = run_once(api)
    assert first.report["decision"]["action"] == "drain"
    assert len(first.outcome.evicted) == 1
    assert next(iter(first.outcome.waiting.values())).startswith("HTTP 429")
    assert not first.outcome.drain_completed
    assert run_once(api, at=later(600)).report["decision"]["action"] == "continue-drain"
    last = run_once(api, at=later(901))
    assert last.report["decision"]["action"] == "rollback"
    assert not cordoned(api, "n1")
    assert DRAIN_FAILED_AT in node_annotations(api, "n1") and DRAIN_STARTED_AT not in node_annotations(api, "n1")
    warnings = [e for e in api.objects("Event") if e["reason"] == "NodeCompactorRollback"]
    assert warnings and warnings[0]["type"] == "Warning"
    # And the node is left alone for retryBackoffSeconds.
    assert run_once(api, at=later(1000)).report["decision"]["action"] == "none"


def test_a_second_run_while_the_lease_is_held_does_nothing(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add(
        k8s.lease(
            "node-compactor",
            namespace="kube-system",
            holder="another-run",
            renew_time="2026-11-21T11:59:30.000000Z",
            duration_seconds=270,
        )
    )
    api.reset_counters()
    with pytest.raises(LeaseHeldError, match="another-run"):
        run_once(api)
    assert api.writes == []


def test_an_expired_lease_is_taken_over(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add(
        k8s.lease(
            "node-compactor",
            namespace="kube-system",
            holder="crashed-run",
            renew_time="2026-11-21T11:00:00.000000Z",
            duration_seconds=270,
        )
    )
    assert run_once(api).report["decision"]["action"] == "drain"


def test_two_runs_at_once_exactly_one_acts(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault(method="GET", path_regex=r"/api/v1/nodes$", delay=0.5, times=-1))
    results: list[Any] = []

    def attempt() -> None:
        try:
            results.append(run_once(api))
        except LeaseHeldError as error:
            results.append(error)

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sum(isinstance(r, LeaseHeldError) for r in results) == 1
    assert sum(isinstance(r, service.RunResult) for r in results) == 1
    cordons = [w for w in api.writes_of("Node", "PATCH") if "unschedulable" in ((w.body or {}).get("spec") or {})]
    assert len(cordons) == 1


def test_the_lease_is_released_so_the_next_run_need_not_wait(api: FakeApiServer) -> None:
    light_cluster(api)
    run_once(api)
    lease = api.get("Lease", "node-compactor", "kube-system")
    assert lease is not None and not lease["spec"].get("holderIdentity")
    run_once(api, at=later(60))  # would raise LeaseHeldError if the first run had kept it


def test_a_dry_run_writes_nothing_at_all(api: FakeApiServer) -> None:
    light_cluster(api)
    api.reset_counters()
    result = run_once(api, dry_run=True)
    assert result.report["decision"]["action"] == "drain"
    assert result.report["dryRun"] is True
    assert api.writes == []
    assert api.evictions == []


def test_a_dry_run_from_the_configuration_writes_nothing(api: FakeApiServer) -> None:
    light_cluster(api)
    api.reset_counters()
    run_once(api, env=env_with({**CONFIG, "dryRun": True}))
    assert api.writes == []


def test_a_node_cordoned_by_a_person_is_never_uncordoned(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add(k8s.node("n1", unschedulable=True, annotations={UNDERUTILIZED_SINCE: "2026-11-21T11:00:00Z"}))
    for at in (NOW, later(1000), later(5000)):
        run_once(api, at=at)
        assert cordoned(api, "n1")
    assert not [w for w in api.writes_of("Node", "PATCH") if w.name == "n1" and w.body and "spec" in w.body]


def test_a_rollback_never_uncordons_a_node_that_lost_our_annotation(api: FakeApiServer) -> None:
    api.add(k8s.node("n1", unschedulable=True))  # a person took the drain over and removed our annotation
    executor = Executor(
        Cluster(connector_for(api)().api_client),
        config_module.validate(CONFIG, source="t"),
        clock=lambda: NOW,
        budget=Budget(deadline=10**9),
        dry_run=False,
    )
    executor._rollback("n1", "drain timed out")
    assert cordoned(api, "n1")
    assert api.writes_of("Node", "PATCH") == []


def test_a_drain_whose_node_changed_before_the_cordon_is_a_no_op(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault(method="PATCH", path_regex=r"/api/v1/nodes/n1$", status=409, times=-1))
    result = run_once(api)
    assert result.outcome.stale is not None and "changed" in result.outcome.stale
    assert not cordoned(api, "n1")
    assert api.evictions == []


def test_a_drain_that_no_longer_holds_after_re_reading_is_a_no_op(api: FakeApiServer) -> None:
    light_cluster(api)
    # Between the list and the re-read, a bare pod lands on n1.

    class Sneaky(Cluster):
        def node(self, name: str) -> dict[str, Any] | None:
            api.add(k8s.pod("debug", node="n1", owner_kind=None))
            return super().node(name)

    connection = connector_for(api)()
    cluster = Sneaky(connection.api_client)
    snapshot = cluster.read_snapshot()
    config = config_module.validate(CONFIG, source="t")
    plan = planner.plan(snapshot, config, now=NOW)
    assert plan.decision.action == "drain"
    outcome = Executor(cluster, config, clock=lambda: NOW, budget=Budget(deadline=10**9), dry_run=False).execute(
        plan, snapshot
    )
    assert outcome.stale is not None and "no controller" in outcome.stale
    assert not cordoned(api, "n1")


def light_cluster_tainted(api: FakeApiServer) -> None:
    """`light_cluster` with the soft taint n1's mark brought in an earlier run, so this run writes no node."""
    taint = {"key": SOFT_TAINT, "effect": "PreferNoSchedule"}
    api.add(k8s.node("n1", annotations={UNDERUTILIZED_SINCE: "2026-11-21T11:00:00Z"}, taints=[taint]))
    for name in ("n2", "n3"):
        api.add(k8s.node(name))
        api.add(k8s.pod(f"busy-b{name[1]}", node=name, cpu="3"))
    api.add(k8s.pod("web-a1", node="n1", cpu="300m"))
    api.add(k8s.pod("web-a2", node="n1", cpu="300m"))


def _plan_with_proofs(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, proof.Memo, list[str]]:
    """The cluster's snapshot, its plan made with a memo of proofs, the memo, and every node proven from now on."""
    snapshot = cluster.read_snapshot()
    memo = proof.Memo()
    plan = planner.plan(snapshot, config_module.validate(CONFIG, source="t"), now=NOW, proofs=memo)
    assert plan.decision.action == "drain" and plan.decision.node == "n1"
    return snapshot, plan, memo, counting_proofs(monkeypatch)


def test_the_plan_made_again_before_a_drain_takes_its_proofs_when_the_node_reads_the_same(
    api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    light_cluster_tainted(api)
    cluster = Cluster(connector_for(api)().api_client)
    snapshot, plan, memo, proved = _plan_with_proofs(cluster, monkeypatch)
    config = config_module.validate(CONFIG, source="t")
    executor = Executor(cluster, config, clock=lambda: NOW, budget=Budget(deadline=10**9), dry_run=False, proofs=memo)
    outcome = executor.execute(plan, snapshot)
    # Scale-down steering wrote pod-deletion-cost on n1's pods before the re-read: no proof reads it.
    assert plan.deletion_costs_add
    assert outcome.stale is None and cordoned(api, "n1")
    assert proved == []


def test_a_pod_landing_between_the_plan_and_the_drain_is_proven_again_though_the_plans_proofs_are_given(
    api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    light_cluster_tainted(api)

    class Sneaky(Cluster):
        def node(self, name: str) -> dict[str, Any] | None:
            # A ReplicaSet's pod that fits neither n2 nor n3 (1 cpu free on each, 2 in all).
            api.add(k8s.pod("web-big", node="n1", cpu="1100m"))
            return super().node(name)

    cluster = Sneaky(connector_for(api)().api_client)
    snapshot, plan, memo, proved = _plan_with_proofs(cluster, monkeypatch)
    config = config_module.validate(CONFIG, source="t")
    executor = Executor(cluster, config, clock=lambda: NOW, budget=Budget(deadline=10**9), dry_run=False, proofs=memo)
    outcome = executor.execute(plan, snapshot)
    assert "n1" in proved
    assert outcome.stale is not None and "no longer a candidate" in outcome.stale
    assert not cordoned(api, "n1")
    assert api.evictions == []


@pytest.mark.parametrize(
    ("fault", "expected_evicted"),
    [
        pytest.param(Fault(method="POST", path_regex=r"/eviction$", status=500, times=3), 2, id="5xx-storm-then-ok"),
        pytest.param(Fault(method="POST", path_regex=r"/eviction$", status=429, times=4), 2, id="429-storm-then-ok"),
        pytest.param(
            Fault(method="POST", path_regex=r"/eviction$", drop_connection=True, times=2), 2, id="dropped-connections"
        ),
        pytest.param(Fault(method="POST", path_regex=r"/eviction$", status=503, times=-1), 0, id="endless-5xx"),
    ],
)
def test_eviction_storms_are_retried_within_the_budget(api: FakeApiServer, fault: Fault, expected_evicted: int) -> None:
    light_cluster(api)
    api.add_fault(fault)
    time = FakeTime()
    result = run_once(api, time=time)
    assert len(result.outcome.evicted) == expected_evicted
    assert len(result.outcome.evicted) + len(result.outcome.waiting) == 2
    assert time.now - 1000 <= 60, "retries stop inside the run budget"
    assert cordoned(api, "n1"), "the drain state stays readable for the next run"
    api.clear_faults()
    follow_up = run_once(api, at=later(60))
    assert follow_up.report["decision"]["action"] in ("continue-drain", "none")
    assert api.get("Pod", "web-a1") is None and api.get("Pod", "web-a2") is None


def test_a_failing_list_is_a_failed_run_with_nothing_written(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault(method="GET", path_regex=r"/api/v1/pods$", status=500, times=-1))
    api.reset_counters()
    with pytest.raises(ClusterAccessError, match="list pods"):
        run_once(api)
    assert [w for w in api.writes if w.kind != "Lease"] == []


def test_a_forbidden_eviction_fails_the_run_and_the_next_run_goes_on(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add_fault(Fault(method="POST", path_regex=r"/eviction$", status=403, times=-1))
    with pytest.raises(RunFailedError) as failed:
        run_once(api)
    assert failed.value.report is not None and failed.value.report["decision"]["action"] == "drain"
    assert cordoned(api, "n1")
    api.clear_faults()
    resumed = run_once(api, at=later(120))
    assert resumed.report["decision"]["action"] == "continue-drain"
    assert resumed.outcome.drain_completed


def test_a_missing_token_is_refused_by_the_api_server(api: FakeApiServer) -> None:
    from kubernetes import client

    configuration = api.client_configuration()
    configuration.api_key = {}
    api_client = client.ApiClient(configuration)
    connection = service.ClusterConnection(api_client, None, api_client.close)
    # Without a token kube-apiserver sees the anonymous user, whom RBAC refuses (403, not 401).
    with pytest.raises(ClusterAccessError, match=r'403 Forbidden: .* User "system:anonymous"'):
        service.run(env_with(), connector=lambda: connection)


def test_pool_settings_come_from_the_configuration(api: FakeApiServer) -> None:
    light_cluster(api)
    config = {"nodePools": {"default-pool": {**POOL_CONFIG, "minNodes": 3}}}
    result = run_once(api, env=env_with(config))
    assert result.report["decision"]["action"] == "none"
    assert not cordoned(api, "n1")


def test_a_dry_run_shows_the_consolidation_path_and_an_acting_run_does_not_compute_it(api: FakeApiServer) -> None:
    light_cluster(api)
    looked = run_once(api, dry_run=True)
    assert looked.report["path"]["steps"][0]["node"] == "n1"
    assert looked.report["path"]["steps"][0]["podsMoved"] == 2
    acted = run_once(api)
    assert acted.report["path"] is None


def test_a_running_job_pod_holds_its_node_until_it_completes(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add(
        k8s.pod("etl-x1", node="n1", cpu="100m", owner_kind="Job", owner_name="etl", created="2026-11-21T11:30:00Z")
    )
    held = run_once(api)
    assert held.report["decision"]["action"] == "none"
    [row] = [node for node in held.report["nodes"] if node["name"] == "n1"]
    assert "pod default/etl-x1: Job etl is running since 2026-11-21T11:30:00Z (30m)" in " ".join(row["blockers"])
    assert api.evictions == []
    done = api.get("Pod", "etl-x1", "default")
    assert done is not None
    done["status"]["phase"] = "Succeeded"
    api.add(done)
    drained = run_once(api, at=later(60))
    assert drained.report["decision"]["action"] == "drain"
    assert drained.report["decision"]["node"] == "n1"
