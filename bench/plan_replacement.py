"""What node replacement adds to a plan: time and peak memory at 5,000 nodes, with it off and on.

    python bench/plan_replacement.py bench/out/snapshot-5000.json bench/out/config-5000.json [--repeat 3]

Generate the snapshot first with `python bench/plan_scale.py --sizes 5000 --keep`. Each case runs in a
fresh process (the snapshot read first, then the peak RSS reset, so the peak is the plan's), the
median of `--repeat` plans, GC off as `plan` runs it:

- `off`: the configuration as it is;
- `on`: every enabled pool replaces into every other pool (`replacement.enabled`, each pool priced
  by the built-in table from its nodes' labels), every node carrying an old `replaceable-since` (rule 10's
  wait over, so busy nodes are candidates and the search proves in this plan);
- `off, no deletion` and `on, no deletion`: every ordinary fit proof made to fail after running in
  full, so no node can simply be deleted and, with replacement on, the search runs every time: the
  worst case of both.

A benchmark run by hand, never a timed test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/plan_replacement.py`
    sys.path.insert(0, str(REPO))

CASES = ("off", "on", "off, no deletion", "on, no deletion")


def _status_mib(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _with_replacement(data: dict[str, Any]) -> dict[str, Any]:
    pools = data["nodePools"]
    names = list(pools)
    for name, settings in pools.items():
        if settings.get("enabled"):
            settings["replacement"] = {"enabled": True, "targetPools": [other for other in names if other != name]}
    return data


def child(snapshot_path: str, config_path: str, case: str, repeat: int) -> dict[str, Any]:
    import gc

    import msgspec

    from compactor import cli
    from compactor.core import planner, proof
    from compactor.core.model import REPLACEABLE_SINCE
    from compactor.core.replacement import search
    from compactor.kube import snapshot
    from compactor.settings import config as config_module

    data = json.loads(Path(config_path).read_text())
    if case.startswith("on"):
        data = _with_replacement(data)
    config = config_module.validate(data, source=config_path)
    cluster = snapshot.read_file(snapshot_path)
    if case.startswith("on"):
        # Every node as if it had carried `replaceable-since` for rule 10's wait: the search proves what it finds
        # in this very plan, its worst case (otherwise a first plan only writes the annotations).
        waited = {REPLACEABLE_SINCE: "2026-11-20T00:00:00Z"}
        nodes = tuple(
            msgspec.structs.replace(node, annotations={**node.annotations, **waited}) for node in cluster.nodes
        )
        cluster = msgspec.structs.replace(cluster, nodes=nodes)
    now = cli.parse_now("2026-11-21T03:00:00Z")
    if case.endswith("no deletion"):
        original = proof.Memo.prove  # the planner's proofs of deletions, not the replacements'

        def failing(memo: proof.Memo, *positional: Any, **named: Any) -> str:
            original(memo, *positional, **named)  # the whole proof's cost, then no fit
            return "made to fail"

        proof.Memo.prove = failing  # type: ignore[method-assign,assignment]
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    before = _status_mib("VmRSS")
    times = []
    plan = None
    for _ in range(repeat):
        gc.disable()
        started = time.perf_counter()
        plan = planner.plan(cluster, config, now=now)
        times.append(time.perf_counter() - started)
        gc.enable()
    assert plan is not None
    return {
        "case": case,
        "plan_s": statistics.median(times),
        "runs_s": [round(value, 3) for value in times],
        "peak_mib": _status_mib("VmHWM") - before,
        "decision": plan.decision.action,
        "replacement": plan.replacement.reason if plan.replacement else None,
        "max_proofs": search.MAX_PROOFS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot")
    parser.add_argument("config")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.snapshot, args.config, args.child, args.repeat)))
        return
    print("| case | plan s (median) | runs s | plan peak MiB | decision | replacement |")
    print("|---|---:|---|---:|---|---|")
    for case in CASES:
        command = [sys.executable, __file__, args.snapshot, args.config, "--repeat", str(args.repeat), "--child", case]
        found = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        print(
            f"| {case} | {found['plan_s']:.3f} | {', '.join(str(t) for t in found['runs_s'])} | "
            f"{found['peak_mib']:.0f} | {found['decision']} | {found['replacement'] or '-'} |"
        )


if __name__ == "__main__":
    main()
