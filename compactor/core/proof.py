"""The fit proof: a node's pods fit on the other nodes in every order and with every scheduler
preference a drain may meet (DESIGN rules 0 and 6).

One proof serves both moments a drain needs one: before it starts (`planner`, every candidate in
ranking order) and before every later batch of its evictions (`inflight`, on the cluster as it is
then, with the pods already on their way to a node placed first). Each run of it is a
`fit.Simulation`; this module only says which runs make a proof.

Pure, like the rest of the core: it never reads a clock and never changes the view it is given.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence

import msgspec

from compactor.core import fit
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import Pod

# Random tie-breaks a proven drain is checked with, beside ties to the fullest target (`prove`).
TIE_DRAWS = 4
TIES_SUFFIX = " (when the scheduler breaks ties between equal scores another way)"
SPREAD_SUFFIX = " (when the scheduler's default topology spread score sends each pod away from its siblings)"
BALANCE_SUFFIX = " (when the scheduler scores the change to each node's balance, as kube-scheduler 1.36 does)"


class Memo:
    """Fit proofs already made on one cluster, by the node, its targets, the avoided and the reserved nodes
    (everything else a proof reads is the view's). For a caller that plans the same content with the same
    configuration again, such as the simulator between two runs on a world that did not change, so a proof
    made once is not made again; a new memo for any other cluster. A planner without one makes every proof."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, tuple[str, ...], frozenset[str], frozenset[str]], fit.FitResult | str] = {}

    def prove(
        self,
        view: ClusterView,
        state: NodeState,
        targets: list[NodeState],
        avoided: frozenset[str],
        *,
        reserved: frozenset[str] = frozenset(),
    ) -> fit.FitResult | str:
        """`prove`, or what it found for the same node, targets, avoided and reserved nodes before."""
        key = (state.name, tuple([target.name for target in targets]), avoided, reserved)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = prove(view, state, targets, avoided, reserved=reserved)
        return found


def same_for_proofs(proved: Sequence[Pod], read: Sequence[Pod]) -> bool:
    """Whether a node's pods read again (`read`) are, for a proof, those it was made with (`proved`): the same
    pods in the same order, equal but for whether a pod-deletion-cost annotation is there and whether
    node-compactor wrote it (`Pod.deletion_cost_set`, `Pod.steered`: scale-down steering writes them between
    a plan and its drain), which no proof reads. The cost itself it reads: it breaks ties in the evictions'
    order."""
    return len(proved) == len(read) and all(
        new == old or msgspec.structs.replace(new, deletion_cost_set=old.deletion_cost_set, steered=old.steered) == old
        for old, new in zip(proved, read, strict=True)
    )


def prove(
    view: ClusterView,
    state: NodeState,
    targets: list[NodeState],
    avoided: frozenset[str],
    *,
    reserved: frozenset[str] = frozenset(),
    moving: Sequence[Pod] | None = None,
    arriving: Sequence[Pod] = (),
) -> fit.FitResult | str:
    """The fit proof: every placement order and scheduler preference the drain may meet must succeed.

    `moving` are the pods of `state` to place (default: all its movable pods); `arriving` are pods
    waiting for a node already (replacements of pods a drain evicted, and others the scheduler has
    not placed yet): they reach the scheduler first, so every order places them first.

    Orders: largest first (rule 6), the order the evictions hand the pods to the scheduler, which
    places each on the node it scores best as it comes (`fit`), that order as the replacements really
    arrive (the pods whose PDB the earlier evictions use up, refused until the others are Ready, coming
    last, and before them Job pods, which their controller recreates a second later, then StatefulSet
    pods, recreated once the old pod is gone), and that one with the higher
    priorities first in each batch (the scheduling queue's order when they wait together). Ties
    between equal scores go to the roomiest target; the orders of arrival are then tried again with
    ties going to the fullest and at random (`_tie_breaks`), with the scheduler's
    system-default topology spread scored too (`fit.Simulation`'s `spread_score`), and with
    BalancedAllocation scored as kube-scheduler 1.36 does, with and without the spread score
    (`fit.Simulation`'s `balance`).
    In every run a pod with preferred node affinity goes where kube-scheduler's NodeAffinity score sends it
    (`fit.node_affinity_scores`).
    Preferences: the scheduler's resource scores alone, and, when some targets carry a PreferNoSchedule taint, the
    scheduler's TaintToleration score putting pods on the other nodes first. With `reserved`, only
    that preference, those nodes among the avoided: the reservation is what makes the pods fit.
    Last, when pods held to a few nodes by a hard constraint (zone spread, pod affinity, a volume's
    zone) move beside pods free to go anywhere, the free ones are placed first where they hurt most
    (`_free_pods_first`): the scheduler scores more than the proof models.
    Returns the first placement, or why a pod fits nowhere.
    """
    movable = state.movable_pods if moving is None else moving
    first_in = fit.largest_first(arriving)
    avoided_targets = avoided & {target.name for target in targets}
    if reserved:
        policies = [avoided_targets | reserved]
    else:
        policies = [avoided_targets, frozenset[str]()] if avoided_targets else [frozenset[str]()]
    first: fit.FitResult | None = None
    evicted = fit.eviction_order(movable)
    arriving_order = fit.arrival_order(evicted, view.pdbs.covering)
    queued = fit.queue_order(evicted, view.pdbs.covering)
    in_eviction_order = (evicted, ", when they arrive in eviction order")
    in_arrival_order = (
        arriving_order,
        ", when they reach the scheduler as they really arrive "
        "(Job, then StatefulSet pods after the others, and pods whose PodDisruptionBudget holds them back last)",
    )
    in_queue_order = (queued, ", when the scheduler takes the higher-priority replacements first")
    # The orders the replacements may really reach the scheduler in.
    arriving_orders = [in_eviction_order if arriving_order == evicted else in_arrival_order]
    if queued != arriving_order:
        arriving_orders.append(in_queue_order)
    orders = [(fit.largest_first(movable), ""), in_eviction_order]
    orders.extend(order for order in arriving_orders if order[0] != evicted)
    # kube-scheduler breaks equal scores at random. On nearly full targets the whole-number scores
    # tie often, and a pick other than the roomiest can leave a later pod without a place: once
    # every order passes with ties to the roomiest, the orders the replacements arrive in are tried
    # again with the other picks (made only then: `_tie_breaks` is a generator).
    # Last, those orders once more with kube-scheduler's system-default topology spread scored beside
    # the resources: it sends a ReplicaSet's new pod to the node and zone with the fewest of its
    # siblings, and where the fit is tight that can break the hole a later pod needed.
    # And kube-scheduler 1.36 scores NodeResourcesBalancedAllocation by the change a pod makes to a
    # node's balance, not by the balance after it (kubernetes/kubernetes#135573): the same pods may
    # land elsewhere, so the orders they arrive in are tried under that score too, with and without
    # the spread score. A fit proven both ways holds whichever version the control plane runs.
    roomiest: fit.TieBreak = "roomiest"
    after: fit.Balance = "after"
    change: fit.Balance = "change"
    passes = itertools.chain(
        [(roomiest, False, orders, "", after)],
        ((ties, False, arriving_orders, TIES_SUFFIX, after) for ties in _tie_breaks(state)),
        [(roomiest, True, arriving_orders, SPREAD_SUFFIX, after)],
        [(roomiest, False, arriving_orders, BALANCE_SUFFIX, change)],
        [(roomiest, True, arriving_orders, SPREAD_SUFFIX + BALANCE_SUFFIX, change)],
    )
    everything = [*first_in, *movable]
    for ties, spread, tried, note, balance in passes:
        for policy in policies:
            for order, suffix in tried:
                placed = [*first_in, *order] if first_in else order
                run = fit.Simulation(view, state, targets, policy, ties=ties, spread_score=spread, balance=balance)
                result = run.run(placed)
                if not result.fits:
                    return _no_fit(result, f"{suffix}{note}", policy)
                if first is None:
                    first = result
                    if fit.fits_in_every_order(view, state, targets, everything):
                        return first  # every other run would place every pod too
    assert first is not None
    stolen = _free_pods_first(view, state, targets, policies, first_in, movable)
    if stolen is not None:
        return stolen
    return first


# At most this many groups of constrained pods (by the targets they may use) get a run of their own
# in `_free_pods_first`: the most constrained groups first.
MAX_CONSTRAINED_GROUPS = 8
STOLEN_SUFFIX = (
    ", when the pods without placement constraints land first on the nodes the constrained ones need "
    "(kube-scheduler scores more than the proof models: topology spread, image locality)"
)


def constrained(pod: Pod) -> bool:
    """Whether a hard constraint beyond resources and node labels narrows where `pod` may go: a
    DoNotSchedule topology spread, required pod affinity or anti-affinity, or a volume's zone."""
    return bool(pod.spread_constraints or pod.pod_affinity or pod.pod_anti_affinity or pod.pvc_names)


def _free_pods_first(
    view: ClusterView,
    state: NodeState,
    targets: list[NodeState],
    policies: list[frozenset[str]],
    first_in: list[Pod],
    movable: Sequence[Pod],
) -> str | None:
    """Why a constrained pod may find no node when the free pods beside it land where the proof does
    not expect, or None.

    The proof places each pod where the scheduler's resource scores put it. kube-scheduler adds
    other scores (the system-default topology spread above all, which sends a ReplicaSet's new pod to
    the zone that just lost one, and image locality), so a pod free to go anywhere can land on
    another node than the proof's, and take the room a pod held to a few nodes (a zone by its spread
    constraint or its volume, the nodes without its anti-affine peers) was counted on. A free pod
    goes wherever it fits: so for each group of constrained pods that may use the same targets, the
    free pods are placed first, roomiest first, on those targets (the others taken last), and then
    the constrained pods, in eviction order. Any placement of the free pods then leaves the
    constrained ones room, as far as putting the most room in their way is the worst (data-platform-
    etl at 20:50: kube-dns took the only zone-a room a zone-spread query-api pod needed).
    """
    tied = [pod for pod in movable if constrained(pod)]
    free = [pod for pod in movable if not constrained(pod)]
    if not tied or not (free or first_in):
        return None
    probe = fit.Simulation(view, state, targets)
    groups: dict[frozenset[str], None] = {}
    for pod in tied:
        usable = frozenset(target.name for target in probe.targets if probe.why_not(pod, target) is None)
        if usable:
            groups.setdefault(usable, None)
    if not groups:
        return None
    everyone = frozenset(target.name for target in probe.targets)
    free_order = [*first_in, *fit.eviction_order(free)]
    tied_order = fit.eviction_order(tied)
    for usable in sorted(groups, key=len)[:MAX_CONSTRAINED_GROUPS]:
        for policy in policies:
            # The free pods first, roomiest first among the targets the group may use, whatever the
            # PreferNoSchedule preferences (soft taints, reservations: scores the ones the proof does
            # not model can outweigh); then the constrained pods, as the scheduler scores them.
            simulation = fit.Simulation(view, state, targets, everyone - usable)
            result = simulation.run(free_order)
            if result.fits:
                simulation.avoided = policy
                result = simulation.run(tied_order)
            if not result.fits:
                return _no_fit(result, STOLEN_SUFFIX, policy)
    return None


def _tie_breaks(state: NodeState) -> Iterator[fit.TieBreak]:
    """Ties to the fullest target, then `TIE_DRAWS` random picks seeded by the node's name: the same
    snapshot gets the same plan."""
    yield "fullest"
    for draw in range(TIE_DRAWS):
        yield random.Random(f"{state.name}/{draw}")


def _no_fit(result: fit.FitResult, suffix: str, policy: frozenset[str]) -> str:
    where = " (marked nodes taken last)" if policy else ""
    return f"{result.failure or 'its pods fit nowhere else'}{suffix}{where}"
