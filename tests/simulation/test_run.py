"""Whole simulations: node-compactor's promises hold, and the same scenario gives the same answer."""

from __future__ import annotations

import time

import pytest

from compactor.simulation import runner
from compactor.simulation.runner import Results, StrategyResult
from tests.simulation.builders import scenario_data, setup_from


@pytest.fixture(scope="module")
def evening() -> Results:
    started = time.monotonic()
    results = runner.run(setup_from(scenario_data(hours=2)))
    assert time.monotonic() - started < 10
    return results


def strategy(results: Results, name: str) -> StrategyResult:
    return next(s for s in results.strategies if s.name == name)


def node_hours(result: StrategyResult) -> float:
    return sum(result.series.nodes) / 60


def test_node_compactor_drains_nodes_in_the_short_simulation(evening: Results) -> None:
    compactor = strategy(evening, "node-compactor")
    assert compactor.summary.get("drainsCompleted", 0) >= 1
    assert compactor.recorder.evicted["node-compactor"] > 0
    assert not compactor.failures


def test_node_compactor_never_violates_a_pdb_nor_leaves_a_pod_without_a_place(evening: Results) -> None:
    recorder = strategy(evening, "node-compactor").recorder
    assert recorder.pdb_violations["node-compactor"] == 0
    assert recorder.no_place["node-compactor"] == 0
    assert recorder.deleted["node-compactor"] == 0


def test_node_compactor_never_ends_with_more_node_hours_than_the_autoscaler_alone(evening: Results) -> None:
    assert node_hours(strategy(evening, "node-compactor")) <= node_hours(strategy(evening, "ca-alone"))


def test_estafette_deletes_pods_where_node_compactor_evicts_them(evening: Results) -> None:
    recorder = strategy(evening, "estafette").recorder
    assert recorder.deleted["estafette"] > 0
    assert recorder.evicted["estafette"] == 0


def test_the_lower_bound_is_never_above_any_strategy(evening: Results) -> None:
    for result in evening.strategies:
        assert all(bound <= nodes for bound, nodes in zip(evening.lower_bound, result.series.nodes, strict=True))


def test_the_same_scenario_gives_the_same_results() -> None:
    def fingerprint() -> list[tuple[str, list[int], int, int]]:
        results = runner.run(setup_from(scenario_data(hours=1)))
        return [
            (s.name, s.series.nodes, s.recorder.disruptions(), int(s.recorder.pending_pod_seconds))
            for s in results.strategies
        ]

    assert fingerprint() == fingerprint()
