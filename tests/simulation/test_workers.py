"""Strategies in worker processes (`simulate --jobs`): the same results as one after the other, progress
relayed from every worker, and a worker's failure raised in the parent instead of waited on."""

from __future__ import annotations

import json
import os
import time

import pytest

from compactor import cli
from compactor.errors import WorkerError
from compactor.simulation import runner, workers
from tests.simulation import shipped

# Priced pools of three shapes (the cost bound's linear program), gke-class-priorities among its strategies.
SCENARIO = "examples/scenarios/oversized-large-nodes.json"


def simulate_json(capsys: pytest.CaptureFixture[str], jobs: int) -> dict[str, object]:
    code = cli.main(["simulate", "--scenario", SCENARIO, "--hours", "0.5", "--json", "--jobs", str(jobs)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return shipped.without_wall_clock(json.loads(captured.out))


def test_strategies_in_two_processes_give_the_json_of_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    alone = simulate_json(capsys, 1)
    parallel = simulate_json(capsys, 2)
    assert alone["comparedBy"] == "costPerDay", "the cost bound comes back from the worker that measured it"
    assert "gke-class-priorities" in json.dumps(alone["strategies"])
    assert parallel == alone


def test_values_come_back_in_the_order_of_the_tasks() -> None:
    tasks = [(name, lambda _, name=name: name.upper()) for name in ("slow", "quick", "quicker")]
    assert workers.run_all(tasks, jobs=2) == ["SLOW", "QUICK", "QUICKER"]


def test_every_workers_progress_reaches_the_parent() -> None:
    heard: list[tuple[str, float]] = []

    def task(name: str) -> workers.Task[int]:
        def measure(progress: workers.Progress) -> int:
            progress(name, 0.5)
            progress(name, 1.0)
            return os.getpid()

        return measure

    pids = workers.run_all([("a", task("a")), ("b", task("b"))], jobs=2, progress=lambda *at: heard.append(at))
    assert os.getpid() not in pids, "each task ran in a worker"
    assert sorted(heard) == [("a", 0.5), ("a", 1.0), ("b", 0.5), ("b", 1.0)]


def test_an_error_in_a_worker_is_raised_in_the_parent_with_the_workers_traceback() -> None:
    def fails(_: workers.Progress) -> None:
        raise ValueError("no such pool: spot")

    with pytest.raises(ValueError, match="no such pool: spot") as raised:
        workers.run_all([("fine", lambda _: 1), ("node-compactor", fails)], jobs=2)
    assert "in the worker simulating node-compactor" in raised.value.__notes__[0]


def test_a_worker_that_dies_without_a_word_is_an_error_naming_its_strategy() -> None:
    def dies(_: workers.Progress) -> None:
        os._exit(9)

    with pytest.raises(WorkerError, match=r"simulating estafette: .* exit code 9"):
        workers.run_all([("estafette", dies), ("ca-alone", lambda _: 1)], jobs=2)


def test_an_error_that_cannot_be_sent_back_is_sent_as_its_text() -> None:
    class UnpicklableError(Exception):
        def __reduce__(self) -> str | tuple[object, ...]:
            raise TypeError("not today")

    def fails(_: workers.Progress) -> None:
        raise UnpicklableError("lost in transit")

    with pytest.raises(WorkerError, match="UnpicklableError: lost in transit"):
        workers.run_all([("node-compactor", fails)], jobs=1)


def test_jobs_below_one_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["simulate", "--scenario", SCENARIO, "--jobs", "0"])
    assert code == 2
    assert "--jobs: 0 is not 1 or more" in capsys.readouterr().err


def test_every_strategy_has_a_place_in_the_order_workers_start_them() -> None:
    assert sorted(runner.COST_ORDER) == sorted(runner.STRATEGIES)


def test_the_dearest_strategies_start_first_and_come_back_in_their_order() -> None:
    names = ("ca-optimize-utilization", "estafette", "node-compactor", "node-compactor+priorities")
    # One worker at a time, so each task's start time gives the order they were started in.
    tasks = [(name, lambda _, name=name: (name, time.monotonic())) for name in names]
    values = runner._run_forked(tasks, 1, None)
    assert [name for name, _ in values] == list(names)
    started = [name for name, _ in sorted(values, key=lambda value: value[1])]
    assert started == ["node-compactor+priorities", "node-compactor", "estafette", "ca-optimize-utilization"]
