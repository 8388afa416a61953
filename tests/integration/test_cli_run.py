"""`python -m compactor run`: the same run as the function, from a laptop, with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor import cli
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.integration.conftest import CONFIG, cordoned, env_with, light_cluster, run_once


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_FIRESTORE_DOCUMENT", "COMPACTOR_CONFIG", "KUBECONFIG"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "60")
    light_cluster(api)
    api.reset_counters()
    return str(api.write_kubeconfig(tmp_path / "kubeconfig"))


def config_file(tmp_path: Path, content: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content))
    return str(path)


def test_a_dry_run_prints_the_report_and_writes_nothing(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        ["run", "--kubeconfig", kubeconfig, "--config", config_file(tmp_path, CONFIG), "--dry-run", "--json"]
    )
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(out)
    assert report["decision"]["node"] == "n1" and report["dryRun"] is True
    assert report["mode"] == "dry-run"
    assert report["outcome"]["dryRun"] is True
    assert api.writes == []


def test_a_run_acts_and_shows_what_it_did_under_the_table(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", config_file(tmp_path, CONFIG)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Decision: drain n1." in out
    assert "Drain started: the node is cordoned." in out
    assert "Evicted 2 pod(s); 0 still waiting." in out
    assert cordoned(api, "n1")


def test_a_bad_config_file_exits_2_and_writes_nothing(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", config_file(tmp_path, {"nodePool": {}})])
    err = capsys.readouterr().err
    assert code == 2
    assert "nodePool: unknown key" in err
    assert api.writes == [] and api.requests == []


def test_a_held_lease_exits_1_and_writes_nothing(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime

    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    api.add(k8s.lease(holder="other-run", renew_time=renewed, duration_seconds=600))
    api.reset_counters()
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", config_file(tmp_path, CONFIG)])
    assert code == 1
    assert "other-run" in capsys.readouterr().err
    assert api.writes == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["run", "--gke", "my-cluster"], "not of the form projects/", id="bad-gke-name"),
        pytest.param(
            ["run", "--gke", "projects/p/locations/l/clusters/c", "--kubeconfig", "k"],
            "not allowed with",
            id="two-clusters",
        ),
    ],
)
def test_bad_cluster_arguments_exit_2(
    kubeconfig: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_config_wins_over_compactor_config_and_the_run_says_which_it_used(
    api: FakeApiServer,
    kubeconfig: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMPACTOR_CONFIG", json.dumps({"nodePools": {}}))
    path = config_file(tmp_path, CONFIG)
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", path, "--dry-run", "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 0
    assert report["decision"]["node"] == "n1"  # the file's pools, not the environment's empty ones
    assert report["configSource"] == f"--config {path}"
    assert f"warning: configuration from --config {path}; COMPACTOR_CONFIG is also set and not used" in captured.err


def test_a_misspelled_config_file_is_an_error_whatever_compactor_config_holds(
    api: FakeApiServer, kubeconfig: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTOR_CONFIG", json.dumps(CONFIG))
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", "confg.json"])
    assert code == 2
    assert "cannot read config file confg.json" in capsys.readouterr().err
    assert api.writes == [] and api.requests == []


def test_a_pool_that_matches_no_node_is_a_warning_in_the_run_and_its_report(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = {"nodePools": {"defualt-pool": CONFIG["nodePools"]["default-pool"]}}
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", config_file(tmp_path, typo), "--dry-run", "--json"])
    captured = capsys.readouterr()
    [warning] = json.loads(captured.out)["warnings"]
    assert code == 0
    assert "pool 'defualt-pool'" in warning and "the pools there are default-pool" in warning
    assert f"warning: {warning}" in captured.err
    assert captured.err.count("pool 'defualt-pool'") == 1, "the warning is printed once, not logged as well"


# -- each error once: stderr carries the logs too, and a problem said twice reads as two -----------------


@pytest.mark.parametrize(
    ("config", "kubeconfig_path", "message"),
    [
        pytest.param(
            None,
            "/nonexistent",
            "no configuration: pass --config FILE, or set COMPACTOR_FIRESTORE_DOCUMENT or COMPACTOR_CONFIG",
            id="no-configuration",
        ),
        pytest.param(CONFIG, "/nonexistent", "kubeconfig /nonexistent: No such file or directory", id="no-kubeconfig"),
    ],
)
def test_an_error_is_printed_once(
    kubeconfig: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    config: object,
    kubeconfig_path: str,
    message: str,
) -> None:
    with_config = ["--config", config_file(tmp_path, config)] if config is not None else []
    code = cli.main(["run", "--dry-run", "--kubeconfig", kubeconfig_path, *with_config])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (2, "", f"error: {message}\n")


def test_a_held_lease_is_said_once(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime

    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    api.add(k8s.lease(holder="other-run", renew_time=renewed, duration_seconds=600))
    code = cli.main(["run", "--kubeconfig", kubeconfig, "--config", config_file(tmp_path, CONFIG)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("other-run") == 1 and err.startswith("error: "), err


def test_a_dry_run_on_a_cluster_new_to_node_compactor_previews_the_first_drain(api: FakeApiServer) -> None:
    # The function's dry run (service.run, configuration from COMPACTOR_CONFIG): no node is marked yet.
    light_cluster(api)
    api.add(k8s.node("n1"))  # n1 unmarked
    light = {"nodePools": {"default-pool": {**CONFIG["nodePools"]["default-pool"], "neededMarkedTimeSeconds": 600}}}
    result = run_once(api, env=env_with(light), dry_run=True)
    report = result.report
    assert report["decision"]["action"] == "none"
    assert report["configSource"] == "COMPACTOR_CONFIG"
    assert report["preview"]["node"] == "n1"
    assert report["preview"]["earliest"] == "2026-11-21T12:10:00Z"
    assert "neededMarkedTimeSeconds" in report["preview"]["reason"]
    assert api.writes == []
