"""Which LP solver the simulator's cost lower bound uses: import time, solve time and install size, HiGHS two ways.

    python bench/bound_solvers.py [--groups 30] [--pools 3] [--zones 3] [--solves 200]

Builds one LP shaped like `compactor.simulation.bound`'s (groups of pods spread over pools split by zone: a
share of each group per place, fractional nodes per place, cpu, memory and pod rows per place, one group's
pods a node each, a pool's minNodes over its zones) from a seeded random cluster, then solves it `--solves`
times with HiGHS through `highspy` (its own Python API) and through SciPy's `linprog(method="highs")`,
whichever is installed. Import time is a fresh interpreter's, best of five; install size is the package's
directory (and the libraries it ships beside it). Both give the same optimum. The numbers behind
docs/dependencies.md's line on highspy; run by hand.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `python bench/bound_solvers.py`
    sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Lp:
    """min cost.x subject to rows (lower <= A.x <= upper, A as sparse rows) and column bounds."""

    cost: list[float]
    col_lower: list[float]
    col_upper: list[float]
    rows: list[dict[int, float]]
    row_lower: list[float]
    row_upper: list[float]


def representative(groups: int, pools: int, zones: int, seed: int = 1) -> Lp:
    rng = random.Random(seed)
    places = [(p, z) for p in range(pools) for z in range(zones)]
    room = {p: (rng.choice([3900, 7900, 15900]), rng.choice([13, 28, 60]) * 2**30) for p in range(pools)}
    price = {p: rng.uniform(0.1, 0.8) for p in range(pools)}
    cost: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    rows: list[dict[int, float]] = []
    row_lower: list[float] = []
    row_upper: list[float] = []
    nodes = {}
    for place in places:
        nodes[place] = len(cost)
        cost.append(price[place[0]])
        lower.append(0.0)
        upper.append(float("inf"))
    capacity = {place: ({nodes[place]: -room[place[0]][0]}, {nodes[place]: -room[place[0]][1]}) for place in places}
    pod_rows = {place: {nodes[place]: -110.0} for place in places}
    for _ in range(groups):
        pods = rng.randint(1, 40)
        cpu, memory = rng.randint(50, 2000) * pods, rng.randint(64, 8192) * 2**20 * pods
        allowed = [place for place in places if rng.random() < 0.7] or places[:1]
        share = {}
        for place in allowed:
            share[place] = len(cost)
            cost.append(0.0)
            lower.append(0.0)
            upper.append(1.0)
            capacity[place][0][share[place]] = cpu
            capacity[place][1][share[place]] = memory
            pod_rows[place][share[place]] = pods
        rows.append({column: 1.0 for column in share.values()})
        row_lower.append(1.0)
        row_upper.append(1.0)
        if rng.random() < 0.2:  # one pod a node
            for place, column in share.items():
                rows.append({column: float(pods), nodes[place]: -1.0})
                row_lower.append(-float("inf"))
                row_upper.append(0.0)
    for place in places:
        for row in (*capacity[place], pod_rows[place]):
            rows.append({column: float(value) for column, value in row.items()})
            row_lower.append(-float("inf"))
            row_upper.append(0.0)
    for p in range(pools):
        rows.append({nodes[(p, z)]: 1.0 for z in range(zones)})
        row_lower.append(float(rng.randint(0, 3)))
        row_upper.append(float("inf"))
    return Lp(cost, lower, upper, rows, row_lower, row_upper)


def solve_highspy(lp: Lp) -> float:
    import highspy

    from compactor.simulation import bound  # the program built as the simulator builds it

    highs = highspy.Highs()  # type: ignore[no-untyped-call]  # its __init__ is unannotated
    highs.setOptionValue("output_flag", False)
    model = bound.highs_lp(lp.cost, lp.col_lower, lp.col_upper, lp.rows, lp.row_lower, lp.row_upper)
    highs.passModel(model)
    highs.run()
    assert highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return float(highs.getInfo().objective_function_value)


def solve_scipy(lp: Lp) -> float:
    from scipy.optimize import linprog
    from scipy.sparse import csr_array

    inf = float("inf")
    ub_rows, ub, eq_rows, eq = [], [], [], []
    for row, low, high in zip(lp.rows, lp.row_lower, lp.row_upper, strict=True):
        if low == high:
            eq_rows.append(row)
            eq.append(high)
            continue
        if high < inf:
            ub_rows.append(row)
            ub.append(high)
        if low > -inf:
            ub_rows.append({column: -value for column, value in row.items()})
            ub.append(-low)

    def matrix(rows: list[dict[int, float]]) -> csr_array:
        data, indices, pointers = list[float](), list[int](), [0]
        for row in rows:
            indices.extend(row)
            data.extend(row.values())
            pointers.append(len(indices))
        return csr_array((data, indices, pointers), shape=(len(rows), len(lp.cost)))

    result = linprog(
        lp.cost,
        A_ub=matrix(ub_rows),
        b_ub=ub,
        A_eq=matrix(eq_rows),
        b_eq=eq,
        bounds=list(zip(lp.col_lower, [None if u == inf else u for u in lp.col_upper], strict=True)),
        method="highs",
    )
    assert result.status == 0, result.message
    return float(result.fun)


SOLVERS = {"highspy": ("highspy", solve_highspy), "scipy": ("scipy.optimize", solve_scipy)}


def import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)]
    runs += [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(4)
    ]
    return min(runs)


def installed_mib(package: str) -> float:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent
    paths = [folder, *folder.parent.glob(f"{package}.libs")]
    size = sum(path.stat().st_size for top in paths for path in top.rglob("*") if path.is_file())
    return size / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=30)
    parser.add_argument("--pools", type=int, default=3)
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--solves", type=int, default=200)
    args = parser.parse_args()
    lp = representative(args.groups, args.pools, args.zones)
    print(f"LP: {len(lp.cost)} columns, {len(lp.rows)} rows")
    for name, (module, solve) in SOLVERS.items():
        if importlib.util.find_spec(name) is None:
            print(f"{name}: not installed")
            continue
        imported = import_seconds(module)
        objective = solve(lp)  # the first solve pays for the import
        started = time.perf_counter()
        for _ in range(args.solves):
            solve(lp)
        each = (time.perf_counter() - started) / args.solves
        print(
            f"{name}: import {imported * 1000:.0f} ms, solve {each * 1000:.2f} ms, "
            f"installed {installed_mib(name):.1f} MiB, optimum {objective:.6f}"
        )


if __name__ == "__main__":
    main()
