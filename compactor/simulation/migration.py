"""GKE's ComputeClass priorities with active migration: the classes a user would write, and the defrag loop that
moves pods up a class's rungs (`gke-class-priorities`).

The classes (`user_classes`): the pods of every workload (kube-system's aside: GKE's own, they select no class)
are grouped by the pools they may use (an empty node of the pool passes their nodeSelector, node affinity,
tolerations and requests); each group that may use two pools or more gets a class over them with
`activeMigration.optimizeRulePriority: true`. Its rungs, one a pool, go cheapest first for the group's pods
(`rung_cost`: the pool's node price times the nodes the group's requests at their peak take there, the larger of
cpu and memory over a node's room), Spot pools before on-demand ones when the pods tolerate Spot. GKE ties a node
pool to one class (the pool's `cloud.google.com/compute-class` label and taint): a pool belongs to the class with
the most rungs that lists it (`owners`).

The loop (`Migration`), as GoogleCloudPlatform/cluster-autoscaler runs it (pkg/defrag/processor and the
high-priority-migration plugin, pkg/defrag/plugins/highprioritymigration; docs/savings.md has the table of
sources): in a loop the shared fairness enforcer admits (every loop without pods waiting for a node, else one
in `max_loops_before_admission`), the tracked candidates are cleaned (nodes no longer valid dropped; a
candidate without nodes, past the scale-up timeout without a scale-down, without a scale-up option, or past
the scale-down timeout is given up and its nodes backed off), candidate nodes carry the defrag taints, and
candidates are processed in order, a new one made when the list runs out (up to `candidate_limit`): one node
(partial defrag is off) of a pool below the first rung of its class, the pool drawn at random. A candidate
whose pods fit on the existing nodes (neither candidates nor on their way) is scaled down through the
autoscaler's own drain (`Autoscaler.start_removal`: one drain at a time, PDBs respected); the first whose pods
fit neither there nor on the VMs being provisioned hands its pods to the scale-up in place of the pods waiting
for a node, with only the pools of a higher rung than the candidate's as options.

Must never: move a pod itself (it only asks the autoscaler to grow a pool and to drain a node), nor act on a
pool no class with optimizeRulePriority owns.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from compactor.core import fit
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import CA_SCALE_DOWN_DISABLED, Pod
from compactor.kube import snapshot as parsing
from compactor.settings.config import Config
from compactor.simulation import objects
from compactor.simulation.model import ComputeClass, MigrationSettings, PoolSpec, Setup
from compactor.simulation.scheduler import NOWHERE, prepared
from compactor.simulation.world import World

# The taints defrag puts on its candidates (pkg/defrag/defrag.go, HardTaint and SoftTaint).
HARD_TAINT = "autoscaling.gke.io/defrag-candidate"
SOFT_TAINT = "autoscaling.gke.io/defrag-soft-candidate"
SPOT_LABEL = "cloud.google.com/gke-spot"
SYSTEM_NAMESPACE = "kube-system"


# -- the classes a user writes ----------------------------------------------------------------------------------


@dataclass
class _Group:
    pools: tuple[str, ...]
    cpu_millis: int = 0
    memory_bytes: int = 0


def user_classes(setup: Setup) -> tuple[ComputeClass, ...]:
    """The ComputeClasses a careful user writes for this cluster (see the module): one for each set of two
    pools or more that some workload's pods may use, its rungs cheapest first; none when no pod may use two."""
    templates = {pool.name: objects.template_node(pool, setup.config.pool_label) for pool in setup.pools}
    spot = {pool.name for pool in setup.pools if templates[pool.name].labels.get(SPOT_LABEL) == "true"}
    groups: dict[frozenset[str], _Group] = {}
    # GKE's own kube-system workloads (kube-dns, metrics-server) select no class: a user cannot change them.
    sources = [(w.template, w.replicas.extremes()[1]) for w in setup.workloads if w.namespace != SYSTEM_NAMESPACE]
    sources += [(c.template, c.parallelism) for c in setup.cronjobs if c.namespace != SYSTEM_NAMESPACE]
    for index, (template, peak) in enumerate(sources):
        pod = _pod(template, f"class-probe-{index}", setup)
        allowed = tuple(name for name, node in templates.items() if fit.could_use(pod, node))
        if len(allowed) < 2:
            continue
        group = groups.setdefault(frozenset(allowed), _Group(allowed))
        group.cpu_millis += pod.requests.cpu_millis * max(1, peak)
        group.memory_bytes += pod.requests.memory_bytes * max(1, peak)
    rooms = pool_rooms(setup)
    classes: list[ComputeClass] = []
    names: set[str] = set()
    for group in groups.values():
        costs = {
            name: rung_cost(setup, name, rooms[name], group.cpu_millis, group.memory_bytes) for name in group.pools
        }
        rungs = tuple(sorted(group.pools, key=lambda name: (name not in spot, costs[name], name)))
        name = f"{rungs[0]}-first"
        while name in names:
            name += "-2"
        names.add(name)
        classes.append(ComputeClass(name, rungs))
    return tuple(sorted(classes, key=lambda c: c.name))


def rung_cost(setup: Setup, pool: str, room: tuple[int, int], cpu_millis: int, memory_bytes: int) -> float:
    """What the requests cost an hour on this pool: its node price times the nodes they take there, the larger of
    cpu and memory over a node's room; a pool without a price costs nothing known and goes last."""
    price = setup.prices.get(pool)
    if price is None or price.per_hour is None:
        return float("inf")
    room_cpu, room_memory = room
    nodes = max(cpu_millis / room_cpu if room_cpu > 0 else 0.0, memory_bytes / room_memory if room_memory > 0 else 0.0)
    return price.per_hour * nodes


def pool_rooms(setup: Setup) -> dict[str, tuple[int, int]]:
    """Each pool's node allocatable less the requests of the DaemonSet pods it carries: cpu, memory."""
    rooms = {}
    for pool in setup.pools:
        node = objects.template_node(pool, setup.config.pool_label)
        cpu, memory = node.allocatable.cpu_millis, node.allocatable.memory_bytes
        for index, daemon in enumerate(setup.daemonsets):
            if daemon.pools is None or pool.name in daemon.pools:
                requests = _pod(daemon.template, f"daemon-probe-{index}", setup).requests
                cpu -= requests.cpu_millis
                memory -= requests.memory_bytes
        rooms[pool.name] = (cpu, memory)
    return rooms


def owners(classes: Iterable[ComputeClass]) -> dict[str, ComputeClass]:
    """The class each pool belongs to (GKE labels a node pool with one class): the one with the most rungs that
    lists it, ties by name."""
    owned: dict[str, ComputeClass] = {}
    for klass in sorted(classes, key=lambda c: (-len(c.rungs), c.name)):
        for pool in klass.rungs:
            owned.setdefault(pool, klass)
    return owned


def scale_up_order(classes: tuple[ComputeClass, ...], pools: Iterable[str], draw: random.Random) -> list[list[str]]:
    """The node groups as GKE's ComputeClass node group list processor hands them to the scale-up
    (pkg/computeclass/processors/node_group_list_processor.go, `Process`, and organizer.go `OrganizeByCrds`):
    per class, one bucket per rung in priority order, the classes in a random order ("so that no crd starves"),
    the pools no class owns in one bucket after them. The scale-up stops at the first bucket that gives an option
    (`StopBinpacking`)."""
    names = list(pools)
    owned = owners(classes)
    order = [klass for klass in classes if any(owned.get(pool) is klass for pool in klass.rungs)]
    draw.shuffle(order)
    buckets = [[pool] for klass in order for pool in klass.rungs if owned.get(pool) is klass and pool in names]
    rest = [name for name in names if name not in owned]
    if rest:
        buckets.append(rest)
    return buckets


def _pod(template: Mapping[str, object], name: str, setup: Setup) -> Pod:
    stamped = objects.stamp_pod(template, name=name, owner_kind=None, owner_name=None, created=setup.start)
    return parsing.parse_pod(stamped)


# -- the defrag loop --------------------------------------------------------------------------------------------


class Autoscaler(Protocol):
    """What defrag reads of the Cluster Autoscaler and asks of it (`simulation.autoscaler.Autoscaler`)."""

    world: World
    rules: Config
    pools: dict[str, PoolSpec]

    @property
    def upcoming(self) -> Sequence[Any]: ...

    @property
    def draining(self) -> str | None: ...

    def template_for(self, up: Any) -> NodeState: ...

    def start_removal(self, name: str, now: datetime) -> bool: ...

    def blocks(self, pod: Pod, view: ClusterView) -> bool: ...


@dataclass
class Candidate:
    """A set of nodes defrag migrates (pkg/defrag/processor/processor.go, `candidateInfo`)."""

    nodes: list[str]
    pool: str
    klass: ComputeClass
    created: datetime
    scale_up_no_options: bool = False
    possible_since: datetime | None = None  # since when its pods fit on the existing nodes (defragPossibleTime)
    scaled_down: dict[str, datetime] = field(default_factory=dict)  # nodes whose scale-down started, and when

    def fully_started(self) -> bool:
        return all(node in self.scaled_down for node in self.nodes)


@dataclass(frozen=True)
class Pick:
    """The candidate whose pods the scale-up gets in this loop, and the pools it may grow for them."""

    candidate: Candidate
    pods: list[str]
    pools: frozenset[str]


@dataclass
class Migration:
    """The defrag processor's state across loops: the tracked candidates, the nodes backed off, the fairness
    enforcer's count of loops, and what it did (`summary`)."""

    settings: MigrationSettings
    classes: tuple[ComputeClass, ...]
    seed: int
    candidates: list[Candidate] = field(default_factory=list)
    backoff: dict[str, datetime] = field(default_factory=dict)  # node -> backed off until
    loop: int = 0
    last_admitted: int = 0
    nodes_migrated: int = 0  # nodes whose scale-down migration started
    given_up: Counter[str] = field(default_factory=Counter)  # candidates given up, by reason

    def __post_init__(self) -> None:
        self.owners = owners(self.classes)
        self._booked: dict[str, list[Pod]] = {}
        self._existing: frozenset[str] = frozenset()
        self._draw = random.Random(f"{self.seed}-defrag")
        # The last loop admitted that had no candidate and found none (`idle`), whether pods were waiting then,
        # and how many nodes its search shuffled: what a loop skipped after it replays (`skip`).
        self._idle_at = -1
        self._waiting = False
        self._listed = 0

    def summary(self) -> dict[str, int]:
        """What the migration did: nodes whose scale-down it started, candidates it gave up (by reason)."""
        given_up = {f"givenUp:{reason}": count for reason, count in sorted(self.given_up.items())}
        return {"nodesMigrated": self.nodes_migrated, **given_up}

    def process(self, autoscaler: Autoscaler, now: datetime, waiting: list[str]) -> Pick | None:
        """One loop of the defrag processor (`Processor.Process`): a pick when a candidate needs new nodes."""
        self.loop += 1
        self._waiting = bool(waiting)
        # The shared fairness enforcer (pkg/utils/fairness/shared_fairness.go, `admitInternal`): without pods
        # waiting it admits every loop, else once `max_loops_before_admission` loops have passed since the last.
        if waiting and self.loop - self.last_admitted < self.settings.max_loops_before_admission:
            return None
        self.last_admitted = self.loop
        view = self._view(autoscaler, now)
        self._booked = self._book_pending(autoscaler, view)
        remaining: dict[str, int] = {}
        self._clean_up(autoscaler, view, now, remaining)
        self._reconcile_taints(autoscaler)
        taken: set[str] = set()
        simulation: fit.Simulation | None = None
        for index in range(self.settings.candidate_limit):
            if index >= len(self.candidates):
                fresh = self._new_candidate(autoscaler, view, now, taken, remaining)
                if fresh is None:
                    return None
                self.candidates.append(fresh)
                self._reconcile_taints(autoscaler)
            candidate = self.candidates[index]
            taken.update(candidate.nodes)
            if simulation is None:
                simulation = self._snapshot(autoscaler, view)
            left = self._process_candidate(autoscaler, view, simulation, candidate, taken, now)
            if left:
                candidate.scale_up_no_options = True  # until the scale-up finds an option (`BestOptions`)
                better = frozenset(pool for pool in candidate.klass.rungs if self._higher(candidate, pool))
                return Pick(candidate, left, better)
        return None

    def state(self) -> tuple[object, ...]:
        """What a loop may change besides the world, other than its count and the draws of its search: the
        candidates, the nodes backed off, what it did. With `idle`, an unchanged state means nothing happened."""
        return (len(self.candidates), tuple(self.backoff.items()), self.nodes_migrated, sum(self.given_up.values()))

    def idle(self) -> bool:
        """Whether the last loop was admitted, tracked no candidate and found none to start: on an unchanged
        cluster every loop after it does the same until a node's backoff ends (`next_timer`), so it may be
        skipped (`skip`)."""
        return not self.candidates and self._idle_at == self.loop

    def next_timer(self, after: datetime) -> datetime | None:
        """When a node backed off may be a candidate again: the first backoff to end after `after`."""
        return min((until for until in self.backoff.values() if until > after), default=None)

    def skip(self) -> None:
        """What a loop skipped after an idle one does (`process` on the same cluster): it counts towards the
        fairness enforcer, and when admitted its search shuffles the same number of nodes (`random.shuffle`
        draws by the length alone) and finds nothing again."""
        self.loop += 1
        if self._waiting and self.loop - self.last_admitted < self.settings.max_loops_before_admission:
            return
        self.last_admitted = self.loop
        self._draw.shuffle([None] * self._listed)
        self._idle_at = self.loop

    def _view(self, autoscaler: Autoscaler, now: datetime) -> ClusterView:
        """The cluster as this loop sees it (`World.view`: the last view again while nothing changed and no pod
        turned Ready, its memos of simulations emptied): most loops of a quiet cluster cost no snapshot."""
        return autoscaler.world.view(now, autoscaler.rules)

    def _book_pending(self, autoscaler: Autoscaler, view: ClusterView) -> dict[str, list[Pod]]:
        """The snapshot defrag sees: the pod list processors before it (pkg/processors/pod_list_processor.go) put
        the pending pods that fit on a node there (filter-out-schedulable), and the pods of the node being
        drained (the currently-drained-nodes processor). Node name -> the pods booked on it, its own for defrag."""
        existing = sorted(fit.targets_for(view), key=lambda state: state.name)
        simulation = fit.Simulation(view, NOWHERE, existing)
        draining = view.nodes.get(autoscaler.draining or "")
        booked: dict[str, list[Pod]] = {}
        pending = [*view.unschedulable_pods, *view.arriving_pods]
        for listed in [*pending, *(draining.movable_pods if draining is not None else ())]:
            pod = prepared(autoscaler.world, listed.key, simulation)  # a bound volume pins it to its zone
            target = next((t for t in simulation.targets if simulation.why_not(pod, t) is None), None)
            if target is not None:
                simulation.place(pod, target)
                booked.setdefault(target.name, []).append(pod)
        return booked

    def _pods(self, state: NodeState) -> list[Pod]:
        """A node's pods as defrag sees them: its own but DaemonSet and mirror pods, and those booked on it."""
        return [*state.movable_pods, *self._booked.get(state.name, ())]

    def _higher(self, candidate: Candidate, pool: str) -> bool:
        """`IsExpansionOptionValid`: the option's pool has a higher priority in the candidate's class."""
        rung, current = candidate.klass.rung(pool), candidate.klass.rung(candidate.pool)
        return rung is not None and current is not None and rung < current

    def _clean_up(self, autoscaler: Autoscaler, view: ClusterView, now: datetime, remaining: dict[str, int]) -> None:
        """`cleanUpCandidates`: drop invalid nodes, give up candidates that should go, back their nodes off."""
        kept = []
        sizes = self._sizes(autoscaler)
        for candidate in self.candidates:
            was_scaled_down = candidate.fully_started()
            nodes = [
                name
                for name in candidate.nodes
                if (state := view.nodes.get(name)) is not None
                and self._valid(autoscaler, state)
                and not self._blocking(autoscaler, view, state, remaining)
            ]
            candidate.nodes = self._within_min_size(autoscaler, nodes, sizes)
            reason = self._reason_to_give_up(candidate, now)
            if reason is not None:
                if not (reason == "no-valid-nodes" and was_scaled_down):
                    self.given_up[reason] += 1
                    until = now + timedelta(seconds=self.settings.backoff_seconds)
                    for name in candidate.nodes:
                        self.backoff[name] = until
                continue
            self._spend(view, candidate.nodes, remaining)
            kept.append(candidate)
        self.candidates = kept
        self.backoff = {name: until for name, until in self.backoff.items() if until > now}

    def _reason_to_give_up(self, candidate: Candidate, now: datetime) -> str | None:
        """`shouldRemoveCandidate`, atomic mode (partial defrag is an experiment, off by default)."""
        if not candidate.nodes:
            return "no-valid-nodes"
        started = candidate.fully_started()
        if not started and (now - candidate.created).total_seconds() > self.settings.scale_up_timeout_seconds:
            return "scale-up-timeout"
        if candidate.scale_up_no_options:
            return "no-scale-up-options"
        timeout = self.settings.scale_down_timeout_seconds
        if any((now - stamp).total_seconds() > timeout for stamp in candidate.scaled_down.values()):
            return "scale-down-timeout"
        return None

    def _snapshot(self, autoscaler: Autoscaler, view: ClusterView) -> fit.Simulation:
        """Where the loop's candidates' pods are placed, one candidate after the other: the existing nodes with
        the pods booked on them, then the VMs on their way. A candidate's placements stay for the next
        (`simulatePodsScheduling` commits its fork of the snapshot)."""
        existing = sorted(fit.targets_for(view), key=lambda state: state.name)
        arriving = [autoscaler.template_for(up) for up in autoscaler.upcoming]
        simulation = fit.Simulation(view, NOWHERE, [*existing, *arriving])
        by_name = {state.name: state for state in existing}
        for name, booked in self._booked.items():
            if name in by_name:
                for pod in booked:
                    simulation.place(pod, by_name[name])
        self._existing = frozenset(by_name)
        return simulation

    def _process_candidate(
        self,
        autoscaler: Autoscaler,
        view: ClusterView,
        simulation: fit.Simulation,
        candidate: Candidate,
        taken: set[str],
        now: datetime,
    ) -> list[str]:
        """`processCandidateAtomic`: its pods' place on the existing nodes that are no candidate, then on the VMs
        on their way; scale it down once they all fit on the existing ones for `scale_down_delay_seconds`. The pods
        that fit nowhere."""
        pods = [pod for name in candidate.nodes if name in view.nodes for pod in self._pods(view.nodes[name])]
        on_existing = True
        left = []
        for listed in sorted(pods, key=lambda p: (autoscaler.world.created_at.get(p.key) or now, p.key)):
            pod = prepared(autoscaler.world, listed.key, simulation)  # a bound volume pins it to its zone
            target = next(
                (t for t in simulation.targets if t.name not in taken and simulation.why_not(pod, t) is None), None
            )
            if target is None:
                left.append(pod.key)
                on_existing = False
                continue
            if target.name not in self._existing:
                on_existing = False
            simulation.place(pod, target)
        if candidate.fully_started():
            return left
        if not on_existing:
            candidate.possible_since = None
        elif candidate.possible_since is None:
            candidate.possible_since = now
        since = candidate.possible_since
        if since is not None and (now - since).total_seconds() >= self.settings.scale_down_delay_seconds:
            for name in candidate.nodes:
                if name not in candidate.scaled_down and autoscaler.start_removal(name, now):
                    candidate.scaled_down[name] = now
                    self.nodes_migrated += 1
        return left

    def _new_candidate(
        self, autoscaler: Autoscaler, view: ClusterView, now: datetime, taken: set[str], remaining: dict[str, int]
    ) -> Candidate | None:
        """`newCandidate` with the plugin's `NewCandidate`: the valid nodes not backed off, grouped by pool, of the
        pools below the first rung of their class; one such pool drawn, its first nodes taken."""
        listed = sorted(view.nodes)
        self._draw.shuffle(listed)  # the snapshot's node list: a Go map's order
        groups: dict[str, list[str]] = {}
        for name in listed:
            state = view.nodes[name]
            if name in taken or not self._valid(autoscaler, state) or self.backoff.get(name, now) > now:
                continue
            # The class first: it costs a look-up, where the pods' check reads every pod and its PDBs.
            klass = self.owners.get(state.pool or "")
            if klass is None or not klass.optimize_rule_priority or not klass.rung(state.pool):
                continue
            if self._blocking(autoscaler, view, state, remaining):
                continue
            groups.setdefault(state.pool or "", []).append(name)
        if not groups:
            if not self.candidates:
                self._idle_at, self._listed = self.loop, len(listed)
            return None
        pool = self._draw.choice(list(groups))
        # Partial defrag is an experiment, off by default: the candidate is atomic and keeps its first node only
        # (`newCandidate`), whatever --defrag-candidate-node-limit says.
        nodes = groups[pool][:1]
        nodes = self._within_min_size(autoscaler, nodes, self._sizes(autoscaler))
        if not nodes:
            return None
        self._spend(view, nodes, remaining)
        return Candidate(nodes, pool, self.owners[pool], now)

    def _valid(self, autoscaler: Autoscaler, state: NodeState) -> bool:
        """`isCandidateNodeValid`: an autoscaled node, Ready and schedulable, not being deleted, without the
        scale-down-disabled annotation."""
        node = state.node
        if state.pool not in autoscaler.pools or not state.schedulable:
            return False
        return node.annotations.get(CA_SCALE_DOWN_DISABLED, "").strip().lower() != "true"

    def _blocking(self, autoscaler: Autoscaler, view: ClusterView, state: NodeState, remaining: dict[str, int]) -> bool:
        """`hasBlockingPods`: a pod the drainability rules keep (`Autoscaler.blocks`), or one whose PDB has no
        disruption left once the other candidates' pods are counted (the processor's own RemainingPdbTracker)."""
        for pod in self._pods(state):
            if autoscaler.blocks(pod, view):
                return True
            if any(remaining.get(pdb.key, pdb.disruptions_allowed) < 1 for pdb in view.pdbs.covering(pod)):
                return True
        return False

    def _spend(self, view: ClusterView, nodes: Iterable[str], remaining: dict[str, int]) -> None:
        for name in nodes:
            state = view.nodes.get(name)
            for pod in self._pods(state) if state is not None else ():
                for pdb in view.pdbs.covering(pod):
                    remaining[pdb.key] = remaining.get(pdb.key, pdb.disruptions_allowed) - 1

    def _sizes(self, autoscaler: Autoscaler) -> Counter[str]:
        sizes: Counter[str] = Counter(autoscaler.world.node_pool(name) or "" for name in autoscaler.world.nodes)
        if autoscaler.draining is not None:
            sizes[autoscaler.world.node_pool(autoscaler.draining) or ""] -= 1  # deletions in progress
        return sizes

    def _within_min_size(self, autoscaler: Autoscaler, nodes: list[str], sizes: Counter[str]) -> list[str]:
        """`filterNodesViolatingMinSize`: keep a pool above its minimum, each node kept counting as removed."""
        kept = []
        for name in nodes:
            pool_name = autoscaler.world.node_pool(name) or ""
            pool = autoscaler.pools.get(pool_name)
            if pool is None or sizes[pool_name] <= pool.min_nodes:
                continue
            kept.append(name)
            sizes[pool_name] -= 1
        return kept

    def _reconcile_taints(self, autoscaler: Autoscaler) -> None:
        """`nodeReconciler`: candidate nodes carry the hard (NoSchedule) and soft (PreferNoSchedule) defrag
        taints, every other node loses them, except one being deleted."""
        wanted = {name for candidate in self.candidates for name in candidate.nodes}
        world = autoscaler.world
        for name in sorted(world.nodes):
            taints = world.nodes[name]["spec"].get("taints") or []
            keys = {taint.get("key") for taint in taints}
            if name in wanted and not {HARD_TAINT, SOFT_TAINT} <= keys:
                added = [
                    {"key": HARD_TAINT, "value": "migration", "effect": "NoSchedule"},
                    {"key": SOFT_TAINT, "value": "migration", "effect": "PreferNoSchedule"},
                ]
                kept = [taint for taint in taints if taint.get("key") not in {HARD_TAINT, SOFT_TAINT}]
                world.patch_node(name, {"spec": {"taints": [*kept, *added]}})
            elif name not in wanted and keys & {HARD_TAINT, SOFT_TAINT} and name != autoscaler.draining:
                kept = [taint for taint in taints if taint.get("key") not in {HARD_TAINT, SOFT_TAINT}]
                world.patch_node(name, {"spec": {"taints": kept or None}})
