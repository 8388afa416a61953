"""A drain under way proves itself again, and every state of drain-started-at has a next step.

The cases of issue 23 at the planner (docs/drain-states.md): a continued drain evicts nothing
that fits nowhere and waits while pods this pool could hold cannot be scheduled; several nodes
carrying drain-started-at resolve to at most one drained node; a drain-started-at in the future
counts as started now; an opt-out on a pod still to move gives the node back; a node a person
cordoned gets no mark. Last, the state machine as a property over random start states.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor.core import planner
from compactor.core.model import (
    CA_SCALE_DOWN_DISABLED,
    DISABLED,
    DO_NOT_DISRUPT,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    UNDERUTILIZED_SINCE,
    Node,
    Pod,
    Snapshot,
)
from compactor.core.plan import Plan
from compactor.core.timing import format_stamp, parse_stamp
from tests.builders import (
    NOW,
    ago,
    blockers_of,
    busy,
    make_config,
    make_node,
    make_pod,
    make_snapshot,
    run_plan,
    stamp,
    toleration,
)

DRAIN_TIMEOUT = 900  # builders' make_config: the default drainTimeoutSeconds
REMOVAL_TIMEOUT = 1800


def draining(name: str = "n3", started: float = 60, **fields: Any) -> Node:
    """A node node-compactor cordoned `started` seconds ago and is draining."""
    annotations = {DRAIN_STARTED_AT: stamp(ago(started)), **fields.pop("annotations", {})}
    return make_node(name, unschedulable=True, annotations=annotations, **fields)


def targets(free: str = "1") -> list[Node]:
    """n0, n1, n2: 4-cpu nodes that are not underutilized, each with `free` cpu left (see `fillers`)."""
    return [make_node(f"n{index}", marked_since=None) for index in range(3)]


def fillers(used: str = "3") -> list[Pod]:
    return [busy(f"b{index}", f"n{index}", cpu=used) for index in range(3)]


def web(count: int, node: str = "n3", cpu: str = "1", **fields: Any) -> list[Pod]:
    return [make_pod(f"web-{index}", node=node, cpu=cpu, memory="128Mi", **fields) for index in range(count)]


# -- a continued drain proves itself again (issue 23, case 1) -------------------------------


def test_a_continued_drain_evicts_its_pods_while_they_fit() -> None:
    plan = run_plan([*targets(), draining()], [*fillers(), *web(2)])
    assert (plan.decision.action, plan.decision.node) == ("continue-drain", "n3")
    assert set(plan.decision.evictions) == {"default/web-0", "default/web-1"}
    assert plan.decision.held is None


def test_a_continued_drain_evicts_nothing_once_other_workloads_took_the_room() -> None:
    # Run A evicted web-0 (its replacement runs on n0); others then took the room on n1 and n2.
    replacement = make_pod("web-0-x", node="n0", cpu="1", memory="128Mi")
    others = [busy("team-1", "n1", cpu="1"), busy("team-2", "n2", cpu="1")]
    plan = run_plan([*targets(), draining()], [*fillers(), replacement, *others, *web(3)[1:]])
    assert (plan.decision.action, plan.decision.node) == ("continue-drain", "n3")
    assert plan.decision.evictions == ()
    assert plan.decision.held is not None and "no longer fit on the other nodes" in plan.decision.held
    assert "waits" in plan.decision.reason and "drainTimeoutSeconds" in plan.decision.reason


def test_a_continued_drain_evicts_nothing_once_a_person_cordoned_the_other_nodes() -> None:
    cordoned = [msgspec.structs.replace(node, unschedulable=True) for node in targets()]
    plan = run_plan([*cordoned, draining()], [*fillers(), *web(2)])
    assert plan.decision.evictions == ()
    assert plan.decision.held is not None and "no longer fit" in plan.decision.held


def test_pods_waiting_for_the_scheduler_are_placed_before_the_pods_left() -> None:
    # 3 cpu free in all; two replacements (1 cpu each) wait for a node; 2 pods of 1 cpu are left.
    waiting = [make_pod(f"web-r{index}", node=None, cpu="1", memory="128Mi", phase="Pending") for index in range(2)]
    plan = run_plan([*targets(), draining()], [*fillers(), *web(2), *waiting])
    assert plan.decision.evictions == ()
    assert plan.decision.held is not None and "2 pod(s) waiting for the scheduler placed first" in plan.decision.held
    # Once one of them has found its node and one pod is left, they fit.
    placed = [msgspec.structs.replace(waiting[0], node_name="n0"), waiting[1]]
    assert run_plan([*targets(), draining()], [*fillers(), *web(2)[:1], *placed]).decision.evictions == (
        "default/web-0",
    )


def test_a_pod_waiting_for_a_node_no_target_could_take_takes_no_room() -> None:
    gpu = make_pod("trainer", node=None, cpu="3", phase="Pending", extended={"nvidia.com/gpu": "1"})
    plan = run_plan([*targets(), draining()], [*fillers(), *web(2), gpu])
    assert plan.decision.held is None
    assert len(plan.decision.evictions) == 2


@pytest.mark.parametrize(
    ("controller", "held"),
    [
        pytest.param("ReplicaSet", False, id="replicaset-replacement-already-counted"),
        pytest.param("StatefulSet", True, id="statefulset-pod-still-needs-its-room"),
    ],
)
def test_a_terminating_pod_counts_unless_its_replacement_exists_already(controller: str, held: bool) -> None:
    # 1 cpu is free (on n0). A ReplicaSet made the terminating pod's replacement at once: it runs
    # on n1 and is counted there, so web-0 alone needs the room. A StatefulSet recreates the pod once
    # it is gone: it still needs 1 cpu beside web-0's (n1 is filled by another pod the same way).
    leaving = make_pod("leaving", node="n3", cpu="1", terminating=True, owner=controller)
    on_n1 = make_pod("leaving-x" if controller == "ReplicaSet" else "other", node="n1", cpu="1", owner=controller)
    pods = [*fillers(), busy("full", "n2", cpu="1"), on_n1, leaving, *web(1)]
    plan = run_plan([*targets(), draining()], pods)
    assert (plan.decision.held is not None) is held


def test_a_continued_drain_waits_while_pods_its_pool_could_hold_cannot_be_scheduled() -> None:
    stuck = make_pod("stuck", node=None, unschedulable=True, phase="Pending", cpu="500m")
    plan = run_plan([*targets(), draining()], [*fillers(), *web(1), stuck])
    assert plan.decision.evictions == ()
    assert plan.decision.held is not None and "cannot be scheduled" in plan.decision.held
    assert "default/stuck" in plan.decision.held


def test_a_pod_no_node_of_the_pool_could_hold_does_not_hold_the_drain() -> None:
    gpu = make_pod("trainer", node=None, unschedulable=True, phase="Pending", extended={"nvidia.com/gpu": "1"})
    plan = run_plan([*targets(), draining()], [*fillers(), *web(1), gpu])
    assert plan.decision.evictions == ("default/web-0",)


def test_a_waiting_drain_is_rolled_back_at_its_timeout() -> None:
    cordoned = [msgspec.structs.replace(node, unschedulable=True) for node in targets()]
    plan = run_plan([*cordoned, draining(started=DRAIN_TIMEOUT)], [*fillers(), *web(2)])
    assert (plan.decision.action, plan.decision.node) == ("rollback", "n3")
    assert "drainTimeoutSeconds" in plan.decision.reason


# -- opt-outs during a drain (issue 23, case 3) ----------------------------------------------


@pytest.mark.parametrize(
    "annotation",
    [
        pytest.param({DISABLED: "true"}, id="node-compactor-disabled"),
        pytest.param({CA_SCALE_DOWN_DISABLED: "true"}, id="ca-scale-down-disabled"),
        pytest.param({DO_NOT_DISRUPT: "true"}, id="karpenter-do-not-disrupt"),
    ],
)
def test_a_node_opted_out_during_its_drain_is_given_back(annotation: dict[str, str]) -> None:
    plan = run_plan([*targets(), draining(annotations=annotation)], [*fillers(), *web(2)])
    assert (plan.decision.action, plan.decision.node) == ("rollback", "n3")
    assert "opted out during the drain" in plan.decision.reason


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"safe_to_evict": False}, id="safe-to-evict-false"),
        pytest.param({"do_not_disrupt": True}, id="do-not-disrupt"),
    ],
)
def test_a_pod_opted_out_during_the_drain_gives_its_node_back(fields: dict[str, Any]) -> None:
    pods = [*fillers(), *web(1), make_pod("keep-me", node="n3", **fields)]
    plan = run_plan([*targets(), draining()], pods)
    assert (plan.decision.action, plan.decision.node) == ("rollback", "n3")
    assert "pod default/keep-me" in plan.decision.reason


# -- several nodes carrying drain-started-at (issue 23, case 2) ------------------------------


def test_an_emptied_node_that_got_pods_again_is_given_back_while_another_drains() -> None:
    # n3 was emptied an hour ago and waits for the Cluster Autoscaler; n4 has been draining for a
    # minute; then a pod that tolerates everything landed on n3.
    anywhere = make_pod("tolerant", node="n3", tolerations=(toleration(operator="Exists"),))
    nodes = [*targets(), draining("n3", started=600), draining("n4", started=60)]
    plan = run_plan(nodes, [*fillers(), anywhere, *web(1, node="n4", cpu="100m")])
    assert (plan.decision.action, plan.decision.node) == ("rollback", "n3")
    assert "n4, the latest drain, goes on" in plan.decision.reason
    assert "this node is being drained" in blockers_of(plan, "n4")
    # The next run, n3 given back, continues n4's drain.
    after = apply(plan, make_snapshot(nodes, [*fillers(), anywhere, *web(1, node="n4", cpu="100m")]), NOW)
    following = planner.plan(after, make_config(), now=NOW + timedelta(seconds=60))
    assert (following.decision.action, following.decision.node) == ("continue-drain", "n4")


def test_an_emptied_node_that_got_pods_again_and_drains_alone_resumes_its_drain() -> None:
    plan = run_plan([*targets(), draining("n3", started=300)], [*fillers(), *web(1, cpu="100m")])
    assert (plan.decision.action, plan.decision.node) == ("continue-drain", "n3")


def test_three_draining_nodes_are_resolved_in_one_run_keeping_the_latest() -> None:
    nodes = [*targets(), draining("n3", started=300), draining("n4", started=60), draining("n5", started=120)]
    pods = [*fillers(), *(make_pod(f"p-{name}", node=name, cpu="100m") for name in ("n3", "n4", "n5"))]
    plan = run_plan(nodes, pods)
    given_back = {plan.decision.node, *(node for node, _ in plan.more_rollbacks)}
    assert plan.decision.action == "rollback"
    assert given_back == {"n3", "n5"}
    assert "this node is being drained" in blockers_of(plan, "n4")


def test_a_drain_started_in_the_future_counts_as_started_now_and_is_restamped() -> None:
    nodes = [*targets(), make_node("n3", unschedulable=True, annotations={DRAIN_STARTED_AT: "2099-01-01T00:00:00Z"})]
    plan = run_plan(nodes, [*fillers(), *web(1)])
    assert (plan.decision.action, plan.decision.node) == ("continue-drain", "n3")
    assert plan.restamp == ("n3",)
    assert "for 0s" in plan.decision.reason


def test_an_emptied_node_stamped_in_the_future_is_restamped_and_then_times_out() -> None:
    nodes = [*targets(), make_node("n3", unschedulable=True, annotations={DRAIN_STARTED_AT: "2099-01-01T00:00:00Z"})]
    plan = run_plan(nodes, fillers())
    assert plan.restamp == ("n3",) and plan.awaiting_removal == ("n3",)
    restamped = apply(plan, make_snapshot(nodes, fillers()), NOW)
    late = planner.plan(restamped, make_config(), now=NOW + timedelta(seconds=REMOVAL_TIMEOUT))
    assert (late.decision.action, late.decision.node) == ("rollback", "n3")


# -- nodes a person cordoned get no writes (issue 23, item 6) --------------------------------


@pytest.mark.parametrize(
    ("marked", "pods"),
    [
        pytest.param(None, [], id="an-unmarked-light-node-is-not-marked"),
        pytest.param(ago(600), [busy("full", "n9", cpu="3900m")], id="a-stale-mark-is-left-as-it-is"),
    ],
)
def test_a_node_a_person_cordoned_is_neither_marked_nor_unmarked(marked: datetime | None, pods: list[Pod]) -> None:
    person = make_node("n9", unschedulable=True, marked_since=marked)
    plan = run_plan([*targets(), person], [*fillers(), *pods])
    assert "n9" not in plan.marks_add and "n9" not in plan.marks_remove
    assert "n9" not in plan.soft_taints_add and "n9" not in plan.soft_taints_remove


# -- the state machine, over random start states ---------------------------------------------


@st.composite
def started_nodes(draw: st.DrawFn, index: int) -> tuple[Node, list[Pod]]:
    """A node carrying drain-started-at in any state, with 0-3 pods to move and maybe a DaemonSet pod."""
    name = f"d{index}"
    # Mostly drains a run would go on with, so that every rule is met beside the others.
    kind = draw(st.sampled_from(["past", "past", "past", "past", "long-past", "future", "far-future", "unreadable"]))
    text: str
    if kind == "past":
        text = format_stamp(NOW - timedelta(seconds=draw(st.integers(0, DRAIN_TIMEOUT))))
    elif kind == "long-past":
        text = format_stamp(NOW - timedelta(seconds=draw(st.integers(DRAIN_TIMEOUT, 90_000))))
    elif kind == "future":
        text = format_stamp(NOW + timedelta(seconds=draw(st.integers(1, 3600))))
    elif kind == "far-future":
        text = "2099-01-01T00:00:00Z"
    else:
        text = draw(st.sampled_from(["yesterday", "", "2026-13-40T00:00:00Z"]))
    annotations = {DRAIN_STARTED_AT: text}
    opt_out = draw(st.sampled_from([None] * 6 + [DISABLED, CA_SCALE_DOWN_DISABLED]))
    if opt_out is not None:
        annotations[opt_out] = "true"
    pool = draw(st.sampled_from(["default-pool"] * 7 + ["off-pool"]))
    node = make_node(
        name,
        pool=pool,
        unschedulable=draw(st.integers(0, 7)) > 0,
        annotations=annotations,
        marked_since=None,
    )
    pods = [
        make_pod(
            f"{name}-p{number}",
            node=name,
            cpu=draw(st.sampled_from(["100m", "500m", "2"])),
            terminating=draw(st.integers(0, 4)) == 0,
            safe_to_evict=draw(st.sampled_from([None] * 9 + [False])),
            owner=draw(st.sampled_from(["ReplicaSet", "ReplicaSet", "StatefulSet"])),
        )
        for number in range(draw(st.integers(0, 3)))
    ]
    if draw(st.booleans()):
        pods.append(make_pod(f"{name}-ds", node=name, owner="DaemonSet"))
    return node, pods


@st.composite
def start_states(draw: st.DrawFn) -> Snapshot:
    count = draw(st.integers(0, 5))
    started = [draw(started_nodes(index)) for index in range(count)]
    used = draw(st.sampled_from(["1", "3", "4"]))  # room on the targets: plenty, some, none
    nodes = [*targets(), *(node for node, _ in started)]
    pods = [*fillers(used), *(pod for _, node_pods in started for pod in node_pods)]
    if draw(st.integers(0, 3)) == 0:
        pods.append(make_pod("stuck", node=None, unschedulable=True, phase="Pending", cpu="500m"))
    return make_snapshot(nodes, pods)


def being_drained(snapshot: Snapshot) -> set[str]:
    """Nodes carrying drain-started-at that still have pods to move (an independent reading)."""
    stamped = {node.name for node in snapshot.nodes if DRAIN_STARTED_AT in node.annotations}
    return {
        pod.node_name
        for pod in snapshot.pods
        if pod.node_name is not None and pod.node_name in stamped and not pod.stays_on_node
    }


def apply(plan: Plan, snapshot: Snapshot, now: datetime, *, evictions_succeed: bool = False) -> Snapshot:
    """What the executor's writes make of the cluster: rollbacks, restamps and (maybe) evictions.

    Evicted pods leave the cluster (their replacements would land on the targets, outside the
    drained nodes, which is all that matters here)."""
    given_back = {node for node, _ in plan.more_rollbacks}
    if plan.decision.action == "rollback" and plan.decision.node:
        given_back.add(plan.decision.node)
    nodes: list[Node] = []
    for node in snapshot.nodes:
        annotations = dict(node.annotations)
        unschedulable = node.unschedulable
        if node.name in given_back:
            annotations.pop(DRAIN_STARTED_AT, None)
            annotations[DRAIN_FAILED_AT] = format_stamp(now)
            unschedulable = False
        elif node.name in plan.restamp:
            annotations[DRAIN_STARTED_AT] = format_stamp(now)
        if node.name in plan.marks_add:
            annotations[UNDERUTILIZED_SINCE] = format_stamp(now)
        if node.name in plan.marks_remove:
            annotations.pop(UNDERUTILIZED_SINCE, None)
        nodes.append(msgspec.structs.replace(node, annotations=annotations, unschedulable=unschedulable))
    evicted = set(plan.decision.evictions) if evictions_succeed else set()
    if plan.decision.action == "drain" and plan.decision.node:
        nodes = [
            msgspec.structs.replace(
                node,
                unschedulable=True,
                annotations={**node.annotations, DRAIN_STARTED_AT: format_stamp(now)},
            )
            if node.name == plan.decision.node
            else node
            for node in nodes
        ]
    pods = tuple(pod for pod in snapshot.pods if pod.key not in evicted)
    return Snapshot(tuple(nodes), pods, snapshot.pdbs)


def evicted_nodes(plan: Plan, snapshot: Snapshot) -> set[str]:
    by_key = {pod.key: pod.node_name for pod in snapshot.pods}
    return {node for key in plan.decision.evictions if (node := by_key.get(key)) is not None}


def names_of(items: Iterable[tuple[str, str]]) -> set[str]:
    return {node for node, _ in items}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=start_states(), steps=st.lists(st.tuples(st.integers(30, 300), st.booleans()), min_size=1, max_size=12))
def test_every_state_of_drain_started_at_has_a_next_step_leading_to_one_drain_at_most(
    start: Snapshot, steps: list[tuple[int, bool]]
) -> None:
    config = make_config()
    snapshot, now = start, NOW
    first = planner.plan(snapshot, config, now=now)
    stamped = {node.name for node in snapshot.nodes if DRAIN_STARTED_AT in node.annotations}
    # Every node carrying drain-started-at is accounted for: given back, awaiting removal, or the
    # one drain that goes on.
    given_back = names_of(first.more_rollbacks) | (
        {first.decision.node} if first.decision.action == "rollback" and first.decision.node else set()
    )
    goes_on = {report.name for report in first.nodes if "this node is being drained" in " | ".join(report.blockers)}
    assert len(goes_on) <= 1
    assert stamped == given_back | set(first.awaiting_removal) | goes_on
    assert not (given_back & (set(first.awaiting_removal) | goes_on))
    if being_drained(snapshot):
        assert first.decision.action in ("rollback", "continue-drain"), first.decision.reason
    # The next step evicts on one node at most, and never on a node it gives back.
    assert len(evicted_nodes(first, snapshot)) <= 1
    assert not evicted_nodes(first, snapshot) & given_back
    # After that step, at most one node is being drained.
    snapshot = apply(first, snapshot, now)
    assert len(being_drained(snapshot)) <= 1
    # Runs go on every few minutes; whatever the evictions do, no node is still being drained
    # drainTimeoutSeconds after the first run (a new drain may start meanwhile, one at a time).
    plan = first
    last_start: dict[str, datetime] = {}
    for seconds, evictions_succeed in steps:
        now += timedelta(seconds=seconds)
        plan = planner.plan(snapshot, config, now=now)
        assert len(evicted_nodes(plan, snapshot)) <= 1
        snapshot = apply(plan, snapshot, now, evictions_succeed=evictions_succeed)
        assert len(being_drained(snapshot)) <= 1
        for node in snapshot.nodes:
            started = parse_stamp(node.annotations.get(DRAIN_STARTED_AT))
            if started is not None:
                assert started <= now, "a drain-started-at in the future survived a run"
                last_start[node.name] = started
        for name in being_drained(snapshot):
            assert now - last_start[name] < timedelta(seconds=DRAIN_TIMEOUT), f"{name} drains past its timeout"
