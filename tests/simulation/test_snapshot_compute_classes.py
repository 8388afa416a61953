"""`simulate --snapshot` with the cluster's ComputeClasses in the List (`kubectl get
nodes,pods,poddisruptionbudgets,computeclasses -A -o json`): gke-consolidation-threshold and
node-compactor+threshold model the class the snapshot's nodes carry, not one at node-compactor's limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactor.core.model import COMPUTE_CLASS_LABEL
from compactor.simulation import kubectl, runner
from compactor.simulation.model import AutoscalerSettings, coexisting

SNAPSHOT = Path("examples/offpeak-snapshot.json")
POOL_LABEL = "cloud.google.com/gke-nodepool"


def with_class(tmp_path: Path, threshold: object, pool: str = "default-pool", delay: object = None) -> str:
    """The example snapshot with a ComputeClass `consolidate` on every node of `pool` (and its
    `consolidationDelayMinutes` when `delay` is given)."""
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text())
    for item in data["items"]:
        labels = item.get("metadata", {}).get("labels") or {}
        if item.get("kind") == "Node" and labels.get(POOL_LABEL) == pool:
            labels[COMPUTE_CLASS_LABEL] = "consolidate"
    data["items"].append(
        {
            "apiVersion": "cloud.google.com/v1",
            "kind": "ComputeClass",
            "metadata": {"name": "consolidate"},
            "spec": {
                "autoscalingPolicy": {
                    "consolidationThreshold": threshold,
                    **({"consolidationDelayMinutes": delay} if delay is not None else {}),
                }
            },
        }
    )
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_the_snapshots_class_is_the_threshold_the_native_strategies_model(tmp_path: Path) -> None:
    setup = kubectl.load(with_class(tmp_path, 60), config=None, hours=0.1)
    assert setup.compute_classes == {"default-pool": 0.6}
    thresholds = runner.consolidation_thresholds(setup)
    assert thresholds["default-pool"] == 0.6, "the class read, not the pool's 0.75 limit"
    raised = coexisting(setup.config, thresholds).node_pools["default-pool"]
    assert (raised.compute_class_threshold, raised.cpu_limit) == (0.6, 0.75), "0.75 is already above 0.6"


def test_a_class_at_the_limit_raises_node_compactors_limit_above_it(tmp_path: Path) -> None:
    setup = kubectl.load(with_class(tmp_path, 80), config=None, hours=0.1)
    raised = coexisting(setup.config, runner.consolidation_thresholds(setup)).node_pools["default-pool"]
    assert (raised.compute_class_threshold, raised.cpu_limit) == (0.8, 0.95)


def test_a_snapshot_without_classes_models_one_at_the_limit_as_before(tmp_path: Path) -> None:
    setup = kubectl.load(with_class(tmp_path, "high"), config=None, hours=0.1)
    assert setup.compute_classes == {}
    assert runner.consolidation_thresholds(setup)["default-pool"] == 0.75


def autoscaler_of(path: str, strategy: str) -> AutoscalerSettings:
    setup = kubectl.load(path, config=None, hours=0.1)
    cluster = runner.build(setup)
    runner._strategy(strategy, setup, cluster)
    return cluster.autoscaler.settings


def test_the_classes_delay_is_the_unneeded_time_the_native_strategies_model(tmp_path: Path) -> None:
    """consolidationDelayMinutes 3: the autoscaler removes the class's nodes after 3 minutes unneeded, not
    the balanced profile's 10, in both strategies that model the class; other pools keep 10."""
    path = with_class(tmp_path, 60, delay=3)
    for strategy in ("gke-consolidation-threshold", "node-compactor+threshold"):
        settings = autoscaler_of(path, strategy)
        assert settings.pool_unneeded_seconds["default-pool"] == 180, strategy
        assert settings.unneeded_seconds == 600
    assert kubectl.load(path, config=None, hours=0.1).compute_class_delays == {"default-pool": 180}


@pytest.mark.parametrize("delay", [0, 1441, "5", 2.5, True])
def test_a_delay_outside_the_crds_range_or_type_is_the_profiles_unneeded_time(tmp_path: Path, delay: object) -> None:
    path = with_class(tmp_path, 60, delay=delay)
    assert kubectl.load(path, config=None, hours=0.1).compute_class_delays == {}
    assert autoscaler_of(path, "gke-consolidation-threshold").pool_unneeded_seconds["default-pool"] == 600
