"""What a simulated run counts: disruptions by who caused them, pending time, nodes, and the series to plot.

Every disruption is booked to an actor (`cluster-autoscaler`, `estafette`,
`node-compactor`), so a comparison can say not only how much a strategy
saved but what it broke doing so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

CLUSTER_AUTOSCALER = "cluster-autoscaler"


@dataclass
class Recorder:
    evicted: Counter[str] = field(default_factory=Counter)  # pods evicted through the Eviction API, by actor
    deleted: Counter[str] = field(default_factory=Counter)  # pods DELETEd directly (no PDB check), by actor
    pdb_violations: Counter[str] = field(default_factory=Counter)  # disruptions a PDB did not allow, by actor
    no_place: Counter[str] = field(default_factory=Counter)  # displaced pods whose replacement found no node
    unplaceable: set[str] = field(default_factory=set)  # pods no node and no new node of any pool could hold
    events: Counter[str] = field(default_factory=Counter)  # Kubernetes Events by reason
    # kube-scheduler's preemptions: node replacement's placeholders (no disruption), and other pods (a
    # disruption, by the preemptor's actor: `kube-scheduler`).
    preempted_placeholders: int = 0
    preempted: Counter[str] = field(default_factory=Counter)
    nodes_added: int = 0
    nodes_removed: int = 0
    pending_pod_seconds: float = 0.0
    lost_job_seconds: float = 0.0  # batch work thrown away when a running Job pod was disrupted
    # The same by the actor that disrupted it (node-compactor under jobPods "wait" never does).
    lost_job_seconds_by_actor: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    # Workloads left without a Ready pod (`availability`): seconds and spans by the actor that caused them,
    # and the spans still open (workload -> since when, by whom).
    no_ready_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    no_ready_spans: Counter[str] = field(default_factory=Counter)
    no_ready_since: dict[tuple[str, str, str], tuple[datetime, str]] = field(default_factory=dict)
    # Each node replacement a planner started: when, the replaced nodes, the target, how many new nodes, Spot,
    # and its prices per hour (the report's `replacements.started`).
    replacements: list[dict[str, object]] = field(default_factory=list)

    def disruptions(self) -> int:
        return sum(self.evicted.values()) + sum(self.deleted.values())


@dataclass
class Series:
    """One sample per step of the measured period."""

    minutes: list[float] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)  # Nodes plus the VMs being provisioned: what is billed
    pending: list[int] = field(default_factory=list)
    lower_bound: list[int] = field(default_factory=list)
    nodes_by_pool: dict[str, list[int]] = field(default_factory=dict)
    # node-compactor's latest decision at each step: a plan action, or the gate that held it (None: no planner)
    decisions: list[str | None] = field(default_factory=list)
