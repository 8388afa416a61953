"""What surgeSingleReplicas costs the planner: `planner.plan` with the option off, off with its hooks
stubbed out (the planner as it was before them), and on in every enabled pool.

    python bench/surge_cost.py [--nodes 5000] [--runs 5] [--keep]

The snapshot is `bench.synth`'s, generated into `bench/out/surge-cost/` when absent (its own
directory: other benchmarks delete theirs when they end) and deleted at the end unless `--keep`.
It lists no Deployments,
so for the "on" runs each ReplicaSet that owns pods gets a ReplicaSet record and a Deployment (named
by the ReplicaSet's name without its last `-suffix`, replicas = its pods, the default 25%/25%
strategy, settled), as a live read would find them. Runs are interleaved; each is timed in CPU
seconds of this process (a shared machine's other load stays out of it), and the best of `--runs`
is printed for each, with the median. A benchmark run by hand, never a timed test.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import orjson

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/surge_cost.py`
    sys.path.insert(0, str(REPO))

from bench import synth  # noqa: E402
from compactor.core import planner, surge  # noqa: E402
from compactor.core.model import Deployment, ReplicaSet, Snapshot  # noqa: E402
from compactor.core.timing import parse_rfc3339  # noqa: E402
from compactor.kube import snapshot as reading  # noqa: E402
from compactor.settings import config as config_module  # noqa: E402

# The planner's calls into core.surge, and what each returns when no pool opts in.
STUBS: dict[str, Callable[..., Any]] = {
    "pods_under_rules": lambda view, state: state.pods,
    "verdicts": lambda view, state: (),
    "split": lambda decision, view: decision,
    "missing_note": lambda view: None,
    "proof_state": lambda view, state: state,
}


def with_deployments(snapshot: Snapshot) -> Snapshot:
    pods_per_set = Counter(
        (pod.namespace, pod.controller_name) for pod in snapshot.pods if pod.controller_kind == "ReplicaSet"
    )
    sets = []
    deployments = []
    for (namespace, name), count in pods_per_set.items():
        assert name is not None
        owner = name.rsplit("-", 1)[0]
        sets.append(ReplicaSet(namespace, name, owner, count, count))
        deployments.append(
            Deployment(namespace, owner, count, "RollingUpdate", None, None, False, 1, 1, count, count, count)
        )
    return msgspec.structs.replace(snapshot, deployments=tuple(deployments), replica_sets=tuple(sets))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/surge_cost.py", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the generated files for the next run")
    args = parser.parse_args(argv)
    out_dir = synth.OUT_DIR / "surge-cost"
    files = synth.files_for(args.nodes, out_dir)
    generated = not files.snapshot.exists()
    if generated:
        synth.generate(synth.Scale(args.nodes, args.nodes * 30), out_dir)
    try:
        return _measure(args.nodes, args.runs, files)
    finally:
        if generated and not args.keep:
            for path in (files.snapshot, files.config, files.meta):
                path.unlink(missing_ok=True)


def _measure(nodes: int, runs: int, files: synth.Files) -> int:
    meta = orjson.loads(files.meta.read_bytes())
    now: datetime = parse_rfc3339(meta["now"])
    data = orjson.loads(files.config.read_bytes())
    off = config_module.validate(data, source="off")
    for pool in data["nodePools"].values():
        pool["surgeSingleReplicas"] = True
    on = config_module.validate(data, source="on")
    plain = reading.read_file(str(files.snapshot))
    read = with_deployments(plain)
    real = {name: getattr(surge, name) for name in STUBS}

    def hooks(stubbed: bool) -> None:
        for name in STUBS:
            setattr(surge, name, STUBS[name] if stubbed else real[name])

    cases: dict[str, tuple[Snapshot, config_module.Config, bool]] = {
        "off, hooks stubbed out": (plain, off, True),
        "off": (plain, off, False),
        "on, Deployments read": (read, on, False),
    }
    times: dict[str, list[float]] = {case: [] for case in cases}
    found: dict[str, str] = {}
    gc.collect()
    gc.freeze()
    gc.disable()
    for _ in range(runs):
        for case, (snapshot, config, stubbed) in cases.items():
            hooks(stubbed)
            started = time.process_time()  # CPU time: on a shared machine, the neighbours' load is not ours
            plan = planner.plan(snapshot, config, now=now)
            times[case].append(time.process_time() - started)
            verdicts = Counter(verdict.action for node in plan.nodes for verdict in node.single_replicas)
            found[case] = f"{plan.decision.action} {plan.decision.node}; verdicts {dict(sorted(verdicts.items()))}"
    hooks(False)
    print(f"## planner.plan at {nodes:,} nodes / {len(plain.pods):,} pods ({runs} runs each)\n")
    print("| case | best CPU s | median CPU s | decision and single-replica verdicts |")
    print("|---|---:|---:|---|")
    for case, seconds in times.items():
        print(f"| {case} | {min(seconds):.3f} | {statistics.median(seconds):.3f} | {found[case]} |")
    print(f"\n{len(read.deployments):,} Deployments, {len(read.replica_sets):,} ReplicaSets made for the 'on' case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
