"""A drain already under way comes first (DESIGN rule 0).

The node that carries `drain-started-at` is either still being emptied
(`continue-drain`), empty and waiting for the Cluster Autoscaler (`none`),
or has run out of time and is given back (`rollback`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from compactor.core import fit
from compactor.core.blockers import API_ENFORCED, pod_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.marks import opted_out
from compactor.core.model import CA_SCALE_DOWN_DISABLED, DRAIN_STARTED_AT, Pod
from compactor.core.plan import Decision
from compactor.core.timing import human, parse_stamp, seconds_between


@dataclass(frozen=True, slots=True)
class InFlight:
    decision: Decision
    node: str | None  # the node being drained, which blocks any new drain


def eviction_order(pods: list[Pod]) -> tuple[str, ...]:
    """Cheapest to lose first; the fit proof checks this order too (`fit.eviction_order`)."""
    return tuple(pod.key for pod in fit.eviction_order(pods))


def evictable(state: NodeState, view: ClusterView) -> list[Pod]:
    """Pods a drain may evict now: movable, not already leaving, blocked by nothing but a PDB."""
    return [
        pod
        for pod in state.movable_pods
        if not pod.terminating and all(b.kind in API_ENFORCED for b in pod_blockers(pod, view.pdbs, view.config))
    ]


def in_flight(view: ClusterView, now: datetime) -> InFlight | None:
    draining = sorted(
        (state for state in view.nodes.values() if DRAIN_STARTED_AT in state.node.annotations),
        key=lambda state: state.name,
    )
    if not draining:
        return None
    if len(draining) > 1:
        names = ", ".join(state.name for state in draining)
        reason = (
            f"{len(draining)} nodes carry {DRAIN_STARTED_AT} ({names}); only one drain may exist, "
            "so nothing is done until a person resolves it"
        )
        return InFlight(Decision("none", None, None, reason), draining[0].name)
    state = draining[0]
    return InFlight(_decide(state, view, now), state.name)


def _decide(state: NodeState, view: ClusterView, now: datetime) -> Decision:
    node = state.node

    def rollback(reason: str) -> Decision:
        return Decision("rollback", node.name, state.pool, reason)

    started = parse_stamp(node.annotations.get(DRAIN_STARTED_AT))
    if started is None:
        return rollback(f"{DRAIN_STARTED_AT} on {node.name} is unreadable; giving the node back")
    if not node.unschedulable:
        return rollback(f"{node.name} was uncordoned by someone else during the drain")
    if opted_out(state) or node.annotations.get(CA_SCALE_DOWN_DISABLED, "").strip().lower() == "true":
        return rollback(f"{node.name} was opted out during the drain")
    pool = view.config.enabled_pool(state.pool)
    if pool is None:
        return rollback(f"pool {state.pool} is no longer enabled")
    elapsed = seconds_between(started, now)
    remaining = state.movable_pods
    if remaining:
        if elapsed >= pool.drain_timeout_seconds:
            left = ", ".join(pod.key for pod in remaining[:5])
            return rollback(
                f"drain of {node.name} did not finish within {human(pool.drain_timeout_seconds)} "
                f"(drainTimeoutSeconds): {len(remaining)} pod(s) left ({left})"
            )
        pods = evictable(state, view)
        return Decision(
            "continue-drain",
            node.name,
            state.pool,
            f"draining {node.name} for {human(elapsed)}: {len(remaining)} pod(s) left, {len(pods)} to evict now",
            eviction_order(pods),
        )
    if elapsed >= pool.removal_timeout_seconds:
        return rollback(
            f"the Cluster Autoscaler did not remove the empty node {node.name} within "
            f"{human(pool.removal_timeout_seconds)} (removalTimeoutSeconds)"
        )
    return Decision(
        "none",
        node.name,
        state.pool,
        f"drain of {node.name} is complete; waiting for the Cluster Autoscaler to remove it",
    )
