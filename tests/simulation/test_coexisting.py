"""`node-compactor+threshold`'s configuration: the ComputeClass's threshold declared and the cpu limit
above it, as docs/compute-class.md tells an operator beside a ComputeClass."""

from __future__ import annotations

from compactor.settings.config import Config
from compactor.simulation import runner
from compactor.simulation.model import coexisting
from tests.simulation.builders import POOL, SCENARIO, setup_from


def test_a_limit_at_the_threshold_is_raised_above_it_and_the_threshold_declared() -> None:
    config = Config.model_validate({"nodePools": {POOL: {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75}}})
    pool = coexisting(config, {POOL: 0.75}).node_pools[POOL]
    assert (pool.cpu_limit, pool.compute_class_threshold) == (0.9, 0.75)


def test_a_limit_already_above_the_threshold_is_kept_and_other_pools_are_untouched() -> None:
    config = Config.model_validate(
        {"nodePools": {POOL: {"enabled": True, "scaleDownCPURequestRatioLimit": 0.95}, "other": {"enabled": False}}}
    )
    changed = coexisting(config, {POOL: 0.75})
    assert changed.node_pools[POOL].cpu_limit == 0.95
    assert changed.node_pools["other"] == config.node_pools["other"]


def test_a_declared_threshold_is_the_compute_class_the_native_strategy_models() -> None:
    data = {
        **SCENARIO,
        "compactor": {
            "nodePools": {
                POOL: {"enabled": True, "scaleDownCPURequestRatioLimit": 0.9, "computeClassConsolidationThreshold": 0.7}
            }
        },
    }
    assert runner.consolidation_thresholds(setup_from(data)) == {POOL: 0.7}
