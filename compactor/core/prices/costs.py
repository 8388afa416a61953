"""What each node costs per hour (DESIGN "Node replacement", prices), from its machine type, region, Spot and GPUs.

The pool's `pricePerHour` wins over the price table (the built-in one, or the `priceFile` the shell read
into it); a node whose machine type, family or region the table does not know has no price, and its
pool says why. A node of an accelerator-optimized machine type (g2-standard-4) costs its machine with the GPUs it
comes with, whatever its nvidia.com/gpu says (GPU sharing and MIG partitions count one GPU many times there). Any
other GPU node (`cloud.google.com/gke-accelerator` and nvidia.com/gpu) costs its machine plus each GPU at the
table's rate for that accelerator; other accelerators (TPUs), or a GPU the table has no rate for, leave the node
unpriced. Pure: the table is handed in, nothing is read here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from compactor.core.cluster import ClusterView, NodeState
from compactor.core.model import Node
from compactor.core.prices import pricing
from compactor.settings.config import Config

PRICE_PER_HOUR = "pricePerHour"


@dataclass(frozen=True, slots=True)
class Price:
    per_hour: float  # in the table's currency
    source: str  # "pricePerHour", or the table's source and date


@dataclass(frozen=True)
class Costs:
    """Every node's price, and for each pool with a node the table does not price, why."""

    currency: str
    nodes: Mapping[str, Price]
    unknown: Mapping[str, str] = field(default_factory=dict)

    def of(self, name: str) -> Price | None:
        return self.nodes.get(name)

    def total(self, names: Iterable[str]) -> float | None:
        """The summed price per hour of these nodes; None when one of them has no price."""
        total = 0.0
        for name in names:
            price = self.nodes.get(name)
            if price is None:
                return None
            total += price.per_hour
        return total


def node_costs(view: ClusterView, table: pricing.PriceTable) -> Costs:
    """The price of every node in the view (one table look-up per machine type, region and Spot)."""
    config = view.config
    found: dict[tuple[str | None, str | None, str | None, bool], Price | str] = {}
    prices: dict[str, Price] = {}
    unknown: dict[str, str] = {}
    for state in view.nodes.values():
        labels = state.node.labels
        key = (state.pool, pricing.machine_type_of(labels), pricing.region_of(labels), pricing.is_spot(labels))
        price = found.get(key)
        if price is None:
            price = found[key] = _price(config, table, *key)
        price = _with_accelerators(price, table, state.node, key[1], key[2], key[3])
        if isinstance(price, Price):
            prices[state.name] = price
        elif state.pool is not None:
            unknown.setdefault(state.pool, price)
    return Costs(table.currency, prices, unknown)


def machine_price(
    config: Config,
    table: pricing.PriceTable,
    pool: str,
    machine_type: str | None,
    region: str | None,
    spot: bool,
) -> Price | str:
    """The price of a node of `pool` with this machine type, region and provisioning, or why there is none."""
    return _price(config, table, pool, machine_type, region, spot)


def of_node(config: Config, table: pricing.PriceTable, pool: str, node: Node) -> Price | str:
    """The price of this node of `pool`, its GPUs included, or why there is none."""
    labels = node.labels
    machine_type, region, spot = pricing.machine_type_of(labels), pricing.region_of(labels), pricing.is_spot(labels)
    price = _price(config, table, pool, machine_type, region, spot)
    return _with_accelerators(price, table, node, machine_type, region, spot)


def pool_price(costs: Costs, members: Iterable[NodeState]) -> float | None:
    """What a pool's nodes cost per hour together; None when one has no price."""
    return costs.total(state.name for state in members)


def _price(
    config: Config,
    table: pricing.PriceTable,
    pool: str | None,
    machine_type: str | None,
    region: str | None,
    spot: bool,
) -> Price | str:
    settings = config.pool(pool)
    if settings is not None and settings.price_per_hour is not None:
        return Price(settings.price_per_hour, PRICE_PER_HOUR)
    if machine_type is None:
        return "no machine type label (node.kubernetes.io/instance-type); set the pool's pricePerHour"
    if region is None:
        return f"{machine_type}: no region or zone label; set the pool's pricePerHour"
    per_hour = pricing.node_price(table, machine_type=machine_type, region=region, spot=spot)
    bundled = pricing.bundled_gpus(machine_type)
    if per_hour is None:
        model = pricing.SPOT if spot else pricing.ON_DEMAND
        what = f"{machine_type} ({model}) in {region}"
        if bundled is not None:
            what += f" with its {bundled[0]} GPUs"
        return (
            f"{what} is not in the price table ({table.source}, {table.as_of}); "
            "set the pool's pricePerHour or a priceFile"
        )
    source = f"{table.source}, {table.as_of}"
    if bundled is not None:
        accelerator, gpus = bundled
        per_gpu = pricing.gpu_price(table, accelerator=accelerator, region=region, spot=spot)
        source += f"; {machine_type} with {gpus:g} x {accelerator} at {per_gpu:g}/h"
    return Price(per_hour, source)


def _with_accelerators(
    price: Price | str,
    table: pricing.PriceTable,
    node: Node,
    machine_type: str | None,
    region: str | None,
    spot: bool,
) -> Price | str:
    """The machine's table price plus the node's GPUs; why not when it has accelerators the table does not price.

    The table prices vCPUs and memory; GPUs and TPUs are billed apart and would make the node look cheap, so a
    node with one the table has no rate for has no price. A pool's pricePerHour is the whole node's price, and an
    accelerator-optimized machine's price has its GPUs already."""
    if not isinstance(price, Price) or price.source == PRICE_PER_HOUR:
        return price
    bundled = machine_type is not None and pricing.bundled_gpus(machine_type) is not None
    accelerators = {
        name: amount
        for name, amount in node.allocatable.extended
        if amount and _accelerator(name) and not (bundled and name == pricing.GPU_RESOURCE)
    }
    if not accelerators:
        return price
    accelerator = pricing.accelerator_of(node.labels)
    gpus, whole = divmod(accelerators.get(pricing.GPU_RESOURCE, 0), 1000)  # thousandths
    per_gpu = None
    if accelerator is not None and region is not None and set(accelerators) == {pricing.GPU_RESOURCE} and not whole:
        per_gpu = pricing.gpu_price(table, accelerator=accelerator, region=region, spot=spot)
    if per_gpu is None:
        names = ", ".join(sorted(accelerators))
        which = ""
        if accelerator is not None and pricing.GPU_RESOURCE in accelerators:
            which = f" ({accelerator}, {pricing.SPOT if spot else pricing.ON_DEMAND}, in {region or 'no region'})"
        return (
            f"{machine_type} has accelerators ({names}) the price table does not price{which}; "
            "set the pool's pricePerHour, or a priceFile from `python -m compactor prices --refresh`, which reads GPU "
            "rates from the Cloud Billing Catalog"
        )
    return Price(
        round(price.per_hour + gpus * per_gpu, 6),
        f"{price.source}; {machine_type} + {gpus} x {accelerator} at {per_gpu:g}/h",
    )


def _accelerator(resource: str) -> bool:
    """An extended resource billed apart from the machine: a device plugin's (a domain-qualified name such as
    nvidia.com/gpu or google.com/tpu), not the node's own ephemeral-storage or hugepages."""
    return "/" in resource and not resource.startswith(("hugepages-", "kubernetes.io/"))
