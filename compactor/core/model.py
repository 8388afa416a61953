"""Immutable records of the cluster as the planner sees it.

Quantities are integers: CPU in millicores, memory in bytes, every other
resource (ephemeral storage, GPUs, hugepages) in thousandths of its unit,
which is exact for every quantity the API accepts. The records keep only what a decision needs, so a
150,000-pod cluster fits comfortably in memory.

The records are frozen msgspec Structs rather than dataclasses: one is made
about 5 times faster than a frozen dataclass with the same fields, which
counts when a cluster makes 150,000 Pods. Change one with
`msgspec.structs.replace` (`dataclasses.replace` does not take them). They
are not tracked by the cyclic collector (`gc=False`): a record refers only
to strings, numbers, times, other records and maps of strings, so it is
never part of a reference cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType

import msgspec

EMPTY: Mapping[str, str] = MappingProxyType({})


# Annotations and labels with a meaning for node-compactor.
UNDERUTILIZED_SINCE = "node-compactor.dev/underutilized-since"
DRAIN_STARTED_AT = "node-compactor.dev/drain-started-at"
DRAIN_FAILED_AT = "node-compactor.dev/drain-failed-at"
DISABLED = "node-compactor.dev/disabled"
CA_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# On a pod whose pod-deletion-cost node-compactor wrote (scale-down steering): the value it wrote. The
# cost is node-compactor's while the two agree; a cost anyone else set is never changed.
STEERED_COST = "node-compactor.dev/deletion-cost"
# The pod-deletion-cost node-compactor writes (`core.steering`).
STEERED_DELETION_COST = -1
MIRROR_POD = "kubernetes.io/config.mirror"
CA_DELETING_TAINT = "ToBeDeletedByClusterAutoscaler"
# The taint the node lifecycle controller mirrors spec.unschedulable into (TaintNodesByCondition).
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# PreferNoSchedule taint on marked nodes, so the scheduler puts pods elsewhere first (as Cluster
# Autoscaler's DeletionCandidateOfClusterAutoscaler does for the nodes it finds unneeded).
SOFT_TAINT = "node-compactor.dev/underutilized"
# PreferNoSchedule taint on the nodes whose room a drain keeps for the last of its pods (planner,
# "reservations"): while the drain's pods are placed, the scheduler fills the other nodes first.
RESERVED_TAINT = "node-compactor.dev/reserved"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The label GKE gives the nodes of a ComputeClass (`core.coexistence`).
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
# Phases of a finished pod, which counts for nothing.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

# Node replacement (DESIGN "Node replacement"): the state lives on the placeholder pod and the replaced nodes.
PLACEHOLDER_LABEL = "node-compactor.dev/placeholder"  # "true" on a placeholder pod
REPLACES = "node-compactor.dev/replaces"  # on the placeholder: the replaced nodes, comma-separated
CREATED_AT = "node-compactor.dev/created-at"  # on the placeholder: when it was created (RFC 3339)
# On a replaced node: its replacement's placeholders, comma-separated (one name, as before several, is read alike).
REPLACED_BY = "node-compactor.dev/replaced-by"
# On a placeholder: its replacement's id, shared by the placeholders of one replacement (one per new node).
REPLACEMENT_LABEL = "node-compactor.dev/replacement"
REPLACEMENT_FAILED_AT = "node-compactor.dev/replacement-failed-at"  # on a node whose replacement failed
# On a node of a pool with replacement on: since when a run has found a replacement of it that saves enough and
# has room (DESIGN rule 10); a replacement starts once each of its nodes has carried it neededMarkedTimeSeconds.
REPLACEABLE_SINCE = "node-compactor.dev/replaceable-since"
PLACEHOLDER_PRIORITY_CLASS = "node-compactor-placeholder"  # value -10, preemptionPolicy Never (terraform)
PLACEHOLDER_PRIORITY = -10  # the PriorityClass's value: any pod of a higher priority may preempt a placeholder
PLACEHOLDER_PREFIX = "node-compactor-placeholder-"


class Resources(msgspec.Struct, frozen=True, gc=False):
    """An amount of node resources. `extended` is sorted (name, thousandths)."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    extended: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: Resources) -> Resources:
        if other is ZERO:
            return self
        if self is ZERO:
            return other
        return Resources(
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
            _merge(self.extended, other.extended, max_not_sum=False),
        )

    def max(self, other: Resources) -> Resources:
        """Per resource, the larger of the two."""
        return Resources(
            max(self.cpu_millis, other.cpu_millis),
            max(self.memory_bytes, other.memory_bytes),
            _merge(self.extended, other.extended, max_not_sum=True),
        )


ZERO = Resources()


def _merge(
    left: tuple[tuple[str, int], ...], right: tuple[tuple[str, int], ...], *, max_not_sum: bool
) -> tuple[tuple[str, int], ...]:
    if not right:
        return left
    if not left:
        return right
    merged = dict(left)
    for name, amount in right:
        current = merged.get(name, 0)
        merged[name] = max(current, amount) if max_not_sum else current + amount
    return tuple(sorted(merged.items()))


class Taint(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: str
    effect: str


class Toleration(msgspec.Struct, frozen=True, gc=False):
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


class Requirement(msgspec.Struct, frozen=True, gc=False):
    """One `matchExpressions` entry of a label or node selector."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


class LabelSelector(msgspec.Struct, frozen=True, gc=False):
    """A metav1.LabelSelector; an empty one matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


class NodeSelectorTerm(msgspec.Struct, frozen=True, gc=False):
    """Terms are ORed; the requirements inside a term are ANDed."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()  # only metadata.name exists


class PreferredTerm(msgspec.Struct, frozen=True, gc=False):
    """One preferredDuringSchedulingIgnoredDuringExecution entry of node affinity: a node that matches the
    term adds `weight` (1-100) to the node's NodeAffinity score. An empty term matches no node."""

    weight: int
    term: NodeSelectorTerm


class PodAffinityTerm(msgspec.Struct, frozen=True, gc=False):
    selector: LabelSelector | None  # None matches no pod
    namespaces: tuple[str, ...]  # empty with no namespace selector = the pod's own
    all_namespaces: bool  # a namespaceSelector is set; namespace labels are not read, so any namespace
    topology_key: str


class SpreadConstraint(msgspec.Struct, frozen=True, gc=False):
    """A topologySpreadConstraint with whenUnsatisfiable: DoNotSchedule."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None


class HostPort(msgspec.Struct, frozen=True, gc=False):
    protocol: str
    port: int
    host_ip: str

    def clashes_with(self, other: HostPort) -> bool:
        if self.protocol != other.protocol or self.port != other.port:
            return False
        wildcard = ("", "0.0.0.0", "::")
        return self.host_ip in wildcard or other.host_ip in wildcard or self.host_ip == other.host_ip


class Placeholder(msgspec.Struct, frozen=True, gc=False):
    """What a placeholder pod's annotations say: the nodes it replaces and when it was created (as written)."""

    replaces: tuple[str, ...]
    created_at: str | None


class Pod(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    name: str
    node_name: str | None
    phase: str
    requests: Resources
    labels: Mapping[str, str] = EMPTY
    controller_kind: str | None = None  # kind of the ownerReference with controller: true
    controller_name: str | None = None
    is_mirror: bool = False
    safe_to_evict: bool | None = None  # the cluster-autoscaler annotation, None when absent
    do_not_disrupt: bool = False
    deletion_cost: int = 0  # the pod's own: 0 when node-compactor wrote the annotation (`steered`)
    # The pod-deletion-cost annotation is there, written by anyone (`deletion_cost_set`) or by
    # node-compactor to steer scale-down to the pod's node (`steered`).
    deletion_cost_set: bool = False
    steered: bool = False
    priority: int = 0
    local_storage: tuple[str, ...] = ()  # names of emptyDir (not in memory) and hostPath volumes
    pvc_names: tuple[str, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # required terms, None = no constraint
    host_ports: tuple[HostPort, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # required
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()  # required
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    unschedulable: bool = False  # PodScheduled=False, reason Unschedulable
    terminating: bool = False  # metadata.deletionTimestamp is set
    # Pods a drain leaves in place: DaemonSet, mirror (static) and finished pods. Derived from the
    # fields above whenever a Pod is made (a value passed for it is replaced), read often.
    stays_on_node: bool = False
    # A node replacement's placeholder pod (`core.replacement`): what it replaces and since when. The
    # snapshot keeps placeholders apart from the other pods (`Snapshot.placeholders`).
    placeholder: Placeholder | None = None
    # When the pod was created, read only for a pod owned by a Job (a pool's jobPods "wait" says since when
    # a node waits for it); None for every other pod.
    created: datetime | None = None
    # Preferred node affinity: no constraint, a score kube-scheduler's NodeAffinity plugin gives the nodes
    # that match (`selectors.preferred_weight`). Last, so records made by position need not name it.
    preferred_node_affinity: tuple[PreferredTerm, ...] = ()

    def __post_init__(self) -> None:
        stays = self.controller_kind == "DaemonSet" or self.is_mirror or self.phase in TERMINAL_PHASES
        msgspec.structs.force_setattr(self, "stays_on_node", stays)

    @property
    def scale_down_cost(self) -> int:
        """The pod-deletion-cost the ReplicaSet controller reads: node-compactor's when it wrote one."""
        return STEERED_DELETION_COST if self.steered else self.deletion_cost

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


class Node(msgspec.Struct, frozen=True, gc=False):
    name: str
    allocatable: Resources
    allocatable_pods: int
    labels: Mapping[str, str] = EMPTY
    annotations: Mapping[str, str] = EMPTY
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    created: datetime | None = None

    @property
    def being_deleted_by_autoscaler(self) -> bool:
        # Asked of every node in every simulation: most have no taint, and need no generator.
        return bool(self.taints) and any(taint.key == CA_DELETING_TAINT for taint in self.taints)

    @property
    def zone(self) -> str | None:
        for label in ZONE_LABELS:
            zone = self.labels.get(label)
            if zone:
                return zone
        return None


class Pdb(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    name: str
    selector: LabelSelector | None  # None selects no pod; empty selects every pod of the namespace
    disruptions_allowed: int
    # spec.minAvailable and spec.maxUnavailable as written ("1", "50%"); None when not set. Read by
    # `core.surge`, which restarts a Deployment a PDB holds only because minAvailable is its replica count.
    min_available: str | None = None
    max_unavailable: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# The pod-template annotation `kubectl rollout restart` writes; a new value rolls the Deployment.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


class Deployment(msgspec.Struct, frozen=True, gc=False):
    """What `core.surge` reads of an apps/v1 Deployment (read only when a pool sets surgeSingleReplicas).

    `max_surge` and `max_unavailable` are spec.strategy.rollingUpdate's values as written ("1",
    "25%"); None when absent, which the API server defaults to "25%"."""

    namespace: str
    name: str
    replicas: int  # spec.replicas (the API defaults it to 1)
    strategy: str  # spec.strategy.type: "RollingUpdate" (the default) or "Recreate"
    max_surge: str | None
    max_unavailable: str | None
    paused: bool
    generation: int
    observed_generation: int
    status_replicas: int
    updated_replicas: int
    available_replicas: int
    restarted_at: str | None = None  # the pod template's RESTARTED_AT annotation

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ReplicaSet(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    name: str
    deployment: str | None  # the name of its controller when that is a Deployment
    replicas: int  # spec.replicas
    status_replicas: int  # status.replicas: pods it still has

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Claim(msgspec.Struct, frozen=True, gc=False):
    """A PersistentVolumeClaim's access modes, and the pod that owns it (a generic ephemeral volume)."""

    namespace: str
    name: str
    access_modes: tuple[str, ...]
    owner_pod: str | None = None  # the name of its controller when that is a Pod

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


EMPTY_POOLS: Mapping[str, PoolAutoscaling] = MappingProxyType({})


class PoolAutoscaling(msgspec.Struct, frozen=True, gc=False):
    """What GKE says of a node pool's autoscaling (live GKE runs only)."""

    enabled: bool
    min_node_count: int = 0  # per zone
    total_min_node_count: int = 0  # whole pool; 0 = not set
    max_node_count: int = 0  # per zone; 0 = not known
    total_max_node_count: int = 0  # whole pool; 0 = not set
    zones: int = 0  # the pool's zones (node locations); 0 = not known
    # The pool's node template, for a replacement into a pool with no node yet (`core.replacement`).
    machine_type: str | None = None
    spot: bool = False
    labels: Mapping[str, str] = msgspec.field(default_factory=dict)  # a dict: pools travel to simulation workers
    taints: tuple[Taint, ...] = ()
    locations: tuple[str, ...] = ()
    # The node pool's own consolidation delay (NodeConfig.consolidationDelay, GKE 1.34.1-gke.2364000 and later),
    # in seconds: GKE's autoscaler takes it over the ComputeClass's consolidationDelayMinutes; None: not set.
    consolidation_delay_seconds: int | None = None
    # The pool's maximum pods per node (maxPodsConstraint, else the cluster's default); 0 = not known.
    max_pods_per_node: int = 0
    # The cluster's default ComputeClass is on (ClusterAutoscaling.defaultComputeClassConfig.enabled): a pool
    # whose nodes carry no cloud.google.com/compute-class label follows the ComputeClass named "default".
    default_compute_class: bool = False
    # The cluster creates node pools for pending pods (ClusterAutoscaling.enableNodeAutoprovisioning): a cluster
    # fact each pool carries, as the one above; replacement's `machineTypes` need it (`Snapshot.creates_pools`).
    creates_pools: bool = False

    def can_grow(self, nodes: int) -> bool:
        """Whether the autoscaler may add a node to a pool of `nodes` nodes (enabled and below its maximum)."""
        if not self.enabled:
            return False
        if self.total_max_node_count > 0:
            return nodes < self.total_max_node_count
        if self.max_node_count > 0 and self.zones > 0:
            return nodes < self.max_node_count * self.zones
        return True


class ComputeClass(msgspec.Struct, frozen=True, gc=False):
    """A GKE ComputeClass (cloud.google.com/v1, cluster-scoped) as far as the Cluster Autoscaler's
    scale-down goes: `spec.autoscalingPolicy.consolidationThreshold`, a whole percent (0-100).

    `consolidation_threshold` is None when the class sets none or sets one that does not read; then
    `problem` says which (`core.coexistence` turns it into a warning and ignores the class)."""

    name: str
    consolidation_threshold: int | None
    problem: str | None = None
    # spec.autoscalingPolicy.consolidationDelayMinutes (1-1440): how long a node must stay unneeded; None when
    # unset or not a whole number in that range (the autoscaling profile's unneeded time then applies). Only
    # the simulator reads it (`simulate --snapshot`); a run does not depend on it.
    consolidation_delay_minutes: int | None = None


class Snapshot(msgspec.Struct, frozen=True, gc=False):
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    pdbs: tuple[Pdb, ...] = ()
    # Known only when the cluster's node pools were read from GKE; empty = not checked.
    pool_autoscaling: Mapping[str, PoolAutoscaling] = EMPTY_POOLS
    # Read only when a pool sets surgeSingleReplicas (`core.surge`); empty otherwise.
    deployments: tuple[Deployment, ...] = ()
    replica_sets: tuple[ReplicaSet, ...] = ()
    claims: tuple[Claim, ...] = ()
    # The cluster's ComputeClasses (none when the cluster has no such resource, or a snapshot file lists
    # none); `compute_classes_unread` says why they could not be read (a 403), None when they were.
    compute_classes: tuple[ComputeClass, ...] = ()
    compute_classes_unread: str | None = None
    # Node replacement's placeholder pods (`core.replacement`), kept out of `pods`: no rule counts them as
    # a workload; the fit proof sees a bound one as holding its room until a pod that fits nowhere else
    # preempts it, as kube-scheduler does (`ClusterView.preemptible`).
    placeholders: tuple[Pod, ...] = ()
    # Whether GKE creates node pools for pending pods (node auto-provisioning, read from GKE's cluster config):
    # None when not read; replacement's `machineTypes` are used only when True.
    creates_pools: bool | None = None
