"""Which single-replica pods a drain moves by a surging rolling restart, and why the others are not (`core.surge`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from compactor import cli
from compactor.core import planner, surge
from compactor.core.cluster import ClusterView
from compactor.core.model import DRAIN_STARTED_AT, Claim, Deployment, Pdb, Pod, ReplicaSet, Snapshot
from compactor.core.plan import Decision, Plan, SurgeVerdict
from compactor.errors import ConfigError
from compactor.settings.config import Config
from tests.builders import (
    NOW,
    ago,
    base_nodes,
    base_pods,
    blockers_of,
    make_claim,
    make_config,
    make_deployment,
    make_pdb,
    make_pod,
    make_replica_set,
    node_report,
    stamp,
)
from tests.fakeapi import builders as k8s

SURGING = make_config(pools={"default-pool": {"surgeSingleReplicas": True}})


def web_pod(name: str = "web-5d8f7-abcde", *, replica_set: str = "web-5d8f7", node: str = "n1", **fields: Any) -> Pod:
    """A pod of ReplicaSet `replica_set` (the builders name a pod's owner after the pod)."""
    pod = make_pod(name, node=node, labels={"app": "web"}, **fields)
    return msgspec.structs.replace(pod, controller_name=replica_set)


def view_of(
    pods: list[Pod],
    *,
    deployments: tuple[Deployment, ...] = (make_deployment(),),
    replica_sets: tuple[ReplicaSet, ...] = (make_replica_set(),),
    claims: tuple[Claim, ...] = (),
    pdbs: tuple[Pdb, ...] = (),
    config: Config = SURGING,
    **light: Any,
) -> ClusterView:
    snapshot = Snapshot(
        tuple(base_nodes(**light)),
        (*pods, *base_pods()),
        pdbs,
        deployments=deployments,
        replica_sets=replica_sets,
        claims=claims,
    )
    return ClusterView(snapshot, config)


def verdicts_on_n1(view: ClusterView) -> list[SurgeVerdict]:
    return list(surge.verdicts(view, view.nodes["n1"]))


def only_verdict(view: ClusterView) -> SurgeVerdict:
    (verdict,) = verdicts_on_n1(view)
    return verdict


class TestWhatQualifies:
    def test_restarts_the_only_pod_of_a_surging_deployment(self) -> None:
        verdict = only_verdict(view_of([web_pod()]))
        assert (verdict.action, verdict.deployment, verdict.owner) == (
            "restart",
            "default/web",
            "Deployment default/web",
        )
        assert "its only pod" in verdict.reason

    def test_restarts_a_pod_held_only_because_min_available_is_the_replica_count(self) -> None:
        pdb = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), min_available="100%")
        view = view_of(
            [web_pod(), web_pod("web-5d8f7-fghij", node="n2")],
            deployments=(make_deployment(replicas=2),),
            replica_sets=(make_replica_set(replicas=2),),
            pdbs=(pdb,),
        )
        verdict = only_verdict(view)
        assert verdict.action == "restart"
        assert "PodDisruptionBudget web holds" in verdict.reason

    def test_nothing_is_judged_in_a_pool_without_the_option(self) -> None:
        assert verdicts_on_n1(view_of([web_pod()], config=make_config())) == []

    def test_a_pod_of_a_deployment_with_several_replicas_and_no_blocking_budget_is_no_single_replica_pod(
        self,
    ) -> None:
        view = view_of(
            [web_pod(), web_pod("web-5d8f7-fghij", node="n2")],
            deployments=(make_deployment(replicas=2),),
            replica_sets=(make_replica_set(replicas=2),),
        )
        assert verdicts_on_n1(view) == []

    @pytest.mark.parametrize(
        ("max_surge", "max_unavailable"),
        [
            pytest.param(None, None, id="the defaults, 25% each: surge 1 (up), unavailable 0 (down)"),
            pytest.param("100%", "0%", id="percentages"),
            pytest.param("2", "0", id="whole numbers"),
        ],
    )
    def test_a_strategy_that_surges_one_replica(self, max_surge: str | None, max_unavailable: str | None) -> None:
        deployment = make_deployment(max_surge=max_surge, max_unavailable=max_unavailable)
        assert only_verdict(view_of([web_pod()], deployments=(deployment,))).action == "restart"


class TestWhatIsLeftToTheNormalRules:
    @pytest.mark.parametrize(
        ("deployment", "reason"),
        [
            pytest.param(
                make_deployment(strategy="Recreate"),
                "its strategy is Recreate, which removes the old pod before the new one runs",
                id="Recreate",
            ),
            pytest.param(
                make_deployment(max_surge="0", max_unavailable="1"),
                "its maxSurge 0 starts no new pod before the old one goes",
                id="no surge",
            ),
            pytest.param(
                make_deployment(max_surge="0", max_unavailable="0"),
                "its maxUnavailable 0 lets the rollout remove the old pod",
                id="both 0: the controller makes maxUnavailable 1",
            ),
            pytest.param(
                make_deployment(max_surge="1", max_unavailable="100%"),
                "its maxUnavailable 100% (= 1) lets the rollout remove the old pod before the new one is Ready",
                id="maxUnavailable as a percentage",
            ),
            pytest.param(
                make_deployment(max_surge="1", max_unavailable="lots"),
                "its maxUnavailable 'lots' does not read",
                id="unreadable",
            ),
            pytest.param(make_deployment(paused=True), "it is paused", id="paused"),
            pytest.param(
                make_deployment(generation=3, observed_generation=2),
                "it is mid-rollout (the controller observed generation 2 of 3)",
                id="not yet observed",
            ),
            pytest.param(
                make_deployment(updated_replicas=0),
                "it is mid-rollout (0 of 1 replica(s) updated)",
                id="not every replica updated",
            ),
        ],
    )
    def test_a_deployment_that_would_not_surge_cleanly(self, deployment: Deployment, reason: str) -> None:
        verdict = only_verdict(view_of([web_pod()], deployments=(deployment,)))
        assert (verdict.action, verdict.deployment) == ("evict", None)
        assert reason in verdict.reason

    def test_another_replica_set_with_pods_is_a_rollout_under_way(self) -> None:
        old = ReplicaSet("default", "web-old", "web", 0, 1)
        verdict = only_verdict(view_of([web_pod()], replica_sets=(make_replica_set(), old)))
        assert verdict.action == "evict"
        assert "ReplicaSet web-old still has 1 pod(s)" in verdict.reason

    @pytest.mark.parametrize("mode", ["ReadWriteOnce", "ReadWriteOncePod"])
    def test_a_volume_only_one_node_can_mount(self, mode: str) -> None:
        view = view_of([web_pod(pvc_names=("data",))], claims=(make_claim("data", modes=(mode,)),))
        verdict = only_verdict(view)
        assert verdict.action == "evict"
        assert f"its volume claim data is {mode}" in verdict.reason

    def test_a_volume_many_nodes_can_mount_is_no_obstacle(self) -> None:
        view = view_of([web_pod(pvc_names=("shared",))], claims=(make_claim("shared", modes=("ReadWriteMany",)),))
        assert only_verdict(view).action == "restart"

    def test_a_generic_ephemeral_volume_is_the_pods_own_and_no_obstacle(self) -> None:
        pod = web_pod(pvc_names=("web-5d8f7-abcde-scratch",))
        claim = make_claim("web-5d8f7-abcde-scratch", owner_pod="web-5d8f7-abcde")
        assert only_verdict(view_of([pod], claims=(claim,))).action == "restart"

    def test_a_claim_missing_from_the_snapshot_may_be_read_write_once(self) -> None:
        verdict = only_verdict(view_of([web_pod(pvc_names=("data",))]))
        assert verdict.action == "evict"
        assert "its volume claim data may be ReadWriteOnce (PersistentVolumeClaims were not read)" in verdict.reason

    def test_a_statefulset_pod_says_why(self) -> None:
        pod = make_pod("db-0", node="n1", owner="StatefulSet")
        verdict = only_verdict(view_of([pod]))
        assert (verdict.action, verdict.owner) == ("evict", "StatefulSet default/db-0-owner")
        assert "a StatefulSet starts a pod's replacement only once the old pod is gone" in verdict.reason

    def test_a_statefulset_with_several_pods_and_no_budget_is_no_single_replica_pod(self) -> None:
        pods = [make_pod("db-0", node="n1", owner="StatefulSet"), make_pod("db-1", node="n2", owner="StatefulSet")]
        pods = [msgspec.structs.replace(pod, controller_name="db") for pod in pods]
        assert verdicts_on_n1(view_of(pods)) == []

    def test_a_budget_with_max_unavailable_0_allows_no_disruption_at_all(self) -> None:
        pdb = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), max_unavailable="0")
        verdict = only_verdict(view_of([web_pod()], pdbs=(pdb,)))
        assert verdict.action == "evict"
        assert "PodDisruptionBudget web (maxUnavailable 0) allows no disruption at all" in verdict.reason

    def test_a_budget_held_by_unavailable_replicas_is_not_lifted(self) -> None:
        pdb = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), min_available="1")
        verdict = only_verdict(view_of([web_pod()], pdbs=(pdb,), deployments=(make_deployment(available_replicas=0),)))
        assert verdict.action == "evict"
        assert "only 0 of 1 replica(s) are available" in verdict.reason

    def test_another_rule_that_blocks_the_pod_still_blocks_it(self) -> None:
        verdict = only_verdict(view_of([web_pod(do_not_disrupt=True)]))
        assert verdict.action == "evict"
        assert "annotated karpenter.sh/do-not-disrupt=true" in verdict.reason

    def test_without_deployments_in_the_snapshot_the_planner_says_so(self) -> None:
        view = view_of([web_pod()], deployments=(), replica_sets=())
        assert only_verdict(view).reason == "Deployments and ReplicaSets were not read, so it is not restarted"
        note = surge.missing_note(view)
        assert note is not None and "kubectl get " + surge.SNAPSHOT_KINDS in note
        assert surge.missing_note(view_of([web_pod()])) is None


class TestARestartAlreadyWritten:
    def test_a_rollout_started_for_this_drain_is_waited_for(self) -> None:
        started = ago(60)
        deployment = make_deployment(
            restarted_at=stamp(ago(30)), generation=3, observed_generation=3, updated_replicas=0
        )
        view = view_of([web_pod()], deployments=(deployment,), annotations={DRAIN_STARTED_AT: stamp(started)})
        verdict = only_verdict(view)
        assert (verdict.action, verdict.deployment) == ("wait", "default/web")

    def test_a_rollout_from_before_the_drain_is_someone_elses(self) -> None:
        deployment = make_deployment(restarted_at=stamp(ago(600)), updated_replicas=0)
        view = view_of([web_pod()], deployments=(deployment,), annotations={DRAIN_STARTED_AT: stamp(ago(60))})
        assert only_verdict(view).action == "evict"

    def test_a_finished_restart_whose_pod_is_still_here_is_not_restarted_again(self) -> None:
        deployment = make_deployment(restarted_at=stamp(ago(30)))
        view = view_of([web_pod()], deployments=(deployment,), annotations={DRAIN_STARTED_AT: stamp(ago(60))})
        verdict = only_verdict(view)
        assert verdict.action == "evict"
        assert "restarted for this drain already" in verdict.reason


class TestWhatTheRestOfThePlannerSees:
    def test_the_pods_moved_by_a_restart_are_not_judged_by_the_pod_rules(self) -> None:
        pdb = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), min_available="1")
        view = view_of([web_pod(), make_pod("other", node="n1")], pdbs=(pdb,))
        state = view.nodes["n1"]
        under_rules = surge.pods_under_rules(view, state)
        assert [pod.name for pod in under_rules] == ["other"]
        assert surge.pods_under_rules(view, state) is under_rules  # the same tuple: its blockers are found once

    def test_a_split_decision_restarts_instead_of_evicting(self) -> None:
        view = view_of([web_pod(), make_pod("other", node="n1")])
        decision = Decision("drain", "n1", "default-pool", "why", ("default/web-5d8f7-abcde", "default/other"))
        split = surge.split(decision, view)
        assert split.evictions == ("default/other",)
        assert split.restarts == (("default/web-5d8f7-abcde", "default/web"),)

    def test_the_proof_places_the_surge_of_a_deployment_with_several_replicas(self) -> None:
        pdb = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), min_available="3")
        pods = [web_pod(), web_pod("web-5d8f7-b", node="n2"), web_pod("web-5d8f7-c", node="n3")]
        view = view_of(
            pods,
            deployments=(make_deployment(replicas=3, max_surge="2"),),
            replica_sets=(make_replica_set(replicas=3),),
            pdbs=(pdb,),
        )
        state = surge.proof_state(view, view.nodes["n1"])
        assert [pod.name for pod in state.movable_pods] == ["web-5d8f7-abcde", "web-5d8f7-abcde~surge-1"]

    def test_a_single_replica_needs_no_more_room_than_its_replacement(self) -> None:
        view = view_of([web_pod()])
        assert surge.proof_state(view, view.nodes["n1"]) is view.nodes["n1"]


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        pytest.param(None, 1, True, 1, id="absent is 25%, up"),
        pytest.param(None, 1, False, 0, id="absent is 25%, down"),
        pytest.param("33%", 10, True, 4, id="33% of 10 up"),
        pytest.param("33%", 10, False, 3, id="33% of 10 down"),
        pytest.param("0%", 7, True, 0, id="0%"),
        pytest.param("3", 10, True, 3, id="a whole number"),
        pytest.param("x%", 10, True, None, id="not a number"),
        pytest.param("", 10, True, None, id="empty"),
    ],
)
def test_percentages_resolve_as_kubernetes_does(
    value: str | None, total: int, round_up: bool, expected: int | None
) -> None:
    assert surge.scaled(value, total, round_up=round_up) == expected


def test_a_restart_written_after_the_drain_started_is_the_drains() -> None:
    started = stamp(NOW)
    assert surge.restarted_for_drain(make_deployment(restarted_at=stamp(NOW)), started)
    assert not surge.restarted_for_drain(make_deployment(restarted_at=stamp(ago(1))), started)
    assert not surge.restarted_for_drain(make_deployment(restarted_at="yesterday"), started)
    assert not surge.restarted_for_drain(make_deployment(), started)


def plan_with(pods: list[Pod], *, config: Config = SURGING, pdbs: tuple[Pdb, ...] = (), **snapshot: Any) -> Plan:
    fields: dict[str, Any] = {"deployments": (make_deployment(),), "replica_sets": (make_replica_set(),)}
    fields.update(snapshot)
    light = fields.pop("light", {})
    nodes = base_nodes(**light)
    return planner.plan(Snapshot(tuple(nodes), (*pods, *base_pods()), pdbs, **fields), config, now=NOW)


MIN_AVAILABLE_1 = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), min_available="1")


class TestThePlan:
    def test_a_node_held_by_a_min_available_budget_is_drained_by_a_restart_where_it_was_blocked(self) -> None:
        before = plan_with([web_pod(), make_pod("other", node="n1")], config=make_config(), pdbs=(MIN_AVAILABLE_1,))
        assert before.decision.action == "none"
        assert "PodDisruptionBudget web allows no disruption now" in blockers_of(before, "n1")

        after = plan_with([web_pod(), make_pod("other", node="n1")], pdbs=(MIN_AVAILABLE_1,))
        assert (after.decision.action, after.decision.node) == ("drain", "n1")
        assert after.decision.restarts == (("default/web-5d8f7-abcde", "default/web"),)
        assert after.decision.evictions == ("default/other",)
        assert "default/web-5d8f7-abcde" in dict(after.decision.placements)

    def test_the_report_says_why_a_single_replica_pod_is_not_restarted(self) -> None:
        claim = make_claim("data")
        found = plan_with([web_pod(pvc_names=("data",))], pdbs=(MIN_AVAILABLE_1,), claims=(claim,))
        assert found.decision.action == "none"
        assert "PodDisruptionBudget web allows no disruption now" in blockers_of(found, "n1")
        (verdict,) = node_report(found, "n1").single_replicas
        assert verdict.action == "evict" and "ReadWriteOnce" in verdict.reason

    def test_a_single_replica_without_a_budget_is_restarted_rather_than_evicted(self) -> None:
        found = plan_with([web_pod()])
        assert found.decision.action == "drain"
        assert found.decision.evictions == ()
        assert found.decision.restarts == (("default/web-5d8f7-abcde", "default/web"),)

    def test_the_proof_needs_room_for_the_surge_of_a_deployment_with_several_replicas(self) -> None:
        pdb = msgspec.structs.replace(make_pdb("web", match={"app": "web"}, allowed=0), min_available="3")
        pods = [
            web_pod(cpu="1"),
            web_pod("web-5d8f7-b", node="n2", cpu="1"),
            web_pod("web-5d8f7-c", node="n3", cpu="1"),
        ]
        busy = [make_pod("b2", node="n2", cpu="2"), make_pod("b3", node="n3", cpu="2")]

        def planned(max_surge: str) -> Plan:
            deployment = make_deployment(replicas=3, max_surge=max_surge)
            snapshot = Snapshot(
                tuple(base_nodes()),
                (*pods, *busy),
                (pdb,),
                deployments=(deployment,),
                replica_sets=(make_replica_set(replicas=3),),
            )
            return planner.plan(snapshot, SURGING, now=NOW)

        # n2 and n3 have 1 cpu free each: room for n1's pod and one more pod of the surge.
        assert planned("2").decision.action == "drain"
        refused = planned("3")
        assert refused.decision.action == "none"
        assert "web-5d8f7-abcde~surge-" in blockers_of(refused, "n1")

    def test_a_drain_waits_for_the_rollout_it_started_instead_of_evicting(self) -> None:
        deployment = make_deployment(restarted_at=stamp(ago(30)), updated_replicas=0, status_replicas=2)
        n1 = {"annotations": {DRAIN_STARTED_AT: stamp(ago(60))}, "unschedulable": True}
        found = plan_with([web_pod()], deployments=(deployment,), light=n1)
        assert found.decision.action == "continue-drain"
        assert found.decision.evictions == ()
        assert found.decision.restarts == (("default/web-5d8f7-abcde", "default/web"),)

    def test_without_deployments_the_plan_says_so_and_follows_the_normal_rules(self) -> None:
        found = plan_with([web_pod()], pdbs=(MIN_AVAILABLE_1,), deployments=(), replica_sets=())
        assert found.decision.action == "none"
        assert found.surge_note is not None and "no Deployments or ReplicaSets" in found.surge_note
        assert plan_with([web_pod()], config=make_config()).surge_note is None


class TestPlanFromASavedList:
    def saved(self, tmp_path: Path, *kinds_left_out: str) -> tuple[str, str]:
        objects = [
            k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": "2026-11-21T11:00:00Z"}),
            k8s.node("n2"),
            k8s.pod("busy-b2", node="n2", cpu="3"),
            *k8s.deployment("web", nodes=["n1"]),
            k8s.pdb("web", match_labels={"app": "web"}, min_available=1, disruptions_allowed=0),
        ]
        items = [item for item in objects if item["kind"] not in kinds_left_out]
        snapshot_file = tmp_path / "cluster.json"
        snapshot_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
        config_file = tmp_path / "config.json"
        pool = {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75, "surgeSingleReplicas": True}
        config_file.write_text(json.dumps({"nodePools": {"default-pool": pool}}))
        return str(snapshot_file), str(config_file)

    def test_deployments_in_the_list_let_the_plan_restart_the_pod(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        snapshot_file, config_file = self.saved(tmp_path)
        assert (
            cli.main(
                [
                    "plan",
                    "--snapshot",
                    snapshot_file,
                    "--config",
                    config_file,
                    "--now",
                    "2026-11-21T12:00:00Z",
                    "--json",
                ]
            )
            == 0
        )
        report = json.loads(capsys.readouterr().out)
        (pod,) = [key for key in report["decision"]["restarts"]]
        assert report["decision"]["action"] == "drain" and report["decision"]["restarts"][pod] == "default/web"
        (node,) = [node for node in report["nodes"] if node["name"] == "n1"]
        assert node["singleReplicaPods"][0]["action"] == "restart"
        # n2 is not underutilized, so never drained: its single-replica pods are not judged.
        assert "singleReplicaPods" not in next(node for node in report["nodes"] if node["name"] == "n2")

    def test_without_them_the_planner_warns_and_the_budget_holds(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        snapshot_file, config_file = self.saved(tmp_path, "Deployment", "ReplicaSet")
        assert (
            cli.main(
                [
                    "plan",
                    "--snapshot",
                    snapshot_file,
                    "--config",
                    config_file,
                    "--now",
                    "2026-11-21T12:00:00Z",
                    "--json",
                ]
            )
            == 0
        )
        captured = capsys.readouterr()
        report = json.loads(captured.out)
        assert report["decision"]["action"] == "none"
        assert "warning: a pool sets surgeSingleReplicas but the snapshot has no Deployments" in captured.err
        assert any("surgeSingleReplicas" in warning for warning in report["warnings"])


class TestConfiguration:
    def test_the_option_is_off_by_default_and_on_per_pool(self) -> None:
        assert not make_config().surges
        assert make_config().pool("default-pool").surge_single_replicas is False  # type: ignore[union-attr]
        assert SURGING.surges

    def test_a_pool_that_is_not_enabled_does_not_count(self) -> None:
        config = make_config(pools={"default-pool": {"enabled": False, "surgeSingleReplicas": True}})
        assert not config.surges

    @pytest.mark.parametrize(
        ("settings", "problem"),
        [
            pytest.param(
                {"surgeSingleReplicas": "yes"}, "surgeSingleReplicas: Input should be a valid boolean", id="text"
            ),
            pytest.param(
                {"surgeSingleReplicas": True, "drainTimeoutSeconds": 0},
                "surgeSingleReplicas needs drainTimeoutSeconds above 0",
                id="no time to wait",
            ),
            pytest.param({"surgeSingleReplica": True}, "surgeSingleReplica: unknown key", id="typo"),
        ],
    )
    def test_bad_settings_name_the_field(self, settings: dict[str, Any], problem: str) -> None:
        with pytest.raises(ConfigError) as raised:
            make_config(pools={"default-pool": settings})
        assert any(problem in line for line in raised.value.problems), raised.value.problems
