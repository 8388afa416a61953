"""`main.hpa_floor` over HTTP (functions-framework's test client) and `python -m compactor hpa`."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from compactor import cli
from compactor.hpa.model import BASE_MIN_REPLICAS, PROMETHEUS_QUERY, REQUESTS_PER_REPLICA, SCALE_DOWN_MAX_RATIO
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.fakeprometheus import FakePrometheus, Reply
from tests.hpa.conftest import RATE, min_replicas, run_hpa, scaled_hpa

ROOT = Path(__file__).resolve().parents[2]
QUERY = {PROMETHEUS_QUERY: RATE, REQUESTS_PER_REPLICA: "10"}


@pytest.fixture
def local_env(api: FakeApiServer, prom: FakePrometheus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The function's environment for a local run: KUBECONFIG at the fake API server, Prometheus at the fake."""
    for variable in (
        "COMPACTOR_CLUSTER",
        "COMPACTOR_FIRESTORE_DOCUMENT",
        "COMPACTOR_CONFIG",
        "KUBERNETES_SERVICE_HOST",
        "MINIMUM_REPLICAS_LOWER_BOUND",
        "PROMETHEUS_URL_ALLOWLIST",
    ):
        monkeypatch.delenv(variable, raising=False)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    monkeypatch.setenv("PROMETHEUS_SERVER_URL", prom.url)
    monkeypatch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "60")
    api.add(scaled_hpa(annotations=QUERY, min_replicas=2, max_replicas=20))
    prom.answer(RATE, 65.0)
    return kubeconfig


@pytest.fixture
def http_client(local_env: str) -> Any:
    import functions_framework

    app = functions_framework.create_app(target="hpa_floor", source=str(ROOT / "main.py"))  # type: ignore[no-untyped-call]
    return app.test_client()


def test_a_dry_run_call_answers_200_with_the_report_and_writes_nothing(http_client: Any, api: FakeApiServer) -> None:
    response = http_client.get("/?dryRun=true")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    report = response.get_json()
    assert report["dryRun"] is True
    assert report["schemaVersion"] == 1
    assert report["hpas"][0]["action"] == "raise"
    assert report["hpas"][0]["newMinReplicas"] == 7
    assert api.writes == []


def test_a_scheduled_call_acts(http_client: Any, api: FakeApiServer) -> None:
    response = http_client.post("/", data=b"", content_type="application/octet-stream")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert min_replicas(api) == 7


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param({"method": "GET", "query_string": "namespace=shop"}, "unknown parameter", id="unknown-name"),
        pytest.param({"method": "GET", "query_string": "dryRun=maybe"}, "valid boolean", id="not-a-boolean"),
        pytest.param({"method": "POST", "json": [True]}, "must be a JSON object", id="body-not-an-object"),
    ],
)
def test_bad_parameters_answer_400_and_write_nothing(
    http_client: Any, api: FakeApiServer, call: dict[str, Any], message: str
) -> None:
    api.reset_counters()
    response = http_client.open("/", **call)
    assert response.status_code == 400
    assert message in json.dumps(response.get_json())
    assert api.requests == []


def test_a_body_over_the_compactors_limit_answers_413(http_client: Any, api: FakeApiServer) -> None:
    api.reset_counters()
    response = http_client.post("/", data=b"{" + b" " * 20_000 + b"}", content_type="application/json")
    assert response.status_code == 413
    assert api.requests == []


@pytest.mark.parametrize(
    ("path", "call", "status", "message"),
    [
        pytest.param("/dryRun=true", {}, 404, "answers on / only", id="parameter-as-path"),
        pytest.param("/%3FdryRun=true", {}, 404, "answers on / only", id="escaped-question-mark"),
        pytest.param("/dry-run", {}, 404, "answers on / only", id="dry-run-path"),
        pytest.param(
            "/",
            {"input_stream": io.BytesIO(b'{"dryRun": true}'), "environ_overrides": {"CONTENT_LENGTH": "0"}},
            400,
            "does not count",
            id="length-0-carrying-a-body",
        ),
    ],
)
def test_a_call_that_is_not_on_the_root_or_not_framed_is_refused_before_the_cluster(
    http_client: Any, api: FakeApiServer, path: str, call: dict[str, Any], status: int, message: str
) -> None:
    api.reset_counters()
    response = http_client.open(path, method="POST", content_type="application/json", **call)
    assert response.status_code == status
    assert message in response.get_json()["error"]
    assert api.requests == []
    assert min_replicas(api) == 2


def test_bad_settings_answer_400(http_client: Any, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_URL_ALLOWLIST", "https://prom.example/")
    response = http_client.post("/")
    assert response.status_code == 400
    assert "PROMETHEUS_URL_ALLOWLIST" in " ".join(response.get_json()["problems"])
    assert api.writes == []


def test_a_held_lease_answers_409(http_client: Any, api: FakeApiServer) -> None:
    from datetime import UTC, datetime

    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    api.add(k8s.lease("node-compactor-hpa", holder="node-compactor-other", renew_time=renewed))
    response = http_client.post("/")
    assert response.status_code == 409
    assert "node-compactor-hpa" in response.get_json()["error"]
    assert min_replicas(api) == 2


def test_an_unreachable_cluster_answers_500(http_client: Any, api: FakeApiServer) -> None:
    api.stop()
    response = http_client.post("/")
    assert response.status_code == 500
    assert response.get_json()["error"].startswith("cannot ")


# --- the command line --------------------------------------------------------------------------------------


def test_the_command_runs_against_a_cluster_and_prints_the_json_report(
    local_env: str, api: FakeApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["hpa", "--kubeconfig", local_env, "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hpas"][0]["newMinReplicas"] == 7
    assert min_replicas(api) == 7


def test_the_command_dry_run_prints_a_table_and_writes_nothing(
    local_env: str, api: FakeApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["hpa", "--kubeconfig", local_env, "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["HPA", "CURRENT", "MIN"]
    assert "default/web" in out and "raise" in out
    assert api.writes == []


def test_bad_settings_exit_2_with_one_message_per_problem(
    local_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINIMUM_REPLICAS_LOWER_BOUND", "x")
    monkeypatch.setenv("PROMETHEUS_SERVER_URL", "prom:9090")
    assert cli.main(["hpa", "--kubeconfig", local_env]) == 2
    errors = capsys.readouterr().err
    assert "error: MINIMUM_REPLICAS_LOWER_BOUND" in errors
    assert "error: PROMETHEUS_SERVER_URL" in errors


def _snapshot(tmp_path: Path, *objects: dict[str, Any]) -> str:
    path = tmp_path / "hpa.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return str(path)


def test_the_offline_plan_reads_kubectl_output_and_a_metrics_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MINIMUM_REPLICAS_LOWER_BOUND", raising=False)
    snapshot = _snapshot(
        tmp_path,
        scaled_hpa(annotations=QUERY, min_replicas=2),
        scaled_hpa("api", annotations={PROMETHEUS_QUERY: "up", BASE_MIN_REPLICAS: "2"}, min_replicas=6),
        scaled_hpa("batch", annotations={SCALE_DOWN_MAX_RATIO: "0.5"}, current_replicas=10, min_replicas=1),
        k8s.replica_set("web-abc12", deployment="web", replicas=3),
        k8s.node("n1"),
    )
    metrics = tmp_path / "metrics.json"
    answer = json.loads(Reply(values=("65",)).body())
    not_a_number = json.loads(Reply(values=("NaN",)).body())
    metrics.write_text(json.dumps({RATE: answer, "up": not_a_number}))
    assert cli.main(["hpa", "--snapshot", snapshot, "--metrics", str(metrics), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_name = {h["name"]: h for h in report["hpas"]}
    assert by_name["web"]["newMinReplicas"] == 7
    assert by_name["api"]["action"] == "fail"
    assert "not a finite number" in by_name["api"]["reason"]
    assert by_name["batch"]["newMinReplicas"] == 5
    assert report["dryRun"] is True


def test_the_offline_plan_without_a_metrics_file_leaves_query_hpas_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = _snapshot(tmp_path, scaled_hpa(annotations=QUERY, min_replicas=2))
    assert cli.main(["hpa", "--snapshot", snapshot, "--json"]) == 0
    [hpa] = json.loads(capsys.readouterr().out)["hpas"]
    assert hpa["action"] == "fail"
    assert "no value for it" in hpa["reason"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["hpa", "--snapshot", "/nonexistent.json"], "cannot read snapshot", id="missing-snapshot"),
        pytest.param(["hpa", "--metrics", "m.json"], "only with --snapshot", id="metrics-without-snapshot"),
        pytest.param(["hpa", "--snapshot", "a", "--kubeconfig", "b"], "not allowed with", id="snapshot-and-cluster"),
    ],
)
def test_bad_command_lines_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_lease_namespace_that_is_not_a_dns_label_is_400_before_any_request(
    http_client: Any, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTOR_LEASE_NAMESPACE", "Bad_NS!")
    api.reset_counters()
    response = http_client.post("/")
    assert response.status_code == 400
    assert (
        "COMPACTOR_LEASE_NAMESPACE: 'Bad_NS!' is not a valid namespace: a namespace is a DNS-1123 label"
        in (response.get_json()["error"])
    )
    assert api.requests == []


def test_a_failed_hpa_run_says_its_error_once(capsys: pytest.CaptureFixture[str]) -> None:
    # stderr carries the run's JSON logs too: the failure is the one `error:` line, not a log line as well.
    assert cli.main(["hpa", "--kubeconfig", "/nonexistent"]) == 2
    assert capsys.readouterr().err == "error: kubeconfig /nonexistent: No such file or directory\n"


# --- scale ----------------------------------------------------------------------------------------------------


def test_two_hundred_hpas_with_their_own_queries_finish_in_one_run_well_within_the_schedule(
    api: FakeApiServer, prom: FakePrometheus
) -> None:
    for index in range(200):
        query = f'sum(rate(http_requests_total{{app="svc-{index}"}}[5m]))'
        api.add(
            scaled_hpa(
                f"svc-{index}", annotations={PROMETHEUS_QUERY: query, REQUESTS_PER_REPLICA: "10"}, min_replicas=2
            )
        )
        prom.answer(query, Reply(values=(str(40 + index % 50),), delay=0.05))
    started = time.monotonic()
    result = run_hpa(api, prom)
    elapsed = time.monotonic() - started
    print(f"200 HPAs, 200 queries: {elapsed:.2f} s")
    assert result.report["summary"]["raise"] == 200
    assert len(prom.seen) == 200
    # The budget is 10 s on a developer machine; the bound here is loose so a loaded CI box does not flake.
    assert elapsed < 30
