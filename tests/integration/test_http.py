"""`main.compact` over HTTP: functions-framework's test client, and once through a real process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from tests.fakeapi import FakeApiServer
from tests.integration.conftest import CONFIG, cordoned, light_cluster
from tests.integration.firestore_emulator import FirestoreEmulator, firestore_emulator  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def function_env(api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeApiServer:
    """The function's environment for a local run: KUBECONFIG at the fake API server, config in the env."""
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_FIRESTORE_DOCUMENT", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("COMPACTOR_CONFIG", json.dumps(CONFIG))
    monkeypatch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "60")
    light_cluster(api)
    api.reset_counters()
    return api


@pytest.fixture
def http_client(function_env: FakeApiServer) -> Any:
    import functions_framework

    app = functions_framework.create_app(target="compact", source=str(ROOT / "main.py"))  # type: ignore[no-untyped-call]
    return app.test_client()


def test_a_dry_run_call_answers_200_with_the_report_and_writes_nothing(
    http_client: Any, function_env: FakeApiServer
) -> None:
    response = http_client.get("/?dryRun=true")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    report = response.get_json()
    assert report["decision"]["action"] == "drain"
    assert report["dryRun"] is True
    assert function_env.writes == []


@pytest.mark.parametrize(
    ("call", "body"),
    [
        pytest.param(
            {"method": "POST", "data": b"", "content_type": "application/octet-stream"}, None, id="scheduler-empty-post"
        ),
        pytest.param({"method": "POST", "json": {"dryRun": False}}, None, id="json-false"),
        pytest.param({"method": "GET", "query_string": "dryRun=FALSE"}, None, id="query-false"),
    ],
)
def test_a_scheduled_call_acts(http_client: Any, function_env: FakeApiServer, call: dict[str, Any], body: Any) -> None:
    response = http_client.open("/", **call)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["decision"]["node"] == "n1"
    assert cordoned(function_env, "n1")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param({"method": "GET", "query_string": "dry_run=true"}, "unknown parameter", id="unknown-name"),
        pytest.param({"method": "GET", "query_string": "dryRun=maybe"}, "valid boolean", id="not-a-boolean"),
        pytest.param({"method": "GET", "query_string": "dryRun=true&dryRun=false"}, "given 2 times", id="twice"),
        pytest.param({"method": "POST", "json": [True]}, "must be a JSON object", id="body-not-an-object"),
        pytest.param(
            {"method": "POST", "data": b"dryRun", "content_type": "text/plain"},
            "must be a JSON object",
            id="body-not-json",
        ),
        pytest.param({"method": "POST", "json": {"dryRun": "yes"}}, "valid boolean", id="json-not-a-boolean"),
        pytest.param({"method": "PUT"}, "use GET or POST", id="wrong-method"),
    ],
)
def test_bad_parameters_answer_400_and_write_nothing(
    http_client: Any, function_env: FakeApiServer, call: dict[str, Any], message: str
) -> None:
    response = http_client.open("/", **call)
    assert response.status_code == 400
    body = response.get_json()
    assert message in json.dumps(body)
    assert function_env.writes == []
    assert function_env.requests == [], "a bad request never reaches the cluster"


def test_bad_configuration_from_the_environment_answers_400_and_writes_nothing(
    http_client: Any, function_env: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTOR_CONFIG", '{"nodePools": {"default-pool": {"enabled": true}}}')
    response = http_client.post("/")
    assert response.status_code == 400
    assert "scaleDownCPURequestRatioLimit is required" in " ".join(response.get_json()["problems"])
    assert function_env.writes == []


def test_bad_configuration_from_firestore_answers_400_and_writes_nothing(
    http_client: Any,
    function_env: FakeApiServer,
    firestore_emulator: FirestoreEmulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud import firestore

    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", firestore_emulator.project)
    firestore.Client(project=firestore_emulator.project).collection("compactor").document("bad").set(
        {"config": '{"nodePools": {"default-pool": {"minNodes": -1}}}'}
    )
    monkeypatch.setenv("COMPACTOR_FIRESTORE_DOCUMENT", "compactor/bad")
    response = http_client.post("/")
    assert response.status_code == 400
    problems = " ".join(response.get_json()["problems"])
    assert "firestore:compactor/bad" in problems and "nodePools.default-pool.minNodes" in problems
    assert function_env.writes == []


def test_a_held_lease_answers_409(http_client: Any, function_env: FakeApiServer) -> None:
    from datetime import datetime

    from tests.fakeapi import builders as k8s

    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    function_env.add(k8s.lease(holder="other", renew_time=renewed, duration_seconds=600))
    function_env.reset_counters()
    response = http_client.post("/")
    assert response.status_code == 409
    assert "other" in response.get_json()["error"]
    assert function_env.writes == []


def test_an_unreachable_cluster_answers_500_with_a_json_error(
    http_client: Any, function_env: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = tmp_path / "dead-kubeconfig"
    config = json.loads(Path(os.environ["KUBECONFIG"]).read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{free_port()}"
    dead.write_text(json.dumps(config))
    monkeypatch.setenv("KUBECONFIG", str(dead))
    response = http_client.post("/")
    assert response.status_code == 500
    assert "cannot" in response.get_json()["error"]


def test_logs_are_json_lines_with_severity_and_one_summary(
    http_client: Any, function_env: FakeApiServer, capfd: pytest.CaptureFixture[str]
) -> None:
    http_client.post("/")
    out = capfd.readouterr().out
    entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert entries and all("severity" in entry and "message" in entry for entry in entries)
    summaries = [entry for entry in entries if entry.get("event") == "run-summary"]
    assert len(summaries) == 1
    assert summaries[0]["action"] == "drain" and summaries[0]["node"] == "n1"
    # The fields the deployment's log-based metrics and dashboard read.
    assert summaries[0]["nodesAwaitingRemoval"] == 0 and summaries[0]["heldBy"] is None
    assert any(entry.get("event") == "drain-started" for entry in entries)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def function_process(function_env: FakeApiServer) -> Iterator[str]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "functions_framework",
        "--target=compact",
        f"--source={ROOT / 'main.py'}",
        "--host=127.0.0.1",
        f"--port={port}",
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None:
                    raise AssertionError(process.stdout.read().decode() if process.stdout else "exited") from None
                time.sleep(0.2)
        else:
            raise AssertionError("functions-framework did not start within 30 s")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


def test_a_real_functions_framework_process_serves_the_function(
    function_process: str, function_env: FakeApiServer
) -> None:
    with urllib.request.urlopen(function_process + "?dryRun=true", timeout=30) as response:
        assert response.status == 200
        report = json.loads(response.read())
    assert report["decision"]["node"] == "n1" and report["dryRun"] is True
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(function_process + "?force=1", timeout=30)
    assert refused.value.code == 400
    assert function_env.writes == []
