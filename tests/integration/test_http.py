"""`main.compact` over HTTP: functions-framework's test client, and once through a real process."""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from compactor.core.prices import pricing
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.integration import function_server
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
    assert (report["schemaVersion"], report["mode"]) == (1, "dry-run")
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
    report = response.get_json()
    assert report["decision"]["node"] == "n1"
    assert (report["schemaVersion"], report["mode"], report["dryRun"]) == (1, "run", False)
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


# Where a caller might put the parameter by mistake: each must be refused, never run for real.
WRONG_PATHS = [
    pytest.param("/dryRun=true", id="parameter-as-path"),
    pytest.param("/%3FdryRun=true", id="escaped-question-mark"),
    pytest.param("/dry-run", id="dry-run-path"),
    pytest.param("/dryRun/true", id="parameter-as-segments"),
    pytest.param("/%2F", id="escaped-slash"),
    pytest.param("/%2F?dryRun=true", id="escaped-slash-with-query"),
    pytest.param("/;dryRun=true", id="path-parameter"),
    pytest.param("/compact", id="function-name"),
    pytest.param("/./", id="dot-segment"),
]


@pytest.mark.parametrize("path", WRONG_PATHS)
@pytest.mark.parametrize("method", ["POST", "GET"])
def test_another_path_answers_404_with_json_and_never_reaches_the_cluster(
    http_client: Any, function_env: FakeApiServer, monkeypatch: pytest.MonkeyPatch, path: str, method: str
) -> None:
    from compactor import service

    def no_connection(env: Any) -> Any:
        raise AssertionError("a refused call asked for a cluster connection")

    monkeypatch.setattr(service, "connector_from", no_connection)
    response = http_client.open(path, method=method)
    assert response.status_code == 404, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/json"
    body = response.get_json()
    assert "answers on / only" in body["error"] and body["problems"] == [body["error"]]
    assert function_env.requests == [], "a call on another path reached the cluster"


@pytest.mark.parametrize(
    ("stated_length", "options", "message"),
    [
        pytest.param("0", {}, "does not count", id="length-0-carrying-a-body"),
        pytest.param("5", {}, "does not count", id="length-shorter-than-the-body"),
        pytest.param("40", {}, "shorter than its Content-Length", id="length-longer-than-the-body"),
        pytest.param(
            "0",
            {"environ_overrides": {"wsgi.input_terminated": True}},
            "has 16 bytes but its Content-Length says 0",
            id="length-0-on-a-terminated-stream",
        ),
    ],
)
def test_a_body_that_disagrees_with_its_content_length_answers_400_and_never_reaches_the_cluster(
    http_client: Any, function_env: FakeApiServer, stated_length: str, options: dict[str, Any], message: str
) -> None:
    environ = {"CONTENT_LENGTH": stated_length, **options.get("environ_overrides", {})}
    response = http_client.open(
        "/",
        method="POST",
        input_stream=io.BytesIO(b'{"dryRun": true}'),
        content_type="application/json",
        environ_overrides=environ,
    )
    assert response.status_code == 400, response.get_data(as_text=True)
    assert message in response.get_json()["error"]
    assert function_env.requests == []


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
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{function_server.free_port()}"
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
    # Money: three e2-standard-4 nodes in europe-west1 at list prices, and the drain saves one of them.
    price = pricing.node_price(pricing.BUILT_IN, machine_type="e2-standard-4", region="europe-west1", spot=False)
    assert price is not None
    assert summaries[0]["currency"] == "USD"
    assert summaries[0]["clusterPricePerHour"] == pytest.approx(3 * price)
    assert summaries[0]["unpricedNodes"] == 0
    assert summaries[0]["savingsPerHour"] == pytest.approx(price)
    assert any(entry.get("event") == "drain-started" for entry in entries)


def test_the_summary_counts_the_nodes_it_cannot_price_and_leaves_them_out_of_the_price(
    http_client: Any, function_env: FakeApiServer, capfd: pytest.CaptureFixture[str]
) -> None:
    function_env.add(k8s.node("odd-1", machine_type="x9-mega-4"))  # a machine type the price table does not know
    http_client.get("/?dryRun=true")
    out = capfd.readouterr().out
    [summary] = [json.loads(line) for line in out.splitlines() if '"run-summary"' in line]
    price = pricing.node_price(pricing.BUILT_IN, machine_type="e2-standard-4", region="europe-west1", spot=False)
    assert price is not None
    assert summary["unpricedNodes"] == 1
    assert summary["clusterPricePerHour"] == pytest.approx(3 * price)


@pytest.fixture
def function_process(function_env: FakeApiServer) -> Iterator[str]:
    with function_server.serve("compact", os.environ) as url:
        yield url


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


# -- what a caller gets from a real server ---------------------------------------------------------
#
# functions-framework serves with gunicorn, which frames requests itself: a raw socket shows what
# reaches the function from a real connection, including what the test client cannot send
# (a `//` path, a fragment, bytes after the declared body). The function's configuration here
# acts for real, so any of these requests that ran would write and the test would see it.


def raw_exchange(url: str, request: bytes, *, pause_after: int | None = None, half_close: bool = False) -> Any:
    """Send `request` as written on a fresh connection; the first answer as (status, JSON body or text)."""
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        if pause_after is None:
            connection.sendall(request)
        else:  # headers first, the rest a moment later, as a client that writes twice
            connection.sendall(request[:pause_after])
            time.sleep(0.01)
            connection.sendall(request[pause_after:])
        if half_close:
            connection.shutdown(socket.SHUT_WR)
        answer = http.client.HTTPResponse(connection)
        answer.begin()
        text = answer.read().decode()
        return answer.status, json.loads(text) if answer.getheader("Content-Type") == "application/json" else text


@pytest.mark.parametrize(
    "target",
    [
        *WRONG_PATHS,
        pytest.param("//", id="double-slash"),
        pytest.param("//?dryRun=true", id="double-slash-with-query"),
        pytest.param("/#?dryRun=true", id="query-after-a-fragment"),
        pytest.param("/?#dryRun=true", id="empty-query-then-fragment"),
        pytest.param("http://127.0.0.1/dryRun=true", id="absolute-form"),
    ],
)
def test_a_real_server_answers_404_for_another_path_and_never_reaches_the_cluster(
    function_process: str, function_env: FakeApiServer, target: str
) -> None:
    request = f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode()
    status, body = raw_exchange(function_process, request)
    assert status == 404, body
    assert "answers on / only" in body["error"]
    assert function_env.requests == [], f"POST {target} reached the cluster"


DRY_RUN_BODY = b'{"dryRun": true}'


@pytest.mark.parametrize(
    ("head", "options", "message"),
    [
        pytest.param("Content-Length: 0", {}, "does not count", id="length-0-carrying-the-body"),
        pytest.param("", {}, "no Content-Length does not count", id="no-length-carrying-the-body"),
        pytest.param("Content-Length: 5", {}, "does not count", id="length-shorter-than-the-body"),
        pytest.param(
            "Content-Length: 0", {"pause_after": -len(DRY_RUN_BODY)}, "does not count", id="body-in-a-second-write"
        ),
        pytest.param("Content-Length: 40", {"half_close": True}, "says 40", id="length-longer-than-the-body"),
    ],
)
def test_a_real_server_refuses_a_body_its_content_length_does_not_frame(
    function_process: str, function_env: FakeApiServer, head: str, options: dict[str, Any], message: str
) -> None:
    headers = "".join(f"{line}\r\n" for line in ("Host: 127.0.0.1", "Content-Type: application/json", head) if line)
    request = f"POST / HTTP/1.1\r\n{headers}\r\n".encode() + DRY_RUN_BODY
    if "pause_after" in options:
        options = {"pause_after": len(request) + options["pause_after"]}
    status, body = raw_exchange(function_process, request, **options)
    assert status == 400, body
    assert message in body["error"]
    assert function_env.requests == [], "a badly framed call reached the cluster"


def test_a_real_server_still_runs_a_well_framed_dry_run_and_a_pipelined_request_is_no_body(
    function_process: str, function_env: FakeApiServer
) -> None:
    framed = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n"
    status, report = raw_exchange(function_process, framed + DRY_RUN_BODY)
    assert status == 200 and report["dryRun"] is True, report
    # A second request sent before the first is answered (HTTP/1.1 pipelining) is not a stray body.
    pipelined = b"GET /?dryRun=true HTTP/1.1\r\nHost: x\r\n\r\nGET /?dryRun=true HTTP/1.1\r\nHost: x\r\n\r\n"
    status, report = raw_exchange(function_process, pipelined)
    assert status == 200 and report["dryRun"] is True
    assert function_env.writes == []
