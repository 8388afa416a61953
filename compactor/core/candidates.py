"""Which nodes may be drained (DESIGN rules 4 and 7), and every reason the others may not.

Node checks come first and are all reported, so a person sees everything
that stands in the way; pool and cluster gates are added only to nodes that
pass every node check, where they are the whole story.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from compactor.config import PoolConfig
from compactor.core.blockers import Blocker, pod_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.marks import opted_out
from compactor.core.model import CA_SCALE_DOWN_DISABLED, DO_NOT_DISRUPT, DRAIN_FAILED_AT, DRAIN_STARTED_AT
from compactor.core.timing import human, parse_stamp, seconds_between
from compactor.core.wording import percent


def node_blockers(
    state: NodeState,
    view: ClusterView,
    underutilized: bool,
    marked_since: datetime | None,
    now: datetime,
) -> list[Blocker]:
    config = view.config
    node = state.node
    pool = config.pool(state.pool)
    if state.pool is None:
        return [Blocker("pool", f"node has no {config.pool_label} label, so no pool settings")]
    if pool is None or not pool.enabled:
        return [Blocker("pool", f"pool {state.pool} is not enabled")]
    found: list[Blocker] = []
    if opted_out(state):
        found.append(Blocker("opt-out", "annotated node-compactor.dev/disabled=true"))
    if node.annotations.get(CA_SCALE_DOWN_DISABLED, "").strip().lower() == "true":
        found.append(Blocker("opt-out", f"annotated {CA_SCALE_DOWN_DISABLED}=true"))
    if node.annotations.get(DO_NOT_DISRUPT, "").strip().lower() == "true":
        found.append(Blocker("opt-out", f"annotated {DO_NOT_DISRUPT}=true"))
    if node.being_deleted_by_autoscaler:
        found.append(Blocker("being-deleted", "the Cluster Autoscaler is already removing this node"))
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
    for pod in state.pods:
        found.extend(pod_blockers(pod, view.pdbs, config))
    found.extend(_pool_size_blockers(state, view, pool))
    return found


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
    now: datetime,
) -> dict[str | None, list[Blocker]]:
    """Pool-wide reasons not to start a drain: the trigger count and the scale-up cooldown."""
    gates: dict[str | None, list[Blocker]] = {}
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
        gates[name] = found
    return gates


def cluster_gates(view: ClusterView, draining: str | None) -> list[Blocker]:
    """Cluster-wide reasons not to start any drain."""
    found = []
    if draining is not None:
        found.append(Blocker("drain-in-progress", f"node {draining} is being drained; one node at a time"))
    pending = view.unschedulable_pods
    if pending:
        example = ", ".join(pod.key for pod in pending[:3])
        found.append(
            Blocker(
                "pending-pods",
                f"{len(pending)} pod(s) cannot be scheduled ({example}); no drain starts while pods wait for room",
            )
        )
    return found
