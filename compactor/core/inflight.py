"""Drains already under way come first (DESIGN rule 0); docs/drain-states.md draws the states.

A node that carries `drain-started-at` is either still being emptied
(**draining**: it has pods left to move), or empty and **awaiting removal**
by the Cluster Autoscaler. Removal is pipelined: a new drain may start while
emptied nodes wait, up to the pool's `maxNodesAwaitingRemoval`, so only the
evictions are one node at a time.

Every combination of such nodes has one next step, and that step leaves at
most one node being evicted:
1. Each started node that must be given back whatever else happens is given
   back: its `drain-started-at` is unreadable, it was uncordoned, it or its
   pool was opted out (or a pod still to move was: safe-to-evict "false",
   do-not-disrupt), or it ran out of time (drainTimeoutSeconds while pods are
   left, removalTimeoutSeconds once emptied). A `drain-started-at` in the
   future counts as "started now", and is rewritten to now (`restamp`) so
   that the clock really starts.
2. Of the draining nodes left, the one whose drain started last goes on
   (one node at a time, and no new drain starts while one is draining, so the
   latest is the one really being drained: an older one is an emptied node
   that got pods again, or a leftover). The others are given back.
3. Pods that cannot be scheduled while an emptied node they could use waits
   for removal: the newest such node is given back, before the Cluster
   Autoscaler must buy a VM.
4. A run that gives nodes back does only that (all of them at once); the
   drain that goes on continues in the next run, on the cluster as it is then.
5. Otherwise the draining node continues: before any pod is evicted, the
   pods left on it must fit on the other nodes as they are now (the planner's
   proof, `proof.prove`, with the pods waiting for the scheduler placed
   first), and no pod this pool could hold may be unschedulable. When either
   fails the drain waits (`Decision.held`) and is rolled back at
   drainTimeoutSeconds, like a drain a PodDisruptionBudget never lets go on.
Without a draining node the planner may start a new drain.

The executor asks the same question before every later batch of evictions in
a run (`in_flight` on a fresh read of the cluster).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from compactor.core import fit, proof, unschedulable
from compactor.core.blockers import API_ENFORCED, pod_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import (
    CA_SCALE_DOWN_DISABLED,
    DISABLED,
    DO_NOT_DISRUPT,
    DRAIN_STARTED_AT,
    PREFER_NO_SCHEDULE,
    Pod,
)
from compactor.core.plan import Decision
from compactor.core.timing import human, parse_stamp, seconds_between
from compactor.settings.config import PoolConfig

# Controllers that create a replacement as soon as the pod they lost starts terminating: a
# terminating pod of theirs on the draining node already has its replacement, waiting for the
# scheduler (and counted there) or placed (counted on its node). A StatefulSet recreates the pod only
# once it is gone (`fit._recreated_last`), so its terminating pods still need the room themselves.
REPLACED_AT_ONCE = frozenset({"ReplicaSet", "ReplicationController", "Job"})


@dataclass(frozen=True, slots=True)
class InFlight:
    # What to do about drains already started; None: nothing to do, a new drain may be planned.
    decision: Decision | None
    # The node whose drain goes on (now, or in the next run when this one gives nodes back); no new
    # drain starts while there is one.
    draining: str | None
    # Emptied nodes waiting for the Cluster Autoscaler, per pool, oldest drain first (none given back).
    awaiting: dict[str | None, list[str]] = field(default_factory=dict)
    # Per pool, the latest drain-started-at of its nodes (drainIntervalSeconds counts from it).
    last_started: dict[str | None, datetime] = field(default_factory=dict)
    # Every node given back in this run as (node, reason), the decision's first.
    give_back: tuple[tuple[str, str], ...] = ()
    # Nodes kept in a drain whose drain-started-at lies in the future: it is rewritten to now.
    restamp: tuple[str, ...] = ()
    # Every node that carries drain-started-at.
    started: frozenset[str] = frozenset()

    @property
    def awaiting_removal(self) -> tuple[str, ...]:
        return tuple(sorted(name for names in self.awaiting.values() for name in names))

    @property
    def given_back(self) -> dict[str, str]:
        return dict(self.give_back)


@dataclass(frozen=True, slots=True)
class _Started:
    state: NodeState
    # When the drain started: the stamp, `now` when the stamp lies in the future, None when unreadable.
    started: datetime | None
    future: bool  # the stamp lies in the future
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
    started = sorted((_read(state, view, now) for state in view.nodes.values() if _carries_stamp(state)), key=_name)
    if not started:
        return InFlight(None, None)

    give_back: dict[str, tuple[int, str]] = {}  # node -> (urgency, reason); lower urgency goes first
    for item in started:
        reason = _give_back_reason(item, now)
        if reason is not None:
            give_back[item.name] = (1 if not item.emptied else 2, reason)
    draining = [item for item in started if not item.emptied and item.name not in give_back]
    kept = _latest(draining, now)
    for item in draining:
        if item is not kept:
            assert kept is not None
            names = ", ".join(other.name for other in draining)
            give_back[item.name] = (
                1,
                f"{len(draining)} nodes carry {DRAIN_STARTED_AT} and still have pods to move ({names}); only one "
                f"node is drained at a time: {kept.name}, the latest drain, goes on and {item.name} is given back",
            )
    emptied = [item for item in started if item.emptied and item.name not in give_back]
    capacity = _capacity_needed(emptied, view)
    if capacity is not None:
        give_back[capacity[0]] = (0, capacity[1])

    awaiting: dict[str | None, list[str]] = defaultdict(list)
    for item in sorted(emptied, key=_started_order):
        if item.name not in give_back:
            awaiting[item.state.pool].append(item.name)
    last_started: dict[str | None, datetime] = {}
    for item in started:
        pool = item.state.pool
        if item.started is not None and (pool not in last_started or item.started > last_started[pool]):
            last_started[pool] = item.started
    ordered = tuple((name, reason) for name, (_, reason) in sorted(give_back.items(), key=lambda kv: (kv[1][0], kv[0])))
    found = InFlight(
        None,
        kept.name if kept is not None else None,
        dict(awaiting),
        last_started,
        ordered,
        tuple(item.name for item in started if item.future and item.name not in give_back),
        frozenset(item.name for item in started),
    )

    if ordered:
        name, reason = ordered[0]
        pool = view.nodes[name].pool
        return replace(found, decision=Decision("rollback", name, pool, reason))
    if kept is not None:
        return replace(found, decision=_continue(kept, view, now))
    return found


def _carries_stamp(state: NodeState) -> bool:
    return DRAIN_STARTED_AT in state.node.annotations


def _name(item: _Started) -> str:
    return item.name


def _read(state: NodeState, view: ClusterView, now: datetime) -> _Started:
    stamp = parse_stamp(state.node.annotations.get(DRAIN_STARTED_AT))
    future = stamp is not None and stamp > now
    return _Started(state, now if future else stamp, future, view.config.enabled_pool(state.pool))


def _latest(draining: list[_Started], now: datetime) -> _Started | None:
    """The drain that started last (the first by name among equal times): the one really under way.
    Their times are all readable (an unreadable one is given back)."""
    by_name = sorted(draining, key=_name)
    return max(by_name, key=lambda item: item.started or now, default=None)


def _started_order(item: _Started) -> tuple[bool, datetime | None, str]:
    return (item.started is None, item.started, item.name)


def _give_back_reason(item: _Started, now: datetime) -> str | None:
    """Why a started node must be given back whatever its pods, or None."""
    state = item.state
    node = state.node
    if item.started is None:
        return f"{DRAIN_STARTED_AT} on {node.name} is unreadable; giving the node back"
    if not node.unschedulable:
        return f"{node.name} was uncordoned by someone else during the drain"
    opt_out = node_opt_out(node.annotations)
    if opt_out is not None:
        return f"{node.name} was opted out during the drain ({opt_out})"
    if item.pool is None:
        return f"pool {state.pool} is no longer enabled"
    elapsed = seconds_between(item.started, now)
    if item.emptied:
        if elapsed >= item.pool.removal_timeout_seconds:
            return (
                f"the Cluster Autoscaler did not remove the empty node {node.name} within "
                f"{human(item.pool.removal_timeout_seconds)} (removalTimeoutSeconds)"
            )
        return None
    pod_opt_out = _pod_opt_out(state)
    if pod_opt_out is not None:
        return f"a pod on {node.name} was opted out during the drain ({pod_opt_out}); its node is given back"
    if elapsed >= item.pool.drain_timeout_seconds:
        remaining = state.movable_pods
        left = ", ".join(pod.key for pod in remaining[:5])
        return (
            f"drain of {node.name} did not finish within {human(item.pool.drain_timeout_seconds)} "
            f"(drainTimeoutSeconds): {len(remaining)} pod(s) left ({left})"
        )
    return None


def node_opt_out(annotations: Mapping[str, object]) -> str | None:
    """The opt-out annotation a node carries, as "annotated KEY=true", or None (DESIGN: the node
    opt-outs node-compactor honours; the executor reads them from the raw node too)."""
    for key in (DISABLED, CA_SCALE_DOWN_DISABLED, DO_NOT_DISRUPT):
        value = annotations.get(key)
        if isinstance(value, str) and value.strip().lower() == "true":
            return f"annotated {key}=true"
    return None


def _pod_opt_out(state: NodeState) -> str | None:
    """A pod still to move whose owner asked that it never be disrupted (DESIGN rule 5's opt-outs)."""
    for pod in state.movable_pods:
        if pod.terminating:
            continue  # already leaving: nothing node-compactor does changes that
        if pod.safe_to_evict is False:
            return f"pod {pod.key} annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false"
        if pod.do_not_disrupt:
            return f"pod {pod.key} annotated {DO_NOT_DISRUPT}=true"
    return None


def _continue(item: _Started, view: ClusterView, now: datetime) -> Decision:
    """The draining node's next batch of evictions, or why the drain waits instead."""
    state = item.state
    node = state.node
    assert item.started is not None and item.pool is not None  # checked by _give_back_reason
    elapsed = seconds_between(item.started, now)
    remaining = state.movable_pods
    pods = evictable(state, view)
    held = _held(state, view, pods)
    if held is not None:
        return Decision(
            "continue-drain",
            node.name,
            state.pool,
            f"the drain of {node.name} waits ({human(elapsed)} of {human(item.pool.drain_timeout_seconds)}, "
            f"drainTimeoutSeconds, then it is rolled back): {held}",
            held=held,
        )
    return Decision(
        "continue-drain",
        node.name,
        state.pool,
        f"draining {node.name} for {human(elapsed)}: {len(remaining)} pod(s) left, {len(pods)} to evict now; "
        "they fit on the other nodes as they are now",
        eviction_order(pods),
    )


def _held(state: NodeState, view: ClusterView, pods: list[Pod]) -> str | None:
    """Why no pod of the draining node may be evicted now, or None (DESIGN rules 0 and 7)."""
    waiting = unschedulable.by_pool(view).get(state.pool)
    if waiting:
        example = ", ".join(pod.key for pod in waiting[:3])
        return (
            f"{len(waiting)} pod(s) cannot be scheduled and could use pool {state.pool}'s nodes ({example}); "
            "nothing is evicted while they wait for room"
        )
    if not pods:
        return None  # nothing would be evicted: no room is asked for
    moving = [*pods, *(pod for pod in state.movable_pods if pod.terminating and not _replaced(pod))]
    targets = fit.targets_for(view)
    arriving = _arriving(view, targets)
    avoided = frozenset(
        target.name for target in targets if any(taint.effect == PREFER_NO_SCHEDULE for taint in target.node.taints)
    )
    result = proof.prove(view, state, targets, avoided, moving=moving, arriving=arriving)
    if isinstance(result, str):
        counted = f" with the {len(arriving)} pod(s) waiting for the scheduler placed first" if arriving else ""
        return (
            f"its {len(moving)} pod(s) left no longer fit on the other nodes as they are now{counted}: {result}; "
            "nothing is evicted that would find no node"
        )
    return None


def _replaced(pod: Pod) -> bool:
    return pod.controller_kind in REPLACED_AT_ONCE


def _arriving(view: ClusterView, targets: list[NodeState]) -> list[Pod]:
    """The pods waiting for the scheduler that could land on a target: they take room first.

    Replacements of pods the drain evicted are among them. A waiting pod no target could ever take
    (a GPU pod while only CPU nodes are targets) takes none of their room, and is left out."""
    arriving: list[Pod] = []
    known: dict[tuple[object, ...], bool] = {}
    for pod in view.arriving_pods:
        key = (pod.tolerations, pod.node_selector, pod.node_affinity, pod.requests)
        usable = known.get(key)
        if usable is None:
            usable = any(fit.could_use(pod, target.node) for target in targets)
            known[key] = usable
        if usable:
            arriving.append(pod)
    return arriving


def _capacity_needed(emptied: list[_Started], view: ClusterView) -> tuple[str, str] | None:
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
            return (
                item.name,
                f"capacity needed again: {len(users)} pod(s) cannot be scheduled ({example}) and could run on "
                f"{item.name}, which was emptied and waits for removal",
            )
    return None
