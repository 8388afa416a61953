"""Scenario files and machine types: what the examples describe, and what a GKE node leaves to pods."""

from __future__ import annotations

from datetime import datetime

import pytest

from compactor.simulation import machines, scenario

EXAMPLES = ("examples/scenarios/diurnal-web.json", "examples/scenarios/batch-and-services.json")


@pytest.mark.parametrize("path", EXAMPLES, ids=["diurnal-web", "batch-and-services"])
def test_the_example_scenarios_load_with_their_node_compactor_configuration(path: str) -> None:
    setup = scenario.load(path)
    assert setup.workloads
    assert all(setup.config.enabled_pool(pool.name) is not None for pool in setup.pools)


def test_the_diurnal_scenario_peaks_at_midday_with_three_times_the_night_replicas() -> None:
    setup = scenario.load(EXAMPLES[0])
    frontend = next(w for w in setup.workloads if w.owner_name.startswith("frontend-"))
    noon = frontend.replicas.at(datetime.fromisoformat("2026-11-20T12:30:00+00:00"))
    night = frontend.replicas.at(datetime.fromisoformat("2026-11-21T04:00:00+00:00"))
    assert noon == 360
    assert night == 120


def test_the_batch_scenario_has_budgets_stateful_sets_and_jobs() -> None:
    setup = scenario.load(EXAMPLES[1])
    assert [w.owner_name for w in setup.workloads if w.ordinal] == ["postgres", "redis", "kafka"]
    assert len(setup.pdbs) >= 6
    assert {cron.name for cron in setup.cronjobs} == {"etl", "reports", "training"}


@pytest.mark.parametrize(
    ("machine", "cpu", "memory_gib"),
    [
        pytest.param("e2-standard-4", "3920m", 13.3, id="e2-standard-4"),
        pytest.param("e2-standard-8", "7910m", 28.3, id="e2-standard-8"),
        pytest.param("n2-highmem-8", "7910m", 58.4, id="n2-highmem-8"),
    ],
)
def test_allocatable_follows_gke_reservations(machine: str, cpu: str, memory_gib: float) -> None:
    allocatable = machines.allocatable(machine)
    assert allocatable["cpu"] == cpu
    assert int(allocatable["memory"].removesuffix("Ki")) / 2**20 == pytest.approx(memory_gib, abs=0.05)
