"""A stand-in for GKE's REST API over real HTTP: `GET /v1/projects/P/locations/L/clusters/C`, as
`container_v1.ClusterManagerClient(transport="rest")` asks it, answering with the cluster's JSON
(the REST shape of container.v1.Cluster: `nodePools`, `autoscaling.enableNodeAutoprovisioning`, ...).

`running()` serves one on 127.0.0.1; `client(url)` is the GKE API client that talks to it, given to
`compactor.gcp.gke.connect(cluster_manager=...)`. Used by tests/integration/test_gke.py and by the
e2e tests that need what GKE says of a cluster (tests/e2e/gke_run.py).
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import google.auth.credentials
from google.cloud import container_v1


@dataclass
class GkeApi:
    """The GKE REST API's `GET /v1/projects/P/locations/L/clusters/C`, answering from `clusters`."""

    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    # cluster name -> (HTTP status, google.rpc status) to answer instead.
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)
    requested: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.split("?", 1)[0].removeprefix("/v1/")
                api.requested.append(name)
                if name in api.errors:
                    status, rpc_status = api.errors[name]
                    self._answer(
                        status, {"error": {"code": status, "message": "denied by the stand-in", "status": rpc_status}}
                    )
                elif name in api.clusters:
                    self._answer(200, api.clusters[name])
                else:
                    self._answer(404, {"error": {"code": 404, "message": f"{name} not found", "status": "NOT_FOUND"}})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def running() -> Iterator[GkeApi]:
    api = GkeApi()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    api.port = server.server_address[1]
    # A short poll interval keeps shutdown() (and so each test's teardown) quick.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def client(url: str) -> container_v1.ClusterManagerClient:
    """GKE's own API client, over REST to the stand-in at `url` (it asks for no Google credentials)."""
    return container_v1.ClusterManagerClient(
        credentials=google.auth.credentials.AnonymousCredentials(),  # type: ignore[no-untyped-call]
        transport="rest",
        client_options={"api_endpoint": url},
    )
