"""A kubeconfig's credentials never reach an error, a log line or an answer, and a broken one never runs.

Each kubeconfig below carries SECRET where a credential would be: on an exec credential
plugin's stderr, in the server URL's query string or user info. Each broken one must stop
the run before the first request to the cluster, with a message that names the problem
and never the secret: exit 1 (a plugin that failed: no credentials) or exit 2 (a field
that is wrong) on the command line, 500 or 400 over HTTP. Key and certificate data that
is not base64 of PEM text is a kubeconfig error naming the field, never a traceback.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from compactor import cli
from compactor.kube.kubeconfig import EXEC_PLUGIN_FAILED
from tests.fakeapi import FakeApiServer
from tests.integration.conftest import CONFIG, TOKEN, light_cluster

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-refresh-token-5f1d"
EXEC_API = "client.authentication.k8s.io/v1"


def exec_user(script: str, **env: str) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": EXEC_API,
            "command": "sh",
            "args": ["-c", script],
            "env": [{"name": name, "value": value} for name, value in env.items()] or None,
            "interactiveMode": "Never",
        }
    }


def write_kubeconfig(path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> str:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "fake", "user": user}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(document))
    return str(path)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


FAILING_PLUGIN = exec_user(f"echo 'error: refresh_token={SECRET} rejected' >&2; exit 1")
TOKEN_USER = {"token": TOKEN}
CERT = b64(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

# (how the server URL is built from the fake's, the user, extra cluster fields, exit code, HTTP status, message)
CASES = [
    pytest.param(
        "{url}", FAILING_PLUGIN, None, 1, 500, EXEC_PLUGIN_FAILED, id="exec-plugin-fails-with-a-secret-on-stderr"
    ),
    pytest.param(
        "{url}/?access_token=" + SECRET,
        TOKEN_USER,
        None,
        2,
        400,
        "clusters[fake].server carries a query string (http://127.0.0.1:{port}/?***)",
        id="token-in-the-server-url-query",
    ),
    pytest.param(
        "http://admin:" + SECRET + "@127.0.0.1:{port}",
        TOKEN_USER,
        None,
        2,
        400,
        "clusters[fake].server carries user info (http://***@127.0.0.1:{port})",
        id="password-in-the-server-url",
    ),
    pytest.param(
        "{url}",
        {"client-certificate-data": CERT, "client-key-data": b64(b"\xff\xfe" + SECRET.encode())},
        None,
        2,
        400,
        "users[fake].client-key-data does not decode to PEM text (byte 0 is not UTF-8)",
        id="key-data-not-utf8",
    ),
    pytest.param(
        "{url}",
        {"client-certificate-data": CERT, "client-key-data": "!!" + SECRET + "$"},
        None,
        2,
        400,
        "users[fake].client-key-data is not valid base64",
        id="key-data-not-base64",
    ),
    pytest.param(
        "{url}",
        TOKEN_USER,
        {"certificate-authority-data": b64(b"\x80" + SECRET.encode())},
        2,
        400,
        "clusters[fake].certificate-authority-data does not decode to PEM text",
        id="ca-data-not-utf8",
    ),
]


def server_url(template: str, api: FakeApiServer) -> str:
    return template.format(url=api.url, port=api.url.rsplit(":", 1)[1])


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_FIRESTORE_DOCUMENT", "KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("COMPACTOR_CONFIG", json.dumps(CONFIG))
    monkeypatch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "60")


@pytest.mark.parametrize(("server", "user", "cluster", "code", "status", "message"), CASES)
@pytest.mark.usefixtures("clean_env")
def test_a_broken_credential_stops_the_command_before_any_request_without_showing_it(
    api: FakeApiServer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    server: str,
    user: dict[str, Any],
    cluster: dict[str, Any] | None,
    code: int,
    status: int,
    message: str,
) -> None:
    light_cluster(api)
    path = write_kubeconfig(tmp_path / "kubeconfig", server_url(server, api), user, cluster)
    assert cli.main(["run", "--kubeconfig", path]) == code
    captured = capfd.readouterr()
    assert f"error: kubeconfig {path}: {server_url(message, api)}" in captured.err
    assert SECRET not in captured.out + captured.err, "a credential reached the output"
    assert "Traceback" not in captured.err
    assert api.requests == [], "the run went on to the cluster"


@pytest.mark.parametrize(("server", "user", "cluster", "code", "status", "message"), CASES)
@pytest.mark.usefixtures("clean_env")
def test_a_broken_credential_is_answered_over_http_without_showing_it(
    api: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    server: str,
    user: dict[str, Any],
    cluster: dict[str, Any] | None,
    code: int,
    status: int,
    message: str,
) -> None:
    import functions_framework

    light_cluster(api)
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kubeconfig", server_url(server, api), user, cluster))
    app = functions_framework.create_app(target="compact", source=str(ROOT / "main.py"))  # type: ignore[no-untyped-call]
    response = app.test_client().post("/")
    assert response.status_code == status
    assert server_url(message, api) in response.get_json()["error"]
    captured = capfd.readouterr()
    assert SECRET not in response.get_data(as_text=True) + captured.out + captured.err
    assert api.requests == []


@pytest.mark.usefixtures("clean_env")
def test_a_key_file_that_is_not_text_is_a_kubeconfig_error_naming_the_field(
    api: FakeApiServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "client.key").write_bytes(b"\xff\xd8binary")
    user = {"client-certificate-data": CERT, "client-key": "client.key"}
    path = write_kubeconfig(tmp_path / "kubeconfig", api.url.replace("http://", "https://"), user)
    assert cli.main(["run", "--kubeconfig", path]) == 2
    assert "users[fake].client-key: client.key is not PEM text (byte 0 is not UTF-8)" in capfd.readouterr().err
    assert api.requests == []


@pytest.mark.usefixtures("clean_env")
def test_a_plugin_that_fails_when_its_credential_is_refreshed_mid_run_is_logged_without_what_it_printed(
    api: FakeApiServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # The first call hands out a credential that has already expired; the client runs the plugin again
    # before each request, and from then on the plugin fails, printing a secret.
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential"} | {
        "status": {"token": TOKEN, "expirationTimestamp": "2000-01-01T00:00:00Z"}
    }
    script = (
        f'if [ -e "$STATE/ran" ]; then echo "refresh_token={SECRET}" >&2; exit 1; fi; '
        f"touch \"$STATE/ran\"; echo '{json.dumps(credential)}'"
    )
    light_cluster(api)
    path = write_kubeconfig(tmp_path / "kubeconfig", api.url, exec_user(script, STATE=str(tmp_path)))
    assert cli.main(["run", "--kubeconfig", path, "--dry-run"]) == 0
    captured = capfd.readouterr()
    assert (tmp_path / "ran").exists() and api.requests, "the run did not start"
    assert EXEC_PLUGIN_FAILED in captured.err, "the refresh never failed: the test proves nothing"
    assert SECRET not in captured.out + captured.err
