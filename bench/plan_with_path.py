"""CPU time of the plan and its consolidation path, as `plan --json` makes them, on one snapshot.

    python bench/plan_with_path.py SNAPSHOT CONFIG [--runs N] [--now RFC3339]

Reads the snapshot once, then runs `core.path.plan_with_path` N times (each
builds its own view and PDB index, as the command does), with the collector
off as `plan` runs it, and prints the median and every run's process CPU
seconds, the path's steps and why it stopped. CPU time, not wall time, so a
busy machine moves it less. A benchmark run by hand, never a timed test.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/plan_with_path.py`
    sys.path.insert(0, str(REPO))

from compactor.cli import parse_now  # noqa: E402
from compactor.core import path  # noqa: E402
from compactor.kube import snapshot  # noqa: E402
from compactor.settings import config as config_source  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot")
    parser.add_argument("config")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--now", default="2026-11-21T03:00:00Z")
    args = parser.parse_args()
    cluster = snapshot.read_file(args.snapshot)
    config = config_source.validate(json.loads(Path(args.config).read_text()), source=args.config)
    now = parse_now(args.now)
    gc.collect()
    gc.freeze()
    gc.disable()
    seconds = []
    result = None
    for _ in range(args.runs):
        started = time.process_time()
        result = path.plan_with_path(cluster, config, now=now)
        seconds.append(time.process_time() - started)
    assert result is not None and result.path is not None
    runs = ", ".join(f"{value:.3f}" for value in seconds)
    print(f"plan and path: median {statistics.median(seconds):.3f} s CPU ({runs})")
    print(f"path: {len(result.path.steps)} step(s); {result.path.stopped_because}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
