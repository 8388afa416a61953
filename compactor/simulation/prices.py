"""What the simulated nodes cost: each pool's price per hour and a strategy's cost per day.

A pool's node price is the scenario's `pricePerHour`, else the configuration's, else the price table's (the
built-in one, or the configuration's `priceFile`) for the pool's machine type, its region (from its zones) and
Spot (the `cloud.google.com/gke-spot` label), as `core.prices.costs` prices a live node (a machine type that comes
with GPUs, g2-standard-4, is priced with them; a node with GPUs attached, as T4s on an N1, or TPUs, which the table
leaves out, has no table price). It is resolved once, where the Setup is built (`of_pools`), and kept as plain
data: a copy of the cluster copies no price table.

The cost lower bound, the cheapest fractional capacity that holds the requests, is `bound`'s; it reads the
prices resolved here from the Setup.

Must never: change what is simulated (prices only price what the run did), nor give a figure when a pool has
no price: every cost is then None, and `warnings` names the pool and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compactor.core.cluster import ClusterView
from compactor.core.model import Node, Snapshot
from compactor.core.prices import costs, pricing
from compactor.gcp import pricefile
from compactor.settings.config import Config
from compactor.simulation import objects
from compactor.simulation.model import PoolPrice, PoolSpec, Setup

SCENARIO_PRICE = "pricePerHour of the scenario's pool"
CONFIGURATION_PRICE = "pricePerHour of the configuration's pool"
HOURS_A_DAY = 24


def table_for(config: Config) -> pricing.PriceTable:
    """The configuration's priceFile (read here, at the edge), else the built-in table."""
    return pricefile.for_config(config) or pricing.BUILT_IN


def of_pools(pools: Sequence[PoolSpec], config: Config, table: pricing.PriceTable) -> dict[str, PoolPrice]:
    """Each pool's price, as a live run prices a node of it (`core.prices.costs.node_costs`: the configuration's
    pricePerHour, else the table's, no price for accelerators the table leaves out), under the scenario's."""
    nodes = {pool.name: objects.template_node(pool, config.pool_label) for pool in pools}
    found = costs.node_costs(ClusterView(Snapshot(nodes=tuple(nodes.values()), pods=()), config), table)
    return {pool.name: _pool_price(pool, nodes[pool.name], table, found) for pool in pools}


def _pool_price(pool: PoolSpec, node: Node, table: pricing.PriceTable, found: costs.Costs) -> PoolPrice:
    spot = pricing.is_spot(node.labels)
    regions = sorted({region for zone in pool.zones if (region := pricing.region_of({pricing.ZONE_LABEL: zone}))})
    region = regions[0] if len(regions) == 1 else None
    if pool.price_per_hour is not None:
        return PoolPrice(pool.price_per_hour, SCENARIO_PRICE, spot, region)
    price = found.of(node.name)
    if price is not None and price.source == costs.PRICE_PER_HOUR:
        return PoolPrice(price.per_hour, CONFIGURATION_PRICE, spot, region)
    if len(regions) > 1:
        problem = f"its zones are in {len(regions)} regions ({', '.join(regions)}); set the pool's pricePerHour"
        return PoolPrice(None, "", spot, None, problem)
    if price is None:
        return PoolPrice(None, "", spot, region, found.unknown.get(pool.name, "not in the price table"))
    return PoolPrice(price.per_hour, price.source, spot, region, as_of=table.as_of)


def complete(setup: Setup) -> bool:
    """Whether every pool has a price."""
    return all(_price(setup, pool.name) is not None for pool in setup.pools)


def warnings(setup: Setup) -> list[str]:
    """One line for each pool without a price, naming it and saying why; every cost is then null."""
    found = []
    for pool in setup.pools:
        price = setup.prices.get(pool.name)
        if price is None or price.per_hour is None:
            why = price.problem if price is not None and price.problem else "not priced"
            found.append(f"pool {pool.name} has no price ({why}): costPerDay is null for every strategy")
    return found


def per_day(setup: Setup, node_hours: Mapping[str, float], measured_hours: float) -> float | None:
    """The cost of these node-hours per pool (over `measured_hours`), per 24 hours; None when a pool with
    node-hours has no price, or when any pool has none (a partial figure would look whole)."""
    if measured_hours <= 0 or not complete(setup):
        return None
    total = 0.0
    for pool, hours in node_hours.items():
        if not hours:
            continue
        price = _price(setup, pool)
        if price is None:
            return None  # nodes outside the scenario's pools (no pool label): no price
        total += hours * price
    return total * HOURS_A_DAY / measured_hours


def per_hour(setup: Setup, nodes_by_pool: Mapping[str, Sequence[int]]) -> list[float] | None:
    """What the nodes cost per hour at each step, from their count per pool at each step; None as `per_day`."""
    if not complete(setup):
        return None
    steps = max((len(series) for series in nodes_by_pool.values()), default=0)
    total = [0.0] * steps
    for pool, series in nodes_by_pool.items():
        if not any(series):
            continue
        price = _price(setup, pool)
        if price is None:
            return None
        for index, count in enumerate(series):
            total[index] += count * price
    return total


def _price(setup: Setup, pool: str) -> float | None:
    price = setup.prices.get(pool)
    return price.per_hour if price is not None else None
