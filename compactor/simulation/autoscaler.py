"""The Cluster Autoscaler as GKE runs it, reduced to the rules that decide the node count.

Scale-up: pods marked Unschedulable that neither the nodes there nor the
VMs being provisioned will hold are bin-packed (largest first) onto new nodes of each pool, with the
scheduler's predicates (`fit.why_not`) against a template node that carries
the pool's DaemonSet pods; the option that wastes least cpu and memory wins
(least-waste expander; or, with `expander` "price", the lowest gke-price
score: `_price_score`), within the pool's maximum, zones kept balanced,
volumes kept in their zone and a pod that selects a zone given one there.
Pods below `--expendable-pods-priority-cutoff` (-10) get no node; a pod at
-10, node replacement's placeholder, does, and as a pod without a
controller it keeps its node from being removed while it runs. New VMs are
billed at once and join as Ready nodes after `provisioning_seconds`.

Scale-down: a node is unneeded when it has only DaemonSet and static pods,
or when its requests are below the utilization threshold (50%, the larger of
cpu and memory, DaemonSet pods included) and every other pod may be evicted
(the drainability rules of `compactor.core.blockers`, PDBs included) and
fits on the other nodes (`fit.Simulation`). In each loop that starts no
removal, unneeded nodes get the soft taint
`DeletionCandidateOfClusterAutoscaler:PreferNoSchedule` and nodes no longer
unneeded lose it, at most `max-bulk-soft-taint-count` (10) changes a loop,
so the scheduler puts new pods elsewhere first. A node unneeded for
`unneeded_seconds` is removed, one at a time, never while a scale-up is
under way nor within `delay_after_add_seconds` of one: it is tainted
ToBeDeletedByClusterAutoscaler, its pods are evicted (PDBs respected, retried
each step), the VM is deleted once they are gone, and the removal is given
up after `max_pod_eviction_seconds`.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from msgspec import structs

from compactor.core import fit
from compactor.core.blockers import node_pods_blockers, pod_blockers
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import CA_SCALE_DOWN_DISABLED, HOSTNAME_LABEL, ZERO, ZONE_LABELS, Node, Pod, Resources
from compactor.core.prices import machines
from compactor.kube import snapshot as parsing
from compactor.settings import config as config_module
from compactor.simulation import migration, objects
from compactor.simulation.controllers import Controllers
from compactor.simulation.draws import Draws
from compactor.simulation.metrics import CLUSTER_AUTOSCALER
from compactor.simulation.model import AutoscalerSettings, PoolSpec, Setup
from compactor.simulation.scheduler import NOWHERE, node_state, prepared
from compactor.simulation.world import World, same_records

TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
# The soft taint on unneeded nodes (cluster-autoscaler/utils/taints) and how many nodes a loop may (un)taint
# (--max-bulk-soft-taint-count, default 10, cluster-autoscaler/main.go).
DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
MAX_BULK_SOFT_TAINT_COUNT = 10
# --max-scale-down-parallelism (10: empty and drained nodes deleted at once; it replaced
# --max-empty-bulk-delete, also 10) and --max-drain-parallelism (1): the defaults in cluster-autoscaler/FAQ.md's
# table of parameters. --unremovable-node-recheck-timeout (5 minutes there) is a scenario's
# `autoscaler.unremovableRecheckSeconds`.
MAX_SCALE_DOWN_PARALLELISM = 10
MAX_DRAIN_PARALLELISM = 1
# --predicate-parallelism (4, cluster-autoscaler/config/flags/flags.go): the goroutines the removal simulation's
# search for a node runs in.
PREDICATE_PARALLELISM = 4
SYSTEM_NAMESPACE = "kube-system"
BOOTSTRAP_AGE = timedelta(days=1)
# --expendable-pods-priority-cutoff (-10, cluster-autoscaler/FAQ.md): pods of lower priority get no scale-up.
EXPENDABLE_PODS_PRIORITY_CUTOFF = -10
# The gke-price expander's constants (pkg/expander/gkeprice/gke_price.go: defaultPreferredCpuCount,
# unfitnessMultiplier; notExistCoefficient as docs/savings.md reads it) and the autoscaler's base prices a pod is
# priced at (cloudprovider/gce/gce_price_model.go: cpuPricePerHour, memoryPricePerHourPerGb, per GiB; GKE's
# fork keeps its own within 2% of them, pkg/cloudprovider/gke's TestPriceConstantsCompatabilityWithGCE).
PREFERRED_CPU_COUNT = 4
UNFITNESS_MULTIPLIER = 1.1
NOT_EXIST_COEFFICIENT = 1.5
BASE_CPU_PRICE = 0.033174
BASE_MEMORY_PRICE = 0.004446
GIB = 2**30
# The nodeSelector keys that make node auto-provisioning create a pool of a shape.
AUTO_CREATION_LABELS = frozenset({objects.MACHINE_FAMILY_LABEL, objects.INSTANCE_TYPE_LABEL})


@dataclass
class Upcoming:
    """A VM being provisioned: billed, not yet a Node."""

    name: str
    pool: str
    zone: str
    ready_at: datetime


@dataclass
class _Removal:
    node: str
    started: datetime


@dataclass(frozen=True)
class _PassInputs:
    """What the planner's last pass read (`Autoscaler._unchanged_since_last_pass`)."""

    settings: AutoscalerSettings
    records: tuple[tuple[Pod, ...], tuple[Node, ...], tuple[tuple[Any, int], ...]]
    pdbs: int
    draining: str | None
    unneeded: frozenset[str]
    unremovable: frozenset[str]
    next_ready: datetime | None


@dataclass
class _Option:
    pool: PoolSpec
    zones: list[str]
    helped: list[str]
    waste: float


@dataclass
class Autoscaler:
    world: World
    setup: Setup
    controllers: Controllers
    upcoming: list[Upcoming] = field(default_factory=list)
    unneeded_since: dict[str, datetime] = field(default_factory=dict)
    last_scale_up: datetime | None = None
    removal: _Removal | None = None
    # Nodes whose removal simulation failed, and until when they are not simulated again.
    unremovable_until: dict[str, datetime] = field(default_factory=dict)
    # Unneeded nodes whose removal evicts pods (the planner's PodsToReschedule), the others being empty.
    _needs_drain: set[str] = field(default_factory=set)
    _last_pass: _PassInputs | None = None
    # Where the removal simulation put each pod in this pass and in the one before (its scheduling hints).
    _hints: dict[str, str] = field(default_factory=dict)
    _old_hints: dict[str, str] = field(default_factory=dict)
    _passes: int = 0  # scale-down passes run (not skipped as unchanged)

    def __post_init__(self) -> None:
        self.pools = {pool.name: pool for pool in self.setup.pools}
        self.settings = self.setup.autoscaler
        # The Cluster Autoscaler's own drainability rules, those of GKE: local storage no longer blocks
        # (control plane 1.22 and later); kube-system pods without a PDB are checked in `_blocks`.
        self.rules = config_module.validate(
            {"poolLabel": self.world.pool_label, "skipNodesWithLocalStorage": False, "skipNodesWithSystemPods": False},
            source="cluster-autoscaler",
        )
        self._serial = itertools.count()
        # The order among ripe nodes: Go's map iteration in the real autoscaler, drawn from the seed here.
        self._order = Draws(self.setup.seed)
        # The order of Go maps in the planner's pass: the node lister's, and the simulation snapshot's.
        self._lister = Draws(f"{self.setup.seed}-lister")
        # The search's last match, an index into the snapshot's node list (lastIndexOrderMapping): its plugin
        # runner lives as long as the autoscaler, so the index carries over from pod to pod and loop to loop.
        self._last_match = 0
        self._templates: dict[tuple[str, str], NodeState] = {}
        # The order the ComputeClass node group list processor shuffles classes in (`migration.scale_up_order`).
        self._class_order = Draws(f"{self.setup.seed}-classes")
        self.migration: migration.Migration | None = None
        # The world's change count and the unneeded nodes when `_soft_taint` last left every node as wanted.
        self._soft_tainted: tuple[int, tuple[str, ...]] | None = None

    # -- nodes ----------------------------------------------------------------------------------

    def billed_nodes(self) -> int:
        return len(self.world.nodes) + len(self.upcoming)

    def billed_by_pool(self) -> Counter[str]:
        counts: Counter[str] = Counter(self.world.node_pool(name) or "" for name in self.world.nodes)
        counts.update(up.pool for up in self.upcoming)
        return counts

    def new_node_name(self, pool: str) -> str:
        serial = next(self._serial)
        return f"gke-sim-{pool}-{objects.short_hash(pool, str(serial), length=4)}-{serial:04d}"

    def add_node(self, pool: PoolSpec, zone: str, name: str, created: datetime) -> None:
        self.world.add_node(self._node_object(pool, zone, name, created))
        self.controllers.add_daemon_pods(name, created)

    def _node_object(self, pool: PoolSpec, zone: str, name: str, created: datetime) -> dict[str, Any]:
        return objects.node_object(
            name,
            pool=pool.name,
            pool_label=self.world.pool_label,
            zone=zone,
            machine_type=pool.machine_type,
            allocatable=pool.allocatable,
            labels=pool.labels,
            taints=list(pool.taints),
            created=created,
        )

    def provision(self, now: datetime) -> None:
        """VMs whose time has come register as Ready nodes."""
        due = [up for up in self.upcoming if up.ready_at <= now]
        for up in due:
            self.add_node(self.pools[up.pool], up.zone, up.name, up.ready_at)
            self.world.recorder.nodes_added += 1
        self.upcoming = [up for up in self.upcoming if up.ready_at > now]

    def _zones_in_use(self, pool: PoolSpec) -> Counter[str]:
        counts: Counter[str] = Counter({zone: 0 for zone in pool.zones})
        for name in self.world.nodes:
            record = self.world.node_record(name)
            if record is not None and record.labels.get(self.world.pool_label) == pool.name and record.zone:
                counts[record.zone] += 1
        counts.update(up.zone for up in self.upcoming if up.pool == pool.name)
        return counts

    def _template(self, pool: PoolSpec, zone: str, name: str) -> NodeState:
        """A node this pool would add in this zone, with its DaemonSet pods already on it."""
        base = self._templates.get((pool.name, zone))
        if base is None:
            template_name = f"template-{pool.name}-{zone}"
            node = self._node_object(pool, zone, template_name, self.world.now)
            pods = []
            for daemon in self.controllers.daemon_templates(pool.name):
                pod = objects.stamp_pod(
                    daemon.template,
                    name=f"{daemon.name}-template",
                    owner_kind="Node" if daemon.mirror else "DaemonSet",
                    owner_name=daemon.name,
                    created=self.world.now,
                    node_name=template_name,
                )
                pods.append(parsing.parse_pod(pod))
            base = node_state(parsing.parse_node(node), tuple(pods), self.rules)
            self._templates[(pool.name, zone)] = base
        node_record = structs.replace(base.node, name=name, labels={**base.node.labels, HOSTNAME_LABEL: name})
        pods_here = tuple(structs.replace(pod, node_name=name) for pod in base.pods)
        return node_state(node_record, pods_here, self.rules)

    # -- scale-up -------------------------------------------------------------------------------

    def scale_up(self, now: datetime, *, instant: bool = False) -> bool:
        """Add nodes for pods nothing else will hold; True when it did. `instant` skips provisioning time."""
        found = self._unhelped(now)
        return found is not None and self._grow(now, found[1], found[0], instant=instant)

    def _unhelped(self, now: datetime) -> tuple[ClusterView, list[str]] | None:
        """The pods waiting for a node that neither the nodes there nor the VMs on their way will hold (the
        pod list processors' filter-out-schedulable), with the view they were judged on; None when none."""
        waiting = self._waiting()
        if not waiting:
            return None
        view = self.world.view(now, self.rules)
        # Pods the scheduler will place on nodes that are there or on their way need no new node.
        existing = sorted((state for state in view.nodes.values() if state.schedulable), key=lambda s: s.name)
        arriving = [self.template_for(up) for up in self.upcoming]
        simulation = fit.Simulation(view, NOWHERE, [*existing, *arriving])
        left = []
        for key in waiting:
            pod = prepared(self.world, key, simulation)
            target = next((t for t in simulation.targets if simulation.why_not(pod, t) is None), None)
            if target is None:
                left.append(key)
            else:
                simulation.place(pod, target)
        return (view, left) if left else None

    def _waiting(self) -> list[str]:
        """The pods marked Unschedulable that may get a node (priority at or above the expendable cutoff)."""
        return [
            key
            for key in self.world.pending()
            if (record := self.world.pod_record(key)).unschedulable
            and record.priority >= EXPENDABLE_PODS_PRIORITY_CUTOFF
        ]

    def _grow(
        self,
        now: datetime,
        left: list[str],
        view: ClusterView,
        *,
        instant: bool = False,
        allowed: frozenset[str] | None = None,
    ) -> bool:
        """The scale-up for pods no node will hold: the pools in the order ComputeClass priorities give them
        (`migration.scale_up_order`: the first bucket with an option wins; one bucket of every pool without
        classes), only the `allowed` pools for a migration, the expander choosing within the bucket."""
        options: list[_Option] = []
        names = [pool.name for pool in self.setup.pools if allowed is None or pool.name in allowed]
        for bucket in migration.scale_up_order(self.settings.classes, names, self._class_order):
            options = [
                option
                for name in bucket
                if (option := self._binpack(self.pools[name], self._may_grow(self.pools[name], left), view)) is not None
            ]
            if options:
                break
        if not options:
            # A placeholder no pool can take is node replacement's to give up, not a workload's pod without a place.
            if allowed is None:
                self.world.recorder.unplaceable.update(key for key in left if not self.world.is_placeholder(key))
            return False
        best = self._expand(options)
        for zone in best.zones:
            name = self.new_node_name(best.pool.name)
            if instant:
                self.add_node(best.pool, zone, name, now - BOOTSTRAP_AGE)
            else:
                ready_at = now + timedelta(seconds=self.settings.provisioning_seconds)
                self.upcoming.append(Upcoming(name, best.pool.name, zone, ready_at))
        self.last_scale_up = now
        return True

    def _may_grow(self, pool: PoolSpec, keys: list[str]) -> list[str]:
        """The pods a pool may grow for: all, but for a pool node auto-provisioning creates, those that select its
        machine family or machine type (what makes GKE create a pool of that shape), or all when the pool is a rung
        of a ComputeClass (a class with `nodePoolAutoCreation` creates its rungs' pools for the pods that select
        it: GKE's "About custom ComputeClasses", and the rungs `migration.user_classes` writes for every pool a
        pod may use)."""
        if not pool.auto_created or any(pool.name in found.rungs for found in self.settings.classes):
            return keys
        return [key for key in keys if AUTO_CREATION_LABELS & {k for k, _ in self.world.pod_record(key).node_selector}]

    def template_for(self, up: Upcoming) -> NodeState:
        """The node a VM being provisioned will be, with its DaemonSet pods."""
        return self._template(self.pools[up.pool], up.zone, up.name)

    def _expand(self, options: list[_Option]) -> _Option:
        """The expander's choice: least-waste, or gke-price when the scenario asks for it and every option's
        pool has a price (else least-waste, as the model always did)."""
        if self.settings.expander == "price":
            prices: dict[str, float] = {}
            for option in options:
                price = self.setup.prices.get(option.pool.name)
                if price is not None and price.per_hour is not None:
                    prices[option.pool.name] = price.per_hour
            if len(prices) == len({option.pool.name for option in options}):
                return min(options, key=lambda o: (self._price_score(o, prices[o.pool.name]), o.pool.name))
        return min(options, key=lambda o: (o.waste / max(1, len(o.zones)), -len(o.helped), o.pool.name))

    def _price_score(self, option: _Option, node_price: float) -> float:
        """GKE's gke-price expander (GoogleCloudPlatform/cluster-autoscaler, pkg/expander/gkeprice/gke_price.go,
        `BestOption`), lowest wins: (the new nodes' price + a stabilizing pod's) / (the helped pods' price + the
        stabilizing pod's), times the node-size unfitness (1.5 x 1.1) ^ |log2(node vCPUs / 4)| (the default
        preferred vCPU count), which fades as the scale-up grows: (u - 1)(1 - tanh((n - 1) / 15)) + 1. Pods are
        priced at the autoscaler's base rates (`BASE_CPU_PRICE`, `BASE_MEMORY_PRICE`: the same for every
        pool), nodes at their pool's price. Left out: the reclaimable room's price (what the cluster's pods
        could use of the room left over), the preferred vCPU count read from the cluster, reservations,
        node-pool creation and the random order among equal scores (ties go to the first pool by name)."""
        cpu = memory = 0
        for key in option.helped:
            requests = self.world.pod_record(key).requests
            cpu += requests.cpu_millis
            memory += requests.memory_bytes
        pods_price = _base_price(cpu, memory)
        nodes = len(option.zones)
        sub_score = (node_price * nodes + STABILIZATION_PRICE) / (pods_price + STABILIZATION_PRICE)
        vcpus = _vcpus(option.pool)
        ratio = max(PREFERRED_CPU_COUNT / vcpus, vcpus / PREFERRED_CPU_COUNT)
        unfitness = math.pow(NOT_EXIST_COEFFICIENT * UNFITNESS_MULTIPLIER, math.log2(ratio))
        suppressed = (unfitness - 1.0) * (1.0 - math.tanh((nodes - 1) / 15.0)) + 1.0
        return suppressed * sub_score

    def _binpack(self, pool: PoolSpec, keys: list[str], view: ClusterView) -> _Option | None:
        billed = self.billed_by_pool()[pool.name]
        room = pool.max_nodes - billed
        if room <= 0:
            return None
        zones = self._zones_in_use(pool)
        allocatable = parsing.parse_node(
            {"metadata": {"name": "x"}, "status": {"allocatable": dict(pool.allocatable)}}
        ).allocatable
        simulation = fit.Simulation(view, NOWHERE, [])
        templates: list[NodeState] = []
        used: dict[str, list[int]] = {}
        helped = []

        def size(key: str) -> float:
            requests = self.world.pod_record(key).requests
            return requests.cpu_millis / max(1, allocatable.cpu_millis) + requests.memory_bytes / max(
                1, allocatable.memory_bytes
            )

        for key in sorted(keys, key=lambda k: (-size(k), self.world.sequence(k))):
            pod = prepared(self.world, key, simulation)
            target = next((t for t in simulation.targets if simulation.why_not(pod, t) is None), None)
            if target is None:
                if len(templates) >= room:
                    continue
                pinned = self.world.volume_zone(key) or dict(pod.node_selector).get(ZONE_LABELS[0])
                if pinned is not None and pinned not in pool.zones:
                    continue
                zone = pinned or min(pool.zones, key=lambda z: (zones[z], z))
                fresh = self._template(pool, zone, f"new-{pool.name}-{len(templates)}")
                if simulation.why_not(pod, fresh) is not None:
                    continue  # this pool's nodes can never hold it
                simulation.targets.append(fresh)
                templates.append(fresh)
                used[fresh.name] = [fresh.requested.cpu_millis, fresh.requested.memory_bytes]
                zones[zone] += 1
                target = fresh
            simulation.place(pod, target)
            if target.name in used:
                used[target.name][0] += pod.requests.cpu_millis
                used[target.name][1] += pod.requests.memory_bytes
            helped.append(key)
        if not templates:
            return None
        waste = sum(
            (1 - cpu / max(1, allocatable.cpu_millis) + 1 - memory / max(1, allocatable.memory_bytes)) / 2
            for cpu, memory in used.values()
        )
        return _Option(pool, [t.node.zone or pool.zones[0] for t in templates], helped, waste)

    # -- scale-down -----------------------------------------------------------------------------

    def step(self, now: datetime) -> None:
        """One loop (RunOnce, core/static_autoscaler.go): provisioning and scale-up; then the scale-down
        planner, also after a scale-up (which only puts scale-down in cooldown), the actuator starting
        what its budgets allow, and the soft taints updated in every loop, whether or not a deletion
        started (`updateSoftDeletionTaints` on each branch of `scaleDown`)."""
        self.provision(now)
        if self.settings.classes and self.migration is None:
            self.migration = migration.Migration(self.settings.migration, self.settings.classes, self.setup.seed)
        found = self._unhelped(now)
        pick = self.migration.process(self, now, found[1] if found else []) if self.migration is not None else None
        if pick is None:
            if found is not None:
                self._grow(now, found[1], found[0])
        else:
            # Defrag hands the scale-up its candidate's pods in place of the waiting ones, and `BestOptions` keeps
            # the options of a higher rung only (pkg/defrag/processor/processor.go, `Process`, `BestOptions`).
            view = self.world.view(now, self.rules)
            grew = self._grow(now, pick.pods, view, allowed=pick.pools)
            pick.candidate.scale_up_no_options = not grew
        if self.removal is not None:
            self._continue_removal(now)
        self._update_unneeded(now)
        self._start_removals(now)
        self._soft_taint(now)

    # -- quiet loops ----------------------------------------------------------------------------

    def state(self) -> tuple[object, ...]:
        """What a loop may change besides the world (`World.changes`): VMs on their way, the drain under way,
        the last scale-up, the scale-down passes run, the unneeded and unremovable nodes, the pods no pool
        takes, and every draw of the seeded orders. Two equal states and an unchanged world mean the loop in
        between did nothing."""
        return (
            len(self.upcoming),
            self.removal,
            self.last_scale_up,
            self._passes,
            self._last_match,
            len(self.unneeded_since),
            len(self.unremovable_until),
            len(self.world.recorder.unplaceable),
            self._order.draws,
            self._lister.draws,
            self._class_order.draws,
            self.migration.state() if self.migration is not None else None,
        )

    def quiet_loops(self) -> bool:
        """Whether a loop that did nothing is followed by loops that do nothing until a timer is due: not with
        a kube-system pod's blocking time (it runs on the clock). Beside GKE's active migration, only after a
        loop whose defrag search found nothing (`idle`), and each loop skipped counts and draws as it would
        (`skip`)."""
        return self.settings.system_pod_blocking_seconds is None

    def idle(self) -> bool:
        """Whether the last loop's migration, if any, was idle (`migration.Migration.idle`)."""
        return self.migration is None or self.migration.idle()

    def skip(self) -> None:
        """A loop skipped after one that changed nothing: only the migration's count and draws move."""
        if self.migration is not None:
            self.migration.skip()

    def next_timers(self, after: datetime) -> tuple[datetime | None, datetime | None]:
        """When a loop on an unchanged cluster could first act differently than at `after`: (the first moment
        at or after which a VM is ready, a drain times out, an unremovable node is simulated again or the
        scale-down cooldown ends; the last moment before an unneeded node is ripe, which it is strictly
        after its unneeded time). Pods turning Ready and Job pods ending are the world's and controllers'."""
        at_or_after = [up.ready_at for up in self.upcoming]
        if self.removal is not None:
            at_or_after.append(self.removal.started + timedelta(seconds=self.settings.max_pod_eviction_seconds))
        at_or_after.extend(self.unremovable_until.values())
        if self.migration is not None and (backoff := self.migration.next_timer(after)) is not None:
            at_or_after.append(backoff)
        if self.last_scale_up is not None:
            at_or_after.append(self.last_scale_up + timedelta(seconds=self.settings.delay_after_add_seconds))
        ripe = (since + self._unneeded_time(name) for name, since in self.unneeded_since.items())
        return (
            min((moment for moment in at_or_after if moment > after), default=None),
            min((moment for moment in ripe if moment >= after), default=None),
        )

    def _in_cooldown(self, now: datetime) -> bool:
        if self.upcoming:
            return True
        delay = timedelta(seconds=self.settings.delay_after_add_seconds)
        return self.last_scale_up is not None and now - self.last_scale_up < delay

    def _start_removals(self, now: datetime) -> bool:
        """The nodes unneeded long enough (`since + unneeded time` strictly before now: unneeded/nodes.go,
        `unremovableReason`), their pool kept above its minimum only here, when deleting (`verifyMinSize`,
        each node chosen counting against the size), the empty ones first, each group in the random order
        of a Go map (`splitEmptyAndNonEmptyNodes`; the scenario's seed draws it). Empty nodes are deleted
        together, up to `max-scale-down-parallelism` (10) nodes in all; beside them at most one node is
        drained (`max-drain-parallelism` 1): budgets/budgets.go, `CropNodes`."""
        if self._in_cooldown(now):
            return False
        ripe = [
            name
            for name in sorted(self.unneeded_since)
            if now - self.unneeded_since[name] > self._unneeded_time(name) and name in self.world.nodes
        ]
        if not ripe:
            return False
        empty = [name for name in ripe if name not in self._needs_drain]
        drain = [name for name in ripe if name in self._needs_drain]
        self._order.shuffle(empty)
        self._order.shuffle(drain)
        sizes: Counter[str] = Counter(self.world.node_pool(name) or "" for name in self.world.nodes)
        if self.removal is not None:
            sizes[self.world.node_pool(self.removal.node) or ""] -= 1  # deletions in progress count as gone
        budget = MAX_SCALE_DOWN_PARALLELISM - (1 if self.removal is not None else 0)
        # A drain that empties its node at once ends within this loop; it still took the one drain slot.
        drain_budget = MAX_DRAIN_PARALLELISM - (1 if self.removal is not None else 0)
        started = False
        for name in [*empty, *drain]:
            pool_name = self.world.node_pool(name) or ""
            pool = self.pools.get(pool_name)
            if budget <= 0 or pool is None or sizes[pool_name] <= pool.min_nodes:
                continue
            if name in empty:
                self._delete(name, now)
            elif drain_budget > 0:
                self._start_removal(name, now)
                drain_budget -= 1
            else:
                continue
            sizes[pool_name] -= 1
            budget -= 1
            started = True
        return started

    def _threshold(self, pool: str | None) -> float:
        return self.settings.pool_thresholds.get(pool or "", self.settings.utilization_threshold)

    def _unneeded_time(self, name: str) -> timedelta:
        """The node pool's own consolidation delay first, then its ComputeClass's consolidationDelayMinutes,
        else the profile's unneeded time: GKE's fork asks the node pool (its MIG's spec) before the class
        (GoogleCloudPlatform/cluster-autoscaler, pkg/computeclass/autoscaling_options.go,
        `ScaleDownUnneededTime`)."""
        pool = self.world.node_pool(name) or ""
        spec = self.pools.get(pool)
        if spec is not None and spec.consolidation_delay_seconds is not None:
            return timedelta(seconds=spec.consolidation_delay_seconds)
        return timedelta(seconds=self.settings.pool_unneeded_seconds.get(pool, self.settings.unneeded_seconds))

    def _soft_taint(self, now: datetime) -> None:
        """Unneeded nodes get the DeletionCandidate soft taint, the others lose it; a bounded number a loop. Once a
        loop left every node as wanted, the next has nothing to do while no node changed (any write to the world
        counts) and the unneeded nodes are the same."""
        unneeded = tuple(self.unneeded_since)
        if self._soft_tainted == (self.world.changes, unneeded):
            return
        budget = MAX_BULK_SOFT_TAINT_COUNT
        for name in sorted(self.world.nodes):
            if budget <= 0:
                return
            taints = self.world.nodes[name]["spec"].get("taints") or []
            tainted = any(taint.get("key") == DELETION_CANDIDATE for taint in taints)
            wanted = name in self.unneeded_since
            if tainted == wanted:
                continue
            if wanted:
                mark = {"key": DELETION_CANDIDATE, "value": str(int(now.timestamp())), "effect": "PreferNoSchedule"}
                kept = [*taints, mark]
            else:
                kept = [taint for taint in taints if taint.get("key") != DELETION_CANDIDATE]
            self.world.patch_node(name, {"spec": {"taints": kept or None}})
            budget -= 1
        self._soft_tainted = (self.world.changes, unneeded)

    def _update_unneeded(self, now: datetime) -> None:
        """The planner's pass (core/scaledown/planner/planner.go, `UpdateClusterState`, `categorizeNodes`).

        The pods of the node being drained are placed on the others first and count in their utilization
        (`injectRecentlyEvictedPods`, and the currently drained nodes' pods the scale-up placed). Every node
        then passes the eligibility check (core/scaledown/eligibility/eligibility.go): its utilization, the
        larger of cpu and memory with DaemonSet and mirror pods counted (--ignore-daemonsets-utilization is
        false by default, config/flags/flags.go), at or below its threshold (`utilization > threshold` keeps
        a node; GKE's fork runs this upstream code). A node with only DaemonSet and mirror pods is judged
        the same way. The eligible nodes are simulated one after the other, empty nodes first, then those
        unneeded in the last loop (the EmptySorting and PreviousCandidates comparers,
        processors/scaledowncandidates, registered in builder/autoscaler.go), the rest in the node lister's
        order (a Go map's: random, drawn from the seed), in `SimulateNodeRemoval` (simulator/cluster.go):
        every pod drainable and fitting on the nodes left, each placed as `_place` says. A node found removable
        keeps its pods booked where they landed (the planner's RemovalSimulator persists a successful
        simulation in its snapshot) and is no destination for the nodes after it; pods booked onto a node
        move with it when it is simulated, and make it a node to drain. Each node found removable spends one
        disruption of every PDB for each pod of it the PDB covers, so a later node with a pod of a PDB left
        with none is blocked in the same pass. A node whose pods were blocked or
        found no place is not simulated again for `unremovable-node-recheck-timeout` (5 minutes by default,
        `unremovable_recheck_seconds`). The
        pool's minimum size is checked only when deleting (`_start_removals`)."""
        draining = self.removal.node if self.removal is not None else None
        self.unremovable_until = {name: until for name, until in self.unremovable_until.items() if until > now}
        if self._unchanged_since_last_pass(now, draining):
            return
        self._passes += 1
        view = self.world.view(now, self.rules)
        self._old_hints, self._hints = self._hints, {}
        targets = [t for t in fit.targets_for(view) if t.name != draining]
        booked: dict[str, list[Pod]] = {}  # destination -> pods placed on it before any node is judged
        if draining is not None and draining in view.nodes:
            source = view.nodes[draining]
            base = fit.Simulation(view, source, targets)
            for pod in fit.largest_first(source.movable_pods):
                target = next((t for t in base.targets if base.why_not(pod, t) is None), None)
                if target is not None:
                    base.place(pod, target)
                    booked.setdefault(target.name, []).append(pod)
        by_name = {target.name: target for target in targets}
        # The same pods booked, once for every simulation below: each starts with them where they were booked.
        booking = fit.Booked(view)
        for target_name, pods in booked.items():
            booking.book(pods, by_name[target_name])
        previous = self.unneeded_since
        # Empty nodes first, then those unneeded in the last loop (processors/scaledowncandidates: the
        # EmptySorting and PreviousCandidates comparers builder/autoscaler.go registers, in that order).
        # The rest in the node lister's order: its cache is a Go map (client-go's threadSafeMap), listed anew
        # in every loop; sort.Sort keeps it among equals on a few nodes (insertion sort up to 12).
        names = sorted(view.nodes)
        draw = {name: self._lister.random() for name in names}
        cycle = {name: self._lister.random() for name in names}  # the snapshot store's map
        listed = sorted(cycle, key=cycle.__getitem__)  # its node list, once a pass
        order = sorted(view.nodes.values(), key=lambda s: (bool(s.movable_pods), s.name not in previous, draw[s.name]))
        eligible = [state for state in order if self._eligible(state, draining, booked.get(state.name, ()))]
        # The nodes not found removable yet, in the targets' order: the next node's destinations but itself.
        open_targets = dict(by_name)
        found: list[str] = []
        needs_drain: set[str] = set()
        # What each PDB still allows in this pass: its disruptionsAllowed less one for every pod it covers on the
        # nodes found removable before (the RemainingPdbTracker, set from the PDBs in every loop,
        # core/static_autoscaler.go `initializeRemainingPdbTracker`, and spent by `categorizeNodes`,
        # core/scaledown/planner/planner.go, with core/scaledown/pdb/basic.go `RemovePods`).
        remaining: dict[str, int] = {}
        for state in eligible:
            if state.name in self.unremovable_until:
                continue
            own = state.movable_pods
            if self._node_blocks(state, view):
                self.unremovable_until[state.name] = now + self._recheck
                continue
            movable = [*own, *booked.get(state.name, ())]
            # The PDB drainability rule asks what is left, not what the PDB's status says
            # (simulator/drainability/rules/pdb/rule.go: "not enough pod disruption budget to move").
            budgets = view.pdbs.covering_each(movable)
            if any(remaining.get(pdb.key, pdb.disruptions_allowed) < 1 for pdb in budgets):
                self.unremovable_until[state.name] = now + self._recheck
                continue
            if movable:
                # The autoscaler simulates the node gone from its snapshot: it is no spread domain. The simulation
                # leaves the node itself out of its destinations.
                destinations = list(open_targets.values())
                simulation = fit.Simulation(view, state, destinations, source_is_domain=False, booked=booking)
                placements = self._place(simulation, movable, listed, open_targets)
                if placements is None:
                    self.unremovable_until[state.name] = now + self._recheck
                    continue
                booked.pop(state.name, None)
                booking.unbook(state.name)
                for pod in movable:
                    booked.setdefault(placements[pod.key], []).append(pod)
                    booking.book((pod,), by_name[placements[pod.key]])
            if movable:
                needs_drain.add(state.name)  # its PodsToReschedule: its own pods and those booked onto it
            for pdb in budgets:
                remaining[pdb.key] = remaining.get(pdb.key, pdb.disruptions_allowed) - 1
            found.append(state.name)
            open_targets.pop(state.name, None)
        self.unneeded_since = {name: previous.get(name, now) for name in found}
        self._needs_drain = needs_drain
        self._last_pass = self._pass_inputs(now, draining)

    def _place(
        self, simulation: fit.Simulation, pods: list[Pod], listed: list[str], destinations: Mapping[str, NodeState]
    ) -> dict[str, str] | None:
        """Where the removal simulation puts a node's pods (simulator/scheduling/hinting_simulator.go,
        `TrySchedulePods`), in their order, stopping at the first that fits nowhere: each on the node it
        was put on in this pass or the one before when that node still takes it (its hint, keyed by the
        pod; `DropOldHints` keeps one pass's worth), else on the node `first_match` picks, kube-scheduler's
        filters only, no score (predicate/plugin_runner.go `RunFiltersUntilPassingNode`), in the snapshot's
        list of every node: the builder gives the planner a delta snapshot store (builder/autoscaler.go),
        whose list is a Go map's order taken once a loop (store/delta.go), the pass's `listed` here, drawn
        from the seed. Nodes that may not take the pod (the one simulated, those found removable before it,
        another pool's for a pinned pod) stay in the list and are passed over, as there. `destinations`: the
        simulation's targets by name, its source among them or not. Pod key -> node name, or None."""
        source = simulation.source.name

        def destination(name: str) -> NodeState | None:
            return destinations.get(name) if name != source else None

        placements: dict[str, str] = {}
        for pod in pods:
            hinted = destination(self._hints.get(pod.key) or self._old_hints.get(pod.key) or "")
            chosen = hinted if hinted is not None and simulation.why_not(pod, hinted) is None else None
            if chosen is None:

                def passes(index: int, pod: Pod = pod) -> bool:
                    target = destination(listed[index])
                    return target is not None and simulation.why_not(pod, target) is None

                index = first_match(len(listed), self._last_match, passes)
                if index is not None:
                    self._last_match = index
                    chosen = destination(listed[index])
            if chosen is None:
                return None
            simulation.place(pod, chosen)
            placements[pod.key] = self._hints[pod.key] = chosen.name
        return placements

    def _pass_inputs(self, now: datetime, draining: str | None) -> _PassInputs:
        return _PassInputs(
            self.settings,
            self.world.records(),
            len(self.world.pdbs),
            draining,
            frozenset(self.unneeded_since),
            frozenset(self.unremovable_until),
            self.world.next_ready(now),
        )

    def _unchanged_since_last_pass(self, now: datetime, draining: str | None) -> bool:
        """Whether the planner would read the same as in its last pass: the same settings, pod and node records, scales,
        budgets, node being drained, unneeded and unremovable nodes, and no pod turned Ready since (a budget's
        allowance changes with it). Its result is then the same, so the pass is skipped: a loop every 10 s
        at the cost of one only when something changed. A kube-system pod's blocking time depends on the
        clock alone, so with `system_pod_blocking_seconds` set every loop runs the pass."""
        last = self._last_pass
        if last is None or last.settings is not self.settings or self.settings.system_pod_blocking_seconds is not None:
            return False
        if last.next_ready is not None and last.next_ready <= now:
            return False
        return (
            same_records(last.records, self.world.records())
            and len(self.world.pdbs) == last.pdbs
            and draining == last.draining
            and frozenset(self.unneeded_since) == last.unneeded
            and frozenset(self.unremovable_until) == last.unremovable
        )

    def _eligible(self, state: NodeState, draining: str | None, arriving: Iterable[Pod]) -> bool:
        """`FilterOutUnremovable` (core/scaledown/eligibility/eligibility.go): an autoscaled, Ready node
        without the scale-down-disabled annotation, at or below its pool's threshold with the pods of a
        drain under way that land on it counted."""
        if state.pool not in self.pools or state.name == draining or not state.node.ready:
            return False
        if state.node.annotations.get(CA_SCALE_DOWN_DISABLED, "").strip().lower() == "true":
            return False
        return utilization(state, _sum(arriving)) <= self._threshold(state.pool)

    def _node_blocks(self, state: NodeState, view: ClusterView) -> bool:
        """Whether a pod of the node is blocked (`_blocks`): its pods' blockers found once for the same pods and
        budgets, from one pass to the next (`node_pods_blockers`)."""
        if node_pods_blockers(state.pods, view.pdbs, self.rules):
            return True
        return any(self._system_blocks(pod, view) for pod in state.movable_pods if pod.namespace == SYSTEM_NAMESPACE)

    def _blocks(self, pod: Pod, view: ClusterView) -> bool:
        """The drainability rules (simulator/drainability/rules): GKE's, where local storage no longer
        blocks (control plane 1.22 and later); a kube-system pod without a PodDisruptionBudget blocks,
        for `system_pod_blocking_seconds` after its creation when that is set (upstream's
        --blocking-system-pod-distruption-timeout), else for as long as it runs."""
        return bool(pod_blockers(pod, view.pdbs, self.rules)) or self._system_blocks(pod, view)

    def _system_blocks(self, pod: Pod, view: ClusterView) -> bool:
        if pod.namespace != SYSTEM_NAMESPACE or pod.safe_to_evict is True or view.pdbs.covering(pod):
            return False
        limit = self.settings.system_pod_blocking_seconds
        if limit is None:
            return True
        created = self.world.created_at.get(pod.key)
        return created is None or (self.world.now - created).total_seconds() < limit

    def start_removal(self, name: str, now: datetime) -> bool:
        """A drain asked for by another processor (defrag's `StartDeletion`): the actuator's budgets apply, one
        drain at a time (`MAX_DRAIN_PARALLELISM`), the scale-down cooldown does not. True when it started."""
        if self.removal is not None or name not in self.world.nodes:
            return False
        self._start_removal(name, now)
        return True

    @property
    def draining(self) -> str | None:
        """The node being drained, if any."""
        return self.removal.node if self.removal is not None else None

    def blocks(self, pod: Pod, view: ClusterView) -> bool:
        return self._blocks(pod, view)

    def _start_removal(self, name: str, now: datetime) -> None:
        self.unneeded_since.pop(name, None)
        node = self.world.nodes[name]
        mark = {"key": TO_BE_DELETED, "value": str(int(now.timestamp())), "effect": "NoSchedule"}
        taints = [*(node["spec"].get("taints") or []), mark]
        self.world.patch_node(name, {"spec": {"taints": taints}})
        self.removal = _Removal(name, now)
        self._continue_removal(now)

    @property
    def _recheck(self) -> timedelta:
        return timedelta(seconds=self.settings.unremovable_recheck_seconds)

    def _continue_removal(self, now: datetime) -> None:
        removal = self.removal
        assert removal is not None
        name = removal.node
        if name not in self.world.nodes:
            self.removal = None
            return
        for key in self.world.pods_on(name):
            if not self.world.pod_record(key).stays_on_node:
                self.world.evict(key, actor=CLUSTER_AUTOSCALER, at=now)
        if not any(not self.world.pod_record(key).stays_on_node for key in self.world.pods_on(name)):
            # --daemonset-eviction-for-occupied-nodes (true by default, config/flags/flags.go): a drained node's
            # DaemonSet pods are evicted too, best effort, mirror pods never (core/scaledown/actuation/drain.go,
            # `podsToEvict`); they go with the VM, so they are counted here, not recreated.
            daemon_pods = sum(
                1
                for key in self.world.pods_on(name)
                if (record := self.world.pod_record(key)).controller_kind == "DaemonSet" and not record.is_terminal
            )
            self.world.recorder.evicted[CLUSTER_AUTOSCALER] += daemon_pods
            self._delete(name, now)
            self.removal = None
            return
        if (now - removal.started).total_seconds() >= self.settings.max_pod_eviction_seconds:
            node = self.world.nodes[name]
            taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != TO_BE_DELETED]
            self.world.patch_node(name, {"spec": {"taints": taints or None}})
            self.removal = None
            self.unremovable_until[name] = now + self._recheck  # "a failed attempt ... extra 5 minutes"

    def _delete(self, name: str, now: datetime) -> None:
        self.world.delete_node(name, actor=CLUSTER_AUTOSCALER, at=now)
        self.world.recorder.nodes_removed += 1
        self.unneeded_since.pop(name, None)


def chunk_size(count: int, parallelism: int) -> int:
    """The chunk size `RunFiltersUntilPassingNode` gives `ParallelizeUntil` (predicate/plugin_runner.go,
    `chunkSizeFor`): the square root of the node count, at most the nodes per goroutine plus one, at least 1."""
    return max(1, min(math.isqrt(count), count // parallelism + 1))


def first_match(
    count: int, last: int, passes: Callable[[int], bool], parallelism: int = PREDICATE_PARALLELISM
) -> int | None:
    """The node the removal simulation's search takes, as an index into the snapshot's list of `count` nodes
    (predicate/plugin_runner.go, `RunFiltersUntilPassingNode`): the search starts one past the last match
    (`NewLastIndexOrderMapping(1)`: the i-th node checked is `(i + 1 + last) % count`) and hands chunks of
    about the square root of the count (`chunkSizeFor`) to `parallelism` goroutines (workqueue's
    `ParallelizeUntil`), each walking its chunk; the earliest match found cancels the rest. Modelled with the
    goroutines in step, `parallelism` chunks at a time: the first step at which any of them matches gives the
    earliest of its matches. So a node first in one chunk beats a node later in the chunk before it, and
    consecutive pods still take consecutive nodes when every node has room. A plain walk in order cannot give
    the placements the real autoscaler logged; the goroutines really race, and one logged sequence needs two
    chunks in step rather than four: in step is their case when all start together (docs/savings.md,
    divergence 7, measures both)."""
    if count <= 0:
        return None
    size = chunk_size(count, parallelism)
    chunks = -(-count // size)
    for first_chunk in range(0, chunks, parallelism):
        running = range(first_chunk, min(first_chunk + parallelism, chunks))
        for step in range(size):
            matches = [
                position
                for chunk in running
                if (position := chunk * size + step) < count and passes((position + 1 + last) % count)
            ]
            if matches:
                return (min(matches) + 1 + last) % count
    return None


def utilization(state: NodeState, arriving: Resources = ZERO) -> float:
    """The autoscaler's utilization of a node (simulator/utilization/info.go, `Calculate`): the larger of its
    cpu and memory requests over allocatable, every pod counted (DaemonSet and mirror pods too, as
    --ignore-daemonsets-utilization is false by default), with `arriving` pods added."""
    allocatable = state.node.allocatable
    requested = state.requested + arriving
    cpu = requested.cpu_millis / allocatable.cpu_millis if allocatable.cpu_millis > 0 else 0.0
    memory = requested.memory_bytes / allocatable.memory_bytes if allocatable.memory_bytes > 0 else 0.0
    return max(0.0, cpu, memory)


def _base_price(cpu_millis: int, memory_bytes: int) -> float:
    return cpu_millis / 1000 * BASE_CPU_PRICE + memory_bytes / GIB * BASE_MEMORY_PRICE


STABILIZATION_PRICE = _base_price(500, 500 * 2**20)  # gke_price.go's priceStabilizationPod: 0.5 cpu, 500 MiB


def _vcpus(pool: PoolSpec) -> float:
    """The pool's machine's vCPUs (its capacity, which the expander reads), else its allocatable cpu rounded up."""
    known = machines.MACHINES.get(pool.machine_type)
    if known is not None:
        return float(known[0])
    cpu = parsing.parse_node({"metadata": {"name": "x"}, "status": {"allocatable": dict(pool.allocatable)}})
    return float(max(1, math.ceil(cpu.allocatable.cpu_millis / 1000)))


def _sum(pods: Iterable[Pod]) -> Resources:
    total = ZERO
    for pod in pods:
        total = total + pod.requests
    return total
