"""Every error path a user can reach (issue "safety under odd state and ambiguous requests"), walked end to end.

Each case goes through the real entry point (the command line, or the HTTP
function through functions-framework) against the fake API server, and must
end in a clear message naming what is wrong, with the documented exit code
or status, no traceback, no "unexpected error", and nothing written when it
is bad input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactor import cli
from compactor.core.model import DRAIN_FAILED_AT, DRAIN_STARTED_AT, UNDERUTILIZED_SINCE
from compactor.errors import RunFailedError
from compactor.kube.client import Cluster
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.fakeapi.statuses import failure_body
from tests.integration.conftest import (
    CONFIG,
    FakeTime,
    connector_for,
    cordoned,
    light_cluster,
    node_annotations,
    run_once,
)

ROOT = Path(__file__).resolve().parents[2]
FAR_FUTURE_OFFSET = "9999-12-31T23:59:59-23:59"
BEFORE_YEAR_ONE = "0001-01-01T00:00:00+01:00"
FORM = "application/x-www-form-urlencoded"
NAMESPACE_RULE = (
    "is not a valid namespace: a namespace is a DNS-1123 label: at most 63 characters of lowercase letters, "
    "digits and '-', starting and ending with a letter or digit"
)
SEVERAL_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (
        "COMPACTOR_CLUSTER",
        "COMPACTOR_FIRESTORE_DOCUMENT",
        "COMPACTOR_CONFIG",
        "KUBECONFIG",
        "KUBERNETES_SERVICE_HOST",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "60")


def write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Exit code, stdout, and the `error:` lines of stderr (a run also logs JSON lines there)."""
    code = cli.main(list(args))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "unexpected error" not in captured.err
    errors = "".join(line + "\n" for line in captured.err.splitlines() if line.startswith("error: "))
    return code, captured.out, errors


# -- times out of range: unreadable, never a crash --------------------------------------------------


def odd_times_cluster(api: FakeApiServer) -> None:
    """n1 marked with a time past year 9999 in UTC, n4 cordoned by us at a time before year 1, n5 failed likewise."""
    light_cluster(api)
    node = api.get("Node", "n1")
    assert node is not None
    node["metadata"]["annotations"][UNDERUTILIZED_SINCE] = FAR_FUTURE_OFFSET
    api.add(node)
    api.add(k8s.node("n4", unschedulable=True, annotations={DRAIN_STARTED_AT: BEFORE_YEAR_ONE}))
    api.add(k8s.node("n5", annotations={DRAIN_FAILED_AT: BEFORE_YEAR_ONE}))


def test_out_of_range_annotations_are_unreadable_in_a_live_run(api: FakeApiServer) -> None:
    odd_times_cluster(api)
    result = run_once(api)
    assert result.report["decision"]["action"] == "rollback" and result.report["decision"]["node"] == "n4"
    assert "unreadable" in result.report["decision"]["reason"]
    assert not cordoned(api, "n4") and DRAIN_STARTED_AT not in node_annotations(api, "n4")
    assert node_annotations(api, "n1")[UNDERUTILIZED_SINCE] == "2026-11-21T12:00:00Z", "the mark was replaced"
    n5 = next(n for n in result.report["nodes"] if n["name"] == "n5")
    assert any("unreadable" in blocker for blocker in n5["blockers"])


def test_out_of_range_annotations_are_unreadable_in_plan(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd_times_cluster(api)
    snapshot = write(tmp_path, "cluster.json", json.dumps(api.snapshot()))
    config = write(tmp_path, "config.json", json.dumps(CONFIG))
    code, out, err = main(capsys, "plan", "--snapshot", snapshot, "--config", config, "--now", "2026-11-21T12:00:00Z")
    assert code == 0, err
    assert "rollback n4" in out


@pytest.mark.parametrize(
    "now",
    [
        pytest.param("0001-01-01T00:00:00+14:00", id="before-year-1"),
        pytest.param("9999-12-31T23:59:59-23:59", id="after-year-9999"),
    ],
)
def test_plan_now_out_of_range_exits_2(now: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = main(capsys, "plan", "--snapshot", str(ROOT / "examples/offpeak-snapshot.json"), "--now", now)
    assert code == 2
    assert err == f"error: --now: {now!r} is outside the years 1 to 9999 once moved to UTC\n"


# -- ambiguous or oversized requests -----------------------------------------------------------------


@pytest.fixture
def http_client(api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import functions_framework

    clean_env(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("COMPACTOR_CONFIG", json.dumps(CONFIG))
    light_cluster(api)
    api.reset_counters()
    app = functions_framework.create_app(target="compact", source=str(ROOT / "main.py"))  # type: ignore[no-untyped-call]
    return app.test_client()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            {"method": "POST", "query_string": "dryRun=true", "json": {"dryRun": False}},
            "parameter 'dryRun' is given in the query string and in the JSON body",
            id="query-true-body-false",
        ),
        pytest.param(
            {"method": "POST", "query_string": "dryRun=true", "json": {"dryRun": True}},
            "parameter 'dryRun' is given in the query string and in the JSON body",
            id="query-and-body-agreeing",
        ),
        pytest.param(
            {"method": "POST", "json": {"dryRun": None}}, "dryRun: Input should be a valid boolean", id="null"
        ),
        pytest.param(
            {"method": "POST", "json": {"dryRun": "true"}}, "dryRun: Input should be a valid boolean", id="json-string"
        ),
        pytest.param({"method": "POST", "json": {"dryRun": 1}}, "dryRun: Input should be a valid boolean", id="number"),
        pytest.param(
            {"method": "POST", "data": b'{"dryRun": true, "dryRun": false}', "content_type": "application/json"},
            "the request body: the key 'dryRun' is given twice in one object",
            id="json-key-twice",
        ),
        pytest.param(
            {
                "method": "POST",
                "data": b"dryRun=false&dryRun=true",
                "content_type": FORM,
            },
            "parameter 'dryRun' is given 2 times in the form",
            id="form-twice",
        ),
        pytest.param(
            {
                "method": "POST",
                "query_string": "dryRun=false",
                "data": b"dryRun=true",
                "content_type": FORM,
            },
            "parameter 'dryRun' is given in the query string and in the form",
            id="query-and-form",
        ),
    ],
)
def test_a_dry_run_question_asked_twice_or_not_as_a_boolean_is_400_and_writes_nothing(
    http_client: Any, api: FakeApiServer, call: dict[str, Any], message: str
) -> None:
    response = http_client.open("/", **call)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert message in " ".join(response.get_json()["problems"])
    assert api.requests == [], "a bad request never reaches the cluster"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param({"data": b" " * 16385, "content_type": "application/json"}, id="declared-length"),
        pytest.param({"json": {"dryRun": True, "padding": "x" * 20000}}, id="json"),
    ],
)
def test_a_body_over_16_kib_is_413(http_client: Any, api: FakeApiServer, call: dict[str, Any]) -> None:
    response = http_client.post("/", **call)
    assert response.status_code == 413
    assert "at most 16384 bytes" in response.get_json()["error"]
    assert api.requests == []


def test_a_body_of_exactly_16_kib_is_read(http_client: Any, api: FakeApiServer) -> None:
    body = b'{"dryRun": true}'
    response = http_client.post("/", data=body + b" " * (16384 - len(body)), content_type="application/json")
    assert response.status_code == 200
    assert api.writes == []


def test_a_configuration_naming_a_key_twice_is_400_over_http(
    http_client: Any, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTOR_CONFIG", '{"dryRun": true, "nodePools": {}, "dryRun": false}')
    response = http_client.post("/")
    assert response.status_code == 400
    assert response.get_json()["problems"] == [
        "COMPACTOR_CONFIG: the key 'dryRun' is given twice in one object; give it once"
    ]
    assert api.requests == []


def test_a_run_budget_past_the_function_timeout_is_400_over_http(
    http_client: Any, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "2147483648")
    response = http_client.post("/")
    assert response.status_code == 400
    assert "at most 1740 seconds" in response.get_json()["error"]
    assert api.requests == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        pytest.param("COMPACTOR_LEASE_NAMESPACE", "Bad_NS!", id="lease-namespace"),
        pytest.param("COMPACTOR_CONFIG", json.dumps({**CONFIG, "placeholderNamespace": "Bad_NS!"}), id="placeholder"),
    ],
)
def test_a_namespace_that_is_not_a_dns_label_is_400_over_http_before_any_request(
    http_client: Any, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    response = http_client.post("/")
    assert response.status_code == 400
    [problem] = response.get_json()["problems"]
    assert f"'Bad_NS!' {NAMESPACE_RULE}" in problem
    assert api.requests == []


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        pytest.param("--lease-namespace", f"error: --lease-namespace: 'Bad_NS!' {NAMESPACE_RULE}", id="lease"),
        pytest.param(
            "--placeholder-namespace", f"error: --placeholder-namespace: 'Bad_NS!' {NAMESPACE_RULE}", id="placeholder"
        ),
    ],
)
def test_cleanup_refuses_a_namespace_that_is_not_a_dns_label_before_any_request(
    api: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    message: str,
) -> None:
    clean_env(monkeypatch)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    code, _, err = main(capsys, "cleanup", "--kubeconfig", kubeconfig, flag, "Bad_NS!")
    assert code == 2
    assert err.startswith(message), err
    assert api.requests == []


# -- the command line: files and environment -----------------------------------------------------------


KUBECONFIGS: list[Any] = [
    pytest.param("apiVersion: v1\nclusters: [\n  - {name: x\n", "not valid YAML or JSON at line", id="yaml-error"),
    pytest.param(
        '{"apiVersion": "v1", "clusters": [{"name": "c"', "not valid YAML or JSON at line", id="truncated-json"
    ),
    pytest.param(
        "apiVersion: v1\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', "
        "certificate-authority-data: '!!!notbase64$$'}\nusers:\n- name: u\n  user: {token: t}\n"
        "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
        "clusters[c].certificate-authority-data is not valid base64",
        id="bad-base64-certificate",
    ),
    pytest.param("- just\n- a list\n", "not a kubeconfig", id="a-list"),
    pytest.param('"a string"\n', "not a kubeconfig", id="a-string"),
    pytest.param("", "file is empty", id="empty"),
]


@pytest.mark.parametrize(("content", "message"), KUBECONFIGS)
def test_a_malformed_kubeconfig_exits_2_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    clean_env(monkeypatch)
    path = write(tmp_path, "kubeconfig", content)
    config = write(tmp_path, "config.json", json.dumps(CONFIG))
    code, _, err = main(capsys, "run", "--kubeconfig", path, "--config", config)
    assert code == 2
    assert err.startswith(f"error: kubeconfig {path}: ") and message in err, err


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/dev/zero", "not a regular file", id="dev-zero"),
        pytest.param("/nonexistent/kubeconfig", "No such file or directory", id="missing"),
        pytest.param("/", "not a regular file", id="a-directory"),
    ],
)
def test_a_kubeconfig_that_is_not_a_file_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], path: str, message: str
) -> None:
    clean_env(monkeypatch)
    config = write(tmp_path, "config.json", json.dumps(CONFIG))
    code, _, err = main(capsys, "run", "--kubeconfig", path, "--config", config)
    assert code == 2
    assert err == f"error: kubeconfig {path}: {message}\n"


def test_a_malformed_kubeconfig_is_400_over_http_naming_the_file(
    http_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "broken-kubeconfig", "apiVersion: v1\nclusters: [\n")
    monkeypatch.setenv("KUBECONFIG", path)
    response = http_client.post("/")
    assert response.status_code == 400
    assert response.get_json()["error"].startswith(f"kubeconfig {path}: not valid YAML or JSON")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        pytest.param(
            ["--config", "/dev/zero"], {}, "error: config file /dev/zero is larger than 1024 KiB", id="config-dev-zero"
        ),
        pytest.param(
            ["--config", "DUPLICATE"], {}, "the key 'dryRun' is given twice in one object", id="config-key-twice"
        ),
        pytest.param(
            [],
            {"COMPACTOR_CONFIG": '{"nodePools": {}, "nodePools": {}}'},
            "error: COMPACTOR_CONFIG: the key 'nodePools' is given twice",
            id="env-config-key-twice",
        ),
        pytest.param(
            ["--config", "GOOD"],
            {"COMPACTOR_RUN_BUDGET_SECONDS": "2147483648"},
            "error: COMPACTOR_RUN_BUDGET_SECONDS: 2147483648 is too long; at most 1740 seconds",
            id="budget-past-int32",
        ),
        pytest.param(
            ["--config", "GOOD"],
            {"COMPACTOR_RUN_BUDGET_SECONDS": "1741"},
            "because a run must end before the function's timeout",
            id="budget-past-the-function-timeout",
        ),
        pytest.param(
            ["--config", "GOOD"],
            {"COMPACTOR_LEASE_NAMESPACE": "Bad_NS!"},
            f"error: COMPACTOR_LEASE_NAMESPACE: 'Bad_NS!' {NAMESPACE_RULE}",
            id="lease-namespace-not-a-dns-label",
        ),
        pytest.param(
            ["--config", "BAD_PLACEHOLDER_NAMESPACE", "--dry-run"],
            {},
            f"placeholderNamespace: 'Bad_NS!' {NAMESPACE_RULE}",
            id="placeholder-namespace-not-a-dns-label",
        ),
    ],
)
def test_bad_configuration_sources_exit_2_and_touch_no_cluster(
    api: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    clean_env(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    files = {
        "DUPLICATE": write(tmp_path, "duplicate.json", '{"dryRun": true, "nodePools": {}, "dryRun": false}'),
        "GOOD": write(tmp_path, "good.json", json.dumps(CONFIG)),
        "BAD_PLACEHOLDER_NAMESPACE": write(
            tmp_path, "namespace.json", json.dumps({**CONFIG, "placeholderNamespace": "Bad_NS!"})
        ),
    }
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    code, _, err = main(capsys, "run", "--kubeconfig", kubeconfig, *[files.get(arg, arg) for arg in args])
    assert code == 2
    assert message in err, err
    assert api.requests == []


@pytest.mark.parametrize(
    ("duplicate", "message"),
    [
        pytest.param(lambda: k8s.node("n2"), "Node n2 is listed 2 times", id="node"),
        pytest.param(lambda: k8s.pod("busy-b2", node="n2", cpu="3"), "Pod default/busy-b2 is listed 2 times", id="pod"),
    ],
)
def test_a_snapshot_listing_an_object_twice_exits_2_naming_it(
    api: FakeApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    duplicate: Callable[[], dict[str, Any]],
    message: str,
) -> None:
    light_cluster(api)
    listing = api.snapshot()
    listing["items"].append(duplicate())
    snapshot = write(tmp_path, "cluster.json", json.dumps(listing))
    code, _, err = main(capsys, "plan", "--snapshot", snapshot)
    assert code == 2
    assert f"error: {message}\n" in err


# -- evictions the API server refuses in a 201 -----------------------------------------------------------


def test_an_eviction_answered_201_with_a_failure_status_is_not_counted_as_evicted(api: FakeApiServer) -> None:
    light_cluster(api)
    refusal = failure_body(403, "Forbidden", "evictions are not allowed here")
    api.add_fault(Fault(method="POST", path_regex=r"/pods/web-a1/eviction$", status=201, body=refusal, times=-1))
    with pytest.raises(RunFailedError) as failed:
        run_once(api)
    report = failed.value.report
    assert report is not None
    assert report["outcome"]["evicted"] == ["default/web-a2"]
    assert "evictions are not allowed here" in failed.value.problems[0]
    assert "code 403" in failed.value.problems[0]
    assert api.get("Pod", "web-a1") is not None


def test_a_pod_under_several_pdbs_is_refused_once_not_retried_for_the_whole_budget(api: FakeApiServer) -> None:
    light_cluster(api)
    answer = failure_body(500, "", SEVERAL_PDBS)
    api.add_fault(Fault(method="POST", path_regex=r"/pods/web-a1/eviction$", status=201, body=answer, times=-1))
    fake_time = FakeTime()
    with pytest.raises(RunFailedError) as failed:
        run_once(api, time=fake_time)
    assert fake_time.now == 1000.0, "no backoff was slept"
    assert [r.path for r in api.requests if r.path.endswith("/web-a1/eviction")] == [
        "/api/v1/namespaces/default/pods/web-a1/eviction"
    ]
    assert SEVERAL_PDBS in failed.value.problems[0]


def test_a_429_in_a_failure_status_is_retried_like_a_429(api: FakeApiServer) -> None:
    light_cluster(api)
    busy = failure_body(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")
    api.add_fault(Fault(method="POST", path_regex=r"/pods/web-a1/eviction$", status=201, body=busy, times=2))
    result = run_once(api)
    assert sorted(result.outcome.evicted) == ["default/web-a1", "default/web-a2"]


def test_a_pod_under_several_pdbs_comes_back_as_a_failed_eviction_from_the_fake_api_server(api: FakeApiServer) -> None:
    light_cluster(api)
    api.add(k8s.pdb("by-app", match_labels={"app": "web"}, disruptions_allowed=5))
    api.add(k8s.pdb("by-name", match_labels={"app": "web"}, disruptions_allowed=5))
    cluster = Cluster(connector_for(api)().api_client)
    result = cluster.evict("default", "web-a1")
    assert result.status == "failed"
    # kube-apiserver 1.36 answers HTTP 500 with this Status (checked by tests/e2e/test_fake_claims.py).
    assert result.detail == f"HTTP 500 Internal Server Error: {SEVERAL_PDBS}"
    assert api.get("Pod", "web-a1") is not None
