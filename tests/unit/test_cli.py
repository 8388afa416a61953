"""`python -m compactor plan`: the report contract, the table, and every bad-input path."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import compactor
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
    assert report["dryRun"] is True  # plan never writes


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
    columns = ["POOL", "ENABLED", "NODES", "UNDERUTILIZED", "LOWER", "BOUND", "EXCESS", "USD/H", "BOUND", "USD/H"]
    assert lines[0].split() == columns
    assert lines[1].split()[:3] == ["default-pool", "yes", "11"]
    header = next(line for line in lines if line.startswith("NODE "))
    assert header.split()[:7] == ["NODE", "POOL", "CPU", "MEM", "USD/H", "MARKED", "FOR"]
    chosen = next(line for line in lines if line.startswith("gke-shop-prod-default-pool-8c1f-7wq9"))
    assert " yes " in chosen and "50m" in chosen
    decision = next(i for i, line in enumerate(lines) if line.startswith("Decision: "))
    assert lines[decision].startswith("Decision: drain gke-shop-prod-default-pool-8c1f-7wq9.")
    assert any(line.startswith("Path if nothing changed: 3 drain(s)") for line in lines[decision:])


def write(tmp_path: Path, name: str, content: str) -> str:
    path = tmp_path / name
    path.write_text(content)
    return str(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["plan"], "--snapshot", id="no-snapshot"),
        pytest.param(["plan", "--snapshot", "missing.json"], "cannot read snapshot missing.json", id="missing-file"),
        pytest.param(
            ["plan", "--snapshot", EXAMPLE, "--now", "tomorrow"], "--now: 'tomorrow' is not an RFC 3339", id="bad-now"
        ),
        pytest.param(
            ["plan", "--snapshot", EXAMPLE, "--now", "2026-11-21T03:00:00"],
            "has no time zone (add Z for UTC: 2026-11-21T03:00:00Z)",
            id="naive-now",
        ),
        pytest.param(
            ["plan", "--snapshot", EXAMPLE, "--now", "2026-11-21Z"],
            "is not an RFC 3339 time (e.g. 2026-11-21T10:00:00Z)",
            id="date-with-a-zone",
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
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--now", NOW, "--json")
    report = json.loads(out)
    assert code == 0
    assert report["decision"]["action"] == "none"
    assert not any(pool["enabled"] for pool in report["pools"])
    # ... and says why, and how to give one, in the report and on stderr.
    [warning] = report["warnings"]
    assert warning.startswith("no configuration was given, so every pool is off: nothing is marked or drained.")
    assert "--config FILE, or set COMPACTOR_CONFIG (JSON text) or COMPACTOR_FIRESTORE_DOCUMENT" in warning
    assert err == f"warning: {warning}\n"


def test_the_table_of_a_plan_without_a_config_says_so_on_its_first_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMPACTOR_CONFIG", raising=False)
    monkeypatch.delenv("COMPACTOR_FIRESTORE_DOCUMENT", raising=False)
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--now", NOW)
    assert code == 0
    first = out.split("\n\n", 1)[0].replace("\n  ", " ")
    assert first.startswith("No configuration was given, so every pool is off: nothing is marked or drained.")
    assert "Give one with --config FILE" in first


def test_a_plan_with_a_config_has_no_note_above_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", CONFIG, "--now", NOW)
    assert code == 0
    assert out.startswith("POOL ")


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


# -- the operator's path (issue 26) ---------------------------------------------------------


def fresh_snapshot(tmp_path: Path, *, keep: tuple[str, ...] = ("Node", "Pod", "PodDisruptionBudget")) -> str:
    """The example as a cluster new to node-compactor: no marks; only the kinds in `keep`."""
    document = json.loads(Path(EXAMPLE).read_text())
    document["items"] = [item for item in document["items"] if item["kind"] in keep]
    for item in document["items"]:
        (item["metadata"].get("annotations") or {}).pop("node-compactor.dev/underutilized-since", None)
    return write(tmp_path, "fresh.json", json.dumps(document))


def test_no_subcommand_prints_the_usage_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: ")
    for command in ("plan", "run", "simulate", "hpa", "cleanup"):
        assert command in err


@pytest.mark.parametrize(
    ("given", "planned_at"),
    [
        pytest.param("2026-11-21", "2026-11-21T00:00:00Z", id="a-date-is-midnight-utc"),
        pytest.param("2026-11-21T03:00:00Z", "2026-11-21T03:00:00Z", id="the-hint-for-a-time-without-zone"),
    ],
)
def test_now_takes_a_date_or_the_time_the_hint_suggests(
    capsys: pytest.CaptureFixture[str], given: str, planned_at: str
) -> None:
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", CONFIG, "--now", given, "--json")
    assert code == 0, err
    assert json.loads(out)["now"] == planned_at


def test_a_yaml_config_is_told_that_json_is_expected(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write(tmp_path, "config.yaml", "nodePools:\n  default-pool:\n    enabled: true\n")
    code, _, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", config)
    assert code == 2
    assert "this looks like YAML; the configuration is JSON" in err


def test_config_wins_over_compactor_config_and_the_report_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMPACTOR_FIRESTORE_DOCUMENT", raising=False)
    monkeypatch.setenv("COMPACTOR_CONFIG", '{"nodePools": {}}')
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", CONFIG, "--now", NOW, "--json")
    report = json.loads(out)
    assert code == 0
    assert report["decision"]["action"] == "drain"  # examples/config.json's pools, not the empty ones
    assert report["configSource"] == f"--config {CONFIG}"
    notice = f"configuration from --config {CONFIG}; COMPACTOR_CONFIG is also set and not used"
    assert notice in report["warnings"]
    assert f"warning: {notice}" in err


def test_a_missing_config_file_is_an_error_even_when_compactor_config_is_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTOR_CONFIG", '{"nodePools": {}}')
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", "examples/confg.json")
    assert (code, out) == (2, "")
    assert "cannot read config file examples/confg.json" in err


def test_without_config_the_environment_is_the_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMPACTOR_FIRESTORE_DOCUMENT", raising=False)
    monkeypatch.setenv("COMPACTOR_CONFIG", Path(CONFIG).read_text())
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--now", NOW, "--json")
    assert code == 0, err
    assert json.loads(out)["configSource"] == "COMPACTOR_CONFIG"
    assert "warning" not in err


def test_a_pool_name_that_matches_nothing_is_a_warning_naming_the_pools_that_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = json.loads(Path(CONFIG).read_text())
    config["nodePools"]["defualt-pool"] = config["nodePools"].pop("default-pool")
    path = write(tmp_path, "typo.json", json.dumps(config))
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", path, "--now", NOW, "--json")
    assert code == 0
    [warning] = json.loads(out)["warnings"]
    assert "pool 'defualt-pool' of the configuration (enabled) has no node in the cluster" in warning
    assert "the pools there are default-pool, gpu-pool" in warning
    assert err == f"warning: {warning}\n"


def test_a_pool_the_configuration_does_not_name_says_so_in_the_table_and_the_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = json.loads(Path(CONFIG).read_text())
    config["nodePools"]["defualt-pool"] = config["nodePools"].pop("default-pool")
    config["nodePools"]["gpu-pool"]["enabled"] = False
    path = write(tmp_path, "typo.json", json.dumps(config))
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", path, "--now", NOW)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:3]}
    assert "  no (not in the configuration)  " in rows["default-pool"]
    assert rows["gpu-pool"].split()[1:3] == ["no", "3"], "a pool switched off by name is plainly off"
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", path, "--now", NOW, "--json")
    pools = {pool["name"]: (pool["enabled"], pool["configured"]) for pool in json.loads(out)["pools"]}
    assert pools == {"default-pool": (False, False), "gpu-pool": (False, True)}


def test_a_replacement_target_pool_the_cluster_lacks_is_a_warning_naming_the_pools_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = json.loads(Path(CONFIG).read_text())
    config["nodePools"]["default-pool"]["replacement"] = {"enabled": True, "targetPools": ["cheap-pool"]}
    path = write(tmp_path, "target.json", json.dumps(config))
    code, out, err = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", path, "--now", NOW, "--json")
    assert code == 0, err
    [warning] = json.loads(out)["warnings"]
    assert warning.startswith("target pool cheap-pool has no node in the cluster")
    assert "so it is not used: the pools there are default-pool, gpu-pool (check its spelling" in warning
    assert err == f"warning: {warning}\n"


def test_nodes_without_the_pool_label_are_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = json.loads(Path(CONFIG).read_text())
    config["poolLabel"] = "example.com/pool"
    path = write(tmp_path, "label.json", json.dumps(config))
    code, out, _ = run(capsys, "plan", "--snapshot", EXAMPLE, "--config", path, "--now", NOW, "--json")
    warnings = json.loads(out)["warnings"]
    assert code == 0
    assert any("no node carries the label example.com/pool" in warning for warning in warnings)
    assert any(warning.startswith("14 node(s) have no example.com/pool label") for warning in warnings)


def test_a_snapshot_without_nodes_is_refused_naming_the_kubectl_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = fresh_snapshot(tmp_path, keep=("Pod",))
    code, out, err = run(capsys, "plan", "--snapshot", path, "--config", CONFIG)
    assert (code, out) == (2, "")
    assert "holds no Node objects" in err
    assert "kubectl get nodes,pods,poddisruptionbudgets -A -o json" in err


def test_a_snapshot_without_pdbs_is_a_warning_naming_the_kubectl_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = fresh_snapshot(tmp_path, keep=("Node", "Pod"))
    code, out, err = run(capsys, "plan", "--snapshot", path, "--config", CONFIG, "--now", NOW, "--json")
    assert code == 0
    [warning] = json.loads(out)["warnings"]
    assert "holds no PodDisruptionBudget" in warning
    assert "kubectl get nodes,pods,poddisruptionbudgets -A -o json" in warning
    assert "every pod a PodDisruptionBudget protects looks free to move" in err


def test_a_cluster_new_to_node_compactor_previews_its_first_drain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys, "plan", "--snapshot", fresh_snapshot(tmp_path), "--config", CONFIG, "--now", NOW, "--json"
    )
    report = json.loads(out)
    assert code == 0
    assert report["decision"]["action"] == "none"
    preview = report["preview"]
    assert preview["node"] == report["path"]["steps"][0]["node"]
    assert preview["pool"] == "default-pool"
    assert preview["earliest"] == "2026-11-21T03:05:00Z"  # every mark is new: neededMarkedTimeSeconds 300 from now
    assert "neededMarkedTimeSeconds" in preview["reason"]


def test_the_table_shows_the_preview(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "plan", "--snapshot", fresh_snapshot(tmp_path), "--config", CONFIG, "--now", NOW)
    assert code == 0
    assert "Preview (the first drain once the waits are over): gke-shop-prod-default-pool-" in out


def test_a_plan_that_drains_now_has_no_preview(capsys: pytest.CaptureFixture[str]) -> None:
    assert example_report(capsys)["preview"] is None


@pytest.mark.parametrize("fresh", [False, True], ids=["example", "new-cluster"])
def test_the_table_keeps_within_120_columns(capsys: pytest.CaptureFixture[str], tmp_path: Path, fresh: bool) -> None:
    snapshot = fresh_snapshot(tmp_path) if fresh else EXAMPLE
    code, out, _ = run(capsys, "plan", "--snapshot", snapshot, "--config", CONFIG, "--now", NOW)
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 120
    # Every blocker is still there, whole: a long one is on the line under its node.
    assert fresh or "fits on no other node (12 checked: 12 with too little free nvidia.com/gpu)" in out.replace(
        "\n    ", " "
    )


def test_a_gpu_pod_says_what_it_needs_and_how_many_nodes_were_checked(capsys: pytest.CaptureFixture[str]) -> None:
    report = example_report(capsys)
    blockers = [b for node in report["nodes"] for b in node["blockers"] if "nvidia.com/gpu" in b]
    assert any(
        "(cpu 2000m, memory 12288Mi, nvidia.com/gpu 1) fits on no other node (12 checked: 12 with too little free "
        "nvidia.com/gpu)" in blocker
        for blocker in blockers
    )


# -- the version --------------------------------------------------------------------------------


def test_version_prints_the_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--version")
    assert (code, err) == (0, "")
    assert out == f"node-compactor {cli.version()}\n"


def test_the_version_is_the_installed_distributions_when_there_is_one() -> None:
    def installed(name: str) -> str:
        assert name == "node-compactor"
        return "1.2.3"

    assert cli.version(installed) == "1.2.3"


def test_from_a_clone_with_nothing_installed_the_version_is_the_source_trees() -> None:
    def nothing_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    assert cli.version(nothing_installed) == compactor.__version__


def test_the_source_trees_version_is_pyprojects() -> None:
    # What a clone prints must be what `pip install .` of the same tree prints.
    assert compactor.__version__ == tomllib.loads(Path("pyproject.toml").read_text())["project"]["version"]


# -- what the report says it is -------------------------------------------------------------------


def test_a_plan_says_it_is_a_plan_that_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    report = example_report(capsys)
    assert (report["mode"], report["dryRun"]) == ("plan", True)


def test_the_report_carries_its_schema_version_first(capsys: pytest.CaptureFixture[str]) -> None:
    report = example_report(capsys)
    assert next(iter(report)) == "schemaVersion"
    assert report["schemaVersion"] == 1
