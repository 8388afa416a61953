"""What the operator's checks cost at scale: the configuration check and the preview of the first drain.

    python bench/preview_cost.py [--nodes 5000] [--runs 5]

On `bench.synth`'s cluster (generated into `bench/out/` when absent; 30 pods a
node), as the snapshot comes and with every `underutilized-since` mark taken
off (a cluster new to node-compactor, where the plan drains nothing and the
preview is computed), prints the median CPU seconds of
`core.configcheck.for_snapshot`, of `core.preview.from_path` alone, and of
`core.path.plan_with_path` with the preview and with `preview.from_path`
replaced by a function that returns None. CPU time, not wall time, so a busy
machine moves it less. A benchmark run by hand, never a timed test.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec import structs

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/preview_cost.py`
    sys.path.insert(0, str(REPO))

from bench import synth  # noqa: E402
from compactor.core import configcheck, path, preview, timing  # noqa: E402
from compactor.core.model import UNDERUTILIZED_SINCE, Snapshot  # noqa: E402
from compactor.kube import snapshot  # noqa: E402
from compactor.settings import config as config_source  # noqa: E402


def cpu_median(work: Callable[[], Any], runs: int) -> float:
    seconds = []
    for _ in range(runs):
        started = time.process_time()
        work()
        seconds.append(time.process_time() - started)
    return statistics.median(seconds)


def unmarked(cluster: Snapshot) -> Snapshot:
    nodes = tuple(
        structs.replace(node, annotations={k: v for k, v in node.annotations.items() if k != UNDERUTILIZED_SINCE})
        for node in cluster.nodes
    )
    return structs.replace(cluster, nodes=nodes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    files = synth.files_for(args.nodes)
    if not files.snapshot.exists():
        synth.generate(synth.Scale(args.nodes, args.nodes * 30))
    gc.disable()  # as `plan` runs
    marked = snapshot.read_file(str(files.snapshot))
    config = config_source.load({}, config_file=str(files.config))
    now = timing.parse_rfc3339(synth.NOW_TEXT)
    real = preview.from_path
    print(f"{args.nodes:,} nodes / {len(marked.pods):,} pods, median of {args.runs} runs (CPU seconds)")
    print(f"configcheck.for_snapshot: {cpu_median(lambda: configcheck.for_snapshot(marked, config), args.runs):.4f}")
    for name, cluster in (("as generated", marked), ("no marks", unmarked(marked))):
        first = path.plan_with_path(cluster, config, now=now)
        assert first.path is not None  # plan_with_path always makes one
        found = first.path
        alone = cpu_median(lambda: real(cluster, config, first, found, now=now), args.runs)  # noqa: B023
        with_preview = cpu_median(lambda: path.plan_with_path(cluster, config, now=now), args.runs)  # noqa: B023
        preview.from_path = lambda *_, **__: None
        try:
            without = cpu_median(lambda: path.plan_with_path(cluster, config, now=now), args.runs)  # noqa: B023
        finally:
            preview.from_path = real
        shown = first.preview.node if first.preview is not None else None
        print(
            f"{name}: decision {first.decision.action}, preview {shown}; preview.from_path {alone:.4f}; "
            f"plan_with_path {with_preview:.3f} with the preview, {without:.3f} without"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
