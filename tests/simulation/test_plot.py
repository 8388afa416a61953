"""`simulate --plot`'s figure, read from its artists: a cost panel beside the node count, one colour per decision in
every band, node-compactor's variants apart by line style, a strategy equal to another drawn once, and the
legends outside every axis."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.colors import to_rgba

from compactor.simulation import plot, report
from compactor.simulation.runner import Results, StrategyResult
from tests.simulation.builders import POOL, scenario_data, setup_from, strategy_result

PRICED_POOLS = [{"name": POOL, "machineType": "e2-standard-4", "zones": ["europe-west1-b"], "minNodes": 1}]
STEPS = 60
# Three planners held back by the same reasons, each most often by another: a colour given by each band's own
# ranking would differ from band to band.
DECISIONS: dict[str, list[str]] = {
    "node-compactor": ["no-fit"] * 30 + ["pdb"] * 20 + ["drain"] * 10,
    "node-compactor+threshold": ["pdb"] * 40 + ["cooldown"] * 15 + ["no-fit"] * 5,
    "node-compactor+priorities": ["cooldown"] * 45 + ["rollback"] * 5 + ["no-fit"] * 10,
}


def day(*strategies: StrategyResult, priced: bool = True) -> Results:
    setup = setup_from(scenario_data(pools=PRICED_POOLS) if priced else scenario_data())
    price = setup.prices[POOL].per_hour
    bound_cost = [price * 1.5] * STEPS if price is not None else None
    return Results(setup, list(strategies), [1] * STEPS, {POOL: [1] * STEPS}, lower_bound_cost=bound_cost)


def planners() -> list[StrategyResult]:
    return [
        strategy_result("ca-alone", {POOL: [4] * STEPS}),
        *(
            strategy_result(name, {POOL: [3 - index] * STEPS}, decisions=decisions)
            for index, (name, decisions) in enumerate(DECISIONS.items())
        ),
    ]


def axis_by_label(figure: Any, ylabel: str) -> Any:
    (axis,) = [axis for axis in figure.axes if axis.get_ylabel() == ylabel]
    return axis


def decision_looks(figure: Any) -> dict[str, set[tuple[tuple[float, ...], str | None]]]:
    """Each decision drawn in a band, by the (colour, hatch) of every band it is in."""
    looks: dict[str, set[tuple[tuple[float, ...], str | None]]] = {}
    for axis in figure.axes:
        for collection in axis.collections:
            label = collection.get_label()
            if label.startswith("_"):
                continue  # the lower bound's fill
            looks.setdefault(label, set()).add((tuple(collection.get_facecolor()[0]), collection.get_hatch()))
    return looks


def test_a_decision_has_one_colour_in_every_band_and_each_decision_its_own() -> None:
    figure = plot.draw(day(*planners()))
    looks = decision_looks(figure)
    assert set(looks) == {"no-fit", "pdb", "drain", "cooldown", "rollback"}
    bands = [axis for axis in figure.axes if axis.collections and axis.get_ylabel() in DECISIONS]
    assert len(bands) == 3
    assert all(len(seen) == 1 for seen in looks.values()), looks
    assert len({next(iter(seen)) for seen in looks.values()}) == len(looks), "two decisions look alike"
    # And no decision looks like a strategy's line.
    lines = {to_rgba(line.get_color()) for line in axis_by_label(figure, "nodes (billed)").lines}
    assert not lines & {next(iter(seen))[0] for seen in looks.values()}


def test_the_cost_panel_draws_each_strategys_cost_per_hour_and_the_cost_lower_bound() -> None:
    results = day(*planners())
    price = results.setup.prices[POOL].per_hour
    assert price is not None
    figure = plot.draw(results)
    cost = axis_by_label(figure, "USD per hour")
    drawn = sorted(tuple(line.get_ydata()[:STEPS]) for line in cost.lines)
    nodes = [4, 3, 2, 1]  # ca-alone, then the three planners
    expected = sorted([tuple([price * count] * STEPS) for count in nodes] + [tuple([price * 1.5] * STEPS)])
    assert drawn == pytest.approx(expected)
    # The lower bound's cost under it, shaded.
    assert cost.collections, "the cost lower bound is shaded"


def test_without_a_price_there_is_no_cost_panel() -> None:
    figure = plot.draw(day(*planners(), priced=False))
    assert not [axis for axis in figure.axes if "per hour" in axis.get_ylabel()]
    assert axis_by_label(figure, "nodes (billed)")


def test_node_compactors_variants_differ_by_line_style() -> None:
    figure = plot.draw(day(*planners()))
    styles = {
        line.get_label().split(":")[0]: line.get_linestyle()
        for line in axis_by_label(figure, "nodes (billed)").lines
        if not line.get_label().startswith("_")
    }
    variants = [styles[name] for name in DECISIONS]
    assert len(set(variants)) == len(variants)


def test_a_strategy_with_another_s_every_figure_is_drawn_once_its_label_naming_both() -> None:
    twin = strategy_result("node-compactor+surge", {POOL: [3] * STEPS}, decisions=DECISIONS["node-compactor"])
    results = day(*planners()[:2], twin)
    assert report.twins(report.summarize(results)["strategies"]) == {"node-compactor+surge": "node-compactor"}
    figure = plot.draw(results)
    labels = [line.get_label() for line in axis_by_label(figure, "nodes (billed)").lines]
    price = results.setup.prices[POOL].per_hour
    assert price is not None
    assert [label for label in labels if "node-compactor" in label] == [
        f"node-compactor = node-compactor+surge: {3 * price * 24:.2f} USD/day, 3 node-h"
    ]
    assert [
        axis.get_ylabel() for axis in figure.axes if axis.collections and "node-compactor" in axis.get_ylabel()
    ] == ["node-compactor\n= node-compactor+surge"]


def test_the_legends_stand_outside_every_axis_and_inside_the_figure() -> None:
    # Twins make the longest labels (steady-fragmented: ca-alone = ca-optimize-utilization, node-compactor =
    # node-compactor+surge).
    # A cluster of hundreds of nodes: figures as wide as a day's.
    strategies = [
        strategy_result("ca-alone", {POOL: [400] * STEPS}),
        strategy_result("ca-optimize-utilization", {POOL: [400] * STEPS}),
        strategy_result("gke-consolidation-threshold", {POOL: [350] * STEPS}),
        strategy_result("estafette", {POOL: [360] * STEPS}),
        *(
            strategy_result(name, {POOL: [300 - index] * STEPS}, decisions=decisions)
            for index, (name, decisions) in enumerate(DECISIONS.items())
        ),
        strategy_result("node-compactor+surge", {POOL: [300] * STEPS}, decisions=DECISIONS["node-compactor"]),
    ]
    figure = plot.draw(day(*strategies))
    figure.draw_without_rendering()
    assert all(axis.get_legend() is None for axis in figure.axes)
    assert len(figure.legends) == 2, "the strategies' and the decisions'"
    for legend in figure.legends:
        box = legend.get_window_extent()
        assert not any(box.overlaps(axis.get_window_extent()) for axis in figure.axes)
        assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1, "a legend cut at the figure's edge"
