"""Every comparison `simulate` makes is in money where every node has a price: the best native strategy is the
cheapest, VS BEST NATIVE and ABOVE BOUND are by cost per day, node-hours stand beside them; without a price for
every node, every comparison falls back to node-hours and the table says so."""

from __future__ import annotations

from typing import Any

import pytest

from compactor.simulation import report, runner
from compactor.simulation.metrics import Recorder, Series
from compactor.simulation.runner import Results, StrategyResult
from tests.simulation.builders import setup_from, table_columns

ZONES = ["europe-west1-b", "europe-west1-c"]
STEPS = 60  # one hour in minute steps


def two_shapes(*, priced: bool = True) -> dict[str, Any]:
    """A small-node pool and a large-node pool, both priced (or the large one in a zone the table lacks)."""
    return {
        "name": "shapes",
        "start": "2026-11-20T00:00:00Z",
        "hours": 1,
        "warmupHours": 0,
        "stepSeconds": 60,
        "pools": [
            {"name": "small", "machineType": "e2-standard-4", "zones": ZONES},
            {"name": "large", "machineType": "e2-standard-16", "zones": ZONES if priced else ["zone-a"]},
        ],
        "deployments": [{"name": "web", "requests": {"cpu": "1", "memory": "1Gi"}, "replicas": 10}],
    }


def ran(name: str, small: int, large: int) -> StrategyResult:
    """A strategy that kept `small` small nodes and `large` large ones all hour."""
    series = Series(
        minutes=[float(minute) for minute in range(STEPS)],
        nodes=[small + large] * STEPS,
        nodes_by_pool={"small": [small] * STEPS, "large": [large] * STEPS},
    )
    return StrategyResult(name, Recorder(), series, {}, [], 0.0)


def results(*, priced: bool = True) -> Results:
    setup = setup_from(two_shapes(priced=priced))
    strategies = [
        ran("ca-alone", 10, 0),  # the most node-hours (10), and the cheapest: 10 x e2-standard-4
        ran("ca-optimize-utilization", 0, 3),  # the fewest node-hours (3), and dearer: 3 x e2-standard-16
        ran("node-compactor", 8, 0),
    ]
    small = setup.prices["small"].per_hour
    # As the runner measures it: the cost lower bound (six small nodes' worth) only when every pool has a price.
    bound_cost = [small * 6] * STEPS if priced and small is not None else None
    return Results(setup, strategies, [2] * STEPS, {"small": [2] * STEPS}, lower_bound_cost=bound_cost)


def prices_per_hour(data: Results) -> tuple[float, float]:
    small, large = data.setup.prices["small"].per_hour, data.setup.prices["large"].per_hour
    assert small is not None and large is not None
    return small, large


def test_the_best_native_strategy_is_the_cheapest_even_with_the_most_node_hours() -> None:
    data = results()
    small, large = prices_per_hour(data)
    assert 10 * small < 3 * large, "the scenario's premise: ten small nodes cost less than three large ones"
    summary = report.summarize(data)
    assert summary["comparedBy"] == "costPerDay"
    assert summary["bestNative"] == {
        "name": "ca-alone",
        "nodeHours": 10.0,
        "costPerDay": pytest.approx(10 * small * 24, abs=0.01),
    }
    assert report.best_native(data) is data.strategies[0]


def test_vs_best_native_and_above_bound_are_by_cost_with_node_hours_beside() -> None:
    data = results()
    small, large = prices_per_hour(data)
    items = {item["name"]: item for item in report.summarize(data)["strategies"]}
    dearer = items["ca-optimize-utilization"]
    assert dearer["vsBestNative"] == pytest.approx(3 * large / (10 * small) - 1, abs=1e-4)
    assert dearer["vsBestNative"] > 0, "fewer node-hours, but dearer than the best native strategy"
    assert dearer["vsBestNativeNodeHours"] == pytest.approx(3 / 10 - 1, abs=1e-4)
    assert dearer["aboveLowerBound"] == pytest.approx(3 * large / (6 * small) - 1, abs=1e-4)
    assert dearer["aboveLowerBoundNodeHours"] == pytest.approx(3 / 2 - 1, abs=1e-4)
    assert dearer["vsCaAlone"] == dearer["vsBestNative"]
    compactor = items["node-compactor"]
    assert compactor["vsBestNative"] == pytest.approx(8 / 10 - 1, abs=1e-4)
    assert compactor["savingsRecovered"] == pytest.approx((10 - 8) / (10 - 6), abs=1e-3)
    assert compactor["savingsRecoveredNodeHours"] == pytest.approx((10 - 8) / (10 - 2), abs=1e-3)
    bound = items[report.LOWER_BOUND]
    assert (bound["aboveLowerBound"], bound["vsBestNative"]) == (0.0, pytest.approx(6 / 10 - 1, abs=1e-4))


def test_without_a_price_for_every_node_every_comparison_is_in_node_hours_and_the_table_says_so() -> None:
    data = results(priced=False)
    summary = report.summarize(data)
    assert summary["comparedBy"] == "nodeHours"
    assert summary["bestNative"]["name"] == "ca-optimize-utilization"
    items = {item["name"]: item for item in summary["strategies"]}
    assert (
        items["ca-alone"]["vsBestNative"]
        == items["ca-alone"]["vsBestNativeNodeHours"]
        == pytest.approx(10 / 3 - 1, abs=1e-4)
    )
    assert items["ca-alone"]["aboveLowerBound"] == pytest.approx(10 / 2 - 1, abs=1e-4)
    table = report.table(summary)
    assert "Every comparison is in node-hours: not every node has a price" in " ".join(table.split())
    assert table_columns(table)[:3] == ["STRATEGY", "NODE-HOURS", "VS BEST NATIVE"]


def test_with_prices_the_table_leads_with_cost_and_the_cheapest_native_strategy() -> None:
    table = report.table(report.summarize(results()))
    lines = table.splitlines()
    assert table_columns(table)[:5] == [
        "STRATEGY",
        "COST/DAY",
        "VS BEST NATIVE",
        "ABOVE BOUND",
        "NODE-HOURS",
    ]
    rows = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in runner.STRATEGIES}
    assert rows["ca-alone"][2] == "-", "ca-alone is the best native strategy: nothing to compare it with"
    assert rows["ca-optimize-utilization"][2].startswith("+")
    assert "cost per day against the cheapest native strategy (ca-alone;" in " ".join(table.split())
