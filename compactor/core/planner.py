"""plan(snapshot, config, *, now) -> Plan: the whole decision, pure.

Stages, each in its own module: utilization and marks (`marks`), a drain
already under way (`inflight`), candidate discovery (`candidates`, with the
pod rules of `blockers`), ranking by disruption cost (`ranking`), and the
fit proof (`proof`, runs of the scheduling simulation `fit`), made for
candidates in ranking order until one fits. Exactly one node is chosen, or none, and every node says why.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from compactor.core import (
    candidates,
    fit,
    inflight,
    marks,
    pools,
    proof,
    ranking,
    steering,
    surge,
)
from compactor.core.blockers import Blocker
from compactor.core.cluster import ClusterView, NodeState, PdbIndex
from compactor.core.model import (
    DRAIN_STARTED_AT,
    PREFER_NO_SCHEDULE,
    REPLACEABLE_SINCE,
    RESERVED_TAINT,
    SOFT_TAINT,
    Pod,
    Snapshot,
)
from compactor.core.plan import Decision, NodeReport, Plan, PoolReport, Replacement
from compactor.core.prices import costs, pricing
from compactor.core.replacement import search, underway
from compactor.core.wording import mebibytes, percent
from compactor.settings.config import Config

# Fit simulations per run. Each costs about one predicate check per pod when
# pods fit; one that fails scans every target for a pod. The bound keeps a
# cluster with thousands of blocked candidates from turning into an
# all-pairs scan; the nodes not simulated say so.
MAX_SIMULATIONS = 25

# Reservations. kube-scheduler's resource scoring spreads a drain's pods over the emptiest
# nodes, so near full the room is left in slivers and the last, larger pod can find none although
# the pool has room in all. When no candidate's pods fit as they are, the cheapest few whose proof
# failed are proven again with the roomiest one or two targets taken last, as a PreferNoSchedule
# taint makes the scheduler take them: the small pods fill the other nodes and the large one finds
# the kept room. The cheapest RESERVATION_CANDIDATES whose proof failed are tried, each with one
# and two nodes kept: at most 20 more proofs in a run that finds nothing (at 5,000 nodes such a
# plan takes 1.03 s against 0.95 s without: bench/plan_worst_case.py).
MAX_RESERVED = 2
RESERVATION_CANDIDATES = 10

BLOCKER_SUMMARY = {
    "pool": "in a pool that is not enabled",
    "opt-out": "opted out",
    "being-deleted": "already being removed by the Cluster Autoscaler",
    "not-underutilized": "not underutilized",
    "marked-recently": "not marked long enough",
    "not-ready": "not Ready",
    "cordoned": "cordoned by someone else",
    "too-young": "too young",
    "backoff": "backing off after a rollback",
    "pod": "blocked by a pod",
    "job": 'waiting for a running Job (jobPods "wait")',
    "pdb": "blocked by a PodDisruptionBudget",
    "min-nodes": "at the pool's minNodes",
    "autoscaling": "limited by the pool's autoscaling",
    "trigger": "in a pool below its underutilized-node count",
    "cooldown": "in a pool that scaled up recently",
    "pending-pods": "held back by unschedulable pods",
    "drain-in-progress": "waiting for the drain in progress",
    "awaiting-removal": "emptied and awaiting removal (or the pool's limit of such nodes reached)",
    "interval": "within the pool's drainIntervalSeconds",
    "window": "outside the pool's disruption windows",
    "ca-threshold": "the Cluster Autoscaler would not remove (DaemonSets above its threshold)",
    "compute-class": "in a pool left to the Cluster Autoscaler (limit at or below its ComputeClass threshold)",
    "no-nodes": "no nodes",
    "rollback": "a node is given back first",
    "no-fit": "with pods that fit nowhere else",
    "not-simulated": "not simulated",
    "replacement": "waiting for the node replacement under way",
}

# What rule 10 waives for a node of a pool with replacement on: underutilization, the mark (its wait is
# `replaceable-since`) and the pool's underutilized-node trigger.
REPLACEMENT_WAIVES = frozenset({"not-underutilized", "marked-recently", "trigger"})

# A replaced node with one of these can no longer be drained for its replacement, which is given up.
REPLACEMENT_STOPPERS = frozenset({"pool", "compute-class", "opt-out", "being-deleted", "not-ready", "cordoned", "pod"})


# Blocker kinds found by the node checks (`candidates.node_blockers`); the others are pool or
# cluster gates and the fit, which only nodes passing every node check reach.
NODE_LEVEL_KINDS = frozenset(
    {
        "pool",
        "compute-class",
        "opt-out",
        "being-deleted",
        "not-underutilized",
        "marked-recently",
        "not-ready",
        "cordoned",
        "too-young",
        "backoff",
        "pod",
        "pdb",
        "job",
        "min-nodes",
        "autoscaling",
        "ca-threshold",
        "drain-in-progress",
        "awaiting-removal",
    }
)


def plan(
    snapshot: Snapshot,
    config: Config,
    *,
    now: datetime,
    pdbs: PdbIndex | None = None,
    view: ClusterView | None = None,
    explain: bool = True,
    prices: pricing.PriceTable | None = None,
    proofs: proof.Memo | None = None,
) -> Plan:
    """The decision for this snapshot; `pdbs` may carry an index of the same PDBs from an earlier plan,
    `view` the caller's view of this snapshot and config (`core.path` builds each from the one before).

    With `explain` false (the consolidation path's plans), each node's blockers stop at the first
    one: the decision, `held_by` and the summary read only that one, so they are the same, and the
    node reports list only it. `prices`: the price table (the built-in one when None; a priceFile's).
    `proofs`: the drains' fit proofs already made on a cluster of the same content and configuration
    (`proof.Memo`; the simulator's, between runs on a world that did not change)."""
    if view is None:
        view = ClusterView(snapshot, config, pdbs)
    states = sorted(view.nodes.values(), key=lambda state: state.name)

    underutilized: dict[str, bool] = {}
    mark_changes: dict[str, marks.MarkChange] = {}
    beside = view.coexistence
    for state in states:
        # Underutilization is reported for every configured pool; marks and drains need it enabled, and
        # a pool left to the Cluster Autoscaler's ComputeClass threshold loses its marks as a disabled one.
        pool = config.pool(state.pool)
        underutilized[state.name] = marks.is_underutilized(state, pool)
        markable = pool if beside.left(state.pool) is None else None
        mark_changes[state.name] = marks.mark_change(state, markable, underutilized[state.name], now)

    running = inflight.in_flight(view, now)
    started = running.started
    given_back = running.given_back
    table = prices if prices is not None else pricing.BUILT_IN
    # The consolidation path's plans (explain false) are never carried out: no replacement, and prices only
    # where the ranking needs them, so that the path drains in the order a run would.
    unpriced = costs.Costs(table.currency, {})
    ranking_costs = costs.node_costs(view, table) if explain or config.ranking == "savings" else unpriced
    node_costs = ranking_costs if explain else unpriced
    replacing = underway.in_flight(view, snapshot.placeholders, now, running) if explain else underway.NOTHING

    blockers: dict[str, list[Blocker]] = {}
    for state in states:
        if state.name == running.draining:
            blockers[state.name] = [Blocker("drain-in-progress", "this node is being drained")]
        elif state.name in given_back:
            blockers[state.name] = [Blocker("rollback", f"given back in this run: {given_back[state.name]}")]
        elif state.name in started:
            blockers[state.name] = [
                Blocker("awaiting-removal", "emptied; waiting for the Cluster Autoscaler to remove it")
            ]
        else:
            blockers[state.name] = candidates.node_blockers(
                state,
                view,
                underutilized[state.name],
                mark_changes[state.name].marked_since,
                now,
                first_only=not explain,
            )

    per_pool_underutilized: Counter[str | None] = Counter(
        state.pool for state in states if underutilized[state.name] and state.name not in started
    )
    pool_gates = candidates.pool_gates(view, per_pool_underutilized, running, now)
    cluster_gates = candidates.cluster_gates(running)
    # Rule 10: the nodes a replacement under way drains need not be underutilized nor marked (their wait was
    # `replaceable-since`), and the underutilized-node trigger does not hold them.
    for name in replacing.drain_only:
        if name in blockers:
            blockers[name] = [blocker for blocker in blockers[name] if blocker.kind not in REPLACEMENT_WAIVES]
    eligible = [state for state in states if not blockers[state.name]]
    for state in eligible:
        waived = REPLACEMENT_WAIVES if state.name in replacing.drain_only else frozenset()
        blockers[state.name].extend(gate for gate in pool_gates.get(state.pool, ()) if gate.kind not in waived)
        blockers[state.name].extend(cluster_gates)
    eligible = [state for state in eligible if not blockers[state.name]]
    # ... and a node of a pool with replacement on is a replacement candidate though busy or not marked.
    busy = [
        state
        for state in states
        if explain
        and _replaces(config, state.pool)
        and blockers[state.name]
        and all(blocker.kind in REPLACEMENT_WAIVES for blocker in blockers[state.name])
        and not any(gate.kind not in REPLACEMENT_WAIVES for gate in (*pool_gates.get(state.pool, ()), *cluster_gates))
    ]
    if replacing.holds:
        # A replacement under way is the one node being evicted: while it waits for its node nothing
        # else starts, and once the node is up only the nodes it replaces are drained.
        active = replacing.replacement
        assert active is not None
        for state in eligible:
            if state.name not in replacing.drain_only:
                blockers[state.name].append(Blocker("replacement", f"{active.placeholder}: {active.reason}"))
        eligible = [state for state in eligible if state.name in replacing.drain_only]

    # Reservations stay while a drain is under way: its pods are still to be placed.
    drain_under_way = running.draining is not None
    hosts = frozenset(pod.node_name for pod in snapshot.placeholders if pod.node_name)
    soft_add, soft_remove, unreserve, avoided = _soft_taints(states, config, mark_changes, drain_under_way, hosts)
    chosen = (
        _choose(
            view,
            eligible,
            blockers,
            avoided,
            _prices_for_ranking(config, eligible, ranking_costs),
            reserve=config.reserve_room_for_drains,
            proofs=proofs if proofs is not None else proof.Memo(),
        )
        if running.decision is None
        else None
    )
    found = search.Search(None, {}, ())
    # Rule 8 with prices: a replacement is searched beside the deletion this run would make, and wins only by
    # saving more per disrupted pod; with `ranking: "disruption"` (or a deletion without a price) only when no
    # node of any pool can simply be deleted.
    to_beat = _deletion_saving_per_pod(config, chosen, states, node_costs)
    searched = (
        explain
        and replacing.replacement is None
        and running.decision is None
        and (chosen is None or to_beat is not None)
    )
    if searched:
        fit_blocked = [state for state in eligible if blockers[state.name] and _only_the_fit(blockers[state.name])]
        found = search.choose(view, table, node_costs, fit_blocked + busy, avoided, now, to_beat=to_beat)
        if found.chosen is not None and chosen is not None and chosen.node is not None:
            blockers[chosen.node].append(
                Blocker(
                    "replacement",
                    f"not drained: replacing {', '.join(found.chosen.nodes)} saves more per disrupted pod "
                    f"({found.chosen.reason})",
                )
            )
            chosen = None
    in_progress = replacing.replacement
    if in_progress is not None and in_progress.step == "drain":
        in_progress = _judge_replaced(view, in_progress, blockers, chosen)
    if running.decision is not None:
        decision = running.decision
    elif chosen is not None:
        decision = chosen
        if in_progress is not None and chosen.node in in_progress.nodes:
            decision = replace(chosen, reason=f"{chosen.reason}, the new node of {in_progress.placeholder} among them")
    else:
        decision = Decision("none", None, None, _summary(states, blockers))
        if found.chosen is not None:
            decision = replace(decision, reason=f"replacing nodes with a cheaper one first: {found.chosen.reason}")
        elif in_progress is not None:
            decision = replace(
                decision, reason=f"node replacement under way ({in_progress.step}): {in_progress.reason}"
            )
    replaceable_add, replaceable_remove = _replaceable_changes(states, config, found, searched) if explain else ((), ())
    # Pods a rolling restart moves leave the evictions (pools with surgeSingleReplicas).
    decision = surge.split(decision, view)
    # Steered from where the cluster goes after this decision; the consolidation path's plans are
    # never carried out, and write no pod.
    evicting = decision.node if decision.action in ("drain", "continue-drain") else None
    taken = started | {evicting} if evicting is not None else started
    steered = steering.steer(view, states, taken, evicting) if explain else steering.NONE

    node_reports = tuple(
        NodeReport(
            name=state.name,
            pool=state.pool,
            cpu_ratio=state.cpu_ratio,
            memory_ratio=state.memory_ratio,
            underutilized=underutilized[state.name],
            marked_since=mark_changes[state.name].marked_since,
            candidate=not blockers[state.name],
            blockers=tuple(blocker.text for blocker in blockers[state.name]),
            ready=state.node.ready,
            cordoned=state.node.unschedulable,
            pods=len(state.pods),
            pods_to_move=len(state.movable_pods),
            single_replicas=(
                surge.verdicts(view, state)
                if explain and (underutilized[state.name] or state.name == decision.node)
                else surge.NO_VERDICTS
            ),
            price_per_hour=_per_hour(node_costs.of(state.name)),
            replacement=found.notes.get(state.name),
        )
        for state in states
    )
    return Plan(
        decision=decision,
        marks_add=tuple(name for name, change in mark_changes.items() if change.add),
        marks_remove=tuple(name for name, change in mark_changes.items() if change.remove),
        nodes=node_reports,
        pools=_pool_reports(view, underutilized, node_costs),
        dry_run=config.dry_run,
        now=now,
        held_by=_held_by(decision, running, states, blockers, underutilized),
        awaiting_removal=running.awaiting_removal,
        soft_taints_add=soft_add,
        soft_taints_remove=soft_remove,
        reservations_remove=unreserve,
        more_rollbacks=running.give_back[1:],
        restamp=running.restamp,
        steered_nodes=steered.nodes,
        deletion_costs_add=steered.add,
        deletion_costs_remove=steered.remove,
        surge_note=surge.missing_note(view),
        compute_class_warnings=beside.warnings,
        replacement=found.chosen or in_progress,
        placeholders_remove=replacing.placeholders_remove,
        replaced_by_remove=replacing.replaced_by_remove,
        price_warnings=_price_warnings(view, node_costs, found.warnings),
        currency=node_costs.currency,
        replaceable_add=replaceable_add,
        replaceable_remove=replaceable_remove,
    )


def _replaces(config: Config, pool: str | None) -> bool:
    settings = config.enabled_pool(pool)
    return settings is not None and settings.replacing is not None


def _replaceable_changes(
    states: list[NodeState], config: Config, found: search.Search, searched: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `replaceable-since` annotations to add (nodes the search found a replacement for, first time) and
    to remove (nodes it judged and found none for, or any node of a pool without replacement); untouched when
    the search did not run this time (a drain, a rollback or a replacement under way came first)."""
    add, remove = [], []
    for state in states:
        carries = REPLACEABLE_SINCE in state.node.annotations
        if searched and state.name in found.replaceable:
            if not carries:
                add.append(state.name)
        elif carries and (
            (searched and state.name in found.judged and state.name not in found.replaceable)
            or not _replaces(config, state.pool)
        ):
            remove.append(state.name)
    return tuple(add), tuple(remove)


def _deletion_saving_per_pod(
    config: Config, chosen: Decision | None, states: list[NodeState], node_costs: costs.Costs
) -> float | None:
    """What the chosen deletion saves per hour per disrupted pod, when the ranking is by savings and its node has a
    price; else None."""
    if chosen is None or chosen.node is None or config.ranking != "savings":
        return None
    price = node_costs.of(chosen.node)
    if price is None:
        return None
    pods = next((len(state.movable_pods) for state in states if state.name == chosen.node), 0)
    return ranking.saving_per_pod(price.per_hour, pods)


def _only_the_fit(found: list[Blocker]) -> bool:
    return all(blocker.kind in ("no-fit", "not-simulated") for blocker in found)


def _per_hour(price: costs.Price | None) -> float | None:
    return price.per_hour if price is not None else None


def _judge_replaced(
    view: ClusterView, in_progress: Replacement, blockers: dict[str, list[Blocker]], chosen: Decision | None
) -> Replacement:
    """A replacement whose next node can no longer be drained (opted out, cordoned by a person, a blocking
    pod, gone from an enabled pool) is given up: the placeholder goes and the nodes not drained yet get
    `replacement-failed-at`. Otherwise it goes on (the fit or a pool gate only holds it for now)."""
    left = [name for name in in_progress.nodes if name in view.nodes and name not in (chosen.node if chosen else None,)]
    stopped = {
        name: blocker.text
        for name in left
        for blocker in blockers.get(name, ())
        if blocker.kind in REPLACEMENT_STOPPERS and DRAIN_STARTED_AT not in view.nodes[name].node.annotations
    }
    if not stopped:
        return in_progress
    name, why = next(iter(sorted(stopped.items())))
    undrained = tuple(n for n in left if DRAIN_STARTED_AT not in view.nodes[n].node.annotations)
    return replace(in_progress, step="give-up", reason=f"{name} can no longer be drained ({why})", failed=undrained)


def _price_warnings(view: ClusterView, node_costs: costs.Costs, found: tuple[str, ...]) -> tuple[str, ...]:
    """A pool whose nodes have no price, when replacement or its report needs them: replacement is off there."""
    warnings = []
    for pool, why in sorted(node_costs.unknown.items()):
        if _replaces(view.config, pool):
            warnings.append(f"pool {pool}: replacement is off, a node has no price: {why}")
    return (*warnings, *found)


def _soft_taints(
    states: list[NodeState],
    config: Config,
    mark_changes: dict[str, marks.MarkChange],
    drain_under_way: bool,
    placeholder_hosts: frozenset[str] = frozenset(),
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], frozenset[str]]:
    """Which nodes gain or lose the PreferNoSchedule taint, which lose a drain's reservation, and which
    nodes the scheduler will avoid. A node a replacement's placeholder runs on never gets the taint: the
    pods of the nodes it replaces must land there.

    A schedulable node carries the taint while it is marked in an enabled pool; a cordoned node is
    left as it is (a person's cordon, or a drain's). A reservation (`RESERVED_TAINT`) lasts while the
    drain that made it is evicting; once no drain is, every one comes off. Nodes with any
    PreferNoSchedule taint left are avoided.
    """
    add: list[str] = []
    remove: list[str] = []
    unreserve: list[str] = []
    avoided: set[str] = set()
    for state in states:
        node = state.node
        has = any(taint.key == SOFT_TAINT and taint.effect == PREFER_NO_SCHEDULE for taint in node.taints)
        reserved = any(taint.key == RESERVED_TAINT and taint.effect == PREFER_NO_SCHEDULE for taint in node.taints)
        marked = mark_changes[state.name].marked_since is not None
        wanted = config.soft_taint_marked_nodes and config.enabled_pool(state.pool) is not None and marked
        wanted = wanted and state.name not in placeholder_hosts
        if not node.unschedulable and wanted != has:
            (add if wanted else remove).append(state.name)
            has = wanted
        if reserved and not drain_under_way and not node.unschedulable:
            unreserve.append(state.name)
            reserved = False
        others = (taint for taint in node.taints if taint.key not in (SOFT_TAINT, RESERVED_TAINT))
        if has or reserved or any(taint.effect == PREFER_NO_SCHEDULE for taint in others):
            avoided.add(state.name)
    return tuple(add), tuple(remove), tuple(unreserve), frozenset(avoided)


def _held_by(
    decision: Decision,
    running: inflight.InFlight,
    states: list[NodeState],
    blockers: dict[str, list[Blocker]],
    underutilized: dict[str, bool],
) -> str | None:
    """The gate that kept this run from acting: the first reason of the node closest to a drain."""
    if decision.action != "none":
        return None
    if not states:
        return "no-nodes"

    def closeness(state: NodeState) -> tuple[int, tuple[int, int, int, float, float, str]]:
        first = blockers[state.name][0].kind if blockers[state.name] else ""
        if first in NODE_LEVEL_KINDS:
            tier = 1 if underutilized[state.name] else 2
            tier = 3 if first in ("pool", "compute-class") else tier
        else:
            tier = 0  # every node check passed: a pool or cluster gate, or the fit, held it
        return tier, ranking.disruption_cost(state)

    closest = min(
        (state for state in states if blockers[state.name] and state.name not in running.started),
        key=closeness,
        default=None,
    )
    return blockers[closest.name][0].kind if closest is not None else None


def _prices_for_ranking(config: Config, eligible: list[NodeState], node_costs: costs.Costs) -> dict[str, float] | None:
    """Each candidate's price per hour, when the ranking is by savings and every candidate has one; else None
    (rule 8's order alone)."""
    if config.ranking != "savings":
        return None
    found: dict[str, float] = {}
    for state in eligible:
        price = node_costs.of(state.name)
        if price is None:
            return None
        found[state.name] = price.per_hour
    return found


def _choose(
    view: ClusterView,
    eligible: list[NodeState],
    blockers: dict[str, list[Blocker]],
    avoided: frozenset[str],
    prices: Mapping[str, float] | None,
    *,
    reserve: bool,
    proofs: proof.Memo,
) -> Decision | None:
    """Simulate candidates best first (rule 8, by savings per disrupted pod when `prices` has every
    candidate's); the first whose pods all fit is the one. When none fits, the first few whose proof
    failed are tried again with room reserved (`_choose_reserving`)."""
    if not eligible:
        return None
    if prices is None:
        ranked = sorted(eligible, key=ranking.disruption_cost)
    else:
        ranked = sorted(eligible, key=lambda state: ranking.savings_order(state, prices[state.name]))
    targets = fit.targets_for(view)
    free_cpu = free_memory = 0
    for target in targets:
        free = target.free
        free_cpu += free.cpu_millis
        free_memory += free.memory_bytes
    chosen: Decision | None = None
    unproven: list[NodeState] = []
    simulations = 0
    for state in ranked:
        if chosen is not None:
            blockers[state.name].append(
                Blocker("not-simulated", f"ranked after {chosen.node}, which was chosen; one node at a time")
            )
            continue
        if simulations >= MAX_SIMULATIONS:
            blockers[state.name].append(
                Blocker("not-simulated", f"not simulated: {MAX_SIMULATIONS} fit checks per run already failed")
            )
            continue
        movable = state.movable_pods
        if movable and not any(target.name != state.name for target in targets):
            blockers[state.name].append(Blocker("no-fit", "no other Ready, schedulable node to move its pods to"))
            continue
        own_free_cpu, own_free_memory = state.free.cpu_millis, state.free.memory_bytes
        need_cpu = sum(pod.requests.cpu_millis for pod in movable)
        need_memory = sum(pod.requests.memory_bytes for pod in movable)
        if need_cpu > free_cpu - own_free_cpu or need_memory > free_memory - own_free_memory:
            blockers[state.name].append(
                Blocker(
                    "no-fit",
                    f"its pods need cpu {need_cpu}m and memory {mebibytes(need_memory)}; the other nodes have "
                    f"{free_cpu - own_free_cpu}m and {mebibytes(free_memory - own_free_memory)} free in all",
                )
            )
            continue
        simulations += 1
        proof = proofs.prove(view, surge.proof_state(view, state), targets, avoided)
        if isinstance(proof, str):
            blockers[state.name].append(Blocker("no-fit", proof))
            unproven.append(state)
            continue
        chosen = _drain(view, state, proof, price=prices.get(state.name) if prices is not None else None)
    if chosen is None and reserve:
        chosen = _choose_reserving(view, unproven[:RESERVATION_CANDIDATES], blockers, targets, avoided, prices, proofs)
    return chosen


def _choose_reserving(
    view: ClusterView,
    unproven: list[NodeState],
    blockers: dict[str, list[Blocker]],
    targets: list[NodeState],
    avoided: frozenset[str],
    prices: Mapping[str, float] | None,
    proofs: proof.Memo,
) -> Decision | None:
    """The first of `unproven` (best first) whose pods fit with room kept on its roomiest one or
    two targets, which the scheduler takes last while they carry the reserved taint."""
    for state in unproven:
        for reserved in _reservations(state, targets, avoided):
            proof = proofs.prove(view, surge.proof_state(view, state), targets, avoided, reserved=reserved)
            if isinstance(proof, str):
                continue
            blockers[state.name] = [blocker for blocker in blockers[state.name] if blocker.kind != "no-fit"]
            price = prices.get(state.name) if prices is not None else None
            return _drain(view, state, proof, tuple(sorted(reserved)), price=price)
    return None


def _reservations(state: NodeState, targets: list[NodeState], avoided: frozenset[str]) -> list[frozenset[str]]:
    """The roomiest target, then the two roomiest, among those that could take the node's largest pod
    and that the scheduler does not already avoid; room is counted in copies of that pod."""
    movable = fit.largest_first(state.movable_pods)
    if not movable:
        return []
    largest = movable[0]
    open_targets = [
        target
        for target in targets
        if target.name != state.name and target.name not in avoided and fit.could_use(largest, target.node)
    ]
    roomiest = sorted(open_targets, key=lambda target: (-_room(target, largest), target.name))[:MAX_RESERVED]
    return [frozenset(target.name for target in roomiest[:count]) for count in range(1, len(roomiest) + 1)]


def _room(target: NodeState, pod: Pod) -> float:
    """How many copies of `pod` the target's free cpu and memory hold (a resource it does not ask for
    does not count)."""
    allocatable, requested, asks = target.node.allocatable, target.requested, pod.requests
    copies = [
        (allocatable.cpu_millis - requested.cpu_millis) / asks.cpu_millis if asks.cpu_millis else math.inf,
        (allocatable.memory_bytes - requested.memory_bytes) / asks.memory_bytes if asks.memory_bytes else math.inf,
    ]
    return min(copies)


def _drain(
    view: ClusterView,
    state: NodeState,
    proof: fit.FitResult,
    reserved: tuple[str, ...] = (),
    *,
    price: float | None = None,
) -> Decision:
    """The drain of `state`; `price` is its price per hour when the ranking was by savings."""
    movable = state.movable_pods
    kept = (
        f", with room kept on {', '.join(reserved)} for the last of them "
        f"(the {RESERVED_TAINT}:{PREFER_NO_SCHEDULE} taint while it drains)"
        if reserved
        else ""
    )
    return Decision(
        "drain",
        state.name,
        state.pool,
        f"{state.name} {_why_first(state, price)} in pool {state.pool} "
        f"(cpu {percent(state.cpu_ratio)}, memory {percent(state.memory_ratio)}): "
        f"its {len(movable)} pod(s) fit on the other nodes{kept}",
        inflight.eviction_order(inflight.evictable(state, view)),
        tuple(sorted(proof.placements.items())),
        reserved,
    )


def _why_first(state: NodeState, price: float | None) -> str:
    if price is None:
        return "is the least disruptive node to remove"
    pods = len(state.movable_pods)
    return (
        f"saves the most per disrupted pod ({price:.4f}/h for {pods} pod(s), "
        f"{ranking.saving_per_pod(price, pods):.4f}/h a pod)"
    )


def _summary(states: list[NodeState], blockers: dict[str, list[Blocker]]) -> str:
    if not states:
        return "no nodes in the snapshot"
    kinds: Counter[str] = Counter(blockers[state.name][0].kind for state in states if blockers[state.name])
    parts = ", ".join(f"{count} {BLOCKER_SUMMARY.get(kind, kind)}" for kind, count in kinds.most_common())
    return f"no node can be drained ({len(states)} node(s): {parts})"


def _pool_reports(view: ClusterView, underutilized: dict[str, bool], node_costs: costs.Costs) -> tuple[PoolReport, ...]:
    reports = []
    for name in sorted(view.nodes_by_pool, key=lambda pool: (pool is None, pool or "")):
        members = view.nodes_by_pool[name]
        bound = pools.lower_bound_nodes(members)
        threshold = view.coexistence.pools.get(name) if name is not None else None
        total = costs.pool_price(node_costs, members)
        cheapest = min((node_costs.nodes[m.name].per_hour for m in members if m.name in node_costs.nodes), default=None)
        reports.append(
            PoolReport(
                name=name if name is not None else "",
                enabled=view.config.enabled_pool(name) is not None,
                configured=view.config.pool(name) is not None,
                nodes=len(members),
                underutilized=sum(1 for member in members if underutilized[member.name]),
                lower_bound_nodes=bound,
                excess_nodes=max(0, len(members) - bound),
                compute_class=threshold,
                price_per_hour=total,
                cost_lower_bound_per_hour=bound * cheapest if total is not None and cheapest is not None else None,
                price_note=node_costs.unknown.get(name) if name is not None else None,
            )
        )
    return tuple(reports)
