"""Every shipped scenario's `simulate --json` for its whole day, against the output recorded in `recorded/`.

The outputs are compared byte for byte once the wall-clock fields are dropped; where bytes differ, the test
tells a change in the order of a floating-point sum (every number within `FLOAT_TOLERANCE`) from a change in
the figures, and only the latter fails. A change meant to move the figures re-records them
(`python -m tests.simulation.record`, docs/testing.md); a change meant to make the simulator faster must not.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.simulation import shipped

FLOAT_TOLERANCE = 1e-4  # 0.01%


def differences(recorded: Any, now: Any, where: str = "") -> list[str]:
    """Where `now` differs from `recorded` beyond a float's `FLOAT_TOLERANCE`, as JSON paths."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        if recorded.keys() != now.keys():
            return [f"{where or '.'}: keys {sorted(recorded.keys() ^ now.keys())} in one only"]
        return [found for key in recorded for found in differences(recorded[key], now[key], f"{where}.{key}")]
    if isinstance(recorded, list) and isinstance(now, list):
        if len(recorded) != len(now):
            return [f"{where}: {len(recorded)} items recorded, {len(now)} now"]
        return [
            found
            for index, pair in enumerate(zip(recorded, now, strict=True))
            for found in differences(*pair, f"{where}[{index}]")
        ]
    if isinstance(recorded, float) and isinstance(now, float | int) and not isinstance(now, bool):
        if math.isclose(recorded, now, rel_tol=FLOAT_TOLERANCE):
            return []
    elif type(recorded) is type(now) and recorded == now:
        return []
    return [f"{where}: recorded {recorded!r}, now {now!r}"]


def test_numbers_within_the_tolerance_are_the_same_figures_and_others_are_not() -> None:
    assert differences({"a": [1.0, 2]}, {"a": [1.00009, 2]}) == []
    assert differences({"a": [1.0, 2]}, {"a": [1.0002, 3]}) == [
        ".a[0]: recorded 1.0, now 1.0002",
        ".a[1]: recorded 2, now 3",
    ]
    assert differences({"a": 1}, {"b": 1}) == [".: keys ['a', 'b'] in one only"]


@pytest.mark.parametrize("path", shipped.SCENARIOS, ids=[path.stem for path in shipped.SCENARIOS])
def test_a_shipped_scenario_gives_the_recorded_figures(path: Path) -> None:
    recorded_file = shipped.recorded_path(path)
    assert recorded_file.exists(), f"no recorded output for {path.name}: python -m tests.simulation.record {path.stem}"
    recorded = recorded_file.read_bytes()
    now = shipped.recordable(shipped.results(path))
    if now == recorded:
        return
    changed = differences(json.loads(recorded), json.loads(now))
    assert not changed, (
        f"{path.name} no longer gives its recorded figures ({len(changed)} differences; if the change is meant to "
        f"move them: python -m tests.simulation.record {path.stem}): {changed[:10]}"
    )


def test_every_recorded_output_has_its_scenario() -> None:
    stems = {path.stem for path in shipped.SCENARIOS}
    assert sorted(path.stem for path in shipped.RECORDED_DIR.glob("*.json") if path.stem not in stems) == []
