"""The planner's answer: one decision, mark changes, and an explanation per node and pool.

Plain frozen data. The executor acts on it, the report renders it; neither
needs to know how it was reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from compactor.core.coexistence import PoolThreshold
from compactor.core.model import Resources, Taint

Action = Literal["drain", "continue-drain", "rollback", "none"]


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    node: str | None
    pool: str | None
    reason: str
    # Pods to evict ("namespace/name") for drain and continue-drain, in eviction order.
    evictions: tuple[str, ...] = ()
    # For a new drain, where the simulation placed each pod ("namespace/name", node): the proof that it fits.
    placements: tuple[tuple[str, str], ...] = ()
    # For a new drain whose proof keeps room on these nodes for the last pods: they carry the
    # PreferNoSchedule taint model.RESERVED_TAINT before the first eviction, until the drain ends.
    reserved: tuple[str, ...] = ()
    # For continue-drain: why no pod is evicted now (the pods left fit nowhere as the cluster is, or
    # pods this pool could hold cannot be scheduled); the drain waits, then rolls back (`inflight`).
    held: str | None = None
    # For drain and continue-drain in a pool with surgeSingleReplicas: the pods moved by a rolling restart
    # of their Deployment instead of an eviction, as ("namespace/pod", "namespace/deployment") (`surge`).
    restarts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SurgeVerdict:
    """What a drain does with one single-replica pod in a pool with surgeSingleReplicas (`core.surge`)."""

    pod: str  # "namespace/name"
    owner: str  # "Deployment shop/web", "StatefulSet shop/db", ...
    deployment: str | None  # "namespace/name" of the Deployment restarted, for "restart" and "wait"
    action: Literal["restart", "wait", "evict"]  # evict: the normal rules (eviction, or blocked)
    reason: str


@dataclass(frozen=True, slots=True)
class NodeReport:
    name: str
    pool: str | None
    cpu_ratio: float | None
    memory_ratio: float | None
    underutilized: bool
    marked_since: datetime | None  # after this run's mark changes
    candidate: bool
    blockers: tuple[str, ...]
    ready: bool
    cordoned: bool
    pods: int  # non-terminal pods on the node
    pods_to_move: int
    # In a pool with surgeSingleReplicas: its single-replica pods and whether a rolling restart moves each.
    single_replicas: tuple[SurgeVerdict, ...] = ()
    # What the node costs per hour (`core.prices.costs`); None when its machine type or region has no price.
    price_per_hour: float | None = None
    # In a pool with replacement enabled: why a replacement was or was not chosen for it, with the prices.
    replacement: str | None = None


@dataclass(frozen=True, slots=True)
class PoolReport:
    name: str
    enabled: bool
    nodes: int
    underutilized: int
    lower_bound_nodes: int
    excess_nodes: int
    # Enabled pools: the ComputeClass threshold the pool follows and whether it is left to the Cluster
    # Autoscaler (`core.coexistence`); None for pools that are not enabled.
    compute_class: PoolThreshold | None = None
    # What the pool's nodes cost per hour together, and the lower bound of nodes at the pool's cheapest
    # node's price; None when a node of the pool has no price (`price_note` says why).
    price_per_hour: float | None = None
    cost_lower_bound_per_hour: float | None = None
    price_note: str | None = None
    # Whether the configuration names the pool at all: a pool it does not name is never enabled, and the
    # report says why (often a misspelt name in the configuration).
    configured: bool = True


ReplacementStep = Literal["create", "wait", "drain", "delete", "give-up"]


@dataclass(frozen=True, slots=True)
class Replacement:
    """A node replacement (DESIGN "Node replacement", rule 10) and this run's step of it (`core.replacement`).

    create: make the placeholder pod that asks the Cluster Autoscaler for the new node (after `replaced-by`
    on the nodes); wait: the placeholder is not running on a Ready node yet; drain: it is, and the
    decision drains the next replaced node; delete: every replaced node is drained, or the replacement
    is over, and the placeholder goes; give-up: it did not run within timeoutSeconds, or a replaced
    node can no longer be drained: the placeholder goes and the undrained nodes get
    `replacement-failed-at`."""

    step: ReplacementStep
    placeholder: str  # the first placeholder (the only one of a replacement by one new node)
    nodes: tuple[str, ...]  # the replaced nodes, in drain order
    target_pool: str  # a target pool, or the machine type GKE creates a pool for
    reason: str
    machine_type: str | None = None
    zone: str | None = None
    price_per_hour: float | None = None  # the new nodes' together
    removed_price_per_hour: float | None = None  # the replaced nodes' together
    savings_per_hour: float | None = None
    # For create: what the placeholder asks for, and where (the target pool's label and zone; its taints).
    requests: Resources | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    # For give-up: the nodes that get replacement-failed-at.
    failed: tuple[str, ...] = ()
    # One placeholder per new node, all labelled with the replacement's id; for create, what each asks for
    # (the moving pods the proof put on its node).
    placeholders: tuple[str, ...] = ()
    replacement_id: str = ""
    placeholder_requests: tuple[Resources, ...] = ()
    # The target is a machine type of `machineTypes` (a pool GKE creates), not a target pool.
    machine_type_target: bool = False
    # For create: the nodes the placeholders' selector matches already; they are kept off them (required node
    # affinity, kubernetes.io/hostname NotIn), so each runs on a new node and no room the proof counted as free
    # is taken twice.
    avoid_nodes: tuple[str, ...] = ()

    @property
    def new_nodes(self) -> int:
        return max(1, len(self.placeholders))

    @property
    def all_placeholders(self) -> tuple[str, ...]:
        return self.placeholders or (self.placeholder,)


@dataclass(frozen=True, slots=True)
class PathStep:
    node: str
    pool: str | None
    pods_moved: int
    nodes_after: int  # nodes left in the pool


@dataclass(frozen=True, slots=True)
class ConsolidationPath:
    """The drains the planner would make one after another if nothing changed (`core.path`)."""

    steps: tuple[PathStep, ...]
    reaches_lower_bound: bool
    stopped_because: str
    estimated_minutes: float
    # What could make the path wrong that the plan can see: nodes it places pods on that the Cluster
    # Autoscaler may remove on its own first (`core.path._autoscaler_may_remove`).
    caveats: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Preview:
    """When nothing may be drained yet only because time has to pass (`core.preview`): the node the
    planner would drain first once the waits are over, from when, and why."""

    node: str
    pool: str | None
    earliest: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    decision: Decision
    marks_add: tuple[str, ...]
    marks_remove: tuple[str, ...]
    nodes: tuple[NodeReport, ...]
    pools: tuple[PoolReport, ...]
    dry_run: bool
    now: datetime
    # When the decision is "none": the kind of the gate that held it (a key of `planner.BLOCKER_SUMMARY`).
    held_by: str | None = None
    # Emptied nodes waiting for the Cluster Autoscaler to remove them.
    awaiting_removal: tuple[str, ...] = ()
    # The PreferNoSchedule taint (model.SOFT_TAINT) to put on marked nodes and take off unmarked ones.
    soft_taints_add: tuple[str, ...] = ()
    soft_taints_remove: tuple[str, ...] = ()
    # Nodes whose model.RESERVED_TAINT comes off: no drain is being evicted any more.
    reservations_remove: tuple[str, ...] = ()
    # More nodes given back in this run beside the decision's rollback, as (node, reason) (`inflight`).
    more_rollbacks: tuple[tuple[str, str], ...] = ()
    # Nodes whose drain-started-at lies in the future: rewritten to the run's time, so the drain's
    # clock starts now and its timeout comes.
    restamp: tuple[str, ...] = ()
    # Scale-down steering (`core.steering`): the nodes it points at, the pods ("namespace/name") that
    # get node-compactor's pod-deletion-cost and those whose cost it takes back.
    steered_nodes: tuple[str, ...] = ()
    deletion_costs_add: tuple[str, ...] = ()
    deletion_costs_remove: tuple[str, ...] = ()
    # Filled by the callers that show it (`plan`, dry runs); planning itself never computes it.
    path: ConsolidationPath | None = None
    # Filled with the path, from its first step, when this plan drains nothing (`core.preview`).
    preview: Preview | None = None
    # When a pool sets surgeSingleReplicas but the snapshot cannot tell which pods to restart (`surge`).
    surge_note: str | None = None
    # About the ComputeClasses read and the pools left to the Cluster Autoscaler (`core.coexistence`).
    compute_class_warnings: tuple[str, ...] = ()
    # Node replacement (`core.replacement`): the one under way or started in this run, placeholders that
    # no replaced node points to (deleted), nodes whose `replaced-by` names no placeholder (removed), and
    # warnings (unknown prices, target pools that cannot be used).
    replacement: Replacement | None = None
    placeholders_remove: tuple[str, ...] = ()
    replaced_by_remove: tuple[str, ...] = ()
    price_warnings: tuple[str, ...] = ()
    currency: str = "USD"
    # The `replaceable-since` annotation (model.REPLACEABLE_SINCE) to put on nodes a replacement was first
    # found for, and to take off nodes none was found for (rule 10's wait).
    replaceable_add: tuple[str, ...] = ()
    replaceable_remove: tuple[str, ...] = ()
