"""The shipped scenarios (examples/scenarios/), each simulated for its whole day at most once per test session.

A day of every scenario takes minutes: the tests that need one (`test_lower_bound`'s every-step cost bound,
`test_recorded`'s outputs) share the runs through `results`, so a session pays for each scenario once.
`recordable` is `simulate --json`'s output without the wall-clock figures, the form kept in `recorded/`.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import orjson

from compactor.simulation import report, runner, scenario
from compactor.simulation.runner import Results

REPO = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO / "examples" / "scenarios"
RECORDED_DIR = Path(__file__).resolve().parent / "recorded"
# A configuration file beside the scenarios (`simulate --config`), not a scenario.
CONFIGURATIONS = sorted(path for path in SCENARIO_DIR.glob("*.json") if path.name.startswith("config-"))
SCENARIOS = sorted(path for path in SCENARIO_DIR.glob("*.json") if path not in CONFIGURATIONS)
# What depends on the machine and its load, not on the model: dropped before outputs are compared.
WALL_CLOCK = "seconds"


@functools.cache
def results(path: Path) -> Results:
    """A day of `path` with every strategy it has, computed once per process, its strategies in as many worker
    processes as the machine lends this one (the results are those of one process: `test_workers`)."""
    return runner.run(scenario.load(str(path)), jobs=len(os.sched_getaffinity(0)))


def recordable(results: Results) -> bytes:
    """`simulate --json`'s bytes for `results` without the wall-clock fields (the run's and each strategy's), the
    scenario's file named as the repository names it, wherever the checkout is."""
    data: dict[str, Any] = json.loads(report.to_json(results))
    data["scenario"]["source"] = Path(data["scenario"]["source"]).relative_to(REPO).as_posix()
    return dumps(without_wall_clock(data))


def dumps(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def without_wall_clock(data: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in data.items() if key != WALL_CLOCK}
    kept["strategies"] = [
        {key: value for key, value in strategy.items() if key != WALL_CLOCK} for strategy in data["strategies"]
    ]
    return kept


def recorded_path(path: Path) -> Path:
    return RECORDED_DIR / path.name
