"""Which nodes may be drained (DESIGN rules 4 and 7), and every reason the others may not.

Node checks come first and are all reported, so a person sees everything
that stands in the way; pool and cluster gates are added only to nodes that
pass every node check, where they are the whole story.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from compactor.core import inflight, pools, surge, unschedulable, windows
from compactor.core.blockers import Blocker, node_pods_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.coexistence import PoolThreshold
from compactor.core.marks import opted_out
from compactor.core.model import (
    CA_SCALE_DOWN_DISABLED,
    DO_NOT_DISRUPT,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    Pod,
)
from compactor.core.timing import format_stamp, human, parse_stamp, seconds_between
from compactor.core.wording import percent
from compactor.settings.config import PoolConfig


def node_blockers(
    state: NodeState,
    view: ClusterView,
    underutilized: bool,
    marked_since: datetime | None,
    now: datetime,
    *,
    first_only: bool = False,
) -> list[Blocker]:
    """Every reason the node is not a drain candidate, in a fixed order; with `first_only`, the first
    one alone (what decisions use: `core.path` plans with it, as no person reads those nodes' reasons)."""
    config = view.config
    node = state.node
    pool = config.pool(state.pool)
    if state.pool is None:
        return [Blocker("pool", f"node has no {config.pool_label} label, so no pool settings")]
    if pool is None or not pool.enabled:
        return [Blocker("pool", f"pool {state.pool} is not enabled")]
    left = view.coexistence.left(state.pool)
    if left is not None:
        return [Blocker("compute-class", _left_briefly(left))]
    found = opt_outs(state)
    if found and first_only:
        return found[:1]
    if not underutilized:
        found.append(Blocker("not-underutilized", _why_not_underutilized(state, pool)))
    elif marked_since is None or seconds_between(marked_since, now) < pool.needed_marked_seconds:
        marked_for = 0.0 if marked_since is None else seconds_between(marked_since, now)
        found.append(
            Blocker(
                "marked-recently",
                f"underutilized for {human(marked_for)}, needs {human(pool.needed_marked_seconds)} "
                "(neededMarkedTimeSeconds)",
            )
        )
    if not node.ready:
        found.append(Blocker("not-ready", "node is not Ready"))
    if node.unschedulable and DRAIN_STARTED_AT not in node.annotations:
        found.append(Blocker("cordoned", "cordoned by someone else (spec.unschedulable); left alone"))
    if node.created is None:
        found.append(Blocker("too-young", "creation time unknown"))
    else:
        age = seconds_between(node.created, now)
        if age < pool.minimum_node_age_seconds:
            found.append(
                Blocker(
                    "too-young",
                    f"node is {human(age)} old, needs {human(pool.minimum_node_age_seconds)} (minimumNodeAgeSeconds)",
                )
            )
    failed_text = node.annotations.get(DRAIN_FAILED_AT)
    if failed_text is not None:
        failed_at = parse_stamp(failed_text)
        if failed_at is None:
            found.append(Blocker("backoff", f"{DRAIN_FAILED_AT} is unreadable ({failed_text!r}); fix or remove it"))
        elif seconds_between(failed_at, now) < pool.retry_backoff_seconds:
            found.append(
                Blocker(
                    "backoff",
                    f"a drain was rolled back {human(seconds_between(failed_at, now))} ago; "
                    f"retry after {human(pool.retry_backoff_seconds)} (retryBackoffSeconds)",
                )
            )
    if found and first_only:
        return found[:1]
    # In a pool with surgeSingleReplicas, a pod a rolling restart moves is blocked by none of the pod rules
    # (judged on underutilized nodes only: no other node is drained, and each judgement reads every pod).
    pods = surge.pods_under_rules(view, state) if underutilized else state.pods
    found.extend(node_pods_blockers(pods, view.pdbs, config))
    if pool.job_pods == "wait":
        found.extend(running_jobs(state.movable_pods, now))
    if found and first_only:
        return found[:1]
    found.extend(_pool_size_blockers(state, view, pool))
    left_behind = _autoscaler_refusal(state, *autoscaler_threshold(view, state.pool))
    if left_behind is not None:
        found.append(left_behind)
    return found[:1] if first_only else found


def running_jobs(pods: Iterable[Pod], now: datetime) -> list[Blocker]:
    """A pool's jobPods "wait": each running pod owned by a Job holds its node, which keeps its mark and soft
    taint (so new Job pods go elsewhere) until the Job's pod is done; evicting it would throw its work away."""
    found = []
    for pod in pods:
        if pod.controller_kind != "Job" or pod.phase != "Running" or pod.terminating:
            continue
        since = ""
        if pod.created is not None:
            since = f" since {format_stamp(pod.created)} ({human(seconds_between(pod.created, now))})"
        found.append(
            Blocker(
                "job",
                f"pod {pod.key}: Job {pod.controller_name} is running{since}; "
                'the node is drained once it is done (jobPods "wait")',
            )
        )
    return found


def _left_briefly(left: PoolThreshold) -> str:
    """A node's blocker in a pool left to the Cluster Autoscaler (the report's warning says what to change)."""
    where = (
        f"ComputeClass {left.compute_class}" if left.compute_class is not None else "computeClassConsolidationThreshold"
    )
    threshold = percent(left.threshold)
    return (
        f"pool {left.pool} is left to the Cluster Autoscaler: its {where} threshold {threshold} is at or above "
        "node-compactor's limit, so the autoscaler removes the nodes node-compactor would drain"
    )


def opt_outs(state: NodeState) -> list[Blocker]:
    """What keeps a node from ever being drained by node-compactor: the opt-out annotations, and
    the Cluster Autoscaler removing it already."""
    node = state.node
    found: list[Blocker] = []
    if opted_out(state):
        found.append(Blocker("opt-out", "annotated node-compactor.dev/disabled=true"))
    if node.annotations.get(CA_SCALE_DOWN_DISABLED, "").strip().lower() == "true":
        found.append(Blocker("opt-out", f"annotated {CA_SCALE_DOWN_DISABLED}=true"))
    if node.annotations.get(DO_NOT_DISRUPT, "").strip().lower() == "true":
        found.append(Blocker("opt-out", f"annotated {DO_NOT_DISRUPT}=true"))
    if node.being_deleted_by_autoscaler:
        found.append(Blocker("being-deleted", "the Cluster Autoscaler is already removing this node"))
    return found


def autoscaler_threshold(view: ClusterView, pool: str | None) -> tuple[float, str]:
    """The utilization threshold the Cluster Autoscaler applies to the pool's nodes, and where it comes from:
    its ComputeClass's consolidationThreshold (read from the cluster, else declared in the configuration:
    `core.coexistence`), else `clusterAutoscalerUtilizationThreshold`. GKE's fork asks the node pool's
    ComputeClass first (GoogleCloudPlatform/cluster-autoscaler, pkg/computeclass/autoscaling_options.go,
    `ScaleDownUtilizationThreshold`), and only then the flag."""
    known = view.coexistence.pools.get(pool) if pool is not None else None
    if known is not None and known.threshold is not None:
        if known.compute_class is not None:
            return known.threshold, f"ComputeClass {known.compute_class}'s consolidationThreshold"
        return known.threshold, "computeClassConsolidationThreshold"
    return view.config.ca_utilization_threshold, "clusterAutoscalerUtilizationThreshold"


def _autoscaler_refusal(state: NodeState, threshold: float, source: str) -> Blocker | None:
    """The Cluster Autoscaler would not remove the emptied node: what stays on it is above its threshold.

    Cluster Autoscaler counts a node as unneeded only while its utilization, the larger of the cpu and
    memory requests of the pods on it (DaemonSet and mirror pods included, --ignore-daemonsets-utilization
    being false by default) over allocatable, is at or below the threshold: `utilization > threshold` keeps
    it (core/scaledown/eligibility/eligibility.go, `isNodeAtOrBelowUtilizationThreshold`, in
    kubernetes/autoscaler; GKE's fork runs that code). After a drain only DaemonSet and mirror pods are left,
    so their share decides, against the pool's ComputeClass threshold when it has one (`autoscaler_threshold`).
    """
    allocatable = state.node.allocatable
    cpu = memory = 0
    for pod in state.pods:
        if pod.stays_on_node:
            cpu += pod.requests.cpu_millis
            memory += pod.requests.memory_bytes
    shares = []
    if allocatable.cpu_millis > 0:
        shares.append(("cpu", cpu / allocatable.cpu_millis))
    if allocatable.memory_bytes > 0:
        shares.append(("memory", memory / allocatable.memory_bytes))
    if not shares:
        return None
    resource, share = max(shares, key=lambda item: item[1])
    if share <= threshold:
        return None
    return Blocker(
        "ca-threshold",
        f"DaemonSet and mirror pods request {percent(share)} of its {resource}: once emptied, the Cluster "
        f"Autoscaler would not remove it (threshold {percent(threshold)}, {source})",
    )


def _why_not_underutilized(state: NodeState, pool: PoolConfig) -> str:
    cpu, memory = state.cpu_ratio, state.memory_ratio
    if cpu is None:
        return "node reports no allocatable cpu"
    assert pool.cpu_limit is not None  # enabled pools always have one
    if cpu >= pool.cpu_limit:
        return f"not underutilized: cpu {percent(cpu)} >= limit {percent(pool.cpu_limit)}"
    if pool.memory_limit is not None:
        return f"not underutilized: memory {percent(memory)} >= limit {percent(pool.memory_limit)}"
    return "not underutilized"


def _pool_size_blockers(state: NodeState, view: ClusterView, pool: PoolConfig) -> list[Blocker]:
    found = []
    members = view.nodes_by_pool[state.pool]
    remaining = view.schedulable_in_pool[state.pool] - (1 if state.schedulable else 0)
    if remaining < pool.min_nodes:
        found.append(
            Blocker(
                "min-nodes",
                f"pool {state.pool} would keep {remaining} schedulable node(s), minNodes is {pool.min_nodes}",
            )
        )
    autoscaling_by_pool = view.snapshot.pool_autoscaling
    if autoscaling_by_pool:
        autoscaling = autoscaling_by_pool.get(state.pool or "")
        if autoscaling is None or not autoscaling.enabled:
            found.append(
                Blocker(
                    "autoscaling",
                    f"pool {state.pool} has no autoscaling: the Cluster Autoscaler would never remove the node",
                )
            )
        else:
            if autoscaling.total_min_node_count and len(members) - 1 < autoscaling.total_min_node_count:
                found.append(
                    Blocker(
                        "autoscaling",
                        f"pool {state.pool} is at its autoscaling minimum "
                        f"({len(members)} nodes, totalMinNodeCount {autoscaling.total_min_node_count})",
                    )
                )
            zone = state.node.zone
            in_zone = view.nodes_in_pool_zone[(state.pool, zone)]
            if autoscaling.min_node_count and in_zone - 1 < autoscaling.min_node_count:
                found.append(
                    Blocker(
                        "autoscaling",
                        f"pool {state.pool} is at its autoscaling minimum in zone {zone} "
                        f"({in_zone} nodes, minNodeCount {autoscaling.min_node_count} per zone)",
                    )
                )
    return found


def pool_gates(
    view: ClusterView,
    underutilized_count: Counter[str | None],
    running: inflight.InFlight,
    now: datetime,
) -> dict[str | None, list[Blocker]]:
    """Pool-wide reasons not to start a drain now; a pool with none may start one."""
    gates: dict[str | None, list[Blocker]] = {}
    pending = unschedulable.by_pool(view)
    for name, members in view.nodes_by_pool.items():
        pool = view.config.enabled_pool(name)
        if pool is None:
            continue
        found = []
        if underutilized_count[name] < pool.required_underutilized:
            found.append(
                Blocker(
                    "trigger",
                    f"pool {name} has {underutilized_count[name]} underutilized node(s), needs "
                    f"{pool.required_underutilized} (scaleDownRequiredUnderutilizedNodeCount)",
                )
            )
        if pool.excess_nodes_threshold is not None:
            leaving = sum(1 for member in members if DRAIN_STARTED_AT in member.node.annotations)
            excess = len(members) - pools.lower_bound_nodes(members) - leaving
            if excess < pool.excess_nodes_threshold:
                found.append(
                    Blocker(
                        "trigger",
                        f"pool {name} has {max(0, excess)} excess node(s) not already being removed, needs "
                        f"{pool.excess_nodes_threshold} (excessNodesThreshold)",
                    )
                )
        ages = [(seconds_between(m.node.created, now), m.name) for m in members if m.node.created is not None]
        if ages:
            youngest_age, youngest = min(ages)
            if youngest_age < pool.scale_up_cooldown_seconds:
                found.append(
                    Blocker(
                        "cooldown",
                        f"pool {name} scaled up {human(youngest_age)} ago (node {youngest}); waiting "
                        f"{human(pool.scale_up_cooldown_seconds)} (scaleUpCooldownSeconds)",
                    )
                )
        awaiting = running.awaiting.get(name, [])
        if len(awaiting) >= pool.max_awaiting_removal:
            found.append(
                Blocker(
                    "awaiting-removal",
                    f"pool {name} has {len(awaiting)} emptied node(s) waiting for the Cluster Autoscaler "
                    f"({', '.join(awaiting)}); at most {pool.max_awaiting_removal} (maxNodesAwaitingRemoval)",
                )
            )
        if pool.drain_interval_seconds:
            last = running.last_started.get(name)
            if last is not None and seconds_between(last, now) < pool.drain_interval_seconds:
                found.append(
                    Blocker(
                        "interval",
                        f"pool {name} started a drain {human(seconds_between(last, now))} ago; waiting "
                        f"{human(pool.drain_interval_seconds)} (drainIntervalSeconds)",
                    )
                )
        if pool.disruption_windows is not None:
            window = windows.state(pool.disruption_windows, view.config.time_zone, now)
            if not window.open:
                opens = (
                    f"next opens at {format_stamp(window.next_open)}"
                    if window.next_open is not None
                    else "none opens again"
                )
                found.append(Blocker("window", f"pool {name} is outside its disruption windows; {opens}"))
        waiting = pending.get(name)
        if waiting:
            example = ", ".join(pod.key for pod in waiting[:3])
            found.append(
                Blocker(
                    "pending-pods",
                    f"{len(waiting)} unschedulable pod(s) could use pool {name}'s nodes ({example}); "
                    "no drain starts in the pool while they wait for room",
                )
            )
        gates[name] = found
    return gates


def cluster_gates(running: inflight.InFlight) -> list[Blocker]:
    """Cluster-wide reasons not to start any drain: evictions are one node at a time."""
    if running.draining is not None:
        return [Blocker("drain-in-progress", f"node {running.draining} is being drained; one node at a time")]
    if running.decision is not None:
        return [Blocker("rollback", f"this run gives {running.decision.node} back first")]
    return []
