"""Drains already under way come first (DESIGN rule 0).

A node that carries `drain-started-at` is either still being emptied
(**draining**: it has pods left to move; at most one may exist), or empty
and **awaiting removal** by the Cluster Autoscaler. Removal is pipelined: a
new drain may start while emptied nodes wait, up to the pool's
`maxNodesAwaitingRemoval`, so only the evictions are one node at a time.

What this stage decides, most urgent first:
1. several draining nodes: nothing at all, until a person resolves it;
2. pods that cannot be scheduled while an emptied node they could use waits
   for removal: give the newest such node back at once (capacity needed
   again), before the Cluster Autoscaler must buy a VM;
3. the draining node: continue, or roll back when it ran out of time or was
   uncordoned, opted out or disabled under us;
4. an emptied node the Cluster Autoscaler did not take in time (or that was
   uncordoned, opted out or disabled): give it back.
Otherwise no decision: the planner may start a new drain if nothing is draining.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime

from compactor.config import PoolConfig
from compactor.core import fit
from compactor.core.blockers import API_ENFORCED, pod_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.marks import opted_out
from compactor.core.model import CA_SCALE_DOWN_DISABLED, DRAIN_STARTED_AT, Pod
from compactor.core.plan import Decision
from compactor.core.timing import human, parse_stamp, seconds_between


@dataclass(frozen=True, slots=True)
class InFlight:
    # What to do about drains already started; None: nothing to do, a new drain may be planned.
    decision: Decision | None
    # The node still being emptied (several: the first by name); no new drain starts while there is one.
    draining: str | None
    # Emptied nodes waiting for the Cluster Autoscaler, per pool, oldest drain first.
    awaiting: dict[str | None, list[str]] = field(default_factory=dict)
    # When the decision is "none": the gate that holds every new drain (e.g. several draining nodes).
    hold: str | None = None
    # Per pool, the latest readable drain-started-at of its nodes (drainIntervalSeconds counts from it).
    last_started: dict[str | None, datetime] = field(default_factory=dict)

    @property
    def started(self) -> frozenset[str]:
        """Every node that carries drain-started-at and is accounted for: draining or awaiting removal."""
        awaiting = (name for names in self.awaiting.values() for name in names)
        return frozenset((*awaiting, *((self.draining,) if self.draining else ())))


@dataclass(frozen=True, slots=True)
class _Started:
    state: NodeState
    started: datetime | None
    pool: PoolConfig | None

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def emptied(self) -> bool:
        return not self.state.movable_pods


def eviction_order(pods: list[Pod]) -> tuple[str, ...]:
    """Lower priorities first, the largest first within each: `fit.eviction_order`, which the proof checks too."""
    return tuple(pod.key for pod in fit.eviction_order(pods))


def evictable(state: NodeState, view: ClusterView) -> list[Pod]:
    """Pods a drain may evict now: movable, not already leaving, blocked by nothing but a PDB."""
    return [
        pod
        for pod in state.movable_pods
        if not pod.terminating and all(b.kind in API_ENFORCED for b in pod_blockers(pod, view.pdbs, view.config))
    ]


def in_flight(view: ClusterView, now: datetime) -> InFlight:
    started = sorted(
        (
            _Started(
                state, parse_stamp(state.node.annotations.get(DRAIN_STARTED_AT)), view.config.enabled_pool(state.pool)
            )
            for state in view.nodes.values()
            if DRAIN_STARTED_AT in state.node.annotations
        ),
        key=lambda item: item.name,
    )
    draining = [item for item in started if not item.emptied]
    emptied = [item for item in started if item.emptied]
    awaiting: dict[str | None, list[str]] = defaultdict(list)
    for item in sorted(emptied, key=_started_order):
        awaiting[item.state.pool].append(item.name)
    last_started: dict[str | None, datetime] = {}
    for item in started:
        pool = item.state.pool
        if item.started is not None and (pool not in last_started or item.started > last_started[pool]):
            last_started[pool] = item.started
    found = InFlight(None, draining[0].name if draining else None, dict(awaiting), last_started=last_started)

    if len(draining) > 1:
        names = ", ".join(item.name for item in draining)
        reason = (
            f"{len(draining)} nodes carry {DRAIN_STARTED_AT} and still have pods to move ({names}); only one "
            "node may be drained at a time, so nothing is done until a person resolves it"
        )
        return replace(found, decision=Decision("none", None, None, reason), hold="several-draining")

    give_back = _capacity_needed(emptied, view)
    if give_back is not None:
        return replace(found, decision=give_back)
    if draining:
        return replace(found, decision=_decide_draining(draining[0], view, now))
    for item in sorted(emptied, key=_started_order):
        rollback = _rollback_reason(item, now)
        if rollback is not None:
            return replace(found, decision=Decision("rollback", item.name, item.state.pool, rollback))
    return found


def _started_order(item: _Started) -> tuple[bool, datetime | None, str]:
    return (item.started is None, item.started, item.name)


def _rollback_reason(item: _Started, now: datetime) -> str | None:
    """Why a started node must be given back whatever its pods, or None."""
    state = item.state
    node = state.node
    if item.started is None:
        return f"{DRAIN_STARTED_AT} on {node.name} is unreadable; giving the node back"
    if not node.unschedulable:
        return f"{node.name} was uncordoned by someone else during the drain"
    if opted_out(state) or node.annotations.get(CA_SCALE_DOWN_DISABLED, "").strip().lower() == "true":
        return f"{node.name} was opted out during the drain"
    if item.pool is None:
        return f"pool {state.pool} is no longer enabled"
    if item.emptied:
        elapsed = seconds_between(item.started, now)
        if elapsed >= item.pool.removal_timeout_seconds:
            return (
                f"the Cluster Autoscaler did not remove the empty node {node.name} within "
                f"{human(item.pool.removal_timeout_seconds)} (removalTimeoutSeconds)"
            )
    return None


def _decide_draining(item: _Started, view: ClusterView, now: datetime) -> Decision:
    state = item.state
    node = state.node
    rollback = _rollback_reason(item, now)
    if rollback is not None:
        return Decision("rollback", node.name, state.pool, rollback)
    assert item.started is not None and item.pool is not None  # checked by _rollback_reason
    elapsed = seconds_between(item.started, now)
    remaining = state.movable_pods
    if elapsed >= item.pool.drain_timeout_seconds:
        left = ", ".join(pod.key for pod in remaining[:5])
        return Decision(
            "rollback",
            node.name,
            state.pool,
            f"drain of {node.name} did not finish within {human(item.pool.drain_timeout_seconds)} "
            f"(drainTimeoutSeconds): {len(remaining)} pod(s) left ({left})",
        )
    pods = evictable(state, view)
    return Decision(
        "continue-drain",
        node.name,
        state.pool,
        f"draining {node.name} for {human(elapsed)}: {len(remaining)} pod(s) left, {len(pods)} to evict now",
        eviction_order(pods),
    )


def _capacity_needed(emptied: list[_Started], view: ClusterView) -> Decision | None:
    """Pods wait for room that an emptied node could give: the newest such node goes back at once."""
    pending = view.unschedulable_pods
    if not pending or not emptied:
        return None
    for item in sorted(emptied, key=_started_order, reverse=True):
        if item.state.node.being_deleted_by_autoscaler:
            continue  # already on its way out: uncordoning would not keep it
        users = [pod for pod in pending if fit.could_use(pod, item.state.node, uncordoned=True)]
        if users:
            example = ", ".join(pod.key for pod in users[:3])
            return Decision(
                "rollback",
                item.name,
                item.state.pool,
                f"capacity needed again: {len(users)} pod(s) cannot be scheduled ({example}) and could run on "
                f"{item.name}, which was emptied and waits for removal",
            )
    return None
