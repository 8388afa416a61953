"""Every shipped scenario simulated, and the tables the README and docs/savings.md quote, by cost per day.

    python bench/savings_tables.py [--jobs 2] [--out bench/out/savings] [SCENARIO.json ...]

Runs `python -m compactor simulate --scenario FILE --json` for each scenario (all of examples/scenarios/ but the
`config-*` files when none is named), `--jobs` at a time, keeps each JSON result in `--out`, and prints one
markdown table: per scenario, the best native option and node-compactor's strategies in USD a day, each against
the best native option and the cost lower bound, with node-hours, pending pod-minutes, PDB violations and pods
with no place beside them. Run by hand when the model or the planner changes; the figures go to the docs with the
commit they were measured at.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
COMPACTOR = ("node-compactor", "node-compactor+threshold")


def simulate(scenario: Path, out: Path) -> tuple[Path, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "compactor", "simulate", "--scenario", str(scenario), "--json"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{scenario}: simulate exited {result.returncode}: {result.stderr.decode()[-2000:]}")
    target = out / f"{scenario.stem}.json"
    target.write_bytes(result.stdout)
    return target, time.monotonic() - started


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def row(document: dict[str, Any]) -> str:
    strategies = {strategy["name"]: strategy for strategy in document["strategies"]}
    best = document["bestNative"]
    native = strategies[best["name"]]
    bound = strategies.get("lower-bound", {})
    by_cost = document.get("comparedBy") == "costPerDay"
    unit = "costPerDay" if by_cost else "nodeHours"
    cells = [document["scenario"]["name"], f"{best['name']} {native[unit]}"]
    for name in COMPACTOR:
        strategy = strategies[name]
        cells.append(f"{strategy[unit]} ({_percent(strategy['vsBestNative'])})")
    compactor = strategies["node-compactor"]
    cells += [
        f"{bound.get(unit, '-')} ({_percent(compactor['aboveLowerBound'])})",
        f"{compactor['nodeHours']} / {native['nodeHours']}",
        f"{compactor['pendingPodMinutes']} / {native['pendingPodMinutes']}",
        f"{compactor['evictions']} / {native['evictions']}",
        f"{compactor['noPlace']} / {native['noPlace']}",
        f"{compactor['pdbViolations']}",
    ]
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "savings")
    parser.add_argument("--print-only", action="store_true", help="print the table from the JSON already in --out")
    args = parser.parse_args(argv)
    scenarios = args.scenarios or sorted(
        path for path in (REPO / "examples" / "scenarios").glob("*.json") if not path.name.startswith("config-")
    )
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if args.print_only:
        done = [(args.out / f"{scenario.stem}.json", 0.0) for scenario in scenarios]
    else:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = list(pool.map(lambda scenario: simulate(scenario, args.out), scenarios))
    print(
        "| scenario | best native (USD a day) | node-compactor | node-compactor+threshold | cost lower bound "
        "(node-compactor above it) | node-hours, node-compactor / best native | pending pod-minutes, "
        "node-compactor / best native | evictions, node-compactor / best native | pods with no place, "
        "node-compactor / best native | node-compactor's PDB violations |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path, _ in done:
        print(row(json.loads(path.read_text())))
    seconds = ", ".join(f"{path.stem} {elapsed:.0f} s" for path, elapsed in done)
    print(f"\n{len(done)} scenarios in {time.monotonic() - started:.0f} s wall ({seconds}); JSON in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
