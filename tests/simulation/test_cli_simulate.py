"""`python -m compactor simulate`: the table, the JSON, the plot, the progress bar and every bad-input path."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactor import cli
from tests.simulation.builders import POOL, scenario_data, table_columns

SNAPSHOT = "examples/offpeak-snapshot.json"


def scenario_file(tmp_path: Path, **changes: Any) -> str:
    path = tmp_path / "scenario.json"
    path.write_bytes(orjson.dumps(scenario_data(**changes)))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["simulate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_json_has_every_strategy_and_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--scenario", scenario_file(tmp_path), "--hours", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["schemaVersion"] == 1
    assert [s["name"] for s in data["strategies"]] == cli_names()
    fields = {"nodeHours", "vsCaAlone", "nodes", "evictions", "evictionsPerNodeRemoved", "pendingPodMinutes"}
    fields |= {"pdbViolations", "noPlace", "nodesRemoved", "series", "savingsRecovered", "heldBackBy"}
    fields |= {"aboveLowerBound", "vsBestNative", "aboveLowerBoundNodeHours", "vsBestNativeNodeHours"}
    fields |= {"vsCaAloneNodeHours", "savingsRecoveredNodeHours", "costPerDay"}
    assert all(fields <= s.keys() for s in data["strategies"][:-1])
    assert data["comparedBy"] == "nodeHours", "the test scenario's zones are in no priced region"
    assert data["bestNative"]["name"] in {"ca-alone", "ca-optimize-utilization", "gke-consolidation-threshold"}
    compactor = data["strategies"][4]
    assert compactor["name"] == "node-compactor"
    assert sum(compactor["decisionMinutes"].values()) == 60
    assert len(compactor["series"]["decisions"]) == 60
    assert len(data["strategies"][0]["series"]["nodes"]) == len(data["minutes"]) == 60
    assert "node-compactor: done" in err, "progress goes to stderr"


def test_the_table_and_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "nodes.png"
    code, out, err = run(capsys, "--scenario", scenario_file(tmp_path), "--hours", "1", "--plot", str(png))
    assert code == 0, err
    lines = out.splitlines()
    assert table_columns(out)[:3] == ["STRATEGY", "NODE-HOURS", "VS BEST NATIVE"]
    assert [line.split()[0] for line in lines if line.split() and line.split()[0] in cli_names()] == cli_names()
    assert "node-compactor: what its runs decided" in out
    assert "in minutes of the 60 measured" in " ".join(out.split())
    assert png.read_bytes().startswith(b"\x89PNG")
    assert err.endswith(f"wrote {png}\n"), "the command says where the plot is, on stderr beside the progress"


def cli_names() -> list[str]:
    return [
        "ca-alone",
        "ca-optimize-utilization",
        "gke-consolidation-threshold",
        "estafette",
        "node-compactor",
        "node-compactor+surge",
        "node-compactor+threshold",
        "lower-bound",
    ]


def test_a_kubectl_snapshot_is_a_starting_point(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--snapshot", SNAPSHOT, "--hours", "0.5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["scenario"]["startNodes"] == 14
    assert {pool["name"] for pool in data["scenario"]["pools"]} == {"default-pool", "gpu-pool"}


@pytest.mark.parametrize(
    ("changes", "messages"),
    [
        pytest.param(
            {"pools": [{"name": "default-pool", "machineTyp": "e2-standard-4", "zones": ["a"]}]},
            ["pools.0.machineType: Field required", "pools.0.machineTyp: unknown key (check its spelling)"],
            id="misspelt-key",
        ),
        pytest.param(
            {
                "deployments": [
                    {"name": "web", "pool": "nope", "requests": {"cpu": "lots", "memory": "1Gi"}, "replicas": 1}
                ]
            },
            ["deployments.0.requests: cpu: 'lots' is not a Kubernetes quantity"],
            id="bad-quantity",
        ),
        pytest.param(
            {
                "deployments": [
                    {"name": "web", "pool": "nope", "requests": {"cpu": "1", "memory": "1Gi"}, "replicas": 1}
                ]
            },
            ["deployments.0.pool: no pool named 'nope'"],
            id="unknown-pool",
        ),
        pytest.param(
            {"compactor": {"nodePools": {"default-pool": {"enabled": True}}}},
            ["scaleDownCPURequestRatioLimit is required when the pool is enabled"],
            id="bad-compactor-config",
        ),
        pytest.param({"hours": -1}, ["hours: Input should be greater than 0"], id="negative-hours"),
    ],
)
def test_a_bad_scenario_exits_2_with_one_message_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], messages: list[str]
) -> None:
    code, out, err = run(capsys, "--scenario", scenario_file(tmp_path, **changes))
    assert code == 2
    assert out == ""
    for message in messages:
        assert message in err
    assert all(line.startswith("error: ") for line in err.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--scenario", "a.json", "--snapshot", SNAPSHOT], "not allowed with argument", id="both-starts"),
        pytest.param([], "one of the arguments --scenario --snapshot is required", id="no-start"),
        pytest.param(["--snapshot", SNAPSHOT, "--hours", "0"], "--hours: 0 is not between 0 and 336", id="no-hours"),
        pytest.param(["--scenario", "missing.json"], "cannot read scenario missing.json", id="missing-file"),
    ],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2
    assert message in err


def test_a_plot_without_matplotlib_fails_before_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run(capsys, "--scenario", scenario_file(tmp_path), "--plot", str(tmp_path / "p.png"))
    assert code == 2
    assert "requirements-simulate.txt" in err
    assert "done" not in err


@pytest.mark.parametrize(
    ("where", "message"),
    [
        pytest.param("missing/nodes.png", "the directory {tmp}/missing does not exist", id="missing-directory"),
        pytest.param("file.txt/nodes.png", "{tmp}/file.txt is not a directory", id="a-file-as-directory"),
        pytest.param(".", "{tmp}/. is a directory; give a file name", id="a-directory"),
        pytest.param("/sys/nodes.png", "no file can be created in /sys", id="not-writable"),
    ],
)
def test_a_plot_path_that_cannot_be_written_exits_2_before_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, message: str
) -> None:
    if where.startswith("/sys") and not Path("/sys").is_dir():
        pytest.skip("no /sys here: no directory read-only even for root")
    (tmp_path / "file.txt").write_text("not a directory")
    path = where if where.startswith("/") else f"{tmp_path}/{where}"
    code, out, err = run(capsys, "--scenario", scenario_file(tmp_path), "--hours", "1", "--plot", path)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: --plot: {path}" if where == "." else f"error: --plot: cannot write {path}")
    assert message.format(tmp=tmp_path) in err
    assert "done" not in err and "%" not in err, "no step was simulated"
    assert not list(tmp_path.glob(".node-compactor-plot-*")), "the check leaves nothing behind"


def test_a_simulation_without_highspy_fails_before_its_first_measured_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a price there is no cost bound and no solver to miss: the pool is priced here.
    pools = [{"name": POOL, "machineType": "e2-standard-4", "zones": ["zone-a"], "minNodes": 1, "pricePerHour": 0.15}]
    monkeypatch.setitem(sys.modules, "highspy", None)
    code, out, err = run(capsys, "--scenario", scenario_file(tmp_path, pools=pools), "--hours", "1")
    assert code == 2
    assert "highspy" in err and "requirements-simulate.txt" in err
    assert out == ""


def test_a_configuration_whose_pool_the_scenario_lacks_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shipped config-cpu-limit-0.9.json names default-pool; two-pools-weekday has other pools, so the
    # configuration would compact nothing and the result reads +0.0% without a word.
    typo = tmp_path / "typo.json"
    typo.write_text(
        json.dumps({"nodePools": {"defualt-pool": {"enabled": True, "scaleDownCPURequestRatioLimit": 0.7}}})
    )
    code, _, err = run(capsys, "--scenario", scenario_file(tmp_path), "--config", str(typo), "--hours", "0.1", "--json")
    assert code == 0, err
    assert "warning: pool 'defualt-pool' of the configuration (enabled) has no node in the cluster" in err
    assert "the pools there are default-pool" in err


def test_a_replacement_target_pool_the_scenario_lacks_is_an_error_naming_it_and_the_scenarios_pools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = json.loads(Path("examples/scenarios/oversized-large-nodes.json").read_text())
    scenario["compactor"]["nodePools"]["large-pool"]["replacement"]["targetPools"] = ["smal-pool"]
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(scenario))
    code, out, err = run(capsys, "--scenario", str(path), "--hours", "0.1")
    assert (code, out) == (2, "")
    assert err == (
        "error: nodePools.large-pool.replacement.targetPools: 'smal-pool' is not a pool of the scenario; its pools "
        "are large-pool, small-pool\n"
    )


@pytest.mark.parametrize(
    ("auto_creation", "says"),
    [
        pytest.param(None, "it creates no pools (a scenario's autoCreation says which it does)", id="no-auto-creation"),
        pytest.param(
            {"machineTypes": ["e2-standard-4"], "spot": False}, "it creates pools of e2-standard-4", id="another-type"
        ),
    ],
)
def test_a_replacement_machine_type_the_scenario_creates_no_pool_for_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], auto_creation: dict[str, Any] | None, says: str
) -> None:
    scenario = json.loads(Path("examples/scenarios/oversized-large-nodes.json").read_text())
    scenario["compactor"]["nodePools"]["large-pool"]["replacement"]["machineTypes"] = ["t2d-standard-8"]
    if auto_creation is not None:
        scenario["autoCreation"] = auto_creation
    path = tmp_path / "machine.json"
    path.write_text(json.dumps(scenario))
    code, out, err = run(capsys, "--scenario", str(path), "--hours", "0.1")
    assert (code, out) == (2, "")
    assert err == (
        "error: nodePools.large-pool.replacement.machineTypes: 't2d-standard-8' is not a shape the scenario creates "
        f"a pool for; {says}\n"
    )


def test_a_snapshot_without_nodes_or_pdbs_says_which_kubectl_command_saves_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(Path(SNAPSHOT).read_text())
    pods_only = tmp_path / "pods.json"
    pods_only.write_text(json.dumps({**document, "items": [i for i in document["items"] if i["kind"] == "Pod"]}))
    code, _, err = run(capsys, "--snapshot", str(pods_only), "--hours", "0.1")
    assert code == 2
    assert "holds no Node objects" in err and "kubectl get nodes,pods,poddisruptionbudgets -A -o json" in err
    no_pdbs = tmp_path / "no-pdbs.json"
    no_pdbs.write_text(
        json.dumps({**document, "items": [i for i in document["items"] if i["kind"] != "PodDisruptionBudget"]})
    )
    code, _, err = run(capsys, "--snapshot", str(no_pdbs), "--hours", "0.1", "--json")
    assert code == 0, err
    assert f"warning: {no_pdbs} holds no PodDisruptionBudget" in err


def test_a_colour_means_one_thing_in_every_panel() -> None:
    from compactor.simulation import plot

    strategies = set(plot.COLORS.values())
    held = ["pool", "marked-recently", "no-fit", "pdb", "trigger", "cooldown", "window", "min-nodes"]
    styles = plot.decision_styles(["drain", "continue-drain", "rollback", *held])
    # A decision is no strategy's colour, nor the night plateau's; every decision looks different from every other.
    assert all(styles[kind][0] not in strategies | {plot.PLATEAU_COLOR} for kind in styles)
    assert len(set(styles.values())) == len(styles)
    assert plot.PLATEAU_COLOR not in strategies


def test_no_fit_names_the_pods_it_waits_on(capsys: pytest.CaptureFixture[str]) -> None:
    # The shipped offpeak cluster: after the first drain the autoscaler removes gke-...-8c1f-3pzx itself, and
    # data/postgres-0 (its volume in europe-west1-b) then fits on no other node, which `plan`'s path could not
    # know (its caveat names 3pzx: tests/unit/test_path.py). The simulation says which pod it waited on.
    code, out, err = run(capsys, "--snapshot", SNAPSHOT, "--config", "examples/config.json", "--hours", "1", "--json")
    assert code == 0, err
    (compactor,) = [s for s in json.loads(out)["strategies"] if s["name"] == "node-compactor"]
    held = {entry["pod"]: entry for entry in compactor["noFitPods"]}
    assert "another zone than its volume" in held["data/postgres-0"]["why"]
    assert 0 < held["data/postgres-0"]["runs"] <= compactor["decisionMinutes"]["no-fit"] / 5
    assert not any(
        s.get("noFitPods") for s in json.loads(out)["strategies"] if not s["name"].startswith("node-compactor")
    )
    code, out, err = run(capsys, "--snapshot", SNAPSHOT, "--config", "examples/config.json", "--hours", "1")
    assert "no-fit waited most on" in out and "data/postgres-0 in " in out
