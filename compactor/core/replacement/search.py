"""Rule 10: which nodes to replace, by what, and whether their pods provably fit (DESIGN "Node replacement").

Karpenter's consolidation by price, on GKE without creating a VM: a set of 1..`maxNodes` of a pool's candidates
(each passing rule 4 but for underutilization, the mark and the fit) is replaced when their pods fit on the other
nodes plus 1..`maxNewNodes` new nodes of one target (`templates`: a target pool, or a machine type GKE creates a
pool for, Spot where allowed), and the new nodes together cost at least `minSavingsPercent` less than they do.
Each set is sized to the fewest new nodes its pods' requests need; one more is proven only when those do not fit.
node-compactor asks the Cluster Autoscaler for the nodes with one placeholder pod each (priority -10: the lowest
the autoscaler still scales up for, and any other pod preempts it); once every placeholder runs on a Ready node,
the replaced nodes are drained one at a time under rules 0-8 (`underway`). Every proof keeps the placeholders'
room taken until a pod that fits on no node as it is preempts one, as kube-scheduler does (the evicted pods'
replacements go where they fit first). With `ranking: "savings"` the search runs beside the run's deletion and
wins only by saving more per disrupted pod (`to_beat`).

The search is bounded: at most `MAX_CANDIDATES` candidates a pool, cheapest first by rule 8, of the first
`MAX_SCREENED` (a candidate whose own pods the checks below rule out alone gives its place to the next), and
`MAX_PROOFS` fit proofs a run; the sets are tried by saving per disrupted pod, then rule 8's order, then fewer new
nodes, and a set that a cheap necessary check already rules out (`_fewest_new_nodes`: the pods' requests summed,
and each pod that cannot use the target against the room of every node outside the set, `Elsewhere`) spends no
proof.

Pure: never reads a clock; the caller passes `now`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import msgspec

from compactor.core import fit, proof, ranking
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import (
    HOSTNAME_LABEL,
    PLACEHOLDER_PREFIX,
    REPLACEABLE_SINCE,
    REPLACEMENT_FAILED_AT,
    ZONE_LABELS,
    Pod,
    Resources,
)
from compactor.core.plan import Replacement
from compactor.core.prices import costs, pricing
from compactor.core.replacement.templates import (
    TEMPLATE_NAME,
    Template,
    machine_template,
    template,
    total_requests,
)
from compactor.core.timing import human, parse_stamp, seconds_between
from compactor.settings.config import Config, PoolConfig
from compactor.settings.config import Replacement as ReplacementSettings

# Candidates per pool the search combines (cheapest first by rule 8), and the proofs one run may make:
# sets of up to 3 of 6 candidates are 41, each against every target pool; most fail the price or
# the room check, which cost nothing.
MAX_CANDIDATES = 6

MAX_PROOFS = 12

# Candidates a pool checks at most, in that order, for the MAX_CANDIDATES the search combines: a candidate the
# checks rule out alone gives its place to the next.
MAX_SCREENED = 10 * MAX_CANDIDATES


_SPOT_LABELS = {pricing.SPOT_LABEL: "true", pricing.PROVISIONING_LABEL: "spot"}


@dataclass(frozen=True, slots=True)
class Search:
    """The replacement chosen (step create) or None, why each candidate was or was not replaced, and warnings."""

    chosen: Replacement | None
    notes: Mapping[str, str]
    warnings: tuple[str, ...]
    # The candidates some replacement saves enough for and has room for (`replaceable-since` is kept on them),
    # and every node the search judged (the annotation comes off those not in `replaceable`): not those the bound
    # on candidates left out, whose annotation stays as it is until a search looks at them.
    replaceable: frozenset[str] = frozenset()
    judged: frozenset[str] = frozenset()


def placeholder_name(nodes: Iterable[str], target: str, index: int = 0) -> str:
    """`node-compactor-placeholder-<hash>` (`-<n>` for the n-th new node from the second on): the same nodes and
    target give the same names (a retried create is a 409), and a replacement by one new node keeps the name a
    single placeholder always had."""
    digest = replacement_id(nodes, target)
    return PLACEHOLDER_PREFIX + digest + (f"-{index + 1}" if index else "")


def replacement_id(nodes: Iterable[str], target: str) -> str:
    """The id every placeholder of one replacement carries in its `node-compactor.dev/replacement` label."""
    return hashlib.sha256(("\n".join(sorted(nodes)) + "\n" + target).encode()).hexdigest()[:10]


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


@dataclass(frozen=True, slots=True)
class _Option:
    """A set of candidates, a target and how many of its new nodes: what it saves, per disrupted pod first."""

    per_pod: float  # minus the saving per hour per disrupted pod: the sort key
    rank: tuple[object, ...]
    group: list[NodeState]
    made: Template
    count: int
    removed: float
    saving: float
    # The most new nodes that still save enough, within maxNewNodes: tried one more at a time when the pods do
    # not fit on `count` and each of them could run on a new node.
    most: int = 0

    @property
    def shape(self) -> str:
        return f"{self.count} new node(s) of {_target_words(self.made)}"


def choose(
    view: ClusterView,
    table: pricing.PriceTable,
    node_costs: costs.Costs,
    fit_blocked: Sequence[NodeState],
    avoided: frozenset[str],
    now: datetime,
    *,
    to_beat: float | None = None,
) -> Search:
    """Rule 10: the best replacement among the candidates (`fit_blocked`, each passing rule 4 but for the fit,
    busy or not marked ones of pools with replacement on among them), by saving per disrupted pod, then rule 8's
    order; None when no set saves enough or fits. `to_beat`: the saving per hour per disrupted pod of the
    deletion this run would make otherwise (rule 8 with prices: a replacement must save more per pod)."""
    config = view.config
    notes: dict[str, str] = {}
    warnings: list[str] = []
    options: list[_Option] = []
    by_pool: dict[str, list[NodeState]] = {}
    for state in fit_blocked:
        pool = config.enabled_pool(state.pool)
        if pool is None or pool.replacing is None or state.pool is None:
            continue
        backoff = backing_off(state, pool, now)
        if backoff is not None:
            notes[state.name] = f"not replaced: {backoff}"
            continue
        if node_costs.of(state.name) is None:
            notes[state.name] = f"not replaced: {node_costs.unknown.get(state.pool, 'its price is not known')}"
            continue
        by_pool.setdefault(state.pool, []).append(state)
    templates: dict[tuple[str, str, str | None], Template | str] = {}
    free = _free_room(view)
    elsewhere = Elsewhere(view)
    staying = Staying()
    unjudged: set[str] = set()
    for pool_name, members in sorted(by_pool.items()):
        pool = config.enabled_pool(pool_name)
        assert pool is not None and pool.replacing is not None
        settings = pool.replacing
        ordered = sorted(members, key=lambda state: _savings_order(state, node_costs))
        wanted = _targets(view, settings, warnings)
        # The candidates combined: the best by saving per disrupted pod among those no check rules out alone (a
        # node whose pods cannot all go to some target or elsewhere is in no set that can be replaced).
        zones = sorted({state.node.zone for state in ordered}, key=lambda zone: zone or "")
        ranked: list[NodeState] = []
        for index, state in enumerate(ordered):
            if len(ranked) >= MAX_CANDIDATES or index >= MAX_SCREENED:
                unjudged.add(state.name)
                notes[state.name] = (
                    f"not replaced: the search combines the {MAX_CANDIDATES} best candidates of pool {pool_name} "
                    f"(by saving per disrupted pod, of the first {MAX_SCREENED}), and this node ranks after them"
                )
                continue
            why = _ruled_out(view, table, templates, state, wanted, zones, free, elsewhere, staying, warnings)
            if why is not None:
                notes[state.name] = why
                continue
            ranked.append(state)
        room = view.schedulable_in_pool[pool_name] - pool.min_nodes
        for state in ranked:
            notes.setdefault(state.name, "not replaced: no target's new nodes save enough and take its pods")
        for size in range(1, min(settings.max_nodes, len(ranked), max(room, 0)) + 1):
            for combination in itertools.combinations(ranked, size):
                group = list(combination)
                zone = group[0].node.zone
                removed = node_costs.total(state.name for state in group) or 0.0
                need = total_requests(staying.requests(state) for state in group)
                pods = sum(len(state.movable_pods) for state in group)
                rank = tuple(ranking.disruption_cost(state) for state in group)
                for target, spot in wanted:
                    made = _template(view, table, templates, group, target, spot, zone, warnings)
                    if made is None:
                        continue
                    sized = _fewest_new_nodes(need, free, group, made, elsewhere, staying)
                    if isinstance(sized, str):
                        _note_one(notes, group, f"not replaced by {_target_words(made)}: {sized}")
                        continue
                    first, everywhere = sized
                    if first > settings.max_new_nodes:
                        _note_one(
                            notes,
                            group,
                            f"not replaced by {_target_words(made)}: its pods need {first} new nodes of it, more "
                            f"than maxNewNodes ({settings.max_new_nodes})",
                        )
                        continue
                    saving = removed - first * made.price.per_hour
                    if not _saves_enough(removed, saving, settings.min_savings_percent):
                        _note_price(notes, group, made, first, removed, saving, settings.min_savings_percent)
                        continue
                    # More nodes are tried only when the pods do not fit on the fewest (a bound from summed room,
                    # not from placed pods), and only when each of them could run on a new node: otherwise the pod
                    # that found no room may be one a new node cannot take.
                    most = first
                    while (
                        everywhere
                        and most < settings.max_new_nodes
                        and _saves_enough(
                            removed, removed - (most + 1) * made.price.per_hour, settings.min_savings_percent
                        )
                    ):
                        most += 1
                    per_pod = -ranking.saving_per_pod(saving, pods)
                    options.append(_Option(per_pod, rank, group, made, first, removed, saving, most))
    options.sort(key=lambda option: (option.per_pod, option.rank, option.count))
    # Rule 10's wait: a set is proven only once each of its nodes has carried `replaceable-since` for the
    # pool's neededMarkedTimeSeconds; the annotation goes on every node some option saves enough for and
    # has room for, waited or not.
    replaceable: set[str] = set()
    ready = []
    for option in options:
        replaceable.update(state.name for state in option.group)
        waiting = [why for state in option.group if (why := _still_waiting(state, config, now)) is not None]
        if waiting:
            _note_all(notes, option.group, f"not replaced by {option.shape} yet: {'; '.join(waiting)}")
            continue
        ready.append(option)
    judged = frozenset(state.name for state in fit_blocked if state.name not in unjudged)
    proofs = 0
    # One view with the new nodes per template and count (a target pool's template differs by zone).
    views: dict[tuple[str, bool, bool, str | None, int], tuple[ClusterView, list[NodeState]]] = {}
    for option in ready:
        group, made = option.group, option.made
        if to_beat is not None and -option.per_pod <= to_beat:
            # Rule 8 with prices: the deletion saves as much per disrupted pod or more (ties go to it).
            _note_all(
                notes,
                group,
                f"not replaced by {option.shape}: saves {-option.per_pod:.4f}/h a disrupted pod, and this run's "
                f"deletion saves {to_beat:.4f}/h a pod",
            )
            continue
        if proofs >= MAX_PROOFS:
            # The run's budget of proofs is spent: the sets left are the less saving ones, and say so.
            _note_all(notes, group, f"not tried by {option.shape}: this run's {MAX_PROOFS} proofs were spent")
            continue
        names = {state.name for state in group}
        moving = [pod for state in group for pod in state.movable_pods]
        proven: tuple[Resources, ...] | str = ""
        tried = option.count
        pods = len(moving)
        for count in range(option.count, option.most + 1):
            saving = option.removed - count * made.price.per_hour
            if to_beat is not None and ranking.saving_per_pod(saving, pods) <= to_beat:
                proven = (
                    f"{proven}; with {count} new nodes it saves {ranking.saving_per_pod(saving, pods):.4f}/h a "
                    f"disrupted pod, and this run's deletion saves {to_beat:.4f}/h a pod"
                )
                break
            if proofs >= MAX_PROOFS:
                proven = f"{proven}; this run's {MAX_PROOFS} proofs were spent before {count} new nodes were tried"
                break
            tried = count
            key = (made.pool, made.auto_created, pricing.is_spot(made.node.labels), made.zone, count)
            grown = views.get(key)
            if grown is None:
                grown = views[key] = _with_templates(view, made, count)
            bigger, targets = grown
            others = [target for target in targets if target.name not in names]
            proofs += 1
            proven = _prove(bigger, group, others, avoided, moving, made, count)
            if not isinstance(proven, str):
                option = dataclasses.replace(option, count=count, saving=saving)
                break
        if isinstance(proven, str):
            shape = (
                option.shape
                if tried == option.count
                else f"{option.count} to {tried} new node(s) of {_target_words(made)}"
            )
            _note_all(notes, group, f"not replaced by {shape}: {proven}")
            continue
        chosen = _replacement(view, option, moving, proven, node_costs.currency)
        for state in group:
            notes[state.name] = f"replaced: {chosen.reason}"
        return Search(chosen, notes, tuple(warnings), frozenset(replaceable), judged)
    return Search(None, notes, tuple(warnings), frozenset(replaceable), judged)


def _targets(view: ClusterView, settings: ReplacementSettings, warnings: list[str]) -> list[tuple[str, bool | None]]:
    """The targets to try: each target pool (None: as the pool is), then each machine type GKE may create a pool
    for, on-demand and, with `spot`, Spot too; `machineTypes` only where the cluster creates pools."""
    found: list[tuple[str, bool | None]] = [(pool, None) for pool in settings.target_pools]
    if not settings.machine_types:
        return found
    creates = creates_pools(view)
    if creates is not True:
        why = (
            "GKE's cluster config was not read (run with --gke or COMPACTOR_CLUSTER)"
            if creates is None
            else "the cluster does not create node pools (node auto-provisioning is off in GKE's cluster config)"
        )
        warning = f"replacement.machineTypes ({', '.join(settings.machine_types)}) not used: {why}"
        if warning not in warnings:
            warnings.append(warning)
        return found
    for machine_type in settings.machine_types:
        found.append((machine_type, False))
        if settings.spot:
            found.append((machine_type, True))
    return found


def creates_pools(view: ClusterView) -> bool | None:
    """Whether GKE creates node pools in this cluster: the snapshot's word (a simulated cluster), else what GKE's
    cluster config says through every pool it read; None when GKE's API was not read."""
    if view.snapshot.creates_pools is not None:
        return view.snapshot.creates_pools
    known = view.snapshot.pool_autoscaling
    if not known:
        return None
    return any(pool.creates_pools for pool in known.values())


def _template(
    view: ClusterView,
    table: pricing.PriceTable,
    templates: dict[tuple[str, str, str | None], Template | str],
    group: list[NodeState],
    target: str,
    spot: bool | None,
    zone: str | None,
    warnings: list[str],
) -> Template | None:
    """The target's new node in `zone` (made once a run), or None with the reason in `warnings`."""
    key = (target, "pool" if spot is None else "spot" if spot else "on-demand", zone)
    made = templates.get(key)
    if made is None:
        daemons = total_requests(pod.requests for state in group for pod in state.pods if pod.stays_on_node)
        if spot is None:
            made = template(view, table, target, zone, daemons)
            unknown = _growth_unknown(view, target)
            if unknown and not isinstance(made, str) and unknown not in warnings:
                warnings.append(unknown)
        else:
            made = machine_template(view, table, target, spot, zone, daemons)
        templates[key] = made
        if isinstance(made, str) and made not in warnings:
            warnings.append(made)
    return None if isinstance(made, str) else made


def _ruled_out(
    view: ClusterView,
    table: pricing.PriceTable,
    templates: dict[tuple[str, str, str | None], Template | str],
    state: NodeState,
    wanted: Sequence[tuple[str, bool | None]],
    zones: Sequence[str | None],
    free: Resources,
    elsewhere: Elsewhere,
    staying: Staying,
    warnings: list[str],
) -> str | None:
    """Why no set holding `state` can be replaced (its note), or None: for every target, in every zone a set's new
    nodes may be made in, some of its pods cannot run on the new node and have no room outside the node. Each
    check of `_fewest_new_nodes` on the pods that stay only gets harder as a set grows (more pods stay, fewer
    nodes are outside it), so a node that fails it alone fails it in every set."""
    why: str | None = None
    need = staying.requests(state)
    for target, spot in wanted:
        judged: set[tuple[int, ...]] = set()  # the pods left by each zone's new node: zones alike are judged once
        for zone in zones:
            made = _template(view, table, templates, [state], target, spot, zone, warnings)
            if made is None:
                continue
            left = tuple(id(pod) for pod in staying.of(state, made)[0])
            if left in judged:
                continue
            judged.add(left)
            sized = _fewest_new_nodes(need, free, [state], made, elsewhere, staying)
            if not isinstance(sized, str):
                return None
            if why is None:
                why = f"not replaced by {_target_words(made)}: {sized}"
    return why


def _fewest_new_nodes(
    need: Resources, free: Resources, group: list[NodeState], made: Template, elsewhere: Elsewhere, staying: Staying
) -> tuple[int, bool] | str:
    """The fewest new nodes whose room, with the free room of the other schedulable nodes, holds the pods'
    requests (cpu and memory summed): a lower bound the proof then checks; at least one. Or why no count does:
    the pods that cannot run on the new nodes at all (a taint they do not tolerate, as Spot's; a selector or
    affinity it does not meet) need more than the other nodes have free, or one of them fits on no node outside
    the set even as the cluster is now (`Elsewhere`). All are necessary conditions only, cheap enough to spare
    the run's proofs the sets that cannot fit. With the count, whether every pod could run on a new node."""
    own = total_requests(state.free for state in group if state.schedulable)
    others_cpu = free.cpu_millis - own.cpu_millis
    others_memory = free.memory_bytes - own.memory_bytes
    stays = [staying.of(state, made) for state in group]
    left = [pod for pods, _ in stays for pod in pods]
    if left:
        stay = total_requests(requests for _, requests in stays)
        if stay.cpu_millis > others_cpu or stay.memory_bytes > others_memory:
            return (
                f"its {len(left)} pod(s) that cannot run on it (cpu {stay.cpu_millis}m, memory "
                f"{stay.memory_bytes // 2**20}Mi) need more than the other nodes have free (cpu {max(0, others_cpu)}m, "
                f"memory {max(0, others_memory) // 2**20}Mi)"
            )
        names = frozenset(state.name for state in group)
        by_terms: dict[tuple[object, ...], list[Pod]] = {}
        for pod in left:
            by_terms.setdefault(_placement_terms(pod), []).append(pod)
        for alike in by_terms.values():
            usable, room = elsewhere.room_outside(alike[0], names)
            asked = total_requests(pod.requests for pod in alike)
            if asked.cpu_millis > room.cpu_millis or asked.memory_bytes > room.memory_bytes:
                return (
                    f"its {len(alike)} pod(s) like {alike[0].namespace}/{alike[0].name} cannot run on it and may use "
                    f"only {usable} other node(s), which have less free (cpu {room.cpu_millis}m, memory "
                    f"{room.memory_bytes // 2**20}Mi) than they ask for (cpu {asked.cpu_millis}m, memory "
                    f"{asked.memory_bytes // 2**20}Mi)"
                )
        for pod in left:
            if not elsewhere.fits_outside(pod, names):
                return (
                    f"pod {pod.namespace}/{pod.name} (cpu {pod.requests.cpu_millis}m, memory "
                    f"{pod.requests.memory_bytes // 2**20}Mi) cannot run on it and fits on no other node even as the "
                    "cluster is now"
                )
    cpu_short = need.cpu_millis - others_cpu
    memory_short = need.memory_bytes - others_memory
    room = made.node.allocatable
    count = 1
    if cpu_short > 0:
        count = max(count, -(-cpu_short // max(1, room.cpu_millis)))
    if memory_short > 0:
        count = max(count, -(-memory_short // max(1, room.memory_bytes)))
    return count, not left


class Staying:
    """Once a run: each candidate's movable pods' requests summed, and its pods that cannot run on a target's new
    node (`fit.could_use`: taints, nodeSelector, node affinity, requests within its room) with theirs. Pods alike
    in their placement terms and requests are judged once a template; templates are made once a run, so each is
    known by its identity."""

    def __init__(self) -> None:
        self._requests: dict[str, Resources] = {}
        self._left: dict[tuple[str, int], tuple[list[Pod], Resources]] = {}
        self._usable: dict[tuple[tuple[object, ...], Resources, int], bool] = {}

    def requests(self, state: NodeState) -> Resources:
        known = self._requests.get(state.name)
        if known is None:
            known = self._requests[state.name] = total_requests(pod.requests for pod in state.movable_pods)
        return known

    def of(self, state: NodeState, made: Template) -> tuple[list[Pod], Resources]:
        key = (state.name, id(made))
        known = self._left.get(key)
        if known is None:
            left = [pod for pod in state.movable_pods if not self._could_use(pod, made)]
            known = self._left[key] = (left, total_requests(pod.requests for pod in left))
        return known

    def _could_use(self, pod: Pod, made: Template) -> bool:
        key = (_placement_terms(pod), pod.requests, id(made))
        known = self._usable.get(key)
        if known is None:
            known = self._usable[key] = fit.could_use(pod, made.node)
        return known


class Elsewhere:
    """Which schedulable nodes could take a pod as the cluster is now, for the pods a target cannot take.

    A pod that cannot run on the new nodes must land on a node outside the set; moving the set's other pods only
    fills those nodes, so a pod that fits on none of them now (taints, nodeSelector, node affinity, cpu, memory,
    pod count, extended resources: the predicates that only get harder as pods arrive) fits in no proof. The nodes
    of the pods alike in that and in their requests are looked up once a run, and the look-up stops at one more
    node than a set may hold: a pod with that many fits outside any set. Pods alike in their tolerations,
    nodeSelector and required node affinity may use the same nodes, whose free room together must hold them all
    (`room_outside`: Spot nodes' room, say, is no room for the pods that do not tolerate Spot).
    """

    # One more than the most nodes a set may hold (`maxNodes` is at most 10).
    ENOUGH = 11

    def __init__(self, view: ClusterView) -> None:
        self._nodes = [state for state in view.nodes.values() if state.schedulable]
        # The first nodes that take a pod now, by what `_takes_now` reads of it: replicas share one look-up.
        self._found: dict[tuple[tuple[object, ...], Resources], tuple[str, ...]] = {}
        self._usable: dict[tuple[object, ...], tuple[dict[str, Resources], Resources]] = {}

    def room_outside(self, pod: Pod, group: frozenset[str]) -> tuple[int, Resources]:
        """How many schedulable nodes outside `group` `pod` may use (taints, nodeSelector, required node affinity),
        and their free cpu and memory together."""
        terms = _placement_terms(pod)
        known = self._usable.get(terms)
        if known is None:
            usable = {state.name: state.free for state in self._nodes if fit.static_refusal(pod, state.node) is None}
            known = self._usable[terms] = (usable, total_requests(usable.values()))
        usable, room = known
        inside = [usable[name] for name in group if name in usable]
        if inside:
            taken = total_requests(inside)
            room = Resources(room.cpu_millis - taken.cpu_millis, room.memory_bytes - taken.memory_bytes)
        return len(usable) - len(inside), room

    def fits_outside(self, pod: Pod, group: frozenset[str]) -> bool:
        """Whether `pod` fits, as the cluster is now, on some schedulable node not in `group`."""
        key = (_placement_terms(pod), pod.requests)
        found = self._found.get(key)
        if found is None:
            taking: list[str] = []
            for state in self._nodes:
                if _takes_now(state, pod):
                    taking.append(state.name)
                    if len(taking) >= self.ENOUGH:
                        break
            found = self._found[key] = tuple(taking)
        return len(found) > len(group) or any(name not in group for name in found)


def _placement_terms(pod: Pod) -> tuple[object, ...]:
    """What `fit.static_refusal` reads of a pod: pods alike in it may use the same nodes."""
    return (pod.tolerations, pod.node_selector, pod.node_affinity)


def _takes_now(state: NodeState, pod: Pod) -> bool:
    """The fit proof's predicates that only get harder as pods arrive, on the node as it is now."""
    node = state.node
    if fit.static_refusal(pod, node) is not None:
        return False
    requests, requested, allocatable = pod.requests, state.requested, node.allocatable
    if requested.cpu_millis + requests.cpu_millis > allocatable.cpu_millis:
        return False
    if requested.memory_bytes + requests.memory_bytes > allocatable.memory_bytes:
        return False
    if len(state.pods) + 1 > node.allocatable_pods:
        return False
    if requests.extended:
        used, room = dict(requested.extended), dict(allocatable.extended)
        return all(used.get(name, 0) + amount <= room.get(name, 0) for name, amount in requests.extended)
    return True


def _saves_enough(removed: float, saving: float, percent: float) -> bool:
    """Whether the new nodes save at least `minSavingsPercent` of the replaced nodes' price."""
    return removed > 0 and saving >= removed * percent / 100


def _free_room(view: ClusterView) -> Resources:
    """The free cpu and memory of every schedulable node together."""
    return total_requests(state.free for state in view.nodes.values() if state.schedulable)


def _prove(
    bigger: ClusterView,
    group: list[NodeState],
    others: list[NodeState],
    avoided: frozenset[str],
    moving: list[Pod],
    made: Template,
    count: int,
) -> tuple[Resources, ...] | str:
    """The fit proof with the new nodes, each holding its placeholder until a pod that fits nowhere else preempts
    it (kube-scheduler's order; `fit.Simulation._preempt`): what each placeholder asks for, or why the pods do
    not fit. One new node's placeholder asks for all the moving pods; with several, each asks for the pods a
    first proof with the new nodes empty put on it (a new node that took none is not asked for)."""
    names = _template_names(count)
    if count == 1:
        asks: tuple[Resources, ...] = (_placeholder_requests(moving, made),)
    else:
        for name in names:
            bigger.preemptible.pop(name, None)
        bigger.start_heaps.clear()
        first = proof.prove(bigger, bigger.nodes[group[0].name], others, avoided, moving=moving)
        if isinstance(first, str):
            return first
        by_node: dict[str, list[Pod]] = {name: [] for name in names}
        keys = {pod.key: pod for pod in moving}
        for key, node in first.placements.items():
            if node in by_node and key in keys:
                by_node[node].append(keys[key])
        asks = tuple(_placeholder_requests(by_node[name], made) for name in names)
        if any(ask.cpu_millis == 0 and ask.memory_bytes == 0 for ask in asks):
            return f"the pods need fewer than {count} new nodes"
    for name, ask in zip(names, asks, strict=True):
        bigger.preemptible[name] = ask
    bigger.start_heaps.clear()  # the new nodes' load changed: the shared starting order is stale
    proven = proof.prove(bigger, bigger.nodes[group[0].name], others, avoided, moving=moving)
    if isinstance(proven, str):
        return proven
    return asks


def _template_names(count: int) -> list[str]:
    """The new nodes' names in a proof: one keeps the template's name, several are numbered."""
    return [TEMPLATE_NAME] if count == 1 else [f"{TEMPLATE_NAME}-{index + 1}" for index in range(count)]


def _target_words(made: Template) -> str:
    if made.auto_created:
        spot = " Spot" if pricing.is_spot(made.node.labels) else ""
        return f"a{spot} {made.pool} of a pool GKE creates"
    return f"a node of {made.pool}"


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
    view: ClusterView, option: _Option, moving: list[Pod], asks: tuple[Resources, ...], currency: str
) -> Replacement:
    group, made, count = option.group, option.made, option.count
    pool_label = view.config.pool_label
    names = tuple(state.name for state in group)
    target = made.pool
    selector: list[tuple[str, str]] = []
    if made.auto_created:
        family = made.node.labels[pricing.MACHINE_FAMILY_LABEL]
        selector += [(pricing.MACHINE_FAMILY_LABEL, family), (pricing.INSTANCE_TYPE_LABEL, target)]
    else:
        selector.append((pool_label, target))
    if made.zone is not None:
        selector.append((ZONE_LABELS[0], made.zone))
    for key, value in _SPOT_LABELS.items():
        if made.node.labels.get(key) == value:
            selector.append((key, value))
            break
    shape = made.machine_type or "its machine type"
    where = "of a pool GKE creates" if made.auto_created else f"in pool {target}"
    spot = " Spot" if pricing.is_spot(made.node.labels) else ""
    new = f"one{spot} {shape}" if count == 1 else f"{count}{spot} {shape}"
    price = count * made.price.per_hour
    reason = (
        f"{', '.join(names)} ({currency} {option.removed:.4f}/h together) -> {new} {where}"
        f"{' (' + made.zone + ')' if made.zone else ''} ({currency} {price:.4f}/h): saves "
        f"{currency} {option.saving:.4f}/h ({option.saving / option.removed:.0%}); their {len(moving)} pod(s) fit on "
        f"the other nodes and the new one{'s' if count > 1 else ''} (shape from {made.source}; price from "
        f"{made.price.source})"
    )
    placeholders = tuple(placeholder_name(names, target, index) for index in range(count))
    avoid = tuple(
        sorted(
            state.name
            for state in view.nodes.values()
            if all(state.node.labels.get(key) == value for key, value in selector)
        )
    )
    return Replacement(
        "create",
        placeholders[0],
        names,
        target,
        reason,
        machine_type=made.machine_type,
        zone=made.zone,
        price_per_hour=price,
        removed_price_per_hour=option.removed,
        savings_per_hour=option.saving,
        requests=asks[0],
        node_selector=tuple(selector),
        taints=made.node.taints,
        placeholders=placeholders,
        replacement_id=replacement_id(names, target),
        placeholder_requests=asks,
        machine_type_target=made.auto_created,
        avoid_nodes=avoid,
    )


def _placeholder_requests(moving: Sequence[Pod], made: Template) -> Resources:
    """What a placeholder asks for: the pods' requests, capped at the new node's allocatable."""
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


def _with_templates(view: ClusterView, made: Template, count: int) -> tuple[ClusterView, list[NodeState]]:
    new_nodes = tuple(
        msgspec.structs.replace(made.node, name=name, labels={**made.node.labels, HOSTNAME_LABEL: name})
        for name in _template_names(count)
    )
    snapshot = msgspec.structs.replace(view.snapshot, nodes=(*view.snapshot.nodes, *new_nodes))
    bigger = ClusterView(snapshot, view.config, view.pdbs, earlier=view)
    return bigger, fit.targets_for(bigger)


def _note_price(
    notes: dict[str, str],
    group: list[NodeState],
    made: Template,
    count: int,
    removed: float,
    saving: float,
    percent: float,
) -> None:
    _note_one(
        notes,
        group,
        f"not replaced by {count} new node(s) of {_target_words(made)}: {made.price.per_hour:.4f}/h each against "
        f"{removed:.4f}/h, a saving of {saving:.4f}/h, below minSavingsPercent ({percent:g}%)",
    )


def _note_one(notes: dict[str, str], group: list[NodeState], text: str) -> None:
    """A set is noted only when proven; one node's note says what its own replacement allows."""
    if len(group) == 1:
        notes[group[0].name] = text


def _note_all(notes: dict[str, str], group: list[NodeState], text: str) -> None:
    for state in group:
        if len(group) == 1 or state.name not in notes or notes[state.name].startswith("not replaced: no target"):
            notes[state.name] = text
