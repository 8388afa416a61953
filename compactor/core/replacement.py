"""Node replacement (DESIGN "Node replacement", rule 10): drain nodes once ONE cheaper new node is up.

Karpenter's second consolidation mechanism, on GKE without creating a VM: when no node of a pool
can simply be deleted, a set of 1..`maxNodes` of its candidates (each passing rule 4 but for the
fit) is replaced when their pods fit on the other nodes plus one new node of a target pool, and the
new node costs at least `minSavingsPercent` less than they do. node-compactor asks the Cluster
Autoscaler for that node with a placeholder pod (priority -10: the lowest the autoscaler still scales
up for, and any other pod preempts it); once the placeholder runs on a Ready node, the replaced
nodes are drained one at a time under rules 0-8. Every proof keeps the placeholder's room taken
until a pod that fits on no node as it is preempts it, as kube-scheduler does (the evicted pods'
replacements go where they fit first), and the placeholder is deleted when the last one is drained
or the replacement is given up.

This module decides, from the snapshot alone: the step of the replacement under way (`in_flight`),
and a new one when none is (`choose`). The new node is a template (`template`): a node of the
target pool as it is (minus its DaemonSets' requests), or, for a pool with no node, what GKE says
of the pool's machine type, labels and taints. The proof moves the pods of the whole set at once
onto the other nodes and the template; the executor proves every batch again on the cluster as it
is, so a set that no longer fits is held, then given up.

Pure: never reads a clock; the caller passes `now`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import msgspec

from compactor.core import fit, inflight, proof, ranking
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import (
    CA_DELETING_TAINT,
    DRAIN_FAILED_AT,
    DRAIN_STARTED_AT,
    HOSTNAME_LABEL,
    PLACEHOLDER_PREFIX,
    REPLACED_BY,
    REPLACEMENT_FAILED_AT,
    RESERVED_TAINT,
    SOFT_TAINT,
    UNSCHEDULABLE_TAINT,
    ZONE_LABELS,
    Node,
    Pod,
    PoolAutoscaling,
    Resources,
)
from compactor.core.plan import Replacement
from compactor.core.prices import costs, machines, pricing
from compactor.core.timing import human, parse_stamp, seconds_between
from compactor.errors import BadInputError
from compactor.settings.config import PoolConfig

# Candidates per pool the search combines (cheapest first by rule 8), and the proofs one run may make:
# sets of up to 3 of 6 candidates are 41, each against every target pool; most fail the price or
# the room check, which cost nothing.
MAX_CANDIDATES = 6
MAX_PROOFS = 12
# Taints a node carries because of what happens to it now, not because of its pool.
_TRANSIENT_TAINTS = frozenset(
    {SOFT_TAINT, RESERVED_TAINT, CA_DELETING_TAINT, UNSCHEDULABLE_TAINT, "DeletionCandidateOfClusterAutoscaler"}
)
_SPOT_LABELS = {"cloud.google.com/gke-spot": "true", "cloud.google.com/gke-provisioning": "spot"}
TEMPLATE_NAME = "node-compactor-new-node"


@dataclass(frozen=True, slots=True)
class Template:
    """The new node of a target pool, as the proof sees it (its DaemonSets' requests already taken off)."""

    pool: str
    node: Node
    machine_type: str | None
    zone: str | None
    price: costs.Price
    source: str  # where its shape came from


@dataclass(frozen=True, slots=True)
class Search:
    """The replacement chosen (step create) or None, why each candidate was or was not replaced, and warnings."""

    chosen: Replacement | None
    notes: Mapping[str, str]
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class InFlight:
    """The replacement under way (or None), what its step is, and the leftovers to clear."""

    replacement: Replacement | None
    # While it waits for its node, or drains: no other drain or replacement starts; while it drains,
    # only these nodes may be drained.
    holds: bool
    drain_only: frozenset[str]
    placeholders_remove: tuple[str, ...]
    replaced_by_remove: tuple[str, ...]


NOTHING = InFlight(None, False, frozenset(), (), ())


def placeholder_name(nodes: Iterable[str], target_pool: str) -> str:
    """`node-compactor-placeholder-<hash>`: the same nodes and pool give the same name (a retried create is a 409)."""
    digest = hashlib.sha256(("\n".join(sorted(nodes)) + "\n" + target_pool).encode()).hexdigest()
    return PLACEHOLDER_PREFIX + digest[:10]


def in_flight(view: ClusterView, placeholders: Sequence[Pod], now: datetime, running: inflight.InFlight) -> InFlight:
    """The replacement under way and its step (`running`: the drains under way, rule 0).

    A placeholder no existing node points to (`replaced-by`) is removed, and so is a `replaced-by` that
    names no placeholder (a run that stopped between the two writes). Of several placeholders with
    nodes (never made by one node-compactor), the oldest goes on and the others are removed."""
    config = view.config
    namespace = config.placeholder_namespace
    # Only what node-compactor could have made: its namespace, its label and annotation, its name prefix.
    ours = sorted(
        (
            pod
            for pod in placeholders
            if pod.namespace == namespace and pod.placeholder is not None and pod.name.startswith(PLACEHOLDER_PREFIX)
        ),
        key=_age_order,
    )
    pointing: dict[str, list[str]] = {}
    for state in view.nodes.values():
        by = state.node.annotations.get(REPLACED_BY)
        if by:
            pointing.setdefault(by, []).append(state.name)
    names = {pod.name for pod in ours}
    replaced_by_remove = tuple(sorted(node for by, nodes in pointing.items() if by not in names for node in nodes))
    remove: list[str] = []
    active: tuple[Pod, list[str]] | None = None
    for pod in ours:
        nodes = pointing.get(pod.name)
        if not nodes or active is not None:
            remove.append(pod.name)
        else:
            active = (pod, nodes)
    if active is None:
        return InFlight(None, False, frozenset(), tuple(remove), replaced_by_remove)
    pod, pointed = active
    assert pod.placeholder is not None
    order = [name for name in pod.placeholder.replaces if name in pointed]
    order += sorted(name for name in pointed if name not in order)
    return _step(view, pod, tuple(order), now, running, tuple(remove), replaced_by_remove)


def _age_order(pod: Pod) -> tuple[str, str]:
    return (pod.placeholder.created_at or "" if pod.placeholder is not None else "", pod.name)


def _step(
    view: ClusterView,
    pod: Pod,
    nodes: tuple[str, ...],
    now: datetime,
    running: inflight.InFlight,
    remove: tuple[str, ...],
    replaced_by_remove: tuple[str, ...],
) -> InFlight:
    assert pod.placeholder is not None
    first = view.nodes.get(nodes[0]) if nodes else None
    pool = view.config.pool(first.pool) if first is not None else None
    timeout = pool.replacement.timeout_seconds if pool is not None and pool.replacement is not None else 900
    created = parse_stamp(pod.placeholder.created_at) if pod.placeholder.created_at else None
    age = seconds_between(created, now) if created is not None else float(timeout)
    target_pool = dict(pod.node_selector).get(view.config.pool_label, "")
    started = [name for name in nodes if DRAIN_STARTED_AT in view.nodes[name].node.annotations]
    left = [name for name in nodes if name not in started]
    failed_back = [
        name for name in left if _failed_since(view.nodes[name].node.annotations, pod.placeholder.created_at)
    ]

    def done(step: Literal["delete", "give-up"], reason: str, failed: tuple[str, ...] = ()) -> InFlight:
        return InFlight(
            Replacement(step, pod.name, nodes, target_pool, reason, failed=failed),
            False,
            frozenset(),
            remove,
            replaced_by_remove,
        )

    if not left and running.draining not in started:
        return done("delete", f"every node {pod.name} replaces is drained ({', '.join(nodes)})")
    if failed_back:
        return done(
            "give-up",
            f"the drain of {', '.join(failed_back)} was given back; the replacement stops there",
            tuple(left),
        )
    bound = pod.node_name is not None and pod.phase == "Running"
    host = view.nodes.get(pod.node_name or "")
    ready = bound and host is not None and host.node.ready
    if not ready:
        if age >= timeout and not started:
            return done(
                "give-up",
                f"{pod.name} did not run on a Ready node within {human(timeout)} (timeoutSeconds): the Cluster "
                "Autoscaler could not add the node (a stockout, a quota, or the pool at its maximum)",
                tuple(left),
            )
        where = f"pending for {human(age)}" if not bound else f"on {pod.node_name}, which is not Ready"
        return InFlight(
            Replacement(
                "wait",
                pod.name,
                nodes,
                target_pool,
                f"waiting for the new node: {pod.name} is {where} (gives up at {human(timeout)})",
            ),
            True,
            frozenset(),
            remove,
            replaced_by_remove,
        )
    # The new node is up, but a replaced node that cannot be drained must not hold every other drain for
    # good: once the placeholder has waited its timeout and a drain's, with no replaced node draining, the
    # rest is given up (the new node goes back to the autoscaler with the placeholder).
    patience = timeout + (pool.drain_timeout_seconds if pool is not None else 900)
    if left and age >= patience and running.draining not in nodes:
        return done(
            "give-up",
            f"{', '.join(left)} could not be drained within {human(patience)} of asking for the new node "
            "(timeoutSeconds and drainTimeoutSeconds)",
            tuple(left),
        )
    return InFlight(
        Replacement(
            "drain",
            pod.name,
            nodes,
            target_pool,
            f"{pod.name} runs on the new node {pod.node_name}; draining {', '.join(left) or 'nothing more'}",
        ),
        True,
        frozenset(left),
        remove,
        replaced_by_remove,
    )


def _failed_since(annotations: Mapping[str, str], created_at: str | None) -> bool:
    """Whether the node's drain was rolled back since the placeholder was created."""
    failed = annotations.get(DRAIN_FAILED_AT)
    if failed is None:
        return False
    failed_at = parse_stamp(failed)
    created = parse_stamp(created_at) if created_at else None
    return failed_at is not None and (created is None or failed_at >= created)


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


def template(
    view: ClusterView,
    table: pricing.PriceTable,
    pool_name: str,
    zone_hint: str | None,
    daemonset_requests: Resources,
) -> Template | str:
    """The new node a target pool would get, or why the pool cannot take one: not in the cluster, not
    autoscaled or at its maximum, or a machine type, zone or price that cannot be known."""
    config = view.config
    members = view.nodes_by_pool.get(pool_name, [])
    autoscaling = view.snapshot.pool_autoscaling.get(pool_name)
    if autoscaling is not None and not autoscaling.can_grow(len(members)):
        if not autoscaling.enabled:
            return f"target pool {pool_name} is not autoscaled"
        return f"target pool {pool_name} is at its maximum size ({len(members)} nodes)"
    if members:
        return _from_node(view, table, pool_name, members, zone_hint)
    if autoscaling is None or autoscaling.machine_type is None:
        return f"target pool {pool_name} has no node in the cluster and GKE's node pool config was not read"
    return _from_gke(config.pool_label, table, view, pool_name, autoscaling, zone_hint, daemonset_requests)


def _from_node(
    view: ClusterView, table: pricing.PriceTable, pool_name: str, members: Sequence[NodeState], zone_hint: str | None
) -> Template | str:
    ready = [state for state in members if state.node.ready and not state.node.unschedulable] or list(members)
    in_zone = [state for state in ready if state.node.zone == zone_hint]
    model = max(in_zone or ready, key=lambda state: (state.node.created or datetime.min, state.name))
    node = model.node
    price = costs.of_node(view.config, table, pool_name, node)
    if isinstance(price, str):
        return f"target pool {pool_name}: {price}"
    daemons = [pod for pod in model.pods if pod.stays_on_node and not pod.is_terminal]
    held = _sum(pod.requests for pod in daemons)
    labels = {**node.labels, HOSTNAME_LABEL: TEMPLATE_NAME}
    new = Node(
        TEMPLATE_NAME,
        Resources(
            max(0, node.allocatable.cpu_millis - held.cpu_millis),
            max(0, node.allocatable.memory_bytes - held.memory_bytes),
            node.allocatable.extended,
        ),
        max(0, node.allocatable_pods - len(daemons)),
        labels,
        taints=tuple(taint for taint in node.taints if taint.key not in _TRANSIENT_TAINTS),
    )
    return Template(
        pool_name,
        new,
        pricing.machine_type_of(node.labels),
        node.zone,
        price,
        f"node {node.name} of the pool, less its DaemonSet pods' requests",
    )


def _from_gke(
    pool_label: str,
    table: pricing.PriceTable,
    view: ClusterView,
    pool_name: str,
    autoscaling: PoolAutoscaling,
    zone_hint: str | None,
    daemonset_requests: Resources,
) -> Template | str:
    machine_type = autoscaling.machine_type or ""
    try:
        cpu, memory = machines.allocatable_amounts(machine_type)
    except BadInputError:
        return f"target pool {pool_name}: machine type {machine_type} has no known allocatable"
    zones = autoscaling.locations
    zone = zone_hint if zone_hint in zones else (sorted(zones)[0] if zones else None)
    if zone is None:
        return f"target pool {pool_name}: GKE names no zone for it"
    region = zone.rsplit("-", 1)[0]
    labels = {
        **autoscaling.labels,
        pool_label: pool_name,
        HOSTNAME_LABEL: TEMPLATE_NAME,
        "node.kubernetes.io/instance-type": machine_type,
        ZONE_LABELS[0]: zone,
        "topology.kubernetes.io/region": region,
    }
    if autoscaling.spot:
        labels["cloud.google.com/gke-spot"] = "true"
    price = costs.machine_price(view.config, table, pool_name, machine_type, region, autoscaling.spot)
    if isinstance(price, str):
        return f"target pool {pool_name}: {price}"
    new = Node(
        TEMPLATE_NAME,
        Resources(max(0, cpu - daemonset_requests.cpu_millis), max(0, memory - daemonset_requests.memory_bytes)),
        machines.MAX_PODS,
        labels,
        taints=autoscaling.taints,
    )
    return Template(pool_name, new, machine_type, zone, price, "GKE's node pool config (the pool has no node yet)")


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
        ranked = sorted(members, key=ranking.disruption_cost)[:MAX_CANDIDATES]
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
                        daemons = _sum(pod.requests for state in group for pod in state.pods if pod.stays_on_node)
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
    proofs = 0
    # One view with the new node per template (a target pool's template differs by zone).
    views: dict[tuple[str, str | None], tuple[ClusterView, list[NodeState]]] = {}
    for _, _, group, made, removed, saving in options:
        if proofs >= MAX_PROOFS:
            break
        if not _room_enough(view, group, made):
            _note_all(
                notes,
                group,
                f"not replaced by a node of {made.pool}: the pods need more room than the other "
                "nodes and the new node have free",
            )
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
        return Search(chosen, notes, tuple(warnings))
    return Search(None, notes, tuple(warnings))


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
    need = _sum(pod.requests for pod in moving)
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
    need = _sum(pod.requests for state in group for pod in state.movable_pods)
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


def _sum(requests: Iterable[Resources]) -> Resources:
    cpu = memory = 0
    for item in requests:
        cpu += item.cpu_millis
        memory += item.memory_bytes
    return Resources(cpu, memory)
