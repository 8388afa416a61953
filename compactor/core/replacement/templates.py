"""The new node a replacement asks for (DESIGN "Node replacement", rule 10), as the fit proof sees it.

A target pool's new node is a template: a node of the pool as it is (minus its DaemonSets' requests), or, for a
pool with no node, what GKE says of the pool's machine type, labels and taints, with the allocatable GKE leaves
on that machine type (`prices.machines`). Also why a pool cannot take one: not in the cluster, not autoscaled,
at its maximum, or a machine type, zone or price that cannot be known. A machine type that comes with GPUs (a2,
a3, g2, g4) is never such a formula node: its GPUs are priced but not modelled, so a new node of it is made only by
copying a node of its pool, GPUs, labels and taints included; never for `machineTypes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from compactor.core import configcheck
from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import (
    CA_DELETING_TAINT,
    HOSTNAME_LABEL,
    RESERVED_TAINT,
    SOFT_TAINT,
    UNSCHEDULABLE_TAINT,
    ZONE_LABELS,
    Node,
    PoolAutoscaling,
    Resources,
    Taint,
)
from compactor.core.prices import costs, machines, pricing
from compactor.errors import BadInputError

# Taints a node carries because of what happens to it now, not because of its pool.
_TRANSIENT_TAINTS = frozenset(
    {SOFT_TAINT, RESERVED_TAINT, CA_DELETING_TAINT, UNSCHEDULABLE_TAINT, "DeletionCandidateOfClusterAutoscaler"}
)


TEMPLATE_NAME = "node-compactor-new-node"

# A new node whose shape comes from GKE's published reservations, not from a node of its pool, is taken this much
# smaller than the formula gives: a node reports within a few percent of it (`prices.machines`), and a placeholder
# that asks for more than the node really has would never run (the replacement would only wait and give up).
FORMULA_MARGIN_PERCENT = 3


def _within_margin(amount: int) -> int:
    return amount * (100 - FORMULA_MARGIN_PERCENT) // 100


@dataclass(frozen=True, slots=True)
class Template:
    """The new node of a target pool, as the proof sees it (its DaemonSets' requests already taken off)."""

    pool: str
    node: Node
    machine_type: str | None
    zone: str | None
    price: costs.Price
    source: str  # where its shape came from
    # A machine type of `machineTypes`: GKE creates the pool, and the placeholder selects the shape, not a pool.
    auto_created: bool = False


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
    known = view.snapshot.pool_autoscaling
    present = [pool for pool in view.nodes_by_pool if pool is not None]
    problem = configcheck.target_pool_problem(pool_name, len(members), present, known)
    if problem is not None:  # the same words as the configuration's check: the report lists it once
        return problem
    if members:
        return _from_node(view, table, pool_name, members, zone_hint)
    # No node, and no problem: GKE's API was read and names the pool (`target_pool_problem`).
    autoscaling = known[pool_name]
    if autoscaling.machine_type is None:
        return f"target pool {pool_name} has no node in the cluster and GKE's node pool config names no machine type"
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
    held = total_requests(pod.requests for pod in daemons)
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
    with_gpus = _with_gpus(machine_type)
    if with_gpus is not None:
        return f"target pool {pool_name}: {with_gpus} (a pool with a node is copied from it)"
    try:
        cpu, memory = (_within_margin(amount) for amount in machines.allocatable_amounts(machine_type))
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
        pricing.INSTANCE_TYPE_LABEL: machine_type,
        ZONE_LABELS[0]: zone,
        pricing.REGION_LABEL: region,
    }
    if autoscaling.spot:
        labels[pricing.SPOT_LABEL] = "true"
    price = costs.machine_price(view.config, table, pool_name, machine_type, region, autoscaling.spot)
    if isinstance(price, str):
        return f"target pool {pool_name}: {price}"
    new = _formula_node(cpu, memory, daemonset_requests, labels, autoscaling.taints)
    return Template(pool_name, new, machine_type, zone, price, "GKE's node pool config (the pool has no node yet)")


def machine_template(
    view: ClusterView,
    table: pricing.PriceTable,
    machine_type: str,
    spot: bool,
    zone: str | None,
    daemonset_requests: Resources,
) -> Template | str:
    """The new node of a pool GKE would create for `machine_type` in `zone` (Spot or not), or why there is none.

    GKE labels it with its machine type and family and, for Spot, `cloud.google.com/gke-spot: "true"` with the
    taint `cloud.google.com/gke-spot=true:NoSchedule` on the pool it creates for Spot pods (GKE's "Spot VMs"
    page, "node auto-provisioning"): only pods that tolerate Spot go there, as rule 6 checks."""
    with_gpus = _with_gpus(machine_type)
    if with_gpus is not None:
        return with_gpus
    try:
        cpu, memory = (_within_margin(amount) for amount in machines.allocatable_amounts(machine_type))
    except BadInputError:
        return f"machine type {machine_type} has no known allocatable (not a predefined type the price table prices)"
    if zone is None:
        return f"machine type {machine_type}: the replaced nodes name no zone to create it in"
    region = zone.rsplit("-", 1)[0]
    labels = {
        HOSTNAME_LABEL: TEMPLATE_NAME,
        pricing.INSTANCE_TYPE_LABEL: machine_type,
        pricing.MACHINE_FAMILY_LABEL: pricing.machine_family(machine_type),
        ZONE_LABELS[0]: zone,
        pricing.REGION_LABEL: region,
    }
    taints: tuple[Taint, ...] = ()
    if spot:
        labels[pricing.SPOT_LABEL] = "true"
        taints = (Taint(pricing.SPOT_LABEL, "true", "NoSchedule"),)
    price = costs.machine_price(view.config, table, "", machine_type, region, spot)
    if isinstance(price, str):
        return f"machine type {machine_type}: {price}"
    new = _formula_node(cpu, memory, daemonset_requests, labels, taints)
    return Template(machine_type, new, machine_type, zone, price, "a pool GKE creates for the machine type", True)


def _with_gpus(machine_type: str) -> str | None:
    """Why no new node of this machine type is made from GKE's formula: it comes with GPUs, which a node of cpu and
    memory alone would leave out (pods that need them could not move there, and GKE may keep other pods off it);
    None for a machine type without GPUs."""
    bundled = pricing.bundled_gpus(machine_type)
    if bundled is None:
        return None
    accelerator, gpus = bundled
    return (
        f"machine type {machine_type} comes with GPUs ({gpus:g} x {accelerator}), which node replacement does not "
        "model on a new node"
    )


def _formula_node(
    cpu: int, memory: int, daemonset_requests: Resources, labels: dict[str, str], taints: tuple[Taint, ...]
) -> Node:
    """A new node whose allocatable comes from GKE's formula (already within the margin), less its DaemonSets."""
    room = Resources(max(0, cpu - daemonset_requests.cpu_millis), max(0, memory - daemonset_requests.memory_bytes))
    return Node(TEMPLATE_NAME, room, machines.MAX_PODS, labels, taints=taints)


def total_requests(requests: Iterable[Resources]) -> Resources:
    cpu = memory = 0
    for item in requests:
        cpu += item.cpu_millis
        memory += item.memory_bytes
    return Resources(cpu, memory)
