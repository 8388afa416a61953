"""Rule 10: which nodes to replace, by what, and whether their pods provably fit (DESIGN "Node replacement").

Karpenter's second consolidation mechanism, on GKE without creating a VM: a set of 1..`maxNodes` of a pool's
candidates (each passing rule 4 but for the fit) is replaced when their pods fit on the other nodes plus one new
node of a target pool (`templates`), and the new node costs at least `minSavingsPercent` less than they do.
node-compactor asks the Cluster Autoscaler for that node with a placeholder pod (priority -10: the lowest the
autoscaler still scales up for, and any other pod preempts it); once the placeholder runs on a Ready node, the
replaced nodes are drained one at a time under rules 0-8 (`underway`). Every proof keeps the placeholder's room
taken until a pod that fits on no node as it is preempts it, as kube-scheduler does (the evicted pods'
replacements go where they fit first).

The search is bounded: at most `MAX_CANDIDATES` candidates a pool, cheapest first by rule 8, and `MAX_PROOFS`
fit proofs a run; the sets are tried by saving per disrupted pod, then rule 8's order.

Pure: never reads a clock; the caller passes `now`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import msgspec

from compactor.core import fit, proof, ranking
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import (
    PLACEHOLDER_PREFIX,
    REPLACEABLE_SINCE,
    REPLACEMENT_FAILED_AT,
    ZONE_LABELS,
    Pod,
    Resources,
)
from compactor.core.plan import Replacement
from compactor.core.prices import costs, pricing
from compactor.core.replacement.templates import TEMPLATE_NAME, Template, template, total_requests
from compactor.core.timing import human, parse_stamp, seconds_between
from compactor.settings.config import Config, PoolConfig

# Candidates per pool the search combines (cheapest first by rule 8), and the proofs one run may make:
# sets of up to 3 of 6 candidates are 41, each against every target pool; most fail the price or
# the room check, which cost nothing.
MAX_CANDIDATES = 6

MAX_PROOFS = 12


_SPOT_LABELS = {"cloud.google.com/gke-spot": "true", "cloud.google.com/gke-provisioning": "spot"}


@dataclass(frozen=True, slots=True)
class Search:
    """The replacement chosen (step create) or None, why each candidate was or was not replaced, and warnings."""

    chosen: Replacement | None
    notes: Mapping[str, str]
    warnings: tuple[str, ...]
    # The candidates some replacement saves enough for and has room for (`replaceable-since` is kept on them),
    # and every node the search judged (the annotation comes off those not in `replaceable`).
    replaceable: frozenset[str] = frozenset()
    judged: frozenset[str] = frozenset()


def placeholder_name(nodes: Iterable[str], target_pool: str) -> str:
    """`node-compactor-placeholder-<hash>`: the same nodes and pool give the same name (a retried create is a 409)."""
    digest = hashlib.sha256(("\n".join(sorted(nodes)) + "\n" + target_pool).encode()).hexdigest()
    return PLACEHOLDER_PREFIX + digest[:10]


def backing_off(state: NodeState, pool: PoolConfig, now: datetime) -> str | None:
    """Why the node is not replaced again yet (`replacement-failed-at` within retryBackoffSeconds), or None."""
    text = state.node.annotations.get(REPLACEMENT_FAILED_AT)
    if text is None:
        return None
    failed = parse_stamp(text)
    if failed is None:
        return None
    waited = seconds_between(failed, now)
    if waited >= pool.retry_backoff_seconds:
        return None
    return (
        f"its replacement failed {human(waited)} ago ({REPLACEMENT_FAILED_AT}); "
        f"not replaced again before {human(pool.retry_backoff_seconds)} (retryBackoffSeconds)"
    )


def choose(
    view: ClusterView,
    table: pricing.PriceTable,
    node_costs: costs.Costs,
    fit_blocked: Sequence[NodeState],
    avoided: frozenset[str],
    now: datetime,
) -> Search:
    """Rule 10: the best replacement among the candidates whose pods did not fit (`fit_blocked`, each
    passing rule 4 but for the fit), by saving per disrupted pod, then rule 8's order; None when no set
    saves enough or fits."""
    config = view.config
    notes: dict[str, str] = {}
    warnings: list[str] = []
    options: list[tuple[float, tuple[object, ...], list[NodeState], Template, float, float]] = []
    by_pool: dict[str, list[NodeState]] = {}
    for state in fit_blocked:
        pool = config.enabled_pool(state.pool)
        if pool is None or pool.replacement is None or not pool.replacement.enabled or state.pool is None:
            continue
        backoff = backing_off(state, pool, now)
        if backoff is not None:
            notes[state.name] = f"not replaced: {backoff}"
            continue
        if node_costs.of(state.name) is None:
            notes[state.name] = f"not replaced: {node_costs.unknown.get(state.pool, 'its price is not known')}"
            continue
        by_pool.setdefault(state.pool, []).append(state)
    templates: dict[tuple[str, str | None], Template | str] = {}
    for pool_name, members in sorted(by_pool.items()):
        pool = config.enabled_pool(pool_name)
        assert pool is not None and pool.replacement is not None
        settings = pool.replacement
        ordered = sorted(members, key=lambda state: _savings_order(state, node_costs))
        ranked = ordered[:MAX_CANDIDATES]
        for state in ordered[MAX_CANDIDATES:]:
            notes[state.name] = (
                f"not replaced: the search combines the {MAX_CANDIDATES} best candidates of pool {pool_name} "
                "(by saving per disrupted pod), and this node ranks after them"
            )
        room = view.schedulable_in_pool[pool_name] - pool.min_nodes
        for state in ranked:
            notes.setdefault(state.name, "not replaced: no target pool's new node saves enough and takes its pods")
        for size in range(1, min(settings.max_nodes, len(ranked), max(room, 0)) + 1):
            for combination in itertools.combinations(ranked, size):
                group = list(combination)
                zone = group[0].node.zone
                removed = node_costs.total(state.name for state in group) or 0.0
                for target_pool in settings.target_pools:
                    key = (target_pool, zone)
                    made = templates.get(key)
                    if made is None:
                        daemons = total_requests(
                            pod.requests for state in group for pod in state.pods if pod.stays_on_node
                        )
                        made = templates[key] = template(view, table, target_pool, zone, daemons)
                        if isinstance(made, str) and made not in warnings:
                            warnings.append(made)
                        unknown = _growth_unknown(view, target_pool)
                        if unknown and not isinstance(made, str) and unknown not in warnings:
                            warnings.append(unknown)
                    if isinstance(made, str):
                        continue
                    saving = removed - made.price.per_hour
                    if removed <= 0 or saving < removed * settings.min_savings_percent / 100:
                        _note_price(notes, group, made, removed, saving, settings.min_savings_percent)
                        continue
                    pods = sum(len(state.movable_pods) for state in group)
                    rank = tuple(ranking.disruption_cost(state) for state in group)
                    options.append((-saving / max(pods, 1), rank, group, made, removed, saving))
    options.sort(key=lambda option: (option[0], option[1]))
    # Rule 10's wait: a set is proven only once each of its nodes has carried `replaceable-since` for the
    # pool's neededMarkedTimeSeconds; the annotation goes on every node some option saves enough for and
    # has room for, waited or not.
    replaceable: set[str] = set()
    ready = []
    for option in options:
        group, made = option[2], option[3]
        if not _room_enough(view, group, made):
            _note_all(
                notes,
                group,
                f"not replaced by a node of {made.pool}: the pods need more room than the other "
                "nodes and the new node have free",
            )
            continue
        replaceable.update(state.name for state in group)
        waiting = [why for state in group if (why := _still_waiting(state, config, now)) is not None]
        if waiting:
            _note_all(notes, group, f"not replaced by a node of {made.pool} yet: {'; '.join(waiting)}")
            continue
        ready.append(option)
    judged = frozenset(state.name for state in fit_blocked)
    proofs = 0
    # One view with the new node per template (a target pool's template differs by zone).
    views: dict[tuple[str, str | None], tuple[ClusterView, list[NodeState]]] = {}
    for _, _, group, made, removed, saving in ready:
        if proofs >= MAX_PROOFS:
            # The run's budget of proofs is spent: the sets left are the less saving ones, and say so.
            _note_all(notes, group, f"not tried by a node of {made.pool}: this run's {MAX_PROOFS} proofs were spent")
            continue
        grown = views.get((made.pool, made.zone))
        if grown is None:
            grown = views[(made.pool, made.zone)] = _with_template(view, made)
        bigger, targets = grown
        names = {state.name for state in group}
        moving = [pod for state in group for pod in state.movable_pods]
        # The new node comes with the placeholder on it: the pods go where they fit first, and only a pod
        # that fits nowhere else preempts it (kube-scheduler's order; `fit.Simulation._preempt`).
        bigger.preemptible[TEMPLATE_NAME] = _placeholder_requests(moving, made)
        bigger.start_heaps.clear()  # the new node's load changed: the shared starting order is stale
        proofs += 1
        proven = proof.prove(
            bigger,
            bigger.nodes[group[0].name],
            [target for target in targets if target.name not in names],
            avoided,
            moving=moving,
        )
        if isinstance(proven, str):
            _note_all(notes, group, f"not replaced by a node of {made.pool}: {proven}")
            continue
        chosen = _replacement(config.pool_label, group, made, removed, saving, moving, node_costs.currency)
        for state in group:
            notes[state.name] = f"replaced: {chosen.reason}"
        return Search(chosen, notes, tuple(warnings), frozenset(replaceable), judged)
    return Search(None, notes, tuple(warnings), frozenset(replaceable), judged)


def _savings_order(state: NodeState, node_costs: costs.Costs) -> tuple[float, ranking.DisruptionCost]:
    price = node_costs.of(state.name)
    return ranking.savings_order(state, price.per_hour if price is not None else 0.0)


def _still_waiting(state: NodeState, config: Config, now: datetime) -> str | None:
    """Why the node may not be replaced yet (its `replaceable-since` younger than neededMarkedTimeSeconds), or
    None. A node without the annotation (found replaceable by this run) waits unless the wait is 0."""
    pool = config.enabled_pool(state.pool)
    needed = pool.needed_marked_seconds if pool is not None else 0
    text = state.node.annotations.get(REPLACEABLE_SINCE)
    since = parse_stamp(text) if text is not None else None
    waited = seconds_between(since, now) if since is not None else 0.0
    if waited >= needed:
        return None
    return f"{state.name} replaceable for {human(waited)}, needs {human(needed)} (neededMarkedTimeSeconds)"


def _replacement(
    pool_label: str,
    group: list[NodeState],
    made: Template,
    removed: float,
    saving: float,
    moving: list[Pod],
    currency: str,
) -> Replacement:
    names = tuple(state.name for state in group)
    requests = _placeholder_requests(moving, made)
    selector = [(pool_label, made.pool)]
    if made.zone is not None:
        selector.append((ZONE_LABELS[0], made.zone))
    for key, value in _SPOT_LABELS.items():
        if made.node.labels.get(key) == value:
            selector.append((key, value))
            break
    shape = made.machine_type or "its machine type"
    reason = (
        f"{', '.join(names)} ({currency} {removed:.4f}/h together) -> one {shape} in pool {made.pool}"
        f"{' (' + made.zone + ')' if made.zone else ''} ({currency} {made.price.per_hour:.4f}/h): saves "
        f"{currency} {saving:.4f}/h ({saving / removed:.0%}); their {len(moving)} pod(s) fit on the other nodes "
        f"and the new one (shape from {made.source}; price from {made.price.source})"
    )
    return Replacement(
        "create",
        placeholder_name(names, made.pool),
        names,
        made.pool,
        reason,
        machine_type=made.machine_type,
        zone=made.zone,
        price_per_hour=made.price.per_hour,
        removed_price_per_hour=removed,
        savings_per_hour=saving,
        requests=requests,
        node_selector=tuple(selector),
        taints=made.node.taints,
    )


def _placeholder_requests(moving: Sequence[Pod], made: Template) -> Resources:
    """What the placeholder asks for: the moving pods' requests, capped at the new node's allocatable."""
    need = total_requests(pod.requests for pod in moving)
    allocatable = made.node.allocatable
    return Resources(min(need.cpu_millis, allocatable.cpu_millis), min(need.memory_bytes, allocatable.memory_bytes))


def _growth_unknown(view: ClusterView, pool: str) -> str:
    """The warning for a target pool whose autoscaling limits were not read (a run without GKE's API); empty when
    they were."""
    if pool in view.snapshot.pool_autoscaling:
        return ""
    return (
        f"target pool {pool}: its autoscaling limits are unknown (GKE's node pool API was not read: run with --gke "
        "or COMPACTOR_CLUSTER), so it is assumed able to grow; a placeholder it cannot hold is given up at "
        "timeoutSeconds, nothing drained"
    )


def _with_template(view: ClusterView, made: Template) -> tuple[ClusterView, list[NodeState]]:
    snapshot = msgspec.structs.replace(view.snapshot, nodes=(*view.snapshot.nodes, made.node))
    bigger = ClusterView(snapshot, view.config, view.pdbs, earlier=view)
    return bigger, fit.targets_for(bigger)


def _room_enough(view: ClusterView, group: list[NodeState], made: Template) -> bool:
    """The pods' summed requests against the free room of the other schedulable nodes and the new one."""
    names = {state.name for state in group}
    need = total_requests(pod.requests for state in group for pod in state.movable_pods)
    cpu = made.node.allocatable.cpu_millis
    memory = made.node.allocatable.memory_bytes
    for state in view.nodes.values():
        if state.schedulable and state.name not in names:
            cpu += max(0, state.node.allocatable.cpu_millis - state.requested.cpu_millis)
            memory += max(0, state.node.allocatable.memory_bytes - state.requested.memory_bytes)
    return need.cpu_millis <= cpu and need.memory_bytes <= memory


def _note_price(
    notes: dict[str, str], group: list[NodeState], made: Template, removed: float, saving: float, percent: float
) -> None:
    if len(group) != 1:
        return  # a set is noted only when proven; one node's note says what its own price allows
    notes[group[0].name] = (
        f"not replaced by a {made.machine_type or 'node'} of {made.pool}: it costs {made.price.per_hour:.4f}/h "
        f"against {removed:.4f}/h, a saving of {saving:.4f}/h, below minSavingsPercent ({percent:g}%)"
    )


def _note_all(notes: dict[str, str], group: list[NodeState], text: str) -> None:
    for state in group:
        if len(group) == 1 or state.name not in notes or notes[state.name].startswith("not replaced: no target"):
            notes[state.name] = text
