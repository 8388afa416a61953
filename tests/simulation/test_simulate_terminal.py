"""`simulate` for a person at a terminal: a table within 120 columns (every column with --wide), progress
that a log can read, and a --help that says what each strategy is."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactor import cli
from compactor.simulation import progress, report, runner, scenario
from compactor.simulation.runner import Results, StrategyResult
from tests.simulation.builders import POOL, START, scenario_data, setup_from, strategy_result, table_columns

# Where every node has a price, the table leads with money, node-hours beside; without, with node-hours.
PRICED_COLUMNS = ["STRATEGY", "COST/DAY", "VS BEST NATIVE", "ABOVE BOUND", "NODE-HOURS", "EVICTIONS", "NO PLACE"]
PRICED_COLUMNS += ["PENDING POD-MIN", "REPLACEMENTS MADE/USED"]
KEY_COLUMNS = ["STRATEGY", "NODE-HOURS", "VS BEST NATIVE", "ABOVE BOUND", "COST/DAY", "EVICTIONS", "NO PLACE"]
KEY_COLUMNS += ["PENDING POD-MIN", "REPLACEMENTS MADE/USED"]
WIDE_ONLY = ["VS CA ALONE", "RECOVERED", "NODES MIN-MAX", "NIGHT GAP", "REMOVED", "PER NODE", "PDB VIOLATIONS"]
WIDE_ONLY += ["NO READY POD-S"]
PRICED_WIDE_ONLY = [*WIDE_ONLY, "NODE-HOURS VS NATIVE", "NODE-HOURS ABOVE BOUND"]
PRICED_POOLS = [{"name": "default-pool", "machineType": "e2-standard-4", "zones": ["europe-west1-b"], "minNodes": 1}]
# The builders' scenario has one pool: no gke-class-priorities there (`runner.applicable`).
ROWS = [
    *(name for name in runner.STRATEGIES if name not in (runner.CLASS_PRIORITIES, runner.BESIDE_PRIORITIES)),
    report.LOWER_BOUND,
]


def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, priced: bool = False) -> str:
    path = tmp_path / "scenario.json"
    path.write_bytes(orjson.dumps(scenario_data(pools=PRICED_POOLS) if priced else scenario_data()))
    code = cli.main(["simulate", "--scenario", str(path), "--hours", "1", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def columns(table: str) -> list[str]:
    return table_columns(table)


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    setup = scenario.with_hours(setup_from(scenario_data()), 0.5)
    return report.summarize(runner.run(setup, strategies=("ca-alone", "node-compactor")))


# -- the table -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("priced", "key"),
    [
        pytest.param(True, PRICED_COLUMNS, id="money-first-where-every-node-has-a-price"),
        pytest.param(False, KEY_COLUMNS, id="node-hours-first-without"),
    ],
)
def test_the_default_table_fits_120_columns_with_the_columns_to_compare_strategies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], priced: bool, key: list[str]
) -> None:
    table = simulate(tmp_path, capsys, priced=priced)
    assert max(len(line) for line in table.splitlines()) <= 120
    assert columns(table) == key
    assert [line.split()[0] for line in table.splitlines() if line.split() and line.split()[0] in ROWS] == ROWS
    assert "--wide" in table, "the table says where the other columns are"


@pytest.mark.parametrize(
    ("priced", "key", "wide_only"),
    [
        pytest.param(True, PRICED_COLUMNS, PRICED_WIDE_ONLY, id="with-node-hours-comparisons-beside-money"),
        pytest.param(False, KEY_COLUMNS, WIDE_ONLY, id="in-node-hours"),
    ],
)
def test_wide_shows_every_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], priced: bool, key: list[str], wide_only: list[str]
) -> None:
    table = simulate(tmp_path, capsys, "--wide", priced=priced)
    assert set(columns(table)) == set(key + wide_only)
    assert columns(table)[: len(key)] == key
    assert "NO READY POD-S: seconds workloads spent with no Ready pod" in " ".join(table.split())


def test_a_pdb_violation_is_named_under_the_default_table_though_its_column_is_wides(summary: dict[str, Any]) -> None:
    data = {**summary}
    data["strategies"] = [
        {**item, "pdbViolations": 3} if item["name"] == "ca-alone" else item for item in summary["strategies"]
    ]
    assert "PDB VIOLATIONS" not in columns(report.table(data))
    assert "PDB VIOLATIONS (--wide): ca-alone 3." in report.table(data)


def test_json_is_the_same_with_or_without_wide(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = orjson.loads(simulate(tmp_path, capsys, "--json"))
    wide = orjson.loads(simulate(tmp_path, capsys, "--json", "--wide"))
    for data in (plain, wide):
        data.pop("seconds")
        for strategy in data["strategies"]:
            strategy.pop("seconds", None)
    assert plain == wide


def test_long_warnings_failures_and_meanings_wrap_within_120_columns(summary: dict[str, Any]) -> None:
    warning = "pool " + ", ".join(f"pool-{index}" for index in range(40)) + " has no price"
    failure = "the API server said " + "no " * 80
    data = {**summary, "warnings": [warning]}
    data["strategies"] = [
        {**item, "failures": [failure]} if item["name"] == "node-compactor" else item for item in data["strategies"]
    ]
    table = report.table(data)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 120
    # Wrapped, not cut: the words read on, the lines after the first indented.
    assert " ".join(line.strip() for line in table.split("warning: ")[1].splitlines()[:4]).startswith(warning)
    assert all(line.startswith("  ") for line in table.split("warning: ")[1].splitlines()[1:3])
    assert "node-compactor: 1 failed run(s), first: the API server said no no" in table


def day_of(*strategies: StrategyResult) -> Results:
    """A priced cluster's results for these strategies, the lower bound one node all along."""
    setup = setup_from(scenario_data(pools=PRICED_POOLS))
    steps = len(strategies[0].series.nodes)
    price = setup.prices[POOL].per_hour
    assert price is not None
    return Results(setup, list(strategies), [1] * steps, {POOL: [1] * steps}, lower_bound_cost=[price] * steps)


DECIDED: list[str | None] = ["drain", "no-fit", "no-fit", "pdb"] * 15  # an hour of minute steps


def row(table: str, name: str) -> str:
    (line,) = [line for line in table.splitlines() if line.startswith(name + " ")]
    return line


def test_the_default_table_shows_the_replacements_a_planner_made_and_those_used() -> None:
    data = report.summarize(
        day_of(
            strategy_result("ca-alone", {POOL: [3] * 60}),
            strategy_result(
                "node-compactor",
                {POOL: [2] * 60},
                decisions=DECIDED,
                summary={"placeholdersCreated": 4},
                preempted_placeholders=3,
            ),
        )
    )
    items = {item["name"]: item for item in data["strategies"]}
    assert items["node-compactor"]["replacements"] == {"made": 4, "used": 3, "started": []}
    assert items["ca-alone"]["replacements"] is None, "no planner: nothing to replace with"
    table = report.table(data)
    assert table_columns(table)[-1] == "REPLACEMENTS MADE/USED"
    assert row(table, "node-compactor").endswith("  4 / 3")
    assert row(table, "ca-alone").endswith("  -")
    notes = " ".join(table.split())
    assert "REPLACEMENTS MADE/USED: new nodes node replacement asked for (placeholders created)" in notes


def test_a_strategy_with_every_figure_of_another_is_one_line_that_says_so() -> None:
    # node-compactor+surge where no pool surges: node-compactor minute for minute, its evictions its own.
    data = report.summarize(
        day_of(
            strategy_result("ca-alone", {POOL: [3] * 60}),
            strategy_result("node-compactor", {POOL: [2] * 60}, decisions=DECIDED, evicted=5),
            strategy_result("node-compactor+surge", {POOL: [2] * 60}, decisions=DECIDED, evicted=5),
            strategy_result("node-compactor+threshold", {POOL: [2] * 60}, decisions=DECIDED, evicted=6),
        )
    )
    assert report.twins(data["strategies"]) == {"node-compactor+surge": "node-compactor"}
    table = report.table(data)
    assert re.fullmatch(r"node-compactor\+surge +same figures as node-compactor", row(table, "node-compactor+surge"))
    assert row(table, "node-compactor+threshold").split()[5] == "6", "one eviction more: a line of its own"
    # One section of decisions for the two, naming both; none repeated word for word.
    assert table.count("what its runs decided") == 2
    assert not any(line.startswith("node-compactor+surge:") for line in table.splitlines())
    assert "node-compactor: what its runs decided (node-compactor+surge's too: the same figures)" in " ".join(
        table.split()
    )


def test_oversized_large_nodes_fits_120_columns_with_cost_pending_pod_minutes_and_replacements(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A quarter of an hour (after the scenario's warm-up) keeps the test short; a day's wider figures below.
    code = cli.main(["simulate", "--scenario", "examples/scenarios/oversized-large-nodes.json", "--hours", "0.25"])
    table = capsys.readouterr().out
    assert code == 0
    assert max(len(line) for line in table.splitlines()) <= 120
    assert table_columns(table) == PRICED_COLUMNS
    assert row(table, "node-compactor").endswith("0 / 0")


def test_a_days_widest_figures_still_fit_120_columns() -> None:
    # Ten times the widest figures of docs/savings.md's thirteen scenarios (cost per day, evictions, pods with no
    # place, pending pod-minutes), under the longest strategy names.
    names = list(runner.STRATEGIES)
    data = report.summarize(
        day_of(
            *(strategy_result(name, {POOL: [2 + index] * 60}, decisions=DECIDED) for index, name in enumerate(names))
        )
    )
    for item in data["strategies"]:
        item.update(costPerDay=3155.6, nodeHours=8830.0, evictions=11560, noPlace=4780, pendingPodMinutes=20170)
        item["vsBestNative"] = item["aboveLowerBound"] = 12.345
        item["replacements"] = {"made": 120, "used": 120}
    table = report.table(data)
    assert max(len(line) for line in table.splitlines()) <= 120
    assert table_columns(table) == PRICED_COLUMNS
    figures = ["3155.60", "+1234.5%", "+1234.5%", "8830.0", "11560", "4780", "20170", "120", "/", "120"]
    assert row(table, "node-compactor+priorities").split()[1:] == figures


# -- progress --------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def plain_bar(clock: Clock) -> tuple[progress.Bar, io.StringIO]:
    stream = io.StringIO()  # not a terminal: a log, a CI job, a pipe
    return progress.Bar(stream, start=START, hours=24, warmup_hours=6, clock=clock), stream


def test_without_a_terminal_progress_is_a_plain_line_at_most_every_five_seconds() -> None:
    clock = Clock()
    bar, stream = plain_bar(clock)
    for second in range(13):  # an update every second, 1% further each time
        clock.seconds = 1000.0 + second
        bar.update("node-compactor", second / 100)
    bar.close()
    assert stream.getvalue().splitlines() == [
        "node-compactor: 5%, 1.2 h of 24 h simulated (2026-11-20 13:12 UTC), about 1 min 35 s left",
        "node-compactor: 10%, 2.4 h of 24 h simulated (2026-11-20 14:24 UTC), about 1 min 30 s left",
    ]


def test_strategies_under_way_at_once_each_get_their_own_estimate_and_the_run_one_in_all() -> None:
    clock = Clock()
    stream = io.StringIO()
    bar = progress.Bar(
        stream, start=START, hours=24, strategies=("ca-alone", "estafette", "node-compactor"), clock=clock
    )
    bar.update("ca-alone", 0.0)
    bar.update("estafette", 0.0)
    clock.seconds += 10
    bar.update("ca-alone", 0.5)  # 10 s for half: 10 s left
    bar.update("estafette", 0.2)  # 10 s for a fifth: 40 s left
    clock.seconds += 10
    bar.update("ca-alone", 1.0)
    bar.update("node-compactor", 0.0)
    clock.seconds += 10
    bar.update("node-compactor", 0.1)
    # The run: a sixth of its strategies in 10 s (50 s more), then (1 + 0.2 + 0.1) / 3 in 30 s (39 s more).
    assert stream.getvalue().splitlines() == [
        "ca-alone: 50%, 12.0 h of 24 h simulated (2026-11-21 00:00 UTC), about 10 s left; all 3 strategies: 16%,"
        " about 50 s left",
        "ca-alone: done",
        "node-compactor: 10%, 2.4 h of 24 h simulated (2026-11-20 14:24 UTC), about 1 min 30 s left; all 3"
        " strategies: 43%, about 39 s left",
    ]


def test_durations_read_as_seconds_minutes_or_hours() -> None:
    assert [progress.duration(s) for s in (0.4, 59, 60, 200, 3599, 3600, 3900)] == [
        "0 s",
        "59 s",
        "1 min 00 s",
        "3 min 20 s",
        "59 min 59 s",
        "1 h 00 min",
        "1 h 05 min",
    ]


def test_without_a_terminal_the_warm_up_counts_its_own_hours_before_the_start() -> None:
    clock = Clock()
    bar, stream = plain_bar(clock)
    clock.seconds += 5
    bar.update("warm-up", 0.5)
    assert stream.getvalue() == "warm-up: 50%, 3.0 h of 6 h simulated (2026-11-20 09:00 UTC)\n"


def test_the_first_strategy_ends_the_warm_up() -> None:
    clock = Clock()
    bar, stream = plain_bar(clock)
    bar.update("warm-up", 0.0)
    bar.update("warm-up", 0.99)
    bar.update("ca-alone", 0.0)
    bar.update("node-compactor", 0.0)
    assert stream.getvalue() == "warm-up: done\n"


def test_without_a_terminal_each_strategy_says_when_it_is_done_however_soon() -> None:
    clock = Clock()
    bar, stream = plain_bar(clock)
    for name in ("ca-alone", "node-compactor"):
        bar.update(name, 0.5)
        bar.update(name, 1.0)
    bar.close()
    assert stream.getvalue() == "ca-alone: done\nnode-compactor: done\n"


def test_a_short_run_without_a_terminal_writes_no_percent() -> None:
    clock = Clock()
    bar, stream = plain_bar(clock)
    clock.seconds += 4.9
    bar.update("ca-alone", 0.9)
    assert stream.getvalue() == ""


def test_on_a_terminal_progress_is_a_bar_redrawn_in_place() -> None:
    stream = Terminal()
    bar = progress.Bar(stream, start=START, hours=24, clock=Clock())
    bar.update("ca-alone", 0.5)
    bar.update("ca-alone", 1.0)
    bar.close()
    assert stream.getvalue() == (
        f"\r{'ca-alone':<15} [{'#' * 15}{'.' * 15}]  50%\r{'ca-alone':<15} [{'#' * 30}] 100%, 0 s\n"
    )


def test_on_a_terminal_the_bars_line_up_under_the_longest_strategy_name() -> None:
    stream = Terminal()
    names = ("ca-alone", "node-compactor+priorities")
    bar = progress.Bar(stream, start=START, hours=24, strategies=names, clock=Clock())
    bar.update("ca-alone", 1.0)
    bar.update("node-compactor+priorities", 1.0)
    bar.close()
    lines = [line for line in stream.getvalue().replace("\r", "\n").splitlines() if "[" in line]
    assert len({line.index("[") for line in lines}) == 1
    assert lines[0].startswith(f"{'ca-alone':<25} [")


def test_a_run_nearly_done_says_under_a_second_left_not_about_0_s() -> None:
    assert progress._estimate(elapsed=10.0, fraction=0.99) == ", under a second left"
    assert progress._estimate(elapsed=10.0, fraction=0.5) == ", about 10 s left"


def test_on_a_terminal_strategies_under_way_at_once_share_the_line_and_each_done_keeps_its_own() -> None:
    clock = Clock()
    stream = Terminal()
    bar = progress.Bar(stream, start=START, hours=24, strategies=("ca-alone", "estafette"), clock=clock)
    bar.update("ca-alone", 0.0)
    bar.update("estafette", 0.0)
    clock.seconds += 10
    bar.update("ca-alone", 0.5)
    bar.update("ca-alone", 1.0)
    bar.close()
    drawn = stream.getvalue().split("\r")
    assert drawn[3] == "ca-alone 50%, about 10 s left | estafette 0%; all 2 strategies: 25%, about 30 s left"
    assert drawn[4].startswith(f"{'ca-alone':<15} [{'#' * 30}] 100%, 10 s   ")
    assert drawn[4].endswith("\n")
    assert drawn[5].startswith(f"{'estafette':<15} [{'.' * 30}]   0%; all 2 strategies: 50%, about 10 s left")


# -- help ------------------------------------------------------------------------------------------------


def test_help_names_every_strategy_and_what_surge_and_threshold_mean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["simulate", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()]
    assert [name for name in listed if name in ROWS] == ROWS
    assert "+surge: surgeSingleReplicas" in out
    assert "+threshold: node-compactor on gke-consolidation-threshold's cluster" in out
    assert "--wide" in out
