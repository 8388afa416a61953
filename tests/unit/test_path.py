"""The consolidation path: the plans that would follow one another if nothing changed."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from msgspec import structs

from compactor.core import path, planner
from compactor.core.cluster import ClusterView
from compactor.core.model import DRAIN_STARTED_AT, UNDERUTILIZED_SINCE, Snapshot
from compactor.core.plan import ConsolidationPath, Plan
from tests.builders import NOW, ago, busy, make_config, make_node, make_pod, make_snapshot, stamp


def light_cluster(light: int = 3) -> Snapshot:
    """`light` nodes at 25% and two at 75%: room for the light ones' pods on fewer nodes."""
    nodes = [make_node(f"l{i}") for i in range(light)] + [make_node(f"b{i}", marked_since=None) for i in range(2)]
    pods = [make_pod(f"web{i}", node=f"l{i}", cpu="1") for i in range(light)]
    pods += [busy(f"busy{i}", f"b{i}") for i in range(2)]
    return make_snapshot(nodes, pods)


def plan_and_path(snapshot: Snapshot, **config: Any) -> tuple[Plan, ConsolidationPath]:
    settings = make_config(**config)
    first = planner.plan(snapshot, settings, now=NOW)
    return first, path.consolidation_path(snapshot, settings, first, now=NOW)


def after(snapshot: Snapshot, decision: Any) -> Snapshot:
    """The oracle's own reading of a drain: the node gone, its pods where the decision placed them."""
    placed = dict(decision.placements)
    pods = tuple(
        structs.replace(pod, node_name=placed[pod.key]) if pod.node_name == decision.node else pod
        for pod in snapshot.pods
        if pod.node_name != decision.node or pod.key in placed
    )
    return structs.replace(snapshot, nodes=tuple(n for n in snapshot.nodes if n.name != decision.node), pods=pods)


def test_each_step_is_the_plan_that_would_be_made_on_the_cluster_the_last_one_leaves() -> None:
    snapshot = light_cluster()
    first, found = plan_and_path(snapshot)
    assert found.steps, found.stopped_because
    assert found.steps[0].node == first.decision.node
    current, decision = snapshot, first.decision
    for step in found.steps:
        assert step.node == decision.node
        assert step.pods_moved == len(decision.placements)
        current = after(current, decision)
        assert step.nodes_after == len(current.nodes)
        # Marks stay where they are (all old): the next plan is the real planner's answer.
        decision = planner.plan(current, make_config(), now=NOW).decision
    if not found.reaches_lower_bound:
        assert decision.action != "drain", "the path stops only where the planner would"


def test_the_path_ends_at_the_lower_bound() -> None:
    # 3 cpu of light pods plus 6 of busy ones on five 4-cpu nodes: three nodes hold it all.
    _, found = plan_and_path(light_cluster())
    assert found.reaches_lower_bound
    assert found.stopped_because == "every enabled pool is at its lower bound"
    assert [step.nodes_after for step in found.steps] == [4, 3]


def test_waits_are_assumed_over_after_the_first_step() -> None:
    snapshot = light_cluster()
    young = structs.replace(
        snapshot,
        nodes=tuple(
            structs.replace(node, annotations={**node.annotations, UNDERUTILIZED_SINCE: stamp(ago(10))})
            for node in snapshot.nodes
        ),
    )
    first, found = plan_and_path(young)
    assert first.decision.action == "none" and first.held_by == "marked-recently"
    assert len(found.steps) == 2  # once the marks are old enough, the same two drains


def test_a_drain_in_progress_comes_first() -> None:
    nodes = [make_node("n1", unschedulable=True, annotations={DRAIN_STARTED_AT: stamp(ago(60))})]
    nodes += [make_node("n2", marked_since=None)]
    _, found = plan_and_path(make_snapshot(nodes, [make_pod("web", node="n1")]))
    assert found.steps == ()
    assert "a drain in progress comes first" in found.stopped_because


def test_pods_that_wait_for_room_stop_the_path_with_the_reason() -> None:
    snapshot = light_cluster()
    stuck = make_pod("stuck", node=None, unschedulable=True, phase="Pending")
    _, found = plan_and_path(structs.replace(snapshot, pods=(*snapshot.pods, stuck)))
    assert found.steps == ()
    assert found.stopped_because.startswith("held back by pending-pods")


def test_the_path_is_bounded_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_config()
    snapshot = light_cluster(light=6)
    first = planner.plan(snapshot, settings, now=NOW)
    planned: list[Snapshot] = []
    real_plan = planner.plan

    def counting_plan(current: Snapshot, *args: Any, **kwargs: Any) -> Plan:
        planned.append(current)
        return real_plan(current, *args, **kwargs)

    monkeypatch.setattr(planner, "plan", counting_plan)
    found = path.consolidation_path(snapshot, settings, first, now=NOW, max_steps=2)
    assert len(found.steps) == 2
    assert found.stopped_because == "stopped after 2 step(s) to keep planning bounded"
    # The first step is the plan made now: only the second is planned, and nothing past it.
    assert len(planned) == 1


@pytest.mark.parametrize(
    ("awaiting", "minutes"),
    [
        # Two drains: the second a run later (5 min), then the autoscaler's 10 minutes after the last.
        pytest.param(2, 5 + 5 + 10, id="pipelined"),
        # One emptied node at a time: each drain waits for the autoscaler to remove the last.
        pytest.param(1, 10 + 5 + 10, id="one-at-a-time"),
    ],
)
def test_the_time_estimate_follows_the_schedule_and_the_autoscaler(awaiting: int, minutes: float) -> None:
    _, found = plan_and_path(light_cluster(), pools={"default-pool": {"maxNodesAwaitingRemoval": awaiting}})
    assert len(found.steps) == 2
    assert found.estimated_minutes == minutes


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "compactor",
            "plan",
            "--snapshot",
            "examples/offpeak-snapshot.json",
            "--config",
            "examples/config.json",
            "--now",
            "2026-11-21T03:00:00Z",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_plan_prints_the_path_under_the_decision_and_in_the_json() -> None:
    table = run_cli()
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    decision = next(i for i, line in enumerate(lines) if line.startswith("Decision: drain"))
    assert any(line.startswith("Path if nothing changed: ") for line in lines[decision:])
    report = json.loads(run_cli("--json").stdout)
    assert report["path"]["steps"][0]["node"] == report["decision"]["node"]
    assert set(report["path"]) == {"steps", "reachesLowerBound", "stoppedBecause", "estimatedMinutes", "caveats"}
    # The shipped cluster's path counts on gke-...-8c1f-3pzx (43% requested), which the autoscaler removes on
    # its own in `simulate --snapshot`: the path's second drain then has no room left for data/postgres-0.
    (caveat,) = report["path"]["caveats"]
    assert "may remove gke-shop-prod-default-pool-8c1f-3pzx (43% requested, its threshold 50%)" in caveat
    assert any(line.startswith("  But: the Cluster Autoscaler may remove") for line in lines[decision:])
    assert json.loads(run_cli("--json", "--path-steps", "0").stdout)["path"] is None


def test_a_negative_path_length_is_bad_input() -> None:
    answer = run_cli("--path-steps", "-1")
    assert answer.returncode == 2
    assert "--path-steps: -1 is negative" in answer.stderr


def test_the_next_view_is_the_one_regrouping_the_cluster_would_make() -> None:
    """`ClusterView(..., moved=...)`: a namespace whose only pod left with the drained node (here a
    DaemonSet pod) is no longer listed, and the moved pods follow their target's own pods."""
    snapshot = light_cluster()
    daemon = make_pod("agent", node="l0", namespace="monitoring", owner="DaemonSet", cpu="0", memory="0")
    snapshot = structs.replace(snapshot, pods=(*snapshot.pods, daemon))
    settings = make_config()
    view = ClusterView(snapshot, settings)
    assert "monitoring" in view.pods_by_namespace
    first = planner.plan(snapshot, settings, now=NOW, view=view)
    assert first.decision.node == "l0", first.decision.reason
    after, _, moved = path._apply(snapshot, first.decision, settings.pool_label, view.nodes["l0"].pods)
    derived = ClusterView(after, settings, view.pdbs, earlier=view, moved=moved)
    full = ClusterView(after, settings)
    assert {name: state.pods for name, state in derived.nodes.items()} == {
        name: state.pods for name, state in full.nodes.items()
    }
    assert "monitoring" not in derived.pods_by_namespace
    # The same pods in each namespace (their readers count them; the order is not kept).
    assert {namespace: sorted(pod.key for pod in pods) for namespace, pods in derived.pods_by_namespace.items()} == {
        namespace: sorted(pod.key for pod in pods) for namespace, pods in full.pods_by_namespace.items()
    }


def cluster_with_light_target(**target: Any) -> Snapshot:
    """l0 (a light node of the enabled pool) can only be drained onto t, a node of a pool node-compactor
    leaves alone that is 45% requested: below the Cluster Autoscaler's 50%, so it may remove t itself."""
    nodes = [
        make_node("l0"),
        make_node("b0", marked_since=None),
        make_node("t", pool="other-pool", marked_since=None, **target),
    ]
    pods = [make_pod("web", node="l0", cpu="500m"), busy("full", "b0", cpu="3900m"), busy("half", "t", cpu="1800m")]
    return make_snapshot(nodes, pods)


def test_the_path_says_when_it_counts_on_a_node_the_autoscaler_may_remove_first() -> None:
    first, found = plan_and_path(cluster_with_light_target())
    assert [step.node for step in found.steps] == ["l0"] and dict(first.decision.placements) == {"default/web": "t"}
    (caveat,) = found.caveats
    assert "may remove t (45% requested, its threshold 50%) on its own first" in caveat
    assert "b0" not in caveat and "l0" not in caveat  # full, and the path's own drain


@pytest.mark.parametrize(
    ("target", "config"),
    [
        ({}, {"clusterAutoscalerUtilizationThreshold": 0.4}),  # 45% is above the autoscaler's threshold
        ({"annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}}, {}),
    ],
)
def test_no_caveat_for_a_node_the_autoscaler_would_keep(target: dict[str, Any], config: dict[str, Any]) -> None:
    _, found = plan_and_path(cluster_with_light_target(**target), **config)
    assert found.caveats == ()
