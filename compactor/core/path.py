"""The consolidation path: the drains the planner would make, one after another, if nothing changed.

Pure, like the planner it drives. The first step is the decision made now
(when it is a drain); from there each step plans again on the cluster the
previous drain leaves behind: the drained node is gone (the Cluster
Autoscaler removes it) and its pods run where the fit proof placed them.
Waiting is assumed over: marks are old enough, nodes old enough, backoffs,
drain intervals and disruption windows passed, and nodes awaiting removal
removed. What cannot pass by waiting still stops the path: pods that cannot
be scheduled, PodDisruptionBudgets at zero, pods that block a drain, pods
that fit nowhere, and the pools' own limits.

The path assumes no other node goes away meanwhile. The Cluster Autoscaler
removes nodes of its own, those at or below its utilization threshold whose pods
fit elsewhere; when the path counts on the room of such a node (places pods
on it), the path says so in its caveats: if the autoscaler removes that node
first, the pods it counted on placing there need other room, and the path
can end sooner than it shows.

The path is bounded (at most `MAX_STEPS` drains, and by default at most
`WORK_LIMIT` pods planned over the steps after the first, so a 5,000-node
cluster costs one more plan, about a second; a caller may ask for a number
of steps instead), and it says when it stopped early. Its time estimate
assumes one run every `schedule_minutes` and the Cluster Autoscaler removing
an emptied node after `removal_minutes` (its scale-down-unneeded-time, 10
minutes by default).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from msgspec import structs

from compactor.core import candidates, planner, pools, preview
from compactor.core.cluster import ClusterView, PdbIndex
from compactor.core.model import (
    CA_SCALE_DOWN_DISABLED,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    UNDERUTILIZED_SINCE,
    Node,
    Pod,
    Snapshot,
)
from compactor.core.plan import ConsolidationPath, Decision, PathStep, Plan
from compactor.core.prices import pricing
from compactor.core.timing import format_stamp
from compactor.settings.config import Config

MAX_STEPS = 50
WORK_LIMIT = 150_000  # pods planned over the steps after the first: one more plan at 150,000 pods
SCHEDULE_MINUTES = 5.0
REMOVAL_MINUTES = 10.0
# Long enough before `now` for every time gate the configuration can set (int32 seconds).
MATURED = timedelta(days=400)


def consolidation_path(
    snapshot: Snapshot,
    config: Config,
    first: Plan,
    *,
    now: datetime,
    schedule_minutes: float = SCHEDULE_MINUTES,
    removal_minutes: float = REMOVAL_MINUTES,
    max_steps: int | None = None,
    view: ClusterView | None = None,
) -> ConsolidationPath:
    """The path from the plan `first` made now; `view` may be the view `first` was made on, whose
    PDB index and per-node sums the path's plans then share."""
    snapshot_nodes = {node.name: node for node in snapshot.nodes}
    started = {node.name for node in snapshot.nodes if DRAIN_STARTED_AT in node.annotations}
    if started - set(first.awaiting_removal):  # the planner found a node still being drained
        return ConsolidationPath((), False, "a drain in progress comes first; the path starts once it is done", 0.0)
    # By default the steps after the first are bounded by the work of planning them; asked for, N it is.
    limit = max_steps if max_steps is not None else min(MAX_STEPS, 1 + WORK_LIMIT // max(1, len(snapshot.pods)))
    matured_config = _without_waiting(config)
    steps: list[PathStep] = []
    original = view  # the view of the cluster as it is now; `view` moves along the path
    # The nodes the path places pods on, in the order it first does.
    targets: dict[str, None] = dict.fromkeys(target for _, target in first.decision.placements)
    # What the last drain moved, by target: with the view before it, the next view is made without
    # regrouping every pod (`ClusterView`); None when there is no such view.
    moved: dict[str, list[Pod]] | None = {} if view is not None else None
    if first.decision.action == "drain" and first.decision.node is not None:
        # The first step is the decision made now; the waits are assumed over only after it.
        node = first.decision.node
        # The view's pods of the node; without a view, the snapshot's (`_apply` keeps the placed ones).
        drained_pods = view.nodes[node].pods if view is not None else [p for p in snapshot.pods if p.node_name == node]
        snapshot, step, drained = _apply(snapshot, first.decision, config.pool_label, drained_pods)
        moved = drained if view is not None else None
        steps.append(step)
    current = _matured(snapshot, now)
    # The PDBs do not change along the path: what they cover is found once.
    pdbs = view.pdbs if view is not None else PdbIndex(snapshot.pdbs)
    while True:
        # Each view is built from the one before: most nodes hold the same pods from step to step.
        view = ClusterView(current, matured_config, pdbs, earlier=view, moved=moved)
        reached = _at_lower_bound(view, config)
        if reached:
            stopped = "every enabled pool is at its lower bound"
            break
        if len(steps) == limit:
            # A plan made past the last step shown would be spent only on saying why it stops there.
            stopped = f"stopped after {limit} step(s) to keep planning bounded"
            break
        plan = planner.plan(current, matured_config, now=now, view=view, explain=False)
        if plan.decision.action != "drain" or plan.decision.node is None:
            stopped = _why_stopped(plan)
            break
        current, step, moved = _apply(current, plan.decision, config.pool_label, view.nodes[plan.decision.node].pods)
        steps.append(step)
        targets.update(dict.fromkeys(target for _, target in plan.decision.placements))
    found = _path(steps, reached, stopped, config, schedule_minutes, removal_minutes)
    gone = {step.node for step in steps}
    counted_on = [target for target in targets if target not in gone]
    caveats = _autoscaler_may_remove(snapshot_nodes, first, counted_on, config, original)
    return dataclasses.replace(found, caveats=caveats) if caveats else found


def plan_with_path(
    snapshot: Snapshot,
    config: Config,
    *,
    now: datetime,
    max_steps: int | None = None,
    prices: pricing.PriceTable | None = None,
) -> Plan:
    """The plan made now with its consolidation path and the preview taken from it; the plans share
    one PDB index, so the PodDisruptionBudgets covering each pod are found once and not once a plan,
    and each plan's view of the cluster is built from the one before. `prices`: as for `planner.plan`."""
    view = ClusterView(snapshot, config)
    first = planner.plan(snapshot, config, now=now, view=view, prices=prices)
    found = consolidation_path(snapshot, config, first, now=now, max_steps=max_steps, view=view)
    # When nothing is drained now, the path's first step is the drain the waits hold back: the preview.
    return dataclasses.replace(first, path=found, preview=preview.from_path(snapshot, config, first, found, now=now))


def _path(
    steps: list[PathStep],
    reached: bool,
    stopped: str,
    config: Config,
    schedule_minutes: float,
    removal_minutes: float,
) -> ConsolidationPath:
    if not steps:
        return ConsolidationPath((), reached, stopped, 0.0)
    # Drains start one run apart while emptied nodes wait for removal, at most that many at once per pool.
    awaiting = min((pool.max_awaiting_removal for pool in config.node_pools.values() if pool.enabled), default=1)
    per_step = max(schedule_minutes, removal_minutes / max(1, awaiting))
    minutes = (len(steps) - 1) * per_step + schedule_minutes + removal_minutes
    return ConsolidationPath(tuple(steps), reached, stopped, math.ceil(minutes))


def _without_waiting(config: Config) -> Config:
    pools = {
        name: pool.model_copy(update={"drain_interval_seconds": 0, "disruption_windows": None})
        for name, pool in config.node_pools.items()
    }
    return config.model_copy(update={"node_pools": pools})


def _matured(snapshot: Snapshot, now: datetime) -> Snapshot:
    """The snapshot once every wait is over: old marks and nodes, no backoff, awaiting nodes gone."""
    long_ago = now - MATURED
    stamp = format_stamp(long_ago)
    gone = {node.name for node in snapshot.nodes if DRAIN_STARTED_AT in node.annotations}
    nodes = []
    for node in snapshot.nodes:
        if node.name in gone:
            continue
        annotations = {k: v for k, v in node.annotations.items() if k != DRAIN_FAILED_AT}
        annotations[UNDERUTILIZED_SINCE] = stamp
        created = long_ago if node.created is None or node.created > long_ago else node.created
        nodes.append(structs.replace(node, annotations=annotations, created=created))
    pods = tuple([pod for pod in snapshot.pods if pod.node_name not in gone]) if gone else snapshot.pods
    return structs.replace(snapshot, nodes=tuple(nodes), pods=pods)


def _apply(
    snapshot: Snapshot, decision: Decision, pool_label: str, drained_pods: Sequence[Pod]
) -> tuple[Snapshot, PathStep, dict[str, list[Pod]]]:
    """The cluster after the drain: the node gone, its pods where the proof placed them, listed after
    every other pod (what `ClusterView`'s `moved` asks); and those pods by their new node.
    `drained_pods` are the drained node's pods in the snapshot's order (its `NodeState.pods`)."""
    drained = decision.node
    placements = dict(decision.placements)
    kept = [pod for pod in snapshot.pods if pod.node_name != drained]
    moved: dict[str, list[Pod]] = {}
    placed: list[Pod] = []
    for pod in drained_pods:
        target = placements.get(pod.key)
        if target is not None:
            pod = structs.replace(pod, node_name=target)
            placed.append(pod)
            moved.setdefault(target, []).append(pod)
    nodes = tuple(node for node in snapshot.nodes if node.name != drained)
    left = sum(1 for node in nodes if node.labels.get(pool_label) == decision.pool)
    step = PathStep(drained or "", decision.pool, len(placements), left)
    return structs.replace(snapshot, nodes=nodes, pods=(*kept, *placed)), step, moved


def _at_lower_bound(view: ClusterView, config: Config) -> bool:
    """Whether every enabled pool has no more nodes than its lower bound (the plans' `excess_nodes`)."""
    enabled = [
        members
        for name, members in view.nodes_by_pool.items()
        if config.enabled_pool(name) is not None and view.coexistence.left(name) is None
    ]
    return bool(enabled) and all(len(members) <= pools.lower_bound_nodes(members) for members in enabled)


def _autoscaler_may_remove(
    nodes: Mapping[str, Node],
    first: Plan,
    targets: Sequence[str],
    config: Config,
    view: ClusterView | None,
) -> tuple[str, ...]:
    """The caveat for the path's targets that the Cluster Autoscaler may remove on its own: Ready, not
    cordoned, not opted out with its `scale-down-disabled`, and at or below its utilization threshold (the
    larger of the cpu and memory shares requested, DaemonSet pods counted, as the autoscaler measures
    it: cluster-autoscaler/simulator/utilization/info.go) as they are now. Its own drainability rules are
    not checked: "may"."""
    reports = {report.name: report for report in first.nodes}
    named: list[str] = []
    for name in targets:
        report, node = reports.get(name), nodes.get(name)
        if report is None or node is None or report.cpu_ratio is None or not report.ready or report.cordoned:
            continue
        if node.annotations.get(CA_SCALE_DOWN_DISABLED) == "true":
            continue
        # The pool's ComputeClass threshold, else clusterAutoscalerUtilizationThreshold, as the planner judges it.
        threshold = (
            candidates.autoscaler_threshold(view, report.pool)[0]
            if view is not None
            else config.ca_utilization_threshold
        )
        utilization = max(report.cpu_ratio, report.memory_ratio or 0.0)
        if utilization <= threshold:
            named.append(f"{name} ({utilization:.0%} requested, its threshold {threshold:.0%})")
    if not named:
        return ()
    return (
        "the Cluster Autoscaler may remove "
        + ", ".join(named)
        + " on its own first; the path places pods there, and if that room goes, the path ends sooner",
    )


def _why_stopped(plan: Plan) -> str:
    if plan.held_by is not None:
        return f"held back by {plan.held_by} ({planner.BLOCKER_SUMMARY.get(plan.held_by, plan.held_by)})"
    return plan.decision.reason
