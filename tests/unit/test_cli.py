"""`python -m compactor plan`: the report contract, the table, and every bad-input path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compactor import cli

EXAMPLE = "examples/offpeak-snapshot.json"
CONFIG = "examples/config.json"
NOW = "2026-11-21T03:00:00Z"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def example_report(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", CONFIG, "--now", NOW, "--json")
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def test_the_json_report_has_every_field_the_contract_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    report = example_report(capsys)
    assert {"decision", "marks", "nodes", "pools", "dryRun"} <= report.keys()
    assert {"action", "node", "pool", "reason"} <= report["decision"].keys()
    assert set(report["marks"]) >= {"add", "remove"}
    node_fields = {"name", "pool", "cpuRatio", "memoryRatio", "underutilized", "markedSince", "candidate", "blockers"}
    assert all(node_fields <= node.keys() for node in report["nodes"])
    pool_fields = {"name", "enabled", "nodes", "underutilized", "lowerBoundNodes", "excessNodes"}
    assert all(pool_fields <= pool.keys() for pool in report["pools"])
    assert report["dryRun"] is False


def test_the_example_drains_one_node_and_shows_many_kinds_of_blocker(capsys: pytest.CaptureFixture[str]) -> None:
    report = example_report(capsys)
    decision = report["decision"]
    assert decision["action"] == "drain"
    assert decision["node"] == "gke-shop-prod-default-pool-8c1f-7wq9"
    assert decision["pool"] == "default-pool"
    assert [n["name"] for n in report["nodes"] if n["candidate"]] == [decision["node"]]
    blockers = " ".join(b for node in report["nodes"] for b in node["blockers"])
    for expected in (
        "safe-to-evict=false",
        "local storage",
        "kube-system pod without a PodDisruptionBudget",
        "cordoned by someone else",
        "scale-down-disabled",
        "nvidia.com/gpu",
        "allows no disruption",
        "neededMarkedTimeSeconds",
        "minimumNodeAgeSeconds",
        "not underutilized",
        "no controller",
    ):
        assert expected in blockers, expected
    cordoned = next(n for n in report["nodes"] if n["name"].endswith("4d2e-9hxv"))
    assert not cordoned["candidate"]


def test_ratios_are_numbers_and_marks_are_rfc3339(capsys: pytest.CaptureFixture[str]) -> None:
    report = example_report(capsys)
    chosen = next(n for n in report["nodes"] if n["candidate"])
    assert 0 < chosen["cpuRatio"] < 0.7
    assert chosen["markedSince"] == "2026-11-21T02:10:00Z"
    assert sorted(report["marks"]["add"]) == report["marks"]["add"]


def test_the_table_shows_pools_nodes_and_the_decision(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", CONFIG, "--now", NOW)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["POOL", "ENABLED", "NODES", "UNDERUTILIZED", "LOWER", "BOUND", "EXCESS"]
    assert lines[1].split()[:3] == ["default-pool", "yes", "11"]
    header = next(line for line in lines if line.startswith("NODE "))
    assert header.split()[:6] == ["NODE", "POOL", "CPU", "MEM", "MARKED", "FOR"]
    chosen = next(line for line in lines if line.startswith("gke-shop-prod-default-pool-8c1f-7wq9"))
    assert " yes " in chosen and "50m" in chosen
    decision = next(i for i, line in enumerate(lines) if line.startswith("Decision: "))
    assert lines[decision].startswith("Decision: drain gke-shop-prod-default-pool-8c1f-7wq9.")
    assert lines[decision + 1].startswith("Path if nothing changed: 3 drain(s)")


def write(tmp_path: Path, name: str, content: str) -> str:
    path = tmp_path / name
    path.write_text(content)
    return str(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([], "the following arguments are required", id="no-command"),
        pytest.param(["plan"], "--snapshot", id="no-snapshot"),
        pytest.param(["plan", "--snapshot", "missing.json"], "cannot read snapshot missing.json", id="missing-file"),
        pytest.param(
            ["plan", "--snapshot", EXAMPLE, "--now", "tomorrow"], "--now: 'tomorrow' is not an RFC 3339", id="bad-now"
        ),
        pytest.param(
            ["plan", "--snapshot", EXAMPLE, "--now", "2026-11-21T03:00:00"], "has no time zone", id="naive-now"
        ),
        pytest.param(
            ["plan", "--snapshot", EXAMPLE, "--config", "missing.json"], "cannot read config file", id="missing-config"
        ),
        pytest.param(["plan", "--snapshot", EXAMPLE, "--frobnicate"], "unrecognized arguments", id="unknown-flag"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2
    assert message in err
    assert out == ""
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("snapshot", "config", "messages"),
    [
        pytest.param("{oops", "{}", ["not valid JSON"], id="snapshot-not-json"),
        pytest.param(
            '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}, '
            '"status": {"allocatable": {"memory": "lots"}}}]}',
            "{}",
            ["Node n: status.allocatable.memory: 'lots' is not a Kubernetes quantity"],
            id="bad-quantity",
        ),
        pytest.param(
            '{"kind": "List", "items": []}',
            '{"nodePools": {"p": {"enabld": true, "minNodes": -2}}}',
            ["nodePools.p.enabld: unknown key", "nodePools.p.minNodes: Input should be greater"],
            id="two-config-problems",
        ),
        pytest.param(
            '{"kind": "List", "items": []}',
            '{"nodePools": {"p\\r\\nerror: forged": 5}}',
            ["nodePools.p\\r\\nerror: forged: Input should be a valid dictionary"],
            id="a-line-break-in-a-name",
        ),
    ],
)
def test_bad_files_exit_2_with_one_message_per_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, snapshot: str, config: str, messages: list[str]
) -> None:
    code, out, err = run(
        capsys, "plan", "--snapshot", write(tmp_path, "s.json", snapshot), "--config", write(tmp_path, "c.json", config)
    )
    assert code == 2
    assert out == ""
    for message in messages:
        assert message in err
    assert all(line.startswith("error: ") for line in err.splitlines())


def test_plan_without_a_config_reports_utilization_with_every_pool_disabled(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMPACTOR_CONFIG", raising=False)
    monkeypatch.delenv("COMPACTOR_FIRESTORE_DOCUMENT", raising=False)
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--now", NOW, "--json")
    report = json.loads(out)
    assert code == 0
    assert report["decision"]["action"] == "none"
    assert not any(pool["enabled"] for pool in report["pools"])


def test_the_module_runs_as_a_command_with_real_exit_codes(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "compactor", "plan", "--snapshot", EXAMPLE, "--config", CONFIG, "--now", NOW, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["decision"]["action"] == "drain"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactor",
            "plan",
            "--snapshot",
            EXAMPLE,
            "--config",
            write(tmp_path, "c.json", '{"dryRun": "maybe"}'),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "dryRun: Input should be a valid boolean" in bad.stderr
