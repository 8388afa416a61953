"""A plan's worst case: every fit proof, ordinary and with a reservation, runs in full and fails.

    python bench/plan_worst_case.py bench/out/snapshot-5000.json bench/out/config-5000.json --now 2026-11-21T03:00:00Z

Generate the snapshot first with `python bench/plan_scale.py --sizes 5000 --keep`. Prints the
planning time (snapshot read excluded, GC off as `plan` runs it) without reservations and with
them, each the median of `--repeat` runs, and how many proofs each made.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/plan_worst_case.py`
    sys.path.insert(0, str(REPO))

from compactor import cli  # noqa: E402
from compactor.core import planner, proof  # noqa: E402
from compactor.kube import snapshot  # noqa: E402
from compactor.settings import config as config_module  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot")
    parser.add_argument("config")
    parser.add_argument("--now", default="2026-11-21T03:00:00Z")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with open(args.config, encoding="utf-8") as file:
        config = config_module.validate(json.load(file), source=args.config)
    now = cli.parse_now(args.now)
    cluster = snapshot.read_file(args.snapshot)
    original = proof.Memo.prove  # the planner's proofs of deletions, not the replacements'
    proofs = [0]

    def failing(memo: proof.Memo, *positional: Any, **named: Any) -> str:
        proofs[0] += 1
        original(memo, *positional, **named)  # the whole proof's cost, then no fit
        return "made to fail"

    proof.Memo.prove = failing  # type: ignore[method-assign,assignment]
    for reserving in (False, True):
        chosen = config.model_copy(update={"reserve_room_for_drains": reserving})
        times = []
        for _ in range(args.repeat):
            proofs[0] = 0
            gc.disable()
            started = time.perf_counter()
            planner.plan(cluster, chosen, now=now)
            times.append(time.perf_counter() - started)
            gc.enable()
        label = "with reservations" if reserving else "without reservations"
        print(f"{label:22s} plan {statistics.median(times):.2f} s (median of {args.repeat}), {proofs[0]} proofs")


if __name__ == "__main__":
    main()
