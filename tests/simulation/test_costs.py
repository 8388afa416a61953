"""Money in every figure: each strategy's cost per day at its pools' prices, and the cost lower bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactor import cli
from compactor.core.prices import pricing
from compactor.errors import BadInputError
from compactor.kube import quantity
from compactor.simulation import report, runner
from compactor.simulation.runner import Results, StrategyResult
from tests.simulation.builders import POOL, scenario_data, setup_from, table_columns

MACHINE = "e2-standard-4"
REGION = "europe-west1"
ZONES = ["europe-west1-b", "europe-west1-c"]
ON_DEMAND = pricing.node_price(pricing.BUILT_IN, machine_type=MACHINE, region=REGION, spot=False)
SPOT = pricing.node_price(pricing.BUILT_IN, machine_type=MACHINE, region=REGION, spot=True)
COMPACTOR = {"nodePools": {POOL: {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75}}}


def steady_day(*, pools: list[dict[str, Any]] | None = None, **changes: Any) -> dict[str, Any]:
    """A day of ten 1-cpu pods on one e2-standard-4 pool in a priced region, in 10-minute steps."""
    data: dict[str, Any] = {
        "name": "priced",
        "start": "2026-11-20T00:00:00Z",
        "hours": 24,
        "warmupHours": 0,
        "stepSeconds": 600,
        "pools": pools or [{"name": POOL, "machineType": MACHINE, "zones": ZONES, "minNodes": 1}],
        "deployments": [{"name": "web", "requests": {"cpu": "1", "memory": "1Gi"}, "replicas": 10}],
        "compactor": COMPACTOR,
    }
    data.update(changes)
    return data


def alone(data: dict[str, Any]) -> tuple[Results, dict[str, dict[str, Any]]]:
    results = runner.run(setup_from(data), strategies=("ca-alone",))
    return results, {item["name"]: item for item in report.summarize(results)["strategies"]}


def node_hours(result: StrategyResult, step_seconds: int) -> float:
    return sum(result.series.nodes) * step_seconds / 3600


def test_cost_per_day_is_the_node_hours_times_the_pools_price() -> None:
    results, items = alone(steady_day())
    hours = node_hours(results.strategies[0], 600)
    assert ON_DEMAND is not None and hours > 0
    assert items["ca-alone"]["costPerDay"] == pytest.approx(hours * ON_DEMAND, abs=0.005)


def test_a_shorter_run_is_scaled_to_a_day() -> None:
    results, items = alone(steady_day(hours=6))
    hours = node_hours(results.strategies[0], 600)
    assert ON_DEMAND is not None
    assert items["ca-alone"]["costPerDay"] == pytest.approx(hours * ON_DEMAND * 24 / 6, abs=0.005)


def test_a_spot_pool_is_priced_at_spot_rates_and_its_nodes_say_so() -> None:
    data = steady_day(pools=[{"name": POOL, "machineType": MACHINE, "zones": ZONES, "spot": True}])
    results, items = alone(data)
    assert SPOT is not None and ON_DEMAND is not None and SPOT < ON_DEMAND
    priced = report.summarize(results)["prices"]["pools"][POOL]
    assert (priced["perHour"], priced["spot"]) == (SPOT, True)
    assert items["ca-alone"]["costPerDay"] == pytest.approx(node_hours(results.strategies[0], 600) * SPOT, abs=0.005)
    cluster = runner.build(setup_from(data))
    assert cluster.world.nodes
    assert all(node["metadata"]["labels"][pricing.SPOT_LABEL] == "true" for node in cluster.world.nodes.values())


@pytest.mark.parametrize(
    ("pool", "configured", "price", "source"),
    [
        pytest.param({"pricePerHour": 0.5}, {}, 0.5, "pricePerHour of the scenario's pool", id="the-scenario's"),
        pytest.param({}, {"pricePerHour": 0.25}, 0.25, "pricePerHour of the configuration's pool", id="the-config's"),
        pytest.param(
            {"pricePerHour": 0.5},
            {"pricePerHour": 0.25},
            0.5,
            "pricePerHour of the scenario's pool",
            id="the-scenario's-over-the-config's",
        ),
        pytest.param(
            {"pricePerHour": 0.5, "machineType": "z9-unknown-4", "allocatable": {"cpu": "3920m", "memory": "12Gi"}},
            {},
            0.5,
            "pricePerHour of the scenario's pool",
            id="for-a-machine-type-the-table-lacks",
        ),
    ],
)
def test_a_price_per_hour_overrides_the_table(
    pool: dict[str, Any], configured: dict[str, Any], price: float, source: str
) -> None:
    compactor = {"nodePools": {POOL: {**COMPACTOR["nodePools"][POOL], **configured}}}
    data = steady_day(pools=[{"name": POOL, "machineType": MACHINE, "zones": ZONES, **pool}], compactor=compactor)
    results, items = alone(data)
    priced = report.summarize(results)["prices"]["pools"][POOL]
    assert (priced["perHour"], priced["source"], priced["asOf"]) == (price, source, None)
    assert items["ca-alone"]["costPerDay"] == pytest.approx(node_hours(results.strategies[0], 600) * price, abs=0.005)


@pytest.mark.parametrize(
    ("pool", "why"),
    [
        pytest.param(
            {"machineType": "z9-unknown-4", "allocatable": {"cpu": "3920m", "memory": "12Gi"}},
            "z9-unknown-4 (on-demand) in europe-west1 is not in the price table",
            id="unknown-machine-type",
        ),
        pytest.param({"zones": ["mars-north1-a"]}, "in mars-north1 is not in the price table", id="unknown-region"),
        pytest.param(
            {"zones": ["europe-west1-b", "us-central1-a"]},
            "its zones are in 2 regions (europe-west1, us-central1)",
            id="zones-in-two-regions",
        ),
    ],
)
def test_a_pool_without_a_price_makes_every_cost_null_and_a_warning_names_it(pool: dict[str, Any], why: str) -> None:
    data = steady_day(pools=[{"name": POOL, "machineType": MACHINE, "zones": ZONES, **pool}], hours=1, stepSeconds=300)
    results = runner.run(setup_from(data), strategies=("ca-alone", "node-compactor"))
    summary = report.summarize(results)
    assert [item["costPerDay"] for item in summary["strategies"]] == [None, None, None]
    assert results.lower_bound_cost is None
    [warning] = summary["warnings"]
    assert warning.startswith(f"pool {POOL} has no price (") and why in warning
    assert "costPerDay is null for every strategy" in warning
    table = report.to_table(results)
    assert f"warning: pool {POOL} has no price" in table
    assert summary["strategies"][0]["nodeHours"] > 0, "node-hours are still counted"


def test_the_lower_bounds_cost_is_at_most_every_strategys() -> None:
    pools = [{"name": POOL, "machineType": MACHINE, "zones": ZONES, "minNodes": 1}]
    results = runner.run(setup_from(scenario_data(hours=2, pools=pools)))
    items = report.summarize(results)["strategies"]
    bound = items[-1]
    assert bound["name"] == report.LOWER_BOUND and bound["costPerDay"] is not None
    assert all(item["costPerDay"] is not None and bound["costPerDay"] <= item["costPerDay"] for item in items[:-1])
    assert ON_DEMAND is not None
    assert bound["costPerDay"] <= bound["nodeHours"] / 2 * 24 * ON_DEMAND + 0.01, "fractional: at most the node bound"


@pytest.mark.parametrize(
    ("workload", "spot_pool", "cheapest"),
    [
        pytest.param({}, {}, "spot", id="unpinned-pods-count-in-the-cheaper-spot-pool"),
        pytest.param({"pool": "on-demand"}, {}, "on-demand", id="pods-pinned-by-their-node-selector-stay"),
        pytest.param(
            {},
            {"taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]},
            "on-demand",
            id="a-taint-they-do-not-tolerate-keeps-them-out",
        ),
    ],
)
def test_the_cost_lower_bound_counts_pods_in_the_cheapest_pool_that_may_hold_them(
    workload: dict[str, Any], spot_pool: dict[str, Any], cheapest: str
) -> None:
    pools = [
        {"name": "on-demand", "machineType": MACHINE, "zones": ZONES, "minNodes": 0, "initialNodes": 3},
        {"name": "spot", "machineType": MACHINE, "zones": ZONES, "minNodes": 0, "spot": True, **spot_pool},
    ]
    deployments = [{"name": "web", "requests": {"cpu": "1", "memory": "1Gi"}, "replicas": 10, **workload}]
    compactor = {"nodePools": {name: {"enabled": False} for name in ("on-demand", "spot")}}
    data = steady_day(pools=pools, deployments=deployments, compactor=compactor, hours=1)
    results = runner.run(setup_from(data), strategies=("ca-alone",))
    assert ON_DEMAND is not None and SPOT is not None
    room = quantity.millis(setup_from(data).pools[0].allocatable["cpu"])  # no DaemonSets: all of allocatable
    nodes = 10 * 1000 / room
    assert results.lower_bound_cost is not None
    price = SPOT if cheapest == "spot" else ON_DEMAND
    assert results.lower_bound_cost[0] == pytest.approx(nodes * price)


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        pytest.param({"pricePerHour": 0}, "pools.0.pricePerHour: Input should be greater than 0", id="a-zero-price"),
        pytest.param(
            {"spot": True, "labels": {pricing.SPOT_LABEL: "false"}},
            f"pools.0: spot is true but labels set {pricing.SPOT_LABEL} to 'false'",
            id="spot-against-its-label",
        ),
    ],
)
def test_a_bad_price_or_spot_key_is_a_bad_scenario(pool: dict[str, Any], message: str) -> None:
    data = steady_day(pools=[{"name": POOL, "machineType": MACHINE, "zones": ZONES, **pool}])
    with pytest.raises(BadInputError) as raised:
        setup_from(data)
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_the_json_gives_every_strategy_a_cost_per_day_and_the_table_a_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(orjson.dumps(steady_day(hours=1)))
    assert cli.main(["simulate", "--scenario", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    one_pool = runner.applicable(setup_from(steady_day(hours=1)))  # no gke-class-priorities on one pool
    assert [item["name"] for item in data["strategies"]] == [*one_pool, report.LOWER_BOUND]
    assert all(isinstance(item["costPerDay"], float) for item in data["strategies"])
    assert data["prices"]["currency"] == "USD"
    assert set(data["prices"]["pools"][POOL]) == {"perHour", "spot", "region", "source", "asOf", "problem"}
    assert data["prices"]["pools"][POOL]["region"] == REGION
    assert data["warnings"] == []
    assert cli.main(["simulate", "--scenario", str(path)]) == 0
    table = capsys.readouterr().out
    assert table_columns(table)[1:3] == ["COST/DAY", "VS BEST NATIVE"], "every node priced: money comes first"
    assert data["comparedBy"] == "costPerDay"
    assert "COST/DAY: USD per 24 hours at each pool's node price (list prices as of " in table
